//! Settings of a [`KafkaStore`](super::KafkaStore): from a URL or a [`KafkaStoreBuilder`], and the
//! librdkafka client configurations made from them.
//!
//! Our own parameters are consumed here; every other URL parameter is a librdkafka property and is
//! passed to all three clients (producer, consumer, admin) unchanged. Secret values (see
//! [`is_secret`]) are kept out of `Debug` output, logs and error messages: [`Secrets::scrub`] is applied
//! to everything librdkafka says before we log it or put it in an error.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use tracing::level_filters::LevelFilter;

use crate::policy::{ResetPolicies, ResetPolicy};
use crate::store::ApplyFault;
use crate::store::url::{StoreUrl, is_secret};
use crate::{Error, Result};

/// Connect's default number of partitions of the offsets topic (`offset.storage.partitions`).
pub const DEFAULT_PARTITIONS: i32 = 25;
/// Connect's default replication factor of the offsets topic (`offset.storage.replication.factor`).
pub const DEFAULT_REPLICATION: i32 = 3;
/// How long opening, each transaction step and each read-to-end may take without progress.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// librdkafka properties the store sets itself; giving them is refused with the reason.
const RESERVED: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "the brokers are the URL's host part: kafka://host:port,host:port/topic",
    ),
    (
        "metadata.broker.list",
        "the brokers are the URL's host part: kafka://host:port,host:port/topic",
    ),
    (
        "transactional.id",
        "each writer gets its own transactional.id; set `transactional.id.prefix` instead (or \
         `exactly.once.id` for a source task's transactions)",
    ),
    (
        "enable.idempotence",
        "transactions need the idempotent producer",
    ),
    (
        "isolation.level",
        "the store reads with read_committed so aborted batches are never loaded",
    ),
    (
        "enable.auto.commit",
        "the store's reader never commits consumer offsets",
    ),
];

/// How a batch reaches the topic (URL `write.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// One transaction per batch (the default): readers with `read_committed` (our own, Connect
    /// workers with exactly-once support) see a batch whole or not at all, and a newer process of a
    /// writer fences the older one.
    #[default]
    Transaction,
    /// An idempotent `acks=all` producer, no transactions: a batch's records are acknowledged before
    /// its marker is written, so our reopen replays a batch a crash cut short; other readers may see
    /// part of such a batch until then, and nothing fences an older process of the same writer.
    Idempotent,
}

/// Properties whose value the store fixes but which may be given with that same value.
const FIXED: &[(&str, &str)] = &[("partitioner", "murmur2_random"), ("acks", "all")];

/// The names of secret parameters (passwords, private keys, tokens, ...).
fn kafka_secret(name: &str) -> bool {
    is_secret(name)
}

/// Builds a [`KafkaStore`](super::KafkaStore).
///
/// ```no_run
/// use std::time::Duration;
/// use connect_offsets::store::kafka::KafkaStore;
///
/// let store = KafkaStore::builder("127.0.0.1:9092", "connect-offsets")
///     .partitions(25)
///     .replication(3)
///     .timeout(Duration::from_secs(10))
///     .property("sasl.mechanism", "PLAIN")
///     .open()?;
/// # Ok::<(), connect_offsets::Error>(())
/// ```
#[derive(Clone)]
pub struct KafkaStoreBuilder {
    pub(super) bootstrap: String,
    pub(super) topic: String,
    pub(super) partitions: i32,
    pub(super) replication: i32,
    pub(super) timeout: Duration,
    pub(super) strict: bool,
    pub(super) reset_policies: Option<ResetPolicies>,
    pub(super) dead_letter: Option<PathBuf>,
    pub(super) transactional_id_prefix: Option<String>,
    pub(super) claim: Option<String>,
    pub(super) exclusive: Option<String>,
    pub(super) task: Option<TaskId>,
    pub(super) write_mode: WriteMode,
    pub(super) snapshot_dir: Option<PathBuf>,
    pub(super) must_exist: bool,
    pub(super) read_only: bool,
    pub(super) properties: Vec<(String, String)>,
    pub(super) fault: Option<Arc<dyn ApplyFault>>,
}

impl fmt::Debug for KafkaStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaStoreBuilder")
            .field("bootstrap", &self.bootstrap)
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .field("replication", &self.replication)
            .field("timeout", &self.timeout)
            .field("strict", &self.strict)
            .field("reset_policies", &self.reset_policies)
            .field("dead_letter", &self.dead_letter)
            .field("transactional_id_prefix", &self.transactional_id_prefix)
            .field("claim", &self.claim)
            .field("exclusive", &self.exclusive)
            .field("task", &self.task)
            .field("write_mode", &self.write_mode)
            .field("snapshot_dir", &self.snapshot_dir)
            .field("properties", &Masked(&self.properties))
            .finish()
    }
}

/// Properties printed with secret values masked.
struct Masked<'a>(&'a [(String, String)]);

impl fmt::Debug for Masked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| {
                let shown = if kafka_secret(k) { "****" } else { v.as_str() };
                (k, shown)
            }))
            .finish()
    }
}

impl KafkaStoreBuilder {
    /// A builder for the offsets topic `topic` on the brokers `bootstrap` (`host:port[,host:port]`).
    pub fn new(bootstrap: impl Into<String>, topic: impl Into<String>) -> Self {
        KafkaStoreBuilder {
            bootstrap: bootstrap.into(),
            topic: topic.into(),
            partitions: DEFAULT_PARTITIONS,
            replication: DEFAULT_REPLICATION,
            timeout: DEFAULT_TIMEOUT,
            strict: false,
            reset_policies: None,
            dead_letter: None,
            transactional_id_prefix: None,
            claim: None,
            exclusive: None,
            task: None,
            write_mode: WriteMode::default(),
            snapshot_dir: None,
            must_exist: false,
            read_only: false,
            properties: Vec::new(),
            fault: None,
        }
    }

    /// The builder a `kafka://host:port[,host:port]/topic?name=value&...` URL describes.
    ///
    /// Parameters: `partitions` (default 25) and `replication` (default 3, `-1` = the broker's
    /// default) for a topic that must be created; `timeout.ms` (default 30000); `strict`
    /// (`true` refuses to open a topic holding undecodable records); `reset.policy` (what to do with
    /// them per connector, see [`reset_policy`](Self::reset_policy)); `dead.letter.file` (where
    /// undecodable records are copied); `transactional.id.prefix`; `writer` (a writer to claim at open,
    /// see [`claim_writer`](Self::claim_writer)); `exclusive.id` (a name this handle's own writes
    /// are exclusive under, see [`exclusive`](Self::exclusive)); `write.mode` (`transaction`, the
    /// default, or `idempotent`, see [`WriteMode`]); `snapshot.dir` (a local directory for the warm start
    /// snapshot, see [`snapshot_dir`](Self::snapshot_dir); none by default); `exactly.once.id`, or
    /// `exactly.once.group` with `exactly.once.task=<connector>/<task>` (a source task's
    /// transactional id, see [`task`](Self::task)). `fallback.topic` is
    /// refused: it names a pair ([`KafkaPairStore`](super::KafkaPairStore)). Any other parameter
    /// is a librdkafka property.
    pub fn from_url(url: &StoreUrl) -> Result<Self> {
        if url.scheme != "kafka" {
            return Err(url.error("not a kafka:// URL"));
        }
        let (hosts, topic) = url.location.split_once('/').ok_or_else(|| {
            url.error("no topic: use kafka://host:port[,host:port]/topic, e.g. kafka://127.0.0.1:9092/connect-offsets")
        })?;
        let mut b = KafkaStoreBuilder::new(hosts, topic);
        let int = |name: &str, v: &str| -> Result<i64> {
            v.parse::<i64>()
                .map_err(|_| url.error(format!("parameter `{name}` must be an integer, not `{v}`")))
        };
        let mut task = (None, None, None);
        for (k, v) in &url.params {
            match k.as_str() {
                "exactly.once.id" => task.0 = Some(v.as_str()),
                "exactly.once.group" => task.1 = Some(v.as_str()),
                "exactly.once.task" => task.2 = Some(v.as_str()),
                "partitions" => {
                    b.partitions = i32::try_from(int(k, v)?)
                        .map_err(|_| url.error("`partitions` is out of range"))?
                }
                "replication" => {
                    b.replication = i32::try_from(int(k, v)?)
                        .map_err(|_| url.error("`replication` is out of range"))?
                }
                "timeout.ms" => {
                    let ms = int(k, v)?;
                    if ms <= 0 {
                        return Err(url.error("`timeout.ms` must be positive"));
                    }
                    b.timeout = Duration::from_millis(ms as u64);
                }
                "strict" => b.strict = url.bool_param("strict", false)?,
                "reset.policy" => {
                    b.reset_policies = Some(
                        ResetPolicies::parse(v)
                            .map_err(|e| url.error(format!("parameter `reset.policy`: {e}")))?,
                    )
                }
                "dead.letter.file" => b.dead_letter = Some(PathBuf::from(v)),
                "transactional.id.prefix" => b.transactional_id_prefix = Some(v.clone()),
                "writer" => b.claim = Some(v.clone()),
                "exclusive.id" => b.exclusive = Some(v.clone()),
                "write.mode" => {
                    b.write_mode = match v.as_str() {
                        "transaction" => WriteMode::Transaction,
                        "idempotent" => WriteMode::Idempotent,
                        _ => {
                            return Err(url.error(format!(
                                "parameter `write.mode` must be `transaction` or `idempotent`, not `{v}`"
                            )));
                        }
                    }
                }
                "snapshot.dir" => {
                    if v.trim().is_empty() {
                        return Err(url.error(
                            "parameter `snapshot.dir` must name a directory, e.g. snapshot.dir=/var/lib/connect-offsets",
                        ));
                    }
                    b.snapshot_dir = Some(PathBuf::from(v))
                }
                "fallback.topic" => {
                    return Err(url.error(
                        "`fallback.topic` names a pair of topics: open it with connect_offsets::open or \
                         KafkaPairStore, not KafkaStore",
                    ));
                }
                _ => b.properties.push((k.clone(), v.clone())),
            }
        }
        b.task = TaskId::from_params(task.0, task.1, task.2).map_err(|e| url.error(e))?;
        Ok(b)
    }

    /// Partitions of the topic when the store creates it (default 25). An existing topic keeps its own.
    pub fn partitions(mut self, n: i32) -> Self {
        self.partitions = n;
        self
    }

    /// Replication factor when the store creates the topic (default 3; `-1` = the broker's default).
    pub fn replication(mut self, n: i32) -> Self {
        self.replication = n;
        self
    }

    /// The bound on opening (reaching the brokers, checking the topic), on each transaction step and
    /// on a read-to-end that makes no progress (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Refuse to open (or refresh) when the topic holds a record that does not decode, instead of
    /// skipping it to the dead-letter file.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// What to do with a record whose value does not decode, per connector (see
    /// [`crate::policy`]): `fail` refuses to open naming the record, `skip` resets its partition
    /// (the value before it is not used: it is older than what the connector last committed),
    /// `earliest`/`latest` are for sink-style partitions (`kafka_topic`, `kafka_partition`), whose
    /// bounds the brokers know. A record whose key does not decode belongs to no connector: only a
    /// default of `fail` refuses it. Without a policy it is as with `skip`, but for the reset
    /// metric: the partition has no offset, as Connect's reader answers (`strict` is the default
    /// policy `fail`).
    pub fn reset_policy(mut self, policies: ResetPolicies) -> Self {
        self.reset_policies = Some(policies);
        self
    }

    /// Where undecodable records are copied (one JSON line each, as `docs/format.md` says). Without
    /// one they are only counted ([`KafkaStore::dead_letters`](super::KafkaStore::dead_letters)) and
    /// logged as warnings.
    pub fn dead_letter_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.dead_letter = Some(path.into());
        self
    }

    /// The prefix of every writer's `transactional.id` (default `connect-offsets-<topic>-`): writer `w`
    /// writes with `transactional.id = prefix + w`.
    pub fn transactional_id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.transactional_id_prefix = Some(prefix.into());
        self
    }

    /// Claims `writer` while opening: its transactional producer is initialized (fencing any older
    /// process writing as the same writer and settling that process's open transaction) *before*
    /// the topic is read, so [`applied_seq`](crate::OffsetStore::applied_seq) reflects everything the old
    /// owner committed. A process that runs a commit buffer should claim its writer.
    pub fn claim_writer(mut self, writer: impl Into<String>) -> Self {
        self.claim = Some(writer.into());
        self
    }

    /// Makes this handle's own writes (unsequenced batches: a tool's `set`, `reset`, `import`)
    /// exclusive under `name`: they go through one transactional producer with `transactional.id`
    /// `<transactional.id.prefix>~<name>`, initialized while opening, *before* the topic is read.
    /// A later handle opened with the same name fences this one: the write this one then tries
    /// fails with [`Error::Fenced`](crate::Error::Fenced), and nothing of it is written. So of
    /// several processes that each read the topic and then write, only one whose read saw
    /// everything the others committed can commit: a check-then-write that Kafka, having no
    /// compare-and-set, cannot otherwise make safe (`--once`, [`crate::once`]). Without it, each
    /// handle's id is unique and tools never fence each other. With
    /// [`WriteMode::Idempotent`] there is no transactional id, and nothing is fenced.
    pub fn exclusive(mut self, name: impl Into<String>) -> Self {
        self.exclusive = Some(name.into());
        self
    }

    /// The transactional id of the source task this process runs, for
    /// [`KafkaStore::task_producer`](super::KafkaStore::task_producer): its data records and
    /// offsets commit in one transaction, and a newer instance with the same id fences this one.
    pub fn task(mut self, id: TaskId) -> Self {
        self.task = Some(id);
        self
    }

    /// How batches reach the topic (default [`WriteMode::Transaction`]).
    pub fn write_mode(mut self, mode: WriteMode) -> Self {
        self.write_mode = mode;
        self
    }

    /// Keeps a snapshot of the loaded topic in directory `dir` (created if missing), so the next open
    /// reads only what was written since (a warm start). The snapshot is written when the store is
    /// dropped; a snapshot that may not match the topic any more is ignored with a warning and the
    /// topic is read whole (see the [store documentation](super)).
    pub fn snapshot_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.snapshot_dir = Some(dir.into());
        self
    }

    /// Refuses to open when the topic does not exist, instead of creating it (the worker-wide
    /// topic of a [`KafkaPairStore`](super::KafkaPairStore): only a worker makes that one).
    pub fn must_exist(mut self, must_exist: bool) -> Self {
        self.must_exist = must_exist;
        self
    }

    /// Opens to read only: a topic that is not compacted is read with a warning instead of refused
    /// (its offsets can still be exported), and every write is refused.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Sets a librdkafka property (security settings included) on every client of the store.
    pub fn property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((name.into(), value.into()));
        self
    }

    /// Installs a fault seam inside `apply` (tests).
    pub fn fault(mut self, fault: Arc<dyn ApplyFault>) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Checks the settings and resolves them (no I/O).
    pub(crate) fn settings(&self) -> Result<Settings> {
        let bad = |reason: String| Error::Settings(format!("kafka store: {reason}"));
        if self.bootstrap.trim().is_empty() {
            return Err(bad("no brokers given (kafka://host:port/topic)".into()));
        }
        validate_bootstrap(&self.bootstrap).map_err(bad)?;
        validate_topic(&self.topic).map_err(bad)?;
        if self.partitions < 1 {
            return Err(bad(format!(
                "partitions must be at least 1, not {}",
                self.partitions
            )));
        }
        if self.replication < 1 && self.replication != -1 {
            return Err(bad(format!(
                "replication must be at least 1 (or -1 for the broker's default), not {}",
                self.replication
            )));
        }
        if let Some(name) = &self.exclusive
            && (name.trim().is_empty() || name.trim() != name)
        {
            return Err(bad(format!(
                "`exclusive.id` must be a name without leading or trailing blanks, not `{name}`"
            )));
        }
        if let Some(p) = &self.reset_policies
            && self.strict
            && p.default_policy() != ResetPolicy::Fail
        {
            return Err(bad(format!(
                "`strict` means the reset policy fail for every record, which contradicts the \
                 default reset policy `{}`: give one of them",
                p.default_policy()
            )));
        }
        let mut properties = Vec::new();
        for (k, v) in &self.properties {
            if let Some((_, why)) = RESERVED.iter().find(|(name, _)| name == k) {
                return Err(bad(format!("property `{k}` cannot be set: {why}")));
            }
            if let Some((_, fixed)) = FIXED.iter().find(|(name, _)| name == k) {
                if v != fixed {
                    return Err(bad(format!(
                        "property `{k}` must be `{fixed}` (Kafka Connect's placement and durability), not `{}`",
                        if kafka_secret(k) { "****" } else { v }
                    )));
                }
                continue;
            }
            if k == "sasl.jaas.config" {
                return Err(bad(
                    "`sasl.jaas.config` is a Java client property; librdkafka takes \
                     `sasl.mechanism`, `sasl.username` and `sasl.password`"
                        .into(),
                ));
            }
            properties.push((k.clone(), v.clone()));
        }
        if let Some(dir) = &self.snapshot_dir
            && dir.as_os_str().is_empty()
        {
            return Err(bad("`snapshot.dir` must name a directory".into()));
        }
        let secrets = Secrets::of(&properties);
        let max_message_bytes = match properties.iter().find(|(k, _)| k == "message.max.bytes") {
            Some((_, v)) => v
                .parse()
                .map_err(|_| bad(format!("`message.max.bytes` must be an integer, not `{v}`")))?,
            None => 1_000_000,
        };
        let prefix = self
            .transactional_id_prefix
            .clone()
            .unwrap_or_else(|| format!("connect-offsets-{}-", self.topic));
        Ok(Settings {
            bootstrap: self.bootstrap.trim().to_string(),
            topic: self.topic.clone(),
            partitions: self.partitions,
            replication: self.replication,
            timeout: self.timeout,
            strict: self.strict,
            reset_policies: self.reset_policies.clone(),
            dead_letter: self.dead_letter.clone(),
            snapshot_dir: self.snapshot_dir.clone(),
            must_exist: self.must_exist,
            read_only: self.read_only,
            transactional_id_prefix: prefix,
            write_mode: self.write_mode,
            properties,
            secrets: Arc::new(secrets),
            max_message_bytes,
        })
    }
}

/// Each of `host:port[,host:port]` names a host and, if it has one, a port librdkafka can dial
/// (it would otherwise dial nothing, or the local host, until the timeout).
pub(crate) fn validate_bootstrap(list: &str) -> std::result::Result<(), String> {
    for entry in list.split(',') {
        let entry = entry.trim();
        // librdkafka also takes `PLAINTEXT://host:port`.
        let address = entry.split_once("://").map_or(entry, |(_, rest)| rest);
        let (host, port) = match address.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, rest)) => (host, rest.strip_prefix(':')),
                None => return Err(format!("broker address `{entry}` lacks its closing `]`")),
            },
            None => match address.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (address, None),
            },
        };
        if entry.is_empty() {
            return Err(format!("an empty broker address in `{}`", list.trim()));
        }
        if host.is_empty() {
            return Err(format!("broker address `{entry}` has no host"));
        }
        if let Some(port) = port
            && !port.parse::<u16>().is_ok_and(|p| p > 0)
        {
            return Err(format!(
                "broker address `{entry}`: the port must be a number from 1 to 65535, not `{port}`"
            ));
        }
    }
    Ok(())
}

/// Kafka's rule for topic names: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
fn validate_topic(topic: &str) -> std::result::Result<(), String> {
    if topic.is_empty() {
        return Err("no topic given (kafka://host:port/topic)".into());
    }
    if topic.len() > 249 || topic == "." || topic == ".." {
        return Err(format!("`{topic}` is not a valid topic name"));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name `{topic}` contains `{c}`; Kafka allows only letters, digits, `.`, `_` and `-`"
        ));
    }
    Ok(())
}

/// The values of secret properties, to be cut out of anything we print.
#[derive(Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    /// The secret values among `properties` (librdkafka properties named like secrets).
    pub(crate) fn of(properties: &[(String, String)]) -> Secrets {
        Secrets(
            properties
                .iter()
                .filter(|(k, v)| kafka_secret(k) && !v.is_empty())
                .map(|(_, v)| v.clone())
                .collect(),
        )
    }

    /// `text` with every secret value replaced by `****`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.0 {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "****");
            }
        }
        out
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} hidden)", self.0.len())
    }
}

/// Resolved, checked settings.
pub(crate) struct Settings {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub replication: i32,
    pub timeout: Duration,
    pub strict: bool,
    pub reset_policies: Option<ResetPolicies>,
    pub dead_letter: Option<PathBuf>,
    pub snapshot_dir: Option<PathBuf>,
    pub must_exist: bool,
    pub read_only: bool,
    pub transactional_id_prefix: String,
    pub write_mode: WriteMode,
    pub properties: Vec<(String, String)>,
    pub secrets: Arc<Secrets>,
    pub max_message_bytes: usize,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("bootstrap", &self.bootstrap)
            .field("topic", &self.topic)
            .field("timeout", &self.timeout)
            .field("strict", &self.strict)
            .field("reset_policies", &self.reset_policies)
            .field("dead_letter", &self.dead_letter)
            .field("snapshot_dir", &self.snapshot_dir)
            .field("transactional_id_prefix", &self.transactional_id_prefix)
            .field("write_mode", &self.write_mode)
            .field("properties", &Masked(&self.properties))
            .finish()
    }
}

/// A process-unique suffix for client names (`group.id` of the reader, the unsequenced producer).
pub(crate) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = crate::time::since_epoch().as_nanos();
    format!(
        "{}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl Settings {
    fn base(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        // librdkafka formats only what would be logged: follow the level `tracing` lets through.
        c.set_log_level(match tracing::level_filters::LevelFilter::current() {
            LevelFilter::TRACE | LevelFilter::DEBUG => RDKafkaLogLevel::Debug,
            LevelFilter::INFO => RDKafkaLogLevel::Info,
            LevelFilter::WARN => RDKafkaLogLevel::Warning,
            _ => RDKafkaLogLevel::Error,
        });
        c.set("bootstrap.servers", &self.bootstrap);
        c.set("client.id", "connect-offsets");
        // A new client drops its bootstrap connection once it learns the brokers' ids, and may
        // not connect again for half of this (librdkafka's sparse connections): with the default
        // 100 ms, a warm open often waited those 50 ms for its first metadata. Failed
        // connections still back off exponentially, up to `reconnect.backoff.max.ms`.
        c.set("reconnect.backoff.ms", "10");
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }

    /// The reader: assigned every partition, never commits, sees committed records only.
    pub(crate) fn consumer_config(&self) -> ClientConfig {
        let mut c = self.base();
        if !self.has("group.id") {
            // librdkafka needs a group for assign(); it is never joined and nothing is committed to it.
            c.set(
                "group.id",
                format!("connect-offsets-reader-{}", unique_suffix()),
            );
        }
        c.set("enable.auto.commit", "false");
        c.set("enable.auto.offset.store", "false");
        c.set("isolation.level", "read_committed");
        c.set("auto.offset.reset", "earliest");
        c.set("enable.partition.eof", "false");
        if !self
            .properties
            .iter()
            .any(|(k, _)| k == "fetch.wait.max.ms")
        {
            // The reader only fetches during a catch-up (it is paused in between), and a catch-up
            // waits for the last transaction markers: a long broker-side wait only adds latency.
            c.set("fetch.wait.max.ms", "20");
        }
        if !self.has("fetch.queue.backoff.ms") {
            // With assign(), the default 1000 ms pauses every partition for a second once
            // `queued.min.messages` are buffered: a cold read of 1M records took 2.7 s, not 0.7 s.
            c.set("fetch.queue.backoff.ms", "10");
        }
        c
    }

    /// A transactional producer with Connect's placement and `acks=all`.
    pub(crate) fn producer_config(&self, transactional_id: &str) -> ClientConfig {
        let mut c = self.base();
        c.set("transactional.id", transactional_id);
        c.set("enable.idempotence", "true");
        c.set("acks", "all");
        c.set("partitioner", "murmur2_random");
        // Failures still fail the commit; successes need no report, so nothing piles up per record.
        c.set("delivery.report.only.error", "true");
        c.set(
            "transaction.timeout.ms",
            self.transaction_timeout_ms().to_string(),
        );
        self.limit_batches(&mut c);
        c
    }

    /// The producer of [`WriteMode::Idempotent`]: no transactions, Connect's placement, `acks=all`,
    /// a report for every record (the writer waits for them).
    pub(crate) fn idempotent_producer_config(&self) -> ClientConfig {
        let mut c = self.base();
        c.set("enable.idempotence", "true");
        c.set("acks", "all");
        // A record that fails for good must not be followed by later ones in its partition: a
        // marker sent right behind its batch's records is then in the topic only if they are.
        c.set("enable.gapless.guarantee", "true");
        // A batch waits on librdkafka's count of undelivered records (see `flush`): a report per
        // record would cost the polling thread a tenth of the process at 10,000 offsets a batch.
        c.set("delivery.report.only.error", "true");
        c.set("partitioner", "murmur2_random");
        self.limit_batches(&mut c);
        c
    }

    /// The transactional producers' `transaction.timeout.ms` (ours: 60 s, as Connect's).
    pub(crate) fn transaction_timeout_ms(&self) -> u64 {
        self.property("transaction.timeout.ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(60_000)
    }

    /// Keeps the producer's record batches within what the topic takes: librdkafka fills a batch up
    /// to `batch.size` (1 MB), and a broker refuses a whole batch over the topic's
    /// `max.message.bytes` even when each of its records fits.
    fn limit_batches(&self, c: &mut ClientConfig) {
        let asked = self
            .property("batch.size")
            .and_then(|v| v.parse::<usize>().ok());
        if asked.is_none_or(|n| n > self.max_message_bytes) {
            c.set("batch.size", self.max_message_bytes.to_string());
        }
    }

    /// The value of a librdkafka property given in the URL.
    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn has(&self, property: &str) -> bool {
        self.property(property).is_some()
    }

    /// The admin client (topic creation and configuration).
    pub(crate) fn admin_config(&self) -> ClientConfig {
        self.base()
    }

    /// The `transactional.id` of `writer`.
    pub(crate) fn transactional_id(&self, writer: &str) -> String {
        format!("{}{writer}", self.transactional_id_prefix)
    }
}

/// The `transactional.id` of one source task.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TaskId(String);

impl TaskId {
    /// Connect's pattern for task `task` of `connector` in the worker group `group`
    /// (the worker's `group.id`): `<group>-<connector>-<task>`.
    pub fn connect(group: &str, connector: &str, task: u32) -> Result<TaskId> {
        if group.is_empty() || connector.is_empty() {
            return Err(Error::Settings(format!(
                "a task id needs a group and a connector, not group `{group}` and connector \
                 `{connector}`"
            )));
        }
        Ok(TaskId(format!("{group}-{connector}-{task}")))
    }

    /// A `transactional.id` the worker names itself.
    pub fn named(id: impl Into<String>) -> Result<TaskId> {
        let id = id.into();
        if id.trim().is_empty() {
            return Err(Error::Settings(
                "a task's transactional.id must not be empty".into(),
            ));
        }
        Ok(TaskId(id))
    }

    /// The id from the URL parameters `exactly.once.id`, or `exactly.once.group` with
    /// `exactly.once.task=<connector>/<task>`; `None` when none is given.
    pub(crate) fn from_params(
        id: Option<&str>,
        group: Option<&str>,
        task: Option<&str>,
    ) -> std::result::Result<Option<TaskId>, String> {
        let spelled = "give `exactly.once.id=<transactional id>`, or `exactly.once.group=<group.id>` \
                       with `exactly.once.task=<connector>/<task number>`";
        match (id, group, task) {
            (None, None, None) => Ok(None),
            (Some(id), None, None) => TaskId::named(id).map(Some).map_err(|e| e.to_string()),
            (None, Some(group), Some(task)) => {
                let (connector, n) = task.rsplit_once('/').ok_or_else(|| {
                    format!("`exactly.once.task={task}` is not <connector>/<task number>")
                })?;
                let n: u32 = n.parse().map_err(|_| {
                    format!("the task number in `exactly.once.task={task}` must be a non-negative integer, not `{n}`")
                })?;
                TaskId::connect(group, connector, n)
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
            (Some(_), _, _) => Err(format!(
                "`exactly.once.id` names the transactional id itself: it cannot be combined with \
                 `exactly.once.group` or `exactly.once.task` ({spelled})"
            )),
            _ => Err(format!(
                "`exactly.once.group` and `exactly.once.task` go together ({spelled})"
            )),
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(url: &str) -> Result<KafkaStoreBuilder> {
        KafkaStoreBuilder::from_url(&StoreUrl::parse(url)?)
    }

    #[test]
    fn url_parameters_are_ours_or_librdkafkas() {
        let b = builder(
            "kafka://a:1,b:2/offs?partitions=7&replication=-1&timeout.ms=1500&strict=true\
             &dead.letter.file=/tmp/d.jsonl&transactional.id.prefix=p-&writer=w&linger.ms=0",
        )
        .unwrap();
        let s = b.settings().unwrap();
        assert_eq!(s.bootstrap, "a:1,b:2");
        assert_eq!(s.topic, "offs");
        assert_eq!((s.partitions, s.replication), (7, -1));
        assert_eq!(s.timeout, Duration::from_millis(1500));
        assert!(s.strict);
        assert_eq!(s.dead_letter, Some(PathBuf::from("/tmp/d.jsonl")));
        assert_eq!(s.transactional_id("w"), "p-w");
        assert_eq!(b.claim.as_deref(), Some("w"));
        assert_eq!(s.properties, vec![("linger.ms".into(), "0".into())]);
        let d = builder("kafka://h:1/t").unwrap().settings().unwrap();
        assert_eq!((d.partitions, d.replication), (25, 3));
        assert_eq!(d.timeout, DEFAULT_TIMEOUT);
        assert_eq!(d.transactional_id("w"), "connect-offsets-t-w");
    }

    #[test]
    fn an_exclusive_id_is_a_name_without_blanks_at_its_ends() {
        let b = builder("kafka://h:1/t?exclusive.id=once-0123").unwrap();
        assert_eq!(b.exclusive.as_deref(), Some("once-0123"));
        assert!(
            b.settings().unwrap().properties.is_empty(),
            "not librdkafka's"
        );
        for bad in ["", "%20x"] {
            let e = builder(&format!("kafka://h:1/t?exclusive.id={bad}"))
                .unwrap()
                .settings()
                .unwrap_err()
                .to_string();
            assert!(e.contains("`exclusive.id`"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_source_task_is_named_by_url() {
        let task = |url: &str| builder(url).map(|b| b.task.map(|t| t.as_str().to_string()));
        assert_eq!(task("kafka://h:1/t").unwrap(), None);
        assert_eq!(
            task("kafka://h:1/t?exactly.once.group=connect-cluster&exactly.once.task=files/2")
                .unwrap()
                .as_deref(),
            Some("connect-cluster-files-2")
        );
        assert_eq!(
            task("kafka://h:1/t?exactly.once.id=my-task")
                .unwrap()
                .as_deref(),
            Some("my-task")
        );
        let s = builder("kafka://h:1/t?exactly.once.id=x")
            .unwrap()
            .settings()
            .unwrap();
        assert!(s.properties.is_empty(), "not passed to librdkafka");
        let e = task("kafka://h:1/t?exactly.once.task=files/x&exactly.once.group=g")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("exactly.once.task=files/x") && e.contains("`x`"),
            "{e}"
        );
    }

    #[test]
    fn write_mode_and_producer_settings() {
        let s = |url: &str| builder(url).unwrap().settings().unwrap();
        assert_eq!(s("kafka://h:1/t").write_mode, WriteMode::Transaction);
        let idem = s("kafka://h:1/t?write.mode=idempotent");
        assert_eq!(idem.write_mode, WriteMode::Idempotent);
        let e = builder("kafka://h:1/t?write.mode=fast").err().unwrap();
        assert!(e.to_string().contains("`write.mode`"), "{e}");
        assert!(e.to_string().contains("`fast`"), "{e}");
        let c = idem.idempotent_producer_config();
        assert_eq!(c.get("transactional.id"), None);
        assert_eq!(c.get("enable.idempotence"), Some("true"));
        assert_eq!(c.get("acks"), Some("all"));
        // librdkafka's own linger (a writer's wait is a flush, which sends at once); a user's
        // value is kept.
        assert_eq!(c.get("linger.ms"), None);
        assert_eq!(idem.producer_config("x").get("linger.ms"), None);
        assert_eq!(c.get("reconnect.backoff.ms"), Some("10"));
        let own = s("kafka://h:1/t?reconnect.backoff.ms=250");
        assert_eq!(
            own.consumer_config().get("reconnect.backoff.ms"),
            Some("250")
        );
        let own = s("kafka://h:1/t?linger.ms=20");
        assert_eq!(own.producer_config("x").get("linger.ms"), Some("20"));
        assert_eq!(
            own.idempotent_producer_config().get("linger.ms"),
            Some("20")
        );
    }

    #[test]
    fn the_reader_does_not_back_off_a_second_per_full_queue() {
        let get = |url: &str| {
            builder(url)
                .unwrap()
                .settings()
                .unwrap()
                .consumer_config()
                .get("fetch.queue.backoff.ms")
                .map(str::to_owned)
        };
        assert_eq!(get("kafka://h:1/t").as_deref(), Some("10"));
        assert_eq!(
            get("kafka://h:1/t?fetch.queue.backoff.ms=500").as_deref(),
            Some("500"),
            "the user's value wins"
        );
    }

    #[test]
    fn snapshot_dir_is_ours_and_must_name_a_directory() {
        let b = builder("kafka://h:1/t?snapshot.dir=/tmp/snaps").unwrap();
        let s = b.settings().unwrap();
        assert_eq!(s.snapshot_dir, Some(PathBuf::from("/tmp/snaps")));
        assert!(s.properties.is_empty(), "not passed to librdkafka");
        let e = builder("kafka://h:1/t?snapshot.dir=")
            .unwrap_err()
            .to_string();
        assert!(e.contains("snapshot.dir"), "{e}");
    }

    #[test]
    fn broker_addresses_librdkafka_can_dial_pass() {
        for list in [
            "h",
            "h:1",
            "a:1, b:65535",
            "[::1]:9092",
            "[::1]",
            "SSL://h:9093",
        ] {
            assert_eq!(validate_bootstrap(list), Ok(()), "{list}");
        }
    }

    #[test]
    fn refuses_what_would_break_the_guarantees() {
        for (url, word) in [
            (
                "kafka://h:1/t?isolation.level=read_uncommitted",
                "isolation.level",
            ),
            (
                "kafka://h:1/t?transactional.id=x",
                "transactional.id.prefix",
            ),
            ("kafka://h:1/t?enable.idempotence=false", "idempotent"),
            (
                "kafka://h:1/t?partitioner=consistent_random",
                "murmur2_random",
            ),
            ("kafka://h:1/t?bootstrap.servers=x:1", "host part"),
            ("kafka://h:1/t?partitions=0", "partitions"),
            ("kafka://h:1/t?replication=0", "replication"),
            ("kafka://h:1/a/b", "topic name"),
            ("kafka://h:1/", "no topic"),
            ("kafka://h:1", "no topic"),
            ("kafka://:9092/t", "has no host"),
            ("kafka://h:99999/t", "not `99999`"),
            ("kafka://h:0/t", "not `0`"),
            ("kafka://h:x/t", "not `x`"),
            ("kafka://h:1,/t", "an empty broker address"),
            ("kafka://[::1/t", "closing `]`"),
        ] {
            let e = builder(url)
                .and_then(|b| b.settings())
                .err()
                .unwrap_or_else(|| panic!("{url} accepted"))
                .to_string();
            assert!(e.contains(word), "{url}: {e}");
        }
        // The fixed values themselves may be given.
        builder("kafka://h:1/t?partitioner=murmur2_random&acks=all")
            .unwrap()
            .settings()
            .unwrap();
    }

    #[test]
    fn secrets_are_masked_and_scrubbed() {
        let b =
            builder("kafka://h:1/t?sasl.password=pw-123456&ssl.key.pem=PEMDATA&sasl.username=u")
                .unwrap();
        let shown = format!("{b:?}");
        assert!(
            !shown.contains("pw-123456") && !shown.contains("PEMDATA"),
            "{shown}"
        );
        assert!(
            shown.contains("sasl.username") && shown.contains("\"u\""),
            "{shown}"
        );
        let s = b.settings().unwrap();
        assert!(!format!("{s:?}").contains("pw-123456"));
        assert_eq!(
            s.secrets.scrub("auth with pw-123456 failed"),
            "auth with **** failed"
        );
        let e = builder("kafka://h:1/t?sasl.jaas.config=x%20password%3D%22pw-9%22")
            .unwrap()
            .settings()
            .unwrap_err()
            .to_string();
        assert!(e.contains("sasl.jaas.config") && !e.contains("pw-9"), "{e}");
    }
}
