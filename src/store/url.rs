//! Choosing a backend from a URL.

use std::fmt;

use super::OffsetStore;
use crate::{Error, Result};

/// A parsed store URL: `scheme://location?name=value&...`.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// `memory`, `rocksdb` or `kafka`.
    pub scheme: String,
    /// Everything between `://` and `?`, percent-decoded.
    pub location: String,
    /// Query parameters in order, percent-decoded.
    pub params: Vec<(String, String)>,
}

/// Parameter names whose values are secrets: never printed. Besides passwords, secrets and tokens:
/// private keys given inline (`ssl.key.pem`) and librdkafka's OAUTHBEARER configuration string.
pub(crate) fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("password")
        || n.contains("secret")
        || n.ends_with(".key")
        || n.contains("key.pem")
        || n.contains("token")
        || n.contains("jaas")
        || n.contains("oauthbearer.config")
}

impl fmt::Display for StoreUrl {
    /// The URL with secret parameters masked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.location)?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            let v = if is_secret(k) { "****" } else { v.as_str() };
            write!(f, "{}{k}={v}", if i == 0 { '?' } else { '&' })?;
        }
        Ok(())
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// Masks the values of secret-looking query parameters in a raw URL (for error messages).
pub fn redact(raw: &str) -> String {
    let Some((base, query)) = raw.split_once('?') else {
        return raw.to_string();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if is_secret(&percent_decode(k).unwrap_or_default()) => {
                format!("{k}=****")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("{base}?{}", parts.join("&"))
}

/// `s` percent-decoded as UTF-8; `None` for bytes that are not UTF-8 or a `%` without two hex digits
/// after it (which `percent-encoding` would pass through: in a store URL it is a mistake to report).
fn percent_decode(s: &str) -> Option<String> {
    let malformed = s.split('%').skip(1).any(|rest| {
        !rest
            .get(..2)
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if malformed {
        return None;
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

impl StoreUrl {
    /// Parses `raw`; fails with a message naming what is wrong.
    pub fn parse(raw: &str) -> Result<StoreUrl> {
        let bad = |reason: String| Error::InvalidUrl {
            url: redact(raw),
            reason,
        };
        let Some((scheme, rest)) = raw.split_once("://") else {
            return Err(bad(
                "expected scheme://..., e.g. memory://, rocksdb:///path or kafka://host:port/topic"
                    .into(),
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'-')
        {
            return Err(bad(format!("`{scheme}` is not a scheme")));
        }
        let (loc, query) = rest.split_once('?').unwrap_or((rest, ""));
        let location =
            percent_decode(loc).ok_or_else(|| bad(format!("bad percent-escape in `{loc}`")))?;
        let mut params = Vec::new();
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let k = percent_decode(k)
                .ok_or_else(|| bad(format!("bad percent-escape in parameter `{k}`")))?;
            let v = percent_decode(v)
                .ok_or_else(|| bad(format!("bad percent-escape in the value of `{k}`")))?;
            if k.is_empty() {
                return Err(bad("a parameter has no name".into()));
            }
            // Which of two values wins is no guess to make for the person who wrote both.
            if params.iter().any(|(n, _): &(String, String)| *n == k) {
                return Err(bad(format!("parameter `{k}` is given twice")));
            }
            params.push((k, v));
        }
        Ok(StoreUrl {
            scheme,
            location,
            params,
        })
    }

    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An error about this URL.
    pub fn error(&self, reason: impl Into<String>) -> Error {
        Error::InvalidUrl {
            url: self.to_string(),
            reason: reason.into(),
        }
    }

    /// Fails when a parameter other than `known` is present.
    pub fn only_params(&self, known: &[&str]) -> Result<()> {
        for (k, _) in &self.params {
            if !known.contains(&k.as_str()) {
                let list = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(self.error(format!(
                    "unknown parameter `{k}` for {} (known: {list})",
                    self.scheme
                )));
            }
        }
        Ok(())
    }

    /// Fails with a clear reason when `reset.policy` or `dead.letter.file` is given to a store
    /// that loads nothing it did not decode when writing it.
    pub(crate) fn refuse_load_policy(&self) -> Result<()> {
        match ["reset.policy", "dead.letter.file"]
            .into_iter()
            .find(|p| self.param(p).is_some())
        {
            Some(p) => Err(self.error(format!(
                "`{p}` (--reset-policy, --dead-letter) is for stores that load records others \
                 wrote (kafka://); a {} store holds only offsets it checked when they were \
                 written (a worker's log has its own: `offsets.reset.policy`)",
                self.scheme
            ))),
            None => Ok(()),
        }
    }

    /// A boolean parameter (`true`/`false`/`1`/`0`), `default` when absent.
    pub fn bool_param(&self, name: &str, default: bool) -> Result<bool> {
        match self.param(name) {
            None => Ok(default),
            Some("true" | "1" | "yes") => Ok(true),
            Some("false" | "0" | "no") => Ok(false),
            Some(v) => Err(self.error(format!(
                "parameter `{name}` must be true or false, not `{v}`"
            ))),
        }
    }
}

/// Opens the store a URL names:
///
/// * `memory://`: a new, empty [`MemoryStore`](super::MemoryStore);
/// * `rocksdb:///absolute/path` or `rocksdb://relative/path`, optional `?sync=true`;
/// * `kafka://host:port[,host:port]/topic?partitions=25&replication=3&...` (feature `kafka`; any other
///   parameter is passed to librdkafka); with `fallback.topic=connect-offsets`, a connector's own
///   topic read in front of the worker's (`KafkaPairStore`); with `exactly.once.group=<group.id>`
///   and `exactly.once.task=<connector>/<task>` (transactional id `<group>-<connector>-<task>`, as
///   Connect's) or `exactly.once.id=<transactional id>`, the source task whose records and offsets
///   `KafkaStore::task_producer` commits in one transaction (open it with `KafkaStore::open`);
/// * `kafka-group://host:port[,host:port]/?group=connect-{connector}` (feature `kafka`): sink
///   connectors' consumer groups (`KafkaGroupStore`).
///
/// On every scheme, `history=<retention>` (`7d`, `12h`) and optionally `history.max.bytes=N` record
/// how offsets move ([`HistoryStore`](crate::history::HistoryStore)).
///
/// ```
/// use connect_offsets::store::{open, OffsetStoreExt};
/// use connect_offsets::{OffsetKey, Partition, Offset};
///
/// let store = open("memory://")?;
/// let key = OffsetKey::new("my-connector", Partition::new().with("file", "/tmp/a.txt"));
/// store.set(key.clone(), Offset::new().with("position", 42))?;
/// assert_eq!(store.get(&key)?.unwrap().get("position"), Some(&42.into()));
/// # Ok::<(), connect_offsets::Error>(())
/// ```
pub fn open(raw: &str) -> Result<Box<dyn OffsetStore>> {
    open_as(raw, Create::Yes)
}

/// Opens the store at `raw` as [`open`] does, but only if it exists: a RocksDB directory holding a
/// store, a Kafka topic that is there. For commands that read or change what is stored: a
/// mistyped path or topic is refused, naming it, instead of read as a new empty store.
pub fn open_existing(raw: &str) -> Result<Box<dyn OffsetStore>> {
    open_as(raw, Create::No)
}

/// Opens the store at `raw` as [`open_existing`] does, for commands that only read: a Kafka topic
/// that is not compacted is read with a warning rather than refused, and writes are refused.
pub fn open_read_only(raw: &str) -> Result<Box<dyn OffsetStore>> {
    open_as(raw, Create::ReadOnly)
}

/// Opens the store at `raw`, as [`open`] does, for a process whose commit buffer writes as
/// `writer`: a Kafka topic is opened with the writer claimed (URL `writer=`, unless the URL names
/// one), so that this writer's previous process, killed inside a transaction, is fenced and its
/// transaction aborted before the topic is read. Unclaimed, the open would wait for that
/// transaction until the brokers abort it (`transaction.timeout.ms`).
pub fn open_for_writer(raw: &str, writer: &str) -> Result<Box<dyn OffsetStore>> {
    let mut url = StoreUrl::parse(raw)?;
    if url.scheme == "kafka" && url.param("writer").is_none() {
        url.params.push(("writer".into(), writer.into()));
    }
    open_url(url, Create::Yes)
}

/// Whether opening creates a store that is not there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Create {
    Yes,
    No,
    /// As `No`, for reading only.
    ReadOnly,
}

fn open_as(raw: &str, create: Create) -> Result<Box<dyn OffsetStore>> {
    open_url(StoreUrl::parse(raw)?, create)
}

fn open_url(mut url: StoreUrl, create: Create) -> Result<Box<dyn OffsetStore>> {
    // The scheme first: an unknown one is the error to report, whatever its parameters say.
    if !SCHEMES.contains(&url.scheme.as_str()) {
        return Err(unknown_scheme(&url));
    }
    let history = crate::history::HistoryConfig::take_from(&mut url)?;
    if history.is_some() && url.scheme == "kafka-group" {
        return Err(url.error(
            "history is not available on kafka-group:// (a consumer group holds committed offsets only)",
        ));
    }
    let store = open_backend(&url, create)?;
    Ok(match history {
        Some(config) => Box::new(crate::history::HistoryStore::open(store, config)?),
        None => store,
    })
}

fn open_backend(url: &StoreUrl, create: Create) -> Result<Box<dyn OffsetStore>> {
    match url.scheme.as_str() {
        "memory" => {
            url.refuse_load_policy()?;
            url.only_params(&[])?;
            if !url.location.is_empty() {
                return Err(url.error("memory:// takes no location"));
            }
            Ok(Box::new(super::MemoryStore::new()))
        }
        "rocksdb" => open_rocksdb(url, create),
        "kafka" => open_kafka(url, create),
        "kafka-group" => open_kafka_group(url),
        _ => Err(unknown_scheme(url)),
    }
}

/// The schemes [`open`] knows.
const SCHEMES: &[&str] = &["memory", "rocksdb", "kafka", "kafka-group"];

fn unknown_scheme(url: &StoreUrl) -> Error {
    url.error(format!(
        "unknown scheme `{}` (known: {})",
        url.scheme,
        SCHEMES.join(", ")
    ))
}

#[cfg(feature = "rocksdb")]
fn open_rocksdb(url: &StoreUrl, create: Create) -> Result<Box<dyn OffsetStore>> {
    url.refuse_load_policy()?;
    url.only_params(&["sync"])?;
    if url.location.is_empty() {
        return Err(
            url.error("no directory: use rocksdb:///absolute/path or rocksdb://relative/path")
        );
    }
    // RocksDB names its current manifest in `CURRENT`: a directory without one holds no store.
    if create != Create::Yes
        && !std::path::Path::new(&url.location)
            .join("CURRENT")
            .is_file()
    {
        let what = if std::path::Path::new(&url.location).is_dir() {
            "holds no RocksDB store"
        } else {
            "does not exist"
        };
        return Err(Error::NoStore(format!(
            "no store at rocksdb://{}: the directory {what} (this command does not create one; \
             check the path)",
            url.location
        )));
    }
    let options = super::rocksdb::RocksDbOptions {
        sync: url.bool_param("sync", false)?,
    };
    Ok(Box::new(super::rocksdb::RocksDbStore::open_with(
        &url.location,
        options,
    )?))
}

#[cfg(not(feature = "rocksdb"))]
fn open_rocksdb(url: &StoreUrl, _: Create) -> Result<Box<dyn OffsetStore>> {
    Err(Error::FeatureDisabled {
        url: url.to_string(),
        feature: "rocksdb",
    })
}

#[cfg(feature = "kafka")]
fn open_kafka(url: &StoreUrl, create: Create) -> Result<Box<dyn OffsetStore>> {
    if url.param(super::kafka::FALLBACK_TOPIC).is_some() {
        // The worker's topic must exist already; the connector's own may not yet (Connect reads
        // the worker's alone until then).
        return Ok(Box::new(super::kafka::KafkaPairStore::open_url(url)?));
    }
    Ok(Box::new(
        super::kafka::KafkaStoreBuilder::from_url(url)?
            .must_exist(create != Create::Yes)
            .read_only(create == Create::ReadOnly)
            .open()?,
    ))
}

#[cfg(not(feature = "kafka"))]
fn open_kafka(url: &StoreUrl, _: Create) -> Result<Box<dyn OffsetStore>> {
    Err(Error::FeatureDisabled {
        url: url.to_string(),
        feature: "kafka",
    })
}

#[cfg(feature = "kafka")]
fn open_kafka_group(url: &StoreUrl) -> Result<Box<dyn OffsetStore>> {
    url.refuse_load_policy()?;
    Ok(Box::new(super::kafka::KafkaGroupStore::open_url(url)?))
}

#[cfg(not(feature = "kafka"))]
fn open_kafka_group(url: &StoreUrl) -> Result<Box<dyn OffsetStore>> {
    open_kafka(url, Create::Yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        let u =
            StoreUrl::parse("kafka://h:9092/t?sasl.password=hunter2&partitions=5&x=%20y").unwrap();
        assert_eq!(u.scheme, "kafka");
        assert_eq!(u.location, "h:9092/t");
        assert_eq!(u.param("x"), Some(" y"));
        let shown = u.to_string();
        assert!(
            !shown.contains("hunter2") && shown.contains("sasl.password=****"),
            "{shown}"
        );
        let e = StoreUrl::parse("kafka://h/t?sasl.password=hunter2&bad=%zz")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && e.contains("percent"), "{e}");
    }

    #[test]
    fn errors_name_the_problem() {
        let e = open("postgres://x").unwrap_err().to_string();
        assert!(e.contains("unknown scheme `postgres`"), "{e}");
        let e = open("/tmp/x").unwrap_err().to_string();
        assert!(e.contains("scheme://"), "{e}");
        let e = open("memory://?foo=1").unwrap_err().to_string();
        assert!(e.contains("unknown parameter `foo`"), "{e}");
        let e = StoreUrl::parse("rocksdb:///tmp/x?sync=true&sync=false")
            .unwrap_err()
            .to_string();
        assert!(e.contains("parameter `sync` is given twice"), "{e}");
        #[cfg(not(feature = "kafka"))]
        {
            let e = open("kafka://127.0.0.1:9092/t").unwrap_err().to_string();
            assert!(e.contains("`kafka` feature"), "{e}");
        }
    }
}
