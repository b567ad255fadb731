//! A connector's own offsets topic read in front of the worker-wide one, as Connect's
//! `ConnectorOffsetBackingStore` does: `KafkaPairStore` (URL parameter `fallback.topic`). A
//! partition reads from the primary (the connector's topic), else from the fallback (the worker's);
//! writes go to the primary, and a reset tombstones the fallback first: a batch with resets is not
//! atomic. Every rule and why: `docs/design.md`, section "A connector's own offsets topic: `pair`".

use std::collections::{BTreeMap, BTreeSet};

use super::config::KafkaStoreBuilder;
use super::task::TaskProducer;
use super::topic::KafkaStore;
use crate::model::{Batch, OffsetKey};
use crate::store::url::StoreUrl;
use crate::store::{Capabilities, CommitHooks, OffsetStore};
use crate::{Offset, Result};

/// The URL parameter naming the worker-wide topic.
pub const FALLBACK_TOPIC: &str = "fallback.topic";

/// Parameters that concern only the primary topic (a source task's transactions write there, as
/// Connect's exactly-once tasks write to their connector's topic).
const PRIMARY_ONLY: &[&str] = &[
    "partitions",
    "replication",
    "writer",
    "exclusive.id",
    "exactly.once.id",
    "exactly.once.group",
    "exactly.once.task",
];

/// A connector's offsets topic with the worker's topic as fallback (see the
/// [module documentation](self)).
#[derive(Debug)]
pub struct KafkaPairStore {
    primary: KafkaStore,
    fallback: KafkaStore,
}

impl KafkaPairStore {
    /// Opens the pair a `kafka://host:port/topic?fallback.topic=other` URL names.
    pub fn open_url(url: &StoreUrl) -> Result<Self> {
        let (primary, fallback) = split_url(url)?;
        let primary = KafkaStoreBuilder::from_url(&primary)?;
        let fallback = KafkaStoreBuilder::from_url(&fallback)?.must_exist(true);
        Self::open(primary, fallback)
    }

    /// Opens the pair from two builders; the fallback's topic must exist. The two may name other
    /// brokers (another cluster), as a connector's producer overrides may in Connect.
    pub fn open(primary: KafkaStoreBuilder, fallback: KafkaStoreBuilder) -> Result<Self> {
        if primary.topic == fallback.topic && primary.bootstrap.trim() == fallback.bootstrap.trim()
        {
            return Err(crate::Error::Settings(format!(
                "kafka store: the connector's topic and the fallback topic are both `{}`; a pair \
                 needs two topics (drop `fallback.topic` to use one)",
                primary.topic
            )));
        }
        // The fallback first: a missing worker topic fails before the primary is created.
        let fallback = fallback.must_exist(true).open()?;
        let primary = primary.open()?;
        Ok(KafkaPairStore { primary, fallback })
    }

    /// The connector's own topic: read first, written.
    pub fn primary(&self) -> &KafkaStore {
        &self.primary
    }

    /// The worker-wide topic: read for partitions the primary lacks, tombstoned on resets.
    pub fn fallback(&self) -> &KafkaStore {
        &self.fallback
    }

    /// The source task's transactional producer ([`KafkaStore::task_producer`]) on the
    /// connector's topic, where its transactions put their offsets; its resets tombstone the
    /// worker topic first, as the pair's own writes do. (Connect's worker also copies each offset
    /// to the worker topic afterwards; this does not, and reads fall back per partition instead.)
    pub fn task_producer(&self) -> Result<TaskProducer<'_>> {
        Ok(self.primary.task_producer()?.with_fallback(&self.fallback))
    }
}

/// The primary's URL and the fallback's, from a pair URL.
fn split_url(url: &StoreUrl) -> Result<(StoreUrl, StoreUrl)> {
    let fallback_topic = match url.param(FALLBACK_TOPIC) {
        Some(t) if !t.trim().is_empty() => t.to_string(),
        _ => {
            return Err(url.error(
                "`fallback.topic` must name the worker's offsets topic, e.g. \
                 fallback.topic=connect-offsets",
            ));
        }
    };
    let Some((hosts, topic)) = url.location.split_once('/') else {
        return Err(url.error(
            "no topic: use kafka://host:port/<connector topic>?fallback.topic=<worker topic>",
        ));
    };
    if topic == fallback_topic {
        return Err(url.error(format!(
            "`fallback.topic` is the connector's topic `{topic}` itself; a pair needs two topics"
        )));
    }
    let shared = |keep: &dyn Fn(&str) -> bool| -> Vec<(String, String)> {
        url.params
            .iter()
            .filter(|(k, _)| k != FALLBACK_TOPIC && keep(k))
            .cloned()
            .collect()
    };
    let primary = StoreUrl {
        scheme: url.scheme.clone(),
        location: url.location.clone(),
        params: shared(&|_| true),
    };
    let fallback = StoreUrl {
        scheme: url.scheme.clone(),
        location: format!("{hosts}/{fallback_topic}"),
        params: shared(&|k| !PRIMARY_ONLY.contains(&k)),
    };
    Ok((primary, fallback))
}

impl OffsetStore for KafkaPairStore {
    fn kind(&self) -> &'static str {
        "kafka"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT
            .with_durable(true)
            // Two topics, two writes: see the [module documentation](self).
            .with_atomic(false)
            .with_change_times(true)
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
        self.apply_with(batch, |b| self.primary.apply(b))
    }

    fn applied_seq(&self, writer: &str) -> Result<u64> {
        self.primary.applied_seq(writer)
    }

    fn writers(&self) -> Result<Vec<(String, u64)>> {
        self.primary.writers()
    }

    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        match self.primary.get(key)? {
            Some(o) => Ok(Some(o)),
            None => self.fallback.get(key),
        }
    }

    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        let primary = self.primary.get_many(keys)?;
        let fallback = self.fallback.get_many(keys)?;
        Ok(primary
            .into_iter()
            .zip(fallback)
            .map(|(p, f)| p.or(f))
            .collect())
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        let mut merged: BTreeMap<OffsetKey, Offset> =
            self.fallback.partitions(namespace)?.into_iter().collect();
        merged.extend(self.primary.partitions(namespace)?);
        Ok(merged.into_iter().collect())
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        let mut all: BTreeSet<String> = self.fallback.namespaces()?.into_iter().collect();
        all.extend(self.primary.namespaces()?);
        Ok(all.into_iter().collect())
    }

    fn persist(&self) -> Result<()> {
        self.fallback.persist()?;
        self.primary.persist()
    }

    /// The connector topic's time of a partition it holds, else the worker topic's (as `get`).
    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        let primary = self.primary.get_many(keys)?;
        let primary_times = self.primary.change_times(keys)?;
        let fallback_times = self.fallback.change_times(keys)?;
        Ok(primary
            .into_iter()
            .zip(primary_times.into_iter().zip(fallback_times))
            .map(|(p, (pt, ft))| if p.is_some() { pt } else { ft })
            .collect())
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for KafkaPairStore {
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.apply_with(batch, |b| self.primary.apply_logged(b))
    }

    fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        self.primary.admit(writer, key, offset)
    }
}

impl KafkaPairStore {
    /// Tombstones the batch's resets in the fallback, then writes the whole batch to the primary
    /// with `write`. A batch the primary already applied is skipped whole.
    fn apply_with(&self, batch: &Batch, write: impl Fn(&Batch) -> Result<()>) -> Result<()> {
        if batch.seq != 0 && batch.seq <= self.primary.applied_seq(&batch.writer)? {
            return Ok(());
        }
        self.fallback.tombstone_resets(batch)?;
        write(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(raw: &str) -> Result<(String, String)> {
        let (p, f) = split_url(&StoreUrl::parse(raw)?)?;
        Ok((p.to_string(), f.to_string()))
    }

    #[test]
    fn parameters_go_where_they_belong() {
        let (p, f) = split(
            "kafka://h:9092/conn?partitions=5&fallback.topic=global&write.mode=idempotent&writer=w\
             &replication=1&snapshot.dir=/tmp/s&sasl.password=x",
        )
        .unwrap();
        assert_eq!(
            p,
            "kafka://h:9092/conn?partitions=5&write.mode=idempotent&writer=w&replication=1\
             &snapshot.dir=/tmp/s&sasl.password=****"
        );
        assert_eq!(
            f,
            "kafka://h:9092/global?write.mode=idempotent&snapshot.dir=/tmp/s&sasl.password=****"
        );
    }

    #[test]
    fn bad_pairs_are_refused_by_name() {
        let e = split("kafka://h:9092/conn?fallback.topic=conn")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is the connector's topic `conn` itself"), "{e}");
        let e = split("kafka://h:9092/conn?fallback.topic=")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`fallback.topic` must name"), "{e}");
        let e = KafkaStoreBuilder::from_url(
            &StoreUrl::parse("kafka://h:9092/conn?fallback.topic=g").unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("KafkaPairStore"), "{e}");
    }
}
