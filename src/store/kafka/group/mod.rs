//! A sink connector's offsets as a store: [`KafkaGroupStore`] (feature `kafka`), opened by URL
//! `kafka-group://host:port[,host:port]/?group=connect-{connector}&<librdkafka property>=...`.
//!
//! A sink connector's offsets are its consumer group's committed offsets (group `connect-<name>`
//! unless the connector sets `consumer.override.group.id`: then `group=<that id>&connector=<name>`).
//! Keys and offsets have Connect's shape, partition `{"kafka_topic":"orders","kafka_partition":3}`,
//! offset `{"kafka_offset":1000}` (see [`entry`]); a connector is a namespace, so `list`, `get`,
//! `set`, `reset`, `export`, `import`, `migrate` and `serve` work on it unchanged. What a write does
//! is what Connect's `PATCH` and `DELETE /connectors/{name}/offsets` do (`Worker.modifySinkConnectorOffsets`):
//! * offsets are committed for the group (an `OffsetCommit` from a client that never joins it, the
//!   Admin API's `alterConsumerGroupOffsets`); `null` offsets are deleted (`OffsetDelete`, through
//!   librdkafka's `DeleteConsumerGroupOffsets`, in `ffi`);
//! * a write that resets every partition the group has committed deletes the group instead, as
//!   Connect's reset does; a group that does not exist counts as reset;
//! * refused, with nothing changed, while the group has members (the connector is running, or its
//!   tasks have not stopped yet): Connect's "zombie sink tasks" message, naming the members;
//! * checked before anything is changed: every partition in Connect's shape, every offset a
//!   non-negative integer, every topic and partition that gets an offset existing, and every offset at
//!   most the partition's log end. Beyond the log end a consumer's fetch is out of range and it
//!   falls back to `auto.offset.reset` (Connect's sinks: `earliest`, the whole partition again), which
//!   is never what moving an offset meant, so it is refused. Below the log start is accepted: the
//!   same fallback then starts from the first record there is, which is what "from the start" means.
//!   A reset (`null`) needs no such check: deleting an offset that is not there changes nothing.
//!
//! Not atomic ([`Capabilities::atomic`] is false): commits and deletions are two requests. It keeps
//! no writer sequence, so a [`CommitBuffer`](crate::buffer::CommitBuffer) refuses to open over it
//! (its recovery asks [`applied_seq`](OffsetStore::applied_seq), which fails saying why): a sink
//! task's position is committed by its own consumer, in the group, not through a log of ours.

pub(crate) mod entry;
pub(crate) mod names;
mod settle;

pub use entry::TopicPartition;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, GroupResult};
use rdkafka::config::FromClientConfigAndContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::topic_partition_list::Offset as RdOffset;
use rdkafka::{ClientConfig, TopicPartitionList};

use super::client::{Ctx, Scrubbed, block_on};
use super::config::Secrets;
use super::ffi::delete_offsets;
use crate::model::{Batch, OffsetKey};
use crate::store::url::StoreUrl;
use crate::store::{Capabilities, CommitHooks, OffsetStore};
use crate::{Error, Offset, Result};
use names::GroupNames;
use settle::{is_settling, until_settled};

const STORE: &str = "kafka-group";

/// Properties the store sets itself.
const RESERVED: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "the brokers are the URL's host part: kafka-group://host:port/",
    ),
    (
        "metadata.broker.list",
        "the brokers are the URL's host part: kafka-group://host:port/",
    ),
    (
        "group.id",
        "name the group with `group=` (a template with {connector}, or one group with `connector=`)",
    ),
    (
        "enable.auto.commit",
        "the store commits only what it is asked to",
    ),
];

/// A sink connector's consumer group as an offset store. See the [module docs](self).
pub struct KafkaGroupStore {
    bootstrap: String,
    names: GroupNames,
    timeout: Duration,
    properties: Vec<(String, String)>,
    secrets: Arc<Secrets>,
    /// Metadata, watermarks and group descriptions (no `group.id`: it never commits).
    meta: BaseConsumer<Ctx>,
    admin: AdminClient<Ctx>,
}

impl fmt::Debug for KafkaGroupStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaGroupStore")
            .field("bootstrap", &self.bootstrap)
            .field("names", &self.names)
            .field("timeout", &self.timeout)
            .field("properties", &self.properties.len())
            .finish()
    }
}

/// How a refused write is worded: Connect has one text for an alter and one for a reset.
#[derive(Clone, Copy)]
enum Modification {
    Alter,
    Reset,
}

/// One connector's checked changes.
struct Plan<'a> {
    connector: &'a str,
    group: String,
    how: Modification,
    /// Every committed partition reset: the group is deleted.
    reset_all: bool,
    commits: TopicPartitionList,
    deletes: Vec<TopicPartition>,
}

/// Connect's message (`Worker.alterSinkConnectorOffsets`, `resetSinkConnectorOffsets`) for a group
/// that still has members, then who they are.
fn zombie(connector: &str, group: &str, how: Modification, members: &[String]) -> Error {
    zombie_after(connector, group, how, members, "nothing was changed")
}

/// [`zombie`], saying what was done before the refusal.
fn zombie_after(
    connector: &str,
    group: &str,
    how: Modification,
    members: &[String],
    done: &str,
) -> Error {
    let verb = match how {
        Modification::Alter => "alter",
        Modification::Reset => "reset",
    };
    let who = if members.is_empty() {
        "the broker refused the change for a member of the group".to_string()
    } else {
        format!(
            "consumer group `{group}` has {} active member{}: {}",
            members.len(),
            if members.len() == 1 { "" } else { "s" },
            members.join(", ")
        )
    };
    Error::State(format!(
        "Failed to {verb} consumer group offsets for connector {connector} either because its tasks \
         haven't stopped completely yet or the connector was resumed before the request to {verb} \
         its offsets could be successfully completed. If the connector is in a stopped state, this \
         operation can be safely retried. If it doesn't eventually succeed, the Connect cluster may \
         need to be restarted to get rid of the zombie sink tasks. ({who}; {done})"
    ))
}

/// Codes with which the broker refuses a change to a group that has members.
fn is_member_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::UnknownMemberId
            | RDKafkaErrorCode::IllegalGeneration
            | RDKafkaErrorCode::RebalanceInProgress
            | RDKafkaErrorCode::GroupSubscribedToTopic
            | RDKafkaErrorCode::NonEmptyGroup
            | RDKafkaErrorCode::StaleMemberEpoch
            | RDKafkaErrorCode::FencedMemberEpoch
    )
}

impl KafkaGroupStore {
    /// Opens `kafka-group://host:port[,host:port]/?group=...`.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_url(&StoreUrl::parse(url)?)
    }

    /// Opens a parsed URL. Parameters: `group` (default `connect-{connector}`), `connector` (with
    /// a fixed group), `timeout.ms` (default 30000); any other is a librdkafka property.
    pub fn open_url(url: &StoreUrl) -> Result<Self> {
        if url.scheme != STORE {
            return Err(url.error("not a kafka-group:// URL"));
        }
        let (hosts, path) = url.location.split_once('/').unwrap_or((&url.location, ""));
        if hosts.trim().is_empty() {
            return Err(
                url.error("no brokers: use kafka-group://host:port/?group=connect-{connector}")
            );
        }
        super::config::validate_bootstrap(hosts).map_err(|e| url.error(e))?;
        if !path.is_empty() {
            return Err(url.error(format!(
                "a kafka-group:// URL has no path (`/{path}`): name the group with ?group=..."
            )));
        }
        let mut timeout = super::config::DEFAULT_TIMEOUT;
        let mut properties = Vec::new();
        for (k, v) in &url.params {
            match k.as_str() {
                "group" | "connector" => {}
                "timeout.ms" => {
                    let ms: u64 = v.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                        url.error(format!(
                            "`timeout.ms` must be a positive integer, not `{v}`"
                        ))
                    })?;
                    timeout = Duration::from_millis(ms);
                }
                _ => {
                    if let Some((_, why)) = RESERVED.iter().find(|(n, _)| n == k) {
                        return Err(url.error(format!("property `{k}` cannot be set: {why}")));
                    }
                    properties.push((k.clone(), v.clone()));
                }
            }
        }
        let names = GroupNames::new(url.param("group"), url.param("connector"))?;
        let secrets = Arc::new(Secrets::of(&properties));
        let meta = Self::client(hosts, &properties, &secrets, "group metadata")?;
        let admin = Self::client(hosts, &properties, &secrets, "group admin")?;
        let store = KafkaGroupStore {
            bootstrap: hosts.trim().to_string(),
            names,
            timeout,
            properties,
            meta,
            admin,
            secrets,
        };
        // Fail at open on unreachable brokers or refused credentials, not at the first request.
        store.reach()?;
        Ok(store)
    }

    /// Asks the brokers for metadata in slices of a second, so that refused credentials (which
    /// librdkafka reports as events, not as the call's error) end the wait at once.
    fn reach(&self) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        let ctx = self.meta.context();
        loop {
            let slice = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_secs(1));
            let result = self.meta.fetch_metadata(None, slice);
            while let Some(event) = self.meta.poll(Duration::ZERO) {
                if let Err(e) = event {
                    ctx.note_error(&e);
                }
            }
            if let Some(reason) = ctx.auth_error() {
                return Err(Error::store(
                    STORE,
                    format!(
                        "authentication failed at {}: {reason} (check sasl.mechanism, sasl.username and sasl.password)",
                        self.bootstrap
                    ),
                ));
            }
            match result {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(self.error(
                        &self.meta,
                        format!(
                            "reach the brokers {} within {:?}",
                            self.bootstrap, self.timeout
                        ),
                        &e,
                    ));
                }
                Err(_) => {}
            }
        }
    }

    fn client<T: FromClientConfigAndContext<Ctx>>(
        hosts: &str,
        properties: &[(String, String)],
        secrets: &Arc<Secrets>,
        role: &str,
    ) -> Result<T> {
        Self::config(hosts, &[], properties)
            .create_with_context(Ctx::new(secrets.clone(), role))
            .map_err(|e| {
                Error::store_caused(STORE, format!("create the {role} client for {hosts}"), e)
            })
    }

    fn config(
        hosts: &str,
        extra: &[(&str, &str)],
        properties: &[(String, String)],
    ) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", hosts.trim());
        c.set("client.id", "connect-offsets");
        for (k, v) in properties {
            c.set(k, v);
        }
        for (k, v) in extra {
            c.set(*k, *v);
        }
        c
    }

    /// A consumer of `group` that never joins it: it reads and commits the group's offsets.
    fn group_client(&self, group: &str) -> Result<BaseConsumer<Ctx>> {
        let extra = [
            ("group.id", group),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
        ];
        Self::config(&self.bootstrap, &extra, &self.properties)
            .create_with_context(Ctx::new(self.secrets.clone(), format!("group {group}")))
            .map_err(|e| {
                Error::store_caused(STORE, format!("create a client of group `{group}`"), e)
            })
    }

    fn error<C: Consumer<Ctx>>(
        &self,
        client: &C,
        what: impl Into<String>,
        e: &KafkaError,
    ) -> Error {
        Error::store_caused(STORE, what, Scrubbed::of(client.client().context(), e))
    }

    /// The brokers (for `lag`).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The consumer group of `connector`.
    pub fn group_of(&self, connector: &str) -> Result<String> {
        self.names.group_of(connector)
    }

    /// The members of `group` (`client.id` on host), empty when it has none or does not exist.
    pub fn members(&self, group: &str) -> Result<Vec<String>> {
        let list = until_settled(
            self.timeout,
            || self.meta.fetch_group_list(Some(group), self.timeout),
            |r| matches!(r, Err(e) if e.rdkafka_error_code().is_some_and(is_settling)),
        )
        .map_err(|e| self.error(&self.meta, format!("describe consumer group `{group}`"), &e))?;
        Ok(list
            .groups()
            .iter()
            .filter(|g| g.name() == group)
            .flat_map(|g| g.members())
            .map(|m| format!("{} ({})", m.client_id(), m.client_host()))
            .collect())
    }

    /// The committed offsets of `group`: every one (`None`: of every partition the brokers know),
    /// or those of `partitions`. A group that does not exist has none.
    ///
    /// Fetched through a consumer of the group (one that never joins it), whose group handle
    /// finds the coordinator and follows it when it loads, moves or dies, as a consumer does.
    /// librdkafka's admin call for this crashed the process on `NOT_COORDINATOR` (issue #5040)
    /// and, given up on a dead coordinator, on its own timeout.
    fn committed_in(
        &self,
        group: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        let wanted = match partitions {
            Some(p) => p.to_vec(),
            None => self.every_partition()?,
        };
        if wanted.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut list = TopicPartitionList::new();
        for tp in &wanted {
            list.add_partition(&tp.topic, tp.partition);
        }
        let consumer = self.group_client(group)?;
        let got = consumer
            .committed_offsets(list, self.timeout)
            .map_err(|e| {
                self.error(
                    &consumer,
                    format!(
                        "list the offsets of consumer group `{group}` within {:?} (timeout.ms)",
                        self.timeout
                    ),
                    &e,
                )
            })?;
        let mut out = BTreeMap::new();
        for e in got.elements() {
            if let (RdOffset::Offset(n), Ok(())) = (e.offset(), e.error()) {
                let tp = TopicPartition {
                    topic: e.topic().to_string(),
                    partition: e.partition(),
                };
                out.insert(tp, n);
            }
        }
        Ok(out)
    }

    /// Every partition of every topic but Kafka's own.
    fn every_partition(&self) -> Result<Vec<TopicPartition>> {
        let md = self
            .meta
            .fetch_metadata(None, self.timeout)
            .map_err(|e| self.error(&self.meta, "fetch the brokers' topics", &e))?;
        Ok(md
            .topics()
            .iter()
            .filter(|t| !matches!(t.name(), "__consumer_offsets" | "__transaction_state"))
            .flat_map(|t| {
                t.partitions().iter().map(|p| TopicPartition {
                    topic: t.name().to_string(),
                    partition: p.id(),
                })
            })
            .collect())
    }

    /// Every committed offset of `group` (what Connect's `GET` lists).
    pub fn committed(&self, group: &str) -> Result<BTreeMap<TopicPartition, i64>> {
        self.committed_in(group, None)
    }

    /// The log end (high watermark) of a partition that must exist; errors name what is missing.
    fn log_end(&self, connector: &str, tp: &TopicPartition) -> Result<i64> {
        let md = self
            .meta
            .fetch_metadata(Some(&tp.topic), self.timeout)
            .map_err(|e| {
                self.error(
                    &self.meta,
                    format!("fetch metadata of topic `{}`", tp.topic),
                    &e,
                )
            })?;
        let missing = |why: String| {
            Error::InvalidData(format!(
                "sink connector `{connector}`, partition {}: {why}",
                tp.key(connector)
                    .partition()
                    .map(|p| p.to_json())
                    .unwrap_or_default()
            ))
        };
        let Some(topic) = md.topics().iter().find(|t| t.name() == tp.topic) else {
            return Err(missing(format!("topic `{}` does not exist", tp.topic)));
        };
        if let Some(e) = topic.error() {
            let code = RDKafkaErrorCode::from(e);
            if code == RDKafkaErrorCode::UnknownTopicOrPartition
                || code == RDKafkaErrorCode::UnknownTopic
            {
                return Err(missing(format!("topic `{}` does not exist", tp.topic)));
            }
            return Err(Error::store(
                STORE,
                format!("metadata of topic `{}`: {code}", tp.topic),
            ));
        }
        let count = topic.partitions().len();
        if !topic.partitions().iter().any(|p| p.id() == tp.partition) {
            return Err(missing(format!(
                "topic `{}` has no partition {} (it has {count}: 0 to {})",
                tp.topic,
                tp.partition,
                count.saturating_sub(1)
            )));
        }
        let (_, high) = self
            .meta
            .fetch_watermarks(&tp.topic, tp.partition, self.timeout)
            .map_err(|e| self.error(&self.meta, format!("fetch the log end of {tp}"), &e))?;
        Ok(high)
    }

    /// Checks one connector's changes and says what they take; changes nothing.
    fn plan<'a>(
        &self,
        connector: &'a str,
        changes: &BTreeMap<TopicPartition, Option<i64>>,
    ) -> Result<Plan<'a>> {
        let group = self.names.group_of(connector)?;
        let resets_only = changes.values().all(Option::is_none);
        // Connect's reset of everything: the group goes (a group that does not exist is reset).
        let reset_all = resets_only && {
            let have = self.committed(&group)?;
            have.keys().all(|tp| changes.contains_key(tp))
        };
        let how = if reset_all {
            Modification::Reset
        } else {
            Modification::Alter
        };
        let members = self.members(&group)?;
        if !members.is_empty() {
            return Err(zombie(connector, &group, how, &members));
        }
        let mut commits = TopicPartitionList::new();
        for (tp, pos) in changes {
            let Some(pos) = pos else { continue };
            let end = self.log_end(connector, tp)?;
            if *pos > end {
                return Err(Error::InvalidData(format!(
                    "sink connector `{connector}`, partition {}: offset {pos} is beyond the log end of {tp} ({end}); a consumer there would start over from `auto.offset.reset`, so it is refused (at most {end}: the next record written)",
                    tp.key(connector)
                        .partition()
                        .map(|p| p.to_json())
                        .unwrap_or_default()
                )));
            }
            commits
                .add_partition_offset(&tp.topic, tp.partition, RdOffset::Offset(*pos))
                .map_err(|e| Error::store_caused(STORE, format!("offset {pos} of {tp}"), e))?;
        }
        let deletes = changes
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|(tp, _)| tp.clone())
            .collect();
        Ok(Plan {
            connector,
            group,
            how,
            reset_all,
            commits,
            deletes,
        })
    }

    /// Makes the changes of a checked plan.
    fn execute(&self, plan: Plan<'_>) -> Result<()> {
        let Plan {
            connector,
            group,
            how,
            reset_all,
            commits,
            deletes,
        } = plan;
        if reset_all {
            return self.delete_group(connector, &group);
        }
        if commits.count() > 0 {
            let client = self.group_client(&group)?;
            if let Err(e) = client.commit(&commits, CommitMode::Sync) {
                if e.rdkafka_error_code().is_some_and(is_member_refusal) {
                    return Err(zombie(connector, &group, how, &self.members(&group)?));
                }
                return Err(self.error(
                    &client,
                    format!("commit offsets for consumer group `{group}`"),
                    &e,
                ));
            }
        }
        // A member that joined between the check and now: the commit above may have gone through.
        let done = if commits.count() > 0 {
            "the offsets given were committed, the resets were not done"
        } else {
            "nothing was changed"
        };
        if !deletes.is_empty() {
            let partitions = deletes.iter().map(|tp| (tp.topic.as_str(), tp.partition));
            let refused = until_settled(
                self.timeout,
                || delete_offsets(self.admin.inner(), &group, partitions.clone(), self.timeout),
                |r| matches!(r, Err(f) if is_settling(f.code)),
            );
            match refused.map(|rows| {
                rows.into_iter()
                    .map(|(topic, partition, code)| (TopicPartition { topic, partition }, code))
                    .collect::<Vec<_>>()
            }) {
                Ok(refused) if refused.is_empty() => {}
                Ok(refused) => {
                    if refused.iter().any(|(_, c)| is_member_refusal(*c)) {
                        let members = self.members(&group)?;
                        return Err(zombie_after(connector, &group, how, &members, done));
                    }
                    let shown: Vec<String> =
                        refused.iter().map(|(tp, c)| format!("{tp}: {c}")).collect();
                    return Err(Error::store(
                        STORE,
                        format!(
                            "delete offsets of consumer group `{group}`: {}",
                            shown.join(", ")
                        ),
                    ));
                }
                // Nothing committed, nothing to delete.
                Err(f) if f.code == RDKafkaErrorCode::GroupIdNotFound => {}
                Err(f) if is_member_refusal(f.code) => {
                    let members = self.members(&group)?;
                    return Err(zombie_after(connector, &group, how, &members, done));
                }
                Err(f) => {
                    return Err(Error::store(
                        STORE,
                        format!(
                            "delete offsets of consumer group `{group}`: {} ({})",
                            f.text, f.code
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn delete_group(&self, connector: &str, group: &str) -> Result<()> {
        let options = AdminOptions::new().request_timeout(Some(self.timeout));
        let settling = |r: &Option<KafkaResult<Vec<GroupResult>>>| match r {
            Some(Ok(results)) => results
                .iter()
                .any(|r| matches!(r, Err((_, code)) if is_settling(*code))),
            Some(Err(e)) => e.rdkafka_error_code().is_some_and(is_settling),
            None => false,
        };
        let results = until_settled(
            self.timeout,
            || {
                block_on(
                    self.admin.delete_groups(&[group], &options),
                    self.timeout + Duration::from_secs(5),
                )
            },
            settling,
        )
        .ok_or_else(|| Error::Timeout {
            op: format!("delete consumer group `{group}`"),
            after: self.timeout,
        })?
        .map_err(|e| {
            Error::store_caused(
                STORE,
                format!("delete consumer group `{group}`"),
                Scrubbed::of(self.admin.inner().context(), &e),
            )
        })?;
        for r in results {
            match r {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::GroupIdNotFound)) => {}
                Err((_, code)) if is_member_refusal(code) => {
                    return Err(zombie(
                        connector,
                        group,
                        Modification::Reset,
                        &self.members(group)?,
                    ));
                }
                Err((g, code)) => {
                    return Err(Error::store(
                        STORE,
                        format!("delete consumer group `{g}`: {code}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl OffsetStore for KafkaGroupStore {
    fn kind(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT.with_durable(true).with_atomic(false)
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
        if batch.seq != 0 {
            return Err(Error::State(format!(
                "the kafka-group store takes no sequenced batches (writer `{}`, seq {}): a consumer group records no writer sequence, so a commit buffer cannot write to it; a sink task commits its position through its own consumer",
                batch.writer, batch.seq
            )));
        }
        let mut per_connector: BTreeMap<&str, BTreeMap<TopicPartition, (&OffsetKey, Option<i64>)>> =
            BTreeMap::new();
        for (key, offset) in &batch.entries {
            let tp = entry::parse_key(key)?;
            let pos = offset
                .as_ref()
                .map(|o| entry::parse_offset(key, o))
                .transpose()?;
            self.names.group_of(key.namespace())?;
            let changes = per_connector.entry(key.namespace()).or_default();
            // `"kafka_partition":"3"` and `3` are two keys of one topic partition: which one should
            // win is the caller's to say (a reset of one must not quietly undo the other's offset).
            if let Some((first, _)) = changes.insert(tp.clone(), (key, pos)) {
                return Err(Error::InvalidData(format!(
                    "sink connector `{}`: partitions {} and {} both name topic partition {tp}; give it once",
                    key.namespace(),
                    first
                        .partition()
                        .map_or_else(|| "null".into(), |p| p.to_json()),
                    key.partition()
                        .map_or_else(|| "null".into(), |p| p.to_json()),
                )));
            }
        }
        let per_connector: BTreeMap<&str, BTreeMap<TopicPartition, Option<i64>>> = per_connector
            .into_iter()
            .map(|(c, changes)| {
                (
                    c,
                    changes
                        .into_iter()
                        .map(|(tp, (_, pos))| (tp, pos))
                        .collect(),
                )
            })
            .collect();
        // Every connector's changes are checked before any group is changed.
        let plans = per_connector
            .iter()
            .map(|(connector, changes)| self.plan(connector, changes))
            .collect::<Result<Vec<_>>>()?;
        for plan in plans {
            self.execute(plan)?;
        }
        Ok(())
    }

    fn applied_seq(&self, writer: &str) -> Result<u64> {
        Err(Error::State(format!(
            "the kafka-group store keeps no applied seq (asked for writer `{writer}`): a consumer group records no writer sequence, so a commit buffer cannot run over it; a sink task commits its position through its own consumer"
        )))
    }

    fn writers(&self) -> Result<Vec<(String, u64)>> {
        Ok(Vec::new())
    }

    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        let tp = entry::parse_key(key)?;
        let group = self.names.group_of(key.namespace())?;
        Ok(self
            .committed_in(&group, Some(std::slice::from_ref(&tp)))?
            .get(&tp)
            .map(|n| entry::offset_of(*n)))
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        let group = self.names.group_of(namespace)?;
        Ok(self
            .committed(&group)?
            .into_iter()
            .map(|(tp, n)| (tp.key(namespace), entry::offset_of(n)))
            .collect())
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        let list = self
            .meta
            .fetch_group_list(None, self.timeout)
            .map_err(|e| self.error(&self.meta, "list consumer groups", &e))?;
        let candidates: BTreeSet<(String, String)> = list
            .groups()
            .iter()
            // Connect workers' own groups (`connect`) and others hold no consumer offsets.
            .filter(|g| matches!(g.protocol_type(), "consumer" | ""))
            .filter_map(|g| {
                self.names
                    .connector_of(g.name())
                    .map(|c| (c, g.name().to_string()))
            })
            .collect();
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (connector, group) in candidates {
            if !self.committed(&group)?.is_empty() {
                out.push(connector);
            }
        }
        Ok(out)
    }

    fn persist(&self) -> Result<()> {
        // A commit or deletion is durable once the broker acknowledged it.
        Ok(())
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for KafkaGroupStore {
    fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> {
        let tp = entry::parse_key(key)?;
        let position = entry::parse_offset(key, offset)?;
        Ok(Some((tp.key(key.namespace()), entry::offset_of(position))))
    }
}
