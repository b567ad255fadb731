//! Choosing a backend from a URL: [`open`] and its variants, re-exported at the crate root.
//!
//! Above the stores and the wrappers built on them (history): it parses a [`StoreUrl`], takes off
//! what a wrapper reads (`history=`), opens the backend the scheme names and wraps it.

use crate::store::{OffsetStore, StoreUrl};
use crate::{Error, Result};

/// Opens the store a URL names:
///
/// * `memory://`: a new, empty [`MemoryStore`](crate::store::MemoryStore);
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
/// use connect_offsets::{open, OffsetStoreExt};
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
            Ok(Box::new(crate::store::MemoryStore::new()))
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
    let options = crate::store::rocksdb::RocksDbOptions {
        sync: url.bool_param("sync", false)?,
    };
    Ok(Box::new(crate::store::rocksdb::RocksDbStore::open_with(
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
    if url.param(crate::store::kafka::FALLBACK_TOPIC).is_some() {
        // The worker's topic must exist already; the connector's own may not yet (Connect reads
        // the worker's alone until then).
        return Ok(Box::new(crate::store::kafka::KafkaPairStore::open_url(
            url,
        )?));
    }
    Ok(Box::new(
        crate::store::kafka::KafkaStoreBuilder::from_url(url)?
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
    Ok(Box::new(crate::store::kafka::KafkaGroupStore::open_url(
        url,
    )?))
}

#[cfg(not(feature = "kafka"))]
fn open_kafka_group(url: &StoreUrl) -> Result<Box<dyn OffsetStore>> {
    open_kafka(url, Create::Yes)
}

#[cfg(test)]
mod tests {
    use super::*;

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
