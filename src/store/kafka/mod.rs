//! Kafka Connect's offsets topic as a store: [`KafkaStore`] (feature `kafka`).
//!
//! Opened by URL, `kafka://host:port[,host:port]/topic?partitions=25&replication=3&<librdkafka
//! property>=...`, or by [`KafkaStoreBuilder`]. Every parameter that is not ours (see
//! [`KafkaStoreBuilder::from_url`]) is a librdkafka property and reaches all clients, security
//! settings included; secret values never appear in `Debug` output, logs or errors. With
//! `fallback.topic=<worker topic>` the URL names a connector's own topic in front of the worker's
//! ([`KafkaPairStore`], opened by [`open`](crate::open())).
//!
//! ## Records: exactly Connect's
//! * key = `["connector",{partition}]` ([`OffsetKey::connect_key`](crate::OffsetKey::connect_key)), value = the offset object
//!   ([`json::encode_value`](crate::codec::json::encode_value)), a reset = a tombstone (null value);
//! * the partition is the Java producer's, `murmur2(key) % partitions`: it is computed here
//!   ([`murmur2::partition_for`](crate::codec::murmur2::partition_for)) and given explicitly with every record, and the producer is also
//!   configured with `partitioner=murmur2_random`, so a record lands where Connect would put it
//!   whatever librdkafka's default is;
//! * a partition that already has a live record is written under that record's exact key bytes,
//!   in its topic partition (every live one, when several spellings of it are live: another member
//!   order, a JDK 17 worker's digits), never tombstoning them, so the connector that owns the record
//!   finds the new offset; a reset tombstones every live spelling. A partition with no live record
//!   is written in the caller's member order, spelled as JDK 19+ does. Every record carries an
//!   explicit timestamp, the time of the write;
//! * of several live spellings, `get` and `partitions` answer with the newest record: greatest
//!   record timestamp, then topic partition, then offset (the rule and why in the `state` module).
//!
//! ## `applied_seq`: record headers plus a marker per writer
//! Every record of a sequenced batch written in a transaction carries the headers
//! `connect-offsets-writer` and `connect-offsets-seq` (in `write.mode=idempotent`, none: below),
//! and the batch also writes one **marker record** of its own:
//! key `{"connect-offsets-writer":"<writer>"}`, value `{"seq":N}`, on the partition murmur2 gives
//! that key (in `write.mode=idempotent`, a batch whose records share one partition puts it there).
//! On load, `applied_seq(writer)` is the maximum over the markers; the headers are read too once
//! a marker was deleted (below).
//!
//! Why the headers alone would not do: compaction keeps only the latest record per key. A header can
//! only make `applied_seq` *too low*, never too high (each header names a batch that committed, since
//! the reader sees committed records only), but it can be too low: when every record of a writer's
//! last batch is later overwritten by another writer (a Connect worker, an operator's reset), or when
//! that batch only reset keys and its tombstones are removed after `delete.retention.ms`, no header
//! of that batch survives. A too-low `applied_seq` would make recovery replay an old batch from the
//! write-ahead log over newer values. The marker closes that gap: nobody else writes its key, it
//! is never a tombstone, and a later marker of the same writer has a higher seq, so compaction keeps
//! the marker of the writer's latest batch (in each partition that holds one: the maximum is it). It is written in the same transaction as the
//! batch, so it is visible exactly when the batch is. The headers stay as per-record provenance
//! (which batch wrote this record) and as a second witness for a marker someone deleted: a load
//! that meets a marker's tombstone reads the topic again with every record's headers (and keeps
//! reading them). Parsing them on every load was a quarter of a cold load's CPU, for a case
//! only a hand-written tombstone makes; once compaction has removed that tombstone too
//! (`delete.retention.ms` after it), nothing tells the deletion apart and the headers are not read.
//!
//! Kafka Connect tolerates the marker: its reader stores every record's raw bytes and only decodes keys
//! to track a connector's partitions (`OffsetUtils.processPartitionKey`), which logs "Ignoring offset
//! partition key with an unexpected format. Expected type: java.util.List, actual type: …" for a JSON
//! object key and skips it. Its lookups are by exact key bytes, which never match a marker. One such
//! WARN line per surviving marker appears when a worker reads the topic. (Checked against a Kafka
//! Connect 4.4.0 distributed worker: with markers in its offsets topic it starts, runs
//! `FileStreamSourceConnector` from the offset we wrote, returns it from
//! `GET /connectors/{name}/offsets`, and its `DELETE` reset reads back here as a reset.)
//!
//! ## Atomic batches: one transaction per batch
//! Each writer (the `writer` of a [`Batch`](crate::Batch)) gets its own transactional producer, `transactional.id`
//! = `<transactional.id.prefix><writer>` (default prefix `connect-offsets-<topic>-`). A batch is
//! encoded and checked entirely (each record, headers included, against the smaller of the
//! producer's `message.max.bytes` and the topic's `max.message.bytes`, which also caps the
//! producer's `batch.size`) *before* the transaction opens; a commit buffer asks the same at each
//! offer ([`OffsetStore::admit`](crate::OffsetStore::admit)), so it never logs what could not be written;
//! then its records and the marker are produced in one transaction, which commits or aborts as a
//! whole. The reader uses `isolation.level=read_committed`, so an aborted batch is never loaded.
//! Unsequenced batches (`seq == 0`, from [`OffsetStoreExt`](crate::OffsetStoreExt)) use one more
//! transactional producer whose id is unique to the store handle, so two tools writing at once do not
//! fence each other; they write no marker and no headers. A handle opened with `exclusive.id=<name>`
//! ([`KafkaStoreBuilder::exclusive`]) writes them with `transactional.id` `<prefix>~<name>` instead,
//! initialized before the topic is read: of two handles with one name, the older one's next write
//! is fenced. This is how `--once` applies an override once however many processes race
//! ([`crate::once`]).
//!
//! The first batch of a writer initializes its producer: from then on any older producer with the same
//! `transactional.id` (a zombie: the previous process of that writer, still alive somewhere) is
//! **fenced**, and its open transaction is settled. The store then re-reads the topic before deciding
//! whether the batch is already applied. The zombie's next `apply` fails with [`Error::Fenced`](crate::Error::Fenced), which
//! is fatal. [`KafkaStoreBuilder::claim_writer`] (URL `writer=`) does the same at open, before the
//! topic is read, which a process running a commit buffer should use
//! ([`open_for_writer`](crate::open_for_writer) adds it to a URL).
//!
//! A commit whose outcome is unknown (the broker did not answer within the timeout) gives the producer
//! up: the next batch of that writer makes a new one, whose initialization settles the transaction, and
//! re-reads the topic, so the batch is neither lost nor applied twice.
//!
//! ## Exactly-once source tasks
//! A worker that produces its own records to Kafka commits them with its offsets in one
//! transaction through [`KafkaStore::task_producer`] (URL `exactly.once.group` with
//! `exactly.once.task`, or `exactly.once.id`): see [`task`]. The offsets it writes are unsequenced,
//! Connect's records exactly; a newer instance of the task fences the older one.
//!
//! ## `write.mode=idempotent`: no transactions
//! With [`WriteMode::Idempotent`] one idempotent `acks=all` producer per writer writes a batch's
//! records, waits until every one is acknowledged, then writes the marker and waits for it
//! (`idempotent.rs`); a batch whose records share one partition sends its marker into it right
//! behind them and waits once, since the producer appends in order and without gaps. Its records
//! carry no headers, Connect's records exactly: a seq header would count the batch as applied when
//! only part of it is in, and a writer header alone tells our reader nothing while it cost a third
//! of the throughput at 10,000 offsets a batch (the broker validates every record of a compacted
//! topic). So `applied_seq` names only batches wholly in the topic, and a batch a crash cut short
//! is replayed whole by the commit buffer's recovery. The price: until then every reader may see
//! part of that batch ([`OffsetStore::atomic`](crate::OffsetStore::atomic) is false), and no `transactional.id` fences an
//! older process of the same writer.
//!
//! **What a Connect worker without exactly-once sees.** Such a worker reads the topic with
//! `read_uncommitted`: it sees the records of an *aborted* batch as if they were committed (Kafka has
//! no way to hide them from it), until the same keys are written again. Aborts happen only when a
//! write fails mid-batch (a broker lost, a timeout, the process fenced); encoding and validating the
//! whole batch before the transaction opens keeps invalid data from ever causing one. Workers with
//! `exactly.once.source.support=enabled` read with `read_committed` and never see them.
//!
//! ## Loading and lookups
//! On open the store assigns every partition, reads from the beginning to the end (the last stable
//! offset, as a `read_committed` reader sees it), and repeats until the end offsets stop moving. A
//! transaction still open at that point (a writer at work, or one SIGKILLed mid-write) hides every
//! record after it, committed ones too, so the open waits, reading on, until every partition's last
//! stable offset reaches its high watermark (the brokers abort a dead writer's transaction after its
//! `transaction.timeout.ms`), and fails naming the partition after `timeout.ms` plus our producers'
//! transaction timeout: never a state older than what writers were told is written. After
//! that `get`, `partitions` and `namespaces` are answered from memory, never by re-reading the topic
//! (Connect re-reads on every lookup); [`KafkaStore::refresh`] catches up with what other writers
//! wrote since. The store's own commits update memory directly.
//!
//! A record that does not decode (bad JSON, wrong shape, nested values) is skipped, counted
//! ([`KafkaStore::dead_letters`]) and copied to the dead-letter file (`dead.letter.file`, see
//! [`crate::dead_letter`]) with its topic, partition, offset, key and value bytes and the reason. It
//! stays in the topic, so every open meets it again: the file gets it once, the count and a warning
//! come once per open. With no file configured it is only counted and logged as a warning. With
//! `strict=true` the store refuses to open (or refresh) instead, naming the partition and offset.
//!
//! ## Warm start: `snapshot.dir`
//! With `snapshot.dir=/path` (URL) or [`KafkaStoreBuilder::snapshot_dir`], the store keeps a
//! snapshot of what it loaded in `/path/<topic>.snapshot` (the directory is made if missing). It is
//! written when the store is dropped, after a last catch-up that reads the store's own commits
//! back as far as the brokers show them already (atomically: a temporary file, fsync, rename, directory fsync): a pass over the whole
//! state belongs at close, not on the commit path. A process that dies without dropping the
//! store keeps the snapshot of its previous close. It holds the
//! state, the cluster id, the topic's name, topic id and partition count, each partition's log
//! start offset and next offset to read, and when the reader last caught up, under one CRC-32.
//! The next open loads it and reads only what was written since ([`LoadReport::start`] is
//! [`Start::Warm`]). It reads the whole topic instead, with one warning saying why
//! ([`Start::Fallback`]), when the file is corrupt (checksum, length, magic, version), is of
//! another cluster or topic, the topic was re-created (another topic id) or has another number of
//! partitions, the snapshot is older than the topic's `delete.retention.ms` (compaction may have
//! removed tombstones it never saw), a partition now ends below where the snapshot stopped, or
//! its log start offset moved past what the snapshot saw (deleted records), or when the cluster
//! or topic id cannot be had. Records that did not decode were counted at the read that met
//! them; a warm start does not meet them again.
//!
//! ## Bounded waits
//! `timeout.ms` (default 30 s) bounds reaching the brokers and checking the topic at open, each
//! transaction step, and a read-to-end that makes no progress. Unreachable brokers give
//! [`Error::Timeout`](crate::Error::Timeout) naming the brokers and librdkafka's last error; refused credentials fail at once
//! with an authentication error.

mod client;
mod config;
pub mod connect_configs;
mod dead_letters;
#[allow(unsafe_code)]
mod flush;
pub mod group;
#[allow(unsafe_code)]
mod idempotent;
mod load;
pub mod pair;
mod producer;
mod record;
mod snapshot;
mod state;
pub mod task;
mod topic;
#[allow(unsafe_code)]
mod topic_id;
mod topic_store;
mod write;

pub use config::{
    DEFAULT_PARTITIONS, DEFAULT_REPLICATION, DEFAULT_TIMEOUT, KafkaStoreBuilder, WriteMode,
};
pub use connect_configs::ConnectConfigs;
pub use group::KafkaGroupStore;
pub use pair::{FALLBACK_TOPIC, KafkaPairStore};
pub use record::{MARKER_FIELD, SEQ_HEADER, WRITER_HEADER, marker_key};
pub use snapshot::Fallback;
pub use task::{TaskId, TaskProducer};
pub use topic_store::{KafkaStore, LoadReport, Start};
