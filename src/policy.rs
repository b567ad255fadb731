//! Reset policies: what a worker does with a stored offset it cannot use.
//!
//! An offset can be unusable because its bytes do not decode (a corrupt record), because the source
//! says the position no longer exists (a binlog file purged, a topic's retention passed it), or
//! because the connector rejects it. A [`ResetPolicy`] is chosen per connector, with a default:
//!
//! | policy | what happens | for a Connect-style source |
//! |---|---|---|
//! | `fail` (default) | the task gets an error naming the connector, partition, offset and reason | nothing is skipped or re-read behind the operator's back; fix it with `connect-offsets set`/`reset` and restart |
//! | `skip` | the offset goes to the dead-letter file, is reset, and the task goes on | the partition starts as if the connector had never run it (its own initial position: a file from its start, a CDC connector with a new snapshot); the old offset stays in the dead-letter file for a person to look at |
//! | `earliest` | the offset is replaced by the oldest position the source still has | re-reads everything the source kept: duplicates, but no loss beyond what the source already dropped (Kafka's `auto.offset.reset=earliest`) |
//! | `latest` | the offset is replaced by the source's current end | no duplicates, but everything between the old offset and the end is never read (Kafka's `auto.offset.reset=latest`) |
//!
//! For sink-style partitions (`kafka_topic`, `kafka_partition`) the source's bounds are the topic
//! partition's log-start and log-end offsets, as `{"kafka_offset": n}`.
//!
//! A worker loads its offsets through [`ResetPolicies::load`], which reads them from its
//! [`CommitBuffer`](crate::buffer::CommitBuffer) (the commit buffer's side, in `buffer`).
//!
//! Every use is logged (`tracing` warning with connector, partition, policy and reason) and counted
//! (`connect_offsets_offset_resets_total{connector,policy,reason}`).
//!
//! ```
//! use connect_offsets::policy::{ResetPolicies, ResetPolicy, Resolution, SourceBounds, Unusable, UnusableOffset};
//! use connect_offsets::{Offset, OffsetKey, Partition, Result};
//!
//! struct Binlog;
//! impl SourceBounds for Binlog {
//!     fn earliest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
//!         Ok(Some(Offset::new().with("file", "binlog.000007").with("pos", 4)))
//!     }
//!     fn latest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
//!         Ok(Some(Offset::new().with("file", "binlog.000009").with("pos", 1200)))
//!     }
//! }
//!
//! let policies = ResetPolicies::parse("fail,orders=earliest")?;
//! assert_eq!(policies.policy_for("orders"), ResetPolicy::Earliest);
//! let key = OffsetKey::new("orders", Partition::new().with("server", "db1"));
//! let old = Offset::new().with("file", "binlog.000002").with("pos", 77);
//! let bad = UnusableOffset::new(&key, Unusable::Gone, "binlog.000002 was purged").with_offset(&old);
//! match policies.resolve(&bad, &Binlog)? {
//!     Resolution::Use(o) => assert_eq!(o.get("file"), Some(&"binlog.000007".into())),
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), connect_offsets::Error>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::dead_letter::DeadLetter;
use crate::{Error, Offset, OffsetKey, Result};

/// The dead-letter file [`ResetPolicies::with_dead_letter`] takes.
#[doc(hidden)]
pub use crate::dead_letter::DeadLetterFile;

/// What to do with an offset a worker cannot use (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResetPolicy {
    /// Stop with an error. The default.
    #[default]
    Fail,
    /// Dead-letter the offset, reset it and go on.
    Skip,
    /// Replace it with the oldest position the source still has.
    Earliest,
    /// Replace it with the source's current end.
    Latest,
}

impl ResetPolicy {
    /// `fail`, `skip`, `earliest` or `latest`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetPolicy::Fail => "fail",
            ResetPolicy::Skip => "skip",
            ResetPolicy::Earliest => "earliest",
            ResetPolicy::Latest => "latest",
        }
    }
}

impl fmt::Display for ResetPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ResetPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "fail" => Ok(ResetPolicy::Fail),
            "skip" => Ok(ResetPolicy::Skip),
            "earliest" => Ok(ResetPolicy::Earliest),
            "latest" => Ok(ResetPolicy::Latest),
            other => Err(Error::Settings(format!(
                "unknown reset policy `{other}` (known: fail, skip, earliest, latest)"
            ))),
        }
    }
}

/// Why an offset cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum Unusable {
    /// Its bytes do not decode.
    Corrupt,
    /// The source says the position no longer exists.
    Gone,
    /// The connector rejects it (wrong fields, wrong types).
    Invalid,
}

impl Unusable {
    /// `corrupt`, `gone` or `invalid` (the `reason` label of the metric).
    pub fn as_str(self) -> &'static str {
        match self {
            Unusable::Corrupt => "corrupt",
            Unusable::Gone => "gone",
            Unusable::Invalid => "invalid",
        }
    }
}

/// One offset a worker cannot use.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct UnusableOffset<'a> {
    /// The partition it belongs to.
    pub key: &'a OffsetKey,
    /// The offset, when it decoded.
    pub offset: Option<&'a Offset>,
    /// The raw stored bytes, when they are what failed (kept in the dead-letter file).
    pub raw: Option<&'a [u8]>,
    /// Why it cannot be used.
    pub reason: Unusable,
    /// What exactly is wrong, for the log and the error.
    pub detail: String,
}

impl<'a> UnusableOffset<'a> {
    /// An unusable offset of `key`.
    pub fn new(key: &'a OffsetKey, reason: Unusable, detail: impl Into<String>) -> Self {
        UnusableOffset {
            key,
            offset: None,
            raw: None,
            reason,
            detail: detail.into(),
        }
    }

    /// With the decoded offset.
    pub fn with_offset(mut self, offset: &'a Offset) -> Self {
        self.offset = Some(offset);
        self
    }

    /// With the raw bytes that failed.
    pub fn with_raw(mut self, raw: &'a [u8]) -> Self {
        self.raw = Some(raw);
        self
    }
}

/// What the worker should do instead.
#[derive(Debug, Clone, PartialEq)]
#[doc(hidden)]
pub enum Resolution {
    /// Start the partition with no offset (policy `skip`).
    NoOffset,
    /// Start from this offset (policies `earliest` and `latest`).
    Use(Offset),
}

/// The source's bounds for a partition, for the `earliest` and `latest` policies. `None` when the
/// source cannot tell.
#[doc(hidden)]
pub trait SourceBounds {
    /// The oldest position the source still has for `key`'s partition.
    fn earliest(&self, key: &OffsetKey) -> Result<Option<Offset>>;
    /// The source's current end for `key`'s partition.
    fn latest(&self, key: &OffsetKey) -> Result<Option<Offset>>;
}

/// A source that knows no bounds (only `fail` and `skip` can then be used).
#[derive(Debug, Clone, Copy, Default)]
#[doc(hidden)]
pub struct NoBounds;

impl SourceBounds for NoBounds {
    fn earliest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
        Ok(None)
    }
    fn latest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
        Ok(None)
    }
}

/// The reset policy of every connector: a default and per-connector choices, and the dead-letter
/// file `skip` writes to.
#[derive(Debug, Clone, Default)]
pub struct ResetPolicies {
    default: ResetPolicy,
    per_connector: BTreeMap<String, ResetPolicy>,
    dead_letter: Option<DeadLetterFile>,
}

impl ResetPolicies {
    /// `default` for every connector.
    pub fn new(default: ResetPolicy) -> Self {
        ResetPolicies {
            default,
            ..Default::default()
        }
    }

    /// Parses `default[,connector=policy...]`, e.g. `fail,orders=earliest,clicks=latest`. The
    /// default may be left out (`orders=skip` keeps `fail` for the others).
    pub fn parse(spec: &str) -> Result<Self> {
        let mut p = ResetPolicies::default();
        for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match part.rsplit_once('=') {
                Some((conn, policy)) if !conn.trim().is_empty() => {
                    p.per_connector
                        .insert(conn.trim().to_string(), policy.parse()?);
                }
                Some(_) => {
                    return Err(Error::Settings(format!(
                        "reset policy `{part}` names no connector"
                    )));
                }
                None => p.default = part.parse()?,
            }
        }
        Ok(p)
    }

    /// Sets the policy of one connector.
    pub fn with_connector(mut self, connector: impl Into<String>, policy: ResetPolicy) -> Self {
        self.per_connector.insert(connector.into(), policy);
        self
    }

    /// Where `skip` keeps the offsets it drops (without one, `skip` only logs them).
    pub fn with_dead_letter(mut self, file: DeadLetterFile) -> Self {
        self.dead_letter = Some(file);
        self
    }

    /// The policy of connectors not named in the spec.
    pub fn default_policy(&self) -> ResetPolicy {
        self.default
    }

    /// The policy for `connector`.
    pub fn policy_for(&self, connector: &str) -> ResetPolicy {
        self.per_connector
            .get(connector)
            .copied()
            .unwrap_or(self.default)
    }

    /// Decides what to do with `bad` under its connector's policy; logs and counts the decision.
    /// `fail` returns [`Error::InvalidData`] naming the connector, partition, offset and reason.
    pub fn resolve(
        &self,
        bad: &UnusableOffset<'_>,
        bounds: &dyn SourceBounds,
    ) -> Result<Resolution> {
        let connector = bad.key.namespace();
        let policy = self.policy_for(connector);
        let partition = describe_partition(bad.key);
        let offset = bad
            .offset
            .map(|o| o.to_json())
            .unwrap_or_else(|| "(undecodable)".into());
        crate::metrics::offset_reset(connector, policy.as_str(), bad.reason.as_str());
        let bound = |which: &str, got: Option<Offset>| {
            got.ok_or_else(|| {
                Error::Input(format!(
                    "reset policy {policy} of connector `{connector}` needs the source's {which} position of partition {partition}, and the source did not give one (offset {offset}: {})",
                    bad.detail
                ))
            })
        };
        let resolution = match policy {
            ResetPolicy::Fail => {
                tracing::error!(connector, %partition, %offset, reason = bad.reason.as_str(), detail = %bad.detail,
                    "unusable offset; reset policy fail stops the task");
                return Err(Error::InvalidData(format!(
                    "connector `{connector}` partition {partition}: offset {offset} is unusable ({}: {}); reset policy fail (set another with a reset policy, or fix the offset with `connect-offsets set`/`reset`)",
                    bad.reason.as_str(),
                    bad.detail
                )));
            }
            ResetPolicy::Skip => {
                if let Some(dl) = &self.dead_letter {
                    let key_bytes = bad.key.connect_key();
                    let value_bytes = match (bad.raw, bad.offset) {
                        (Some(raw), _) => Some(raw.to_vec()),
                        (None, Some(o)) => Some(o.to_json().into_bytes()),
                        (None, None) => None,
                    };
                    dl.write(&DeadLetter {
                        source: "policy",
                        location: vec![
                            ("connector", connector.to_string()),
                            ("partition", partition.clone()),
                            ("policy", policy.as_str().to_string()),
                        ],
                        reason: format!("{}: {}", bad.reason.as_str(), bad.detail),
                        blobs: vec![("key", Some(&key_bytes)), ("value", value_bytes.as_deref())],
                    })?;
                }
                Resolution::NoOffset
            }
            ResetPolicy::Earliest => Resolution::Use(bound("earliest", bounds.earliest(bad.key)?)?),
            ResetPolicy::Latest => Resolution::Use(bound("latest", bounds.latest(bad.key)?)?),
        };
        let to = match &resolution {
            Resolution::NoOffset => "no offset".to_string(),
            Resolution::Use(o) => o.to_json(),
        };
        tracing::warn!(connector, %partition, %offset, reason = bad.reason.as_str(), detail = %bad.detail,
            policy = policy.as_str(), new_offset = %to, "unusable offset reset by policy");
        Ok(resolution)
    }
}

fn describe_partition(key: &OffsetKey) -> String {
    key.partition()
        .map(|p| p.to_json())
        .unwrap_or_else(|| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    struct Bounds;
    impl SourceBounds for Bounds {
        fn earliest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
            Ok(Some(Offset::new().with("kafka_offset", 10)))
        }
        fn latest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
            Ok(Some(Offset::new().with("kafka_offset", 99)))
        }
    }

    #[test]
    fn parses_per_connector_choices() {
        let p = ResetPolicies::parse("latest, a=skip ,b=earliest").unwrap();
        assert_eq!(p.policy_for("a"), ResetPolicy::Skip);
        assert_eq!(p.policy_for("b"), ResetPolicy::Earliest);
        assert_eq!(p.policy_for("z"), ResetPolicy::Latest);
        assert_eq!(
            ResetPolicies::parse("a=skip").unwrap().policy_for("z"),
            ResetPolicy::Fail
        );
        let e = ResetPolicies::parse("a=never").unwrap_err().to_string();
        assert!(e.contains("unknown reset policy `never`"), "{e}");
        assert!(ResetPolicies::parse("=skip").is_err());
    }

    #[test]
    fn each_policy_does_what_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let dl = DeadLetterFile::new(dir.path().join("dl.jsonl"));
        let p = ResetPolicies::parse("fail,s=skip,e=earliest,l=latest")
            .unwrap()
            .with_dead_letter(dl.clone());
        let part = Partition::new()
            .with("kafka_topic", "t")
            .with("kafka_partition", 0);
        let old = Offset::new().with("kafka_offset", 5);
        let bad = |k| UnusableOffset::new(k, Unusable::Gone, "below log start").with_offset(&old);
        let f = OffsetKey::new("f", part.clone());
        let e = p.resolve(&bad(&f), &Bounds).unwrap_err().to_string();
        assert!(
            e.contains("connector `f`") && e.contains("kafka_offset") && e.contains("gone"),
            "{e}"
        );
        let s = OffsetKey::new("s", part.clone());
        assert_eq!(p.resolve(&bad(&s), &Bounds).unwrap(), Resolution::NoOffset);
        let letters = std::fs::read_to_string(dl.path()).unwrap();
        assert!(
            letters.contains("\"source\":\"policy\"") && letters.contains("below log start"),
            "{letters}"
        );
        let k = OffsetKey::new("e", part.clone());
        assert_eq!(
            p.resolve(&bad(&k), &Bounds).unwrap(),
            Resolution::Use(Offset::new().with("kafka_offset", 10))
        );
        let k = OffsetKey::new("l", part);
        assert_eq!(
            p.resolve(&bad(&k), &Bounds).unwrap(),
            Resolution::Use(Offset::new().with("kafka_offset", 99))
        );
        let e = p.resolve(&bad(&k), &NoBounds).unwrap_err().to_string();
        assert!(e.contains("needs the source's latest position"), "{e}");
    }
}
