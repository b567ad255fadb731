//! Reading the offsets topic into memory: [`Reader`], a `read_committed` consumer that keeps its
//! place between catch-ups. A catch-up reads every partition to its end (the last stable offset),
//! then asks for the ends again until they stop moving; each record is decoded by
//! [`super::record`] and applied to the [`State`], or handed to [`DeadLetters`] when it does not
//! decode.

use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::Offset as KafkaOffset;

use super::dead_letters::{DeadLetters, Verdict};
use super::record::{Record, batch_headers, decode};
use super::state::{Stamp, State};
use crate::codec::{json, scan};
use crate::store::kafka::client::{Ctx, auth_error, kafka_error, timeout_error};
use crate::store::kafka::config::Settings;
use crate::{Error, Result};

/// Errors that pass by themselves (leadership moving, a broker restarting, a request timing out).
fn retriable(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::UnknownLeaderEpoch
                | RDKafkaErrorCode::FencedLeaderEpoch
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::OffsetNotAvailable
                | RDKafkaErrorCode::OffsetOutOfRange
        )
    )
}

/// The most keys a catch-up makes room for in advance (40 MB of table at most, given back after).
const MAX_EXPECTED: usize = 1 << 21;

/// How many times a read-to-end fetches the end offsets again before it settles for what it has
/// (only a topic that is written without pause keeps moving).
const MAX_ROUNDS: usize = 20;

/// Kafka's default `delete.retention.ms` (one day).
const DEFAULT_DELETE_RETENTION_MS: i64 = 86_400_000;

/// The high watermarks being asked for ([`Reader::ask_high_watermarks`]).
pub(crate) struct Watermarks(std::sync::mpsc::Receiver<Result<Vec<i64>>>);

impl Watermarks {
    fn wait(self) -> Result<Vec<i64>> {
        self.0.recv().unwrap_or_else(|_| {
            Err(Error::store(
                "kafka",
                "the high-watermark thread stopped without an answer",
            ))
        })
    }
}

/// Reads the topic with `read_committed`, keeping its place between catch-ups.
pub(crate) struct Reader {
    consumer: BaseConsumer<Ctx>,
    topic: String,
    partitions: i32,
    /// The next offset to read in each partition, as far as we know (records and control markers).
    next: Vec<i64>,
    /// Wall-clock milliseconds at the start of the last complete catch-up: every record at or
    /// after `next` became visible after it (what a snapshot's age is measured from).
    read_at_ms: i64,
    /// The topic's `delete.retention.ms`: a catch-up that starts this long after the last one may
    /// have missed tombstones the cleaner has since removed with the records they deleted.
    keep_tombstones_ms: i64,
    /// Whether each record's `(writer, seq)` headers are read. They only matter once a writer's
    /// marker was deleted (see [`Reader::catch_up`]); parsing them was a quarter of a cold load.
    headers: bool,
}

/// Milliseconds since the Unix epoch, as Kafka's timestamps count them.
pub(crate) fn now_ms() -> i64 {
    crate::time::now_ms() as i64
}

impl Reader {
    /// The consumer, not yet assigned (it is first used to look the topic up).
    pub(crate) fn new(settings: &Settings) -> Result<Reader> {
        let ctx = Ctx::new(settings.secrets.clone(), "reader");
        let consumer: BaseConsumer<Ctx> = settings
            .consumer_config()
            .create_with_context(ctx)
            .map_err(|e| {
                Error::store(
                    "kafka",
                    format!(
                        "cannot create the reader: {}",
                        settings.secrets.scrub(&e.to_string())
                    ),
                )
            })?;
        Ok(Reader {
            consumer,
            topic: settings.topic.clone(),
            partitions: 0,
            next: Vec::new(),
            read_at_ms: now_ms(),
            keep_tombstones_ms: DEFAULT_DELETE_RETENTION_MS,
            headers: false,
        })
    }

    pub(crate) fn consumer(&self) -> &BaseConsumer<Ctx> {
        &self.consumer
    }

    /// Sets the partitions to read (all of them, from the beginning on the first catch-up).
    pub(crate) fn assign(&mut self, partitions: i32) {
        self.partitions = partitions;
        self.next = vec![0; partitions as usize];
    }

    /// How long the topic keeps tombstones, when the brokers said (else Kafka's default).
    pub(crate) fn keep_tombstones(&mut self, delete_retention_ms: Option<i64>) {
        self.keep_tombstones_ms = delete_retention_ms.unwrap_or(DEFAULT_DELETE_RETENTION_MS);
    }

    /// Resumes where a snapshot taken at `read_at_ms` left off: `next` is the next offset to read
    /// in each partition.
    pub(crate) fn resume(&mut self, next: &[i64], read_at_ms: i64) {
        self.next = next.to_vec();
        self.read_at_ms = read_at_ms;
    }

    /// The next offset to read in each partition.
    pub(crate) fn positions(&self) -> &[i64] {
        &self.next
    }

    /// See the field `read_at_ms`.
    pub(crate) fn read_at_ms(&self) -> i64 {
        self.read_at_ms
    }

    /// Assigns every partition at the next offset to read. The reader is assigned only during a
    /// catch-up: in between it neither polls the brokers nor buffers records nobody asked for, and
    /// it resumes exactly where it stopped (`next` counts transaction markers too).
    fn start(&self) -> Result<()> {
        let mut tpl = TopicPartitionList::with_capacity(self.partitions as usize);
        for (p, next) in self.next.iter().enumerate() {
            let at = if *next > 0 {
                KafkaOffset::Offset(*next)
            } else {
                KafkaOffset::Beginning
            };
            tpl.add_partition_offset(&self.topic, p as i32, at)
                .map_err(|e| kafka_error(self.consumer.context(), "assign partitions", &e))?;
        }
        self.consumer.assign(&tpl).map_err(|e| {
            kafka_error(
                self.consumer.context(),
                &format!(
                    "assign the {} partitions of `{}`",
                    self.partitions, self.topic
                ),
                &e,
            )
        })
    }

    fn stop(&self) -> Result<()> {
        self.consumer
            .unassign()
            .map_err(|e| kafka_error(self.consumer.context(), "unassign the reader", &e))
    }

    /// The end of each partition for a `read_committed` reader: the last stable offset. Retries
    /// while partitions are between leaders (a new topic, a broker lost) until the timeout.
    pub(crate) fn end_offsets(&self, settings: &Settings) -> Result<Vec<i64>> {
        self.list_offsets(settings, KafkaOffset::End, "end")
    }

    /// The first offset of each partition (the log start offset), with the same retries.
    pub(crate) fn start_offsets(&self, settings: &Settings) -> Result<Vec<i64>> {
        self.list_offsets(settings, KafkaOffset::Beginning, "start")
    }

    fn list_offsets(&self, settings: &Settings, at: KafkaOffset, which: &str) -> Result<Vec<i64>> {
        let (consumer, timeout) = (&self.consumer, settings.timeout);
        list_offsets(consumer, &self.topic, self.partitions, timeout, at, which)
    }

    /// Reads every partition to its end into `state`, again and again until the ends stop moving
    /// (or [`MAX_ROUNDS`] rounds). Returns how many records were read.
    pub(crate) fn catch_up(
        &mut self,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<u64> {
        let started = now_ms();
        let last = self.read_at_ms;
        let stale = started.saturating_sub(last) >= self.keep_tombstones_ms;
        let read = self.read_on(state, dead, settings, started)?;
        if stale && let Err(e) = self.read_whole_again(state, dead, settings, started - last) {
            self.read_at_ms = last;
            return Err(e);
        }
        Ok(read)
    }

    /// After the first catch-up of a store: a transaction still open in a partition (a writer at
    /// work, or one that died mid-write) hides every record after it from this `read_committed`
    /// reader, also those of transactions committed since, so the state read would be older than
    /// what writers were told is written, and torn across partitions. Reads on until every
    /// partition's last stable offset reaches its end as it is now (a dead writer's transaction
    /// is aborted by the brokers after its `transaction.timeout.ms`); fails, naming the partition,
    /// if one is still open after the store's timeout plus our producers' transaction timeout.
    pub(crate) fn settle_open_transactions(
        &mut self,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
        watermarks: Watermarks,
    ) -> Result<u64> {
        let ends = watermarks.wait()?;
        if self.caught_up(&ends) {
            return Ok(0);
        }
        let open = |r: &Reader| -> Vec<(usize, i64, i64)> {
            (r.next.iter().zip(&ends).enumerate())
                .filter(|(_, (n, e))| n < e)
                .map(|(p, (n, e))| (p, *n, *e))
                .collect()
        };
        tracing::warn!(
            topic = %self.topic,
            partitions = ?open(self).iter().map(|(p, _, _)| p).collect::<Vec<_>>(),
            "a transaction is open in the offsets topic and hides the records after it; waiting \
             until it commits or aborts (the brokers abort one whose writer died after its \
             transaction.timeout.ms)"
        );
        let patience = settings.timeout + Duration::from_millis(settings.transaction_timeout_ms());
        let deadline = Instant::now() + patience;
        let mut read = 0;
        loop {
            std::thread::sleep(Duration::from_millis(100));
            read += self.read_on(state, dead, settings, now_ms())?;
            if self.caught_up(&ends) {
                return Ok(read);
            }
            if Instant::now() >= deadline {
                let (p, next, end) = open(self)[0];
                return Err(Error::store(
                    "kafka",
                    format!(
                        "partition {p} of topic `{}` holds a transaction open at offset {next} \
                         (its records run to {end}) after waiting {} s: what was written after it \
                         cannot be read yet, so the offsets read would be older than those \
                         written; retry once its writer commits or the brokers abort it",
                        self.topic,
                        patience.as_secs()
                    ),
                ));
            }
        }
    }

    /// Starts asking, on a thread of its own, for the end of each partition for a reader that
    /// sees uncommitted records too (the high watermark; a `read_committed` client is told the
    /// last stable offset): what [`settle_open_transactions`](Self::settle_open_transactions)
    /// reads up to, asked for while the store loads.
    pub(crate) fn ask_high_watermarks(&self, settings: &Settings) -> Result<Watermarks> {
        let mut config = settings.consumer_config();
        config.set("isolation.level", "read_uncommitted");
        let ctx = Ctx::new(settings.secrets.clone(), "watermarks");
        let secrets = settings.secrets.clone();
        let (topic, partitions, timeout) = (self.topic.clone(), self.partitions, settings.timeout);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let ask = move || {
            let client: BaseConsumer<Ctx> = match config.create_with_context(ctx) {
                Ok(c) => c,
                Err(e) => {
                    let why = secrets.scrub(&e.to_string());
                    let _ = tx.send(Err(Error::store(
                        "kafka",
                        format!("cannot create the watermarks client: {why}"),
                    )));
                    return;
                }
            };
            let ends = list_offsets(
                &client,
                &topic,
                partitions,
                timeout,
                KafkaOffset::End,
                "high watermark",
            );
            let _ = tx.send(ends);
            // Here, after the answer: its stop takes 100 ms.
            drop(client);
        };
        std::thread::Builder::new()
            .name("kafka-watermarks".into())
            .spawn(ask)
            .map_err(|e| Error::store("kafka", format!("cannot start a thread: {e}")))?;
        Ok(Watermarks(rx))
    }

    /// Reads on from where the last catch-up stopped; `started` is when this catch-up began.
    fn read_on(
        &mut self,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
        started: i64,
    ) -> Result<u64> {
        let ends = self.end_offsets(settings)?;
        if self.caught_up(&ends) {
            self.read_at_ms = started;
            return Ok(0);
        }
        // Offsets, not records: a compacted topic holds fewer, so the room asked for is capped.
        let span: i64 = ends
            .iter()
            .zip(&self.next)
            .map(|(e, n)| (e - n).max(0))
            .sum();
        state.expect((span as usize).min(MAX_EXPECTED));
        self.start()?;
        let result = self.catch_up_rounds(ends, state, dead, settings);
        state.settle_room();
        let stopped = self.stop();
        let read = result?;
        stopped?;
        self.read_at_ms = started;
        if state.take_deleted_marker() && !self.headers {
            return self.reread_with_headers(state, dead, settings);
        }
        Ok(read)
    }

    /// A writer's marker is what its `applied_seq` is read from; once someone deleted one (a
    /// tombstone of its key), only the headers of that writer's surviving records tell its last
    /// batch. So the topic is read again from the start, headers and all, and so is every later
    /// catch-up. Reading records again over the state they built gives the same state: each
    /// record form ends as its partition's last record of it left it.
    fn reread_with_headers(
        &mut self,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<u64> {
        tracing::info!(
            topic = %self.topic,
            "a writer marker was deleted: reading the topic again with every record's batch headers"
        );
        self.headers = true;
        self.next = vec![0; self.partitions as usize];
        self.catch_up(state, dead, settings)
    }

    /// A catch-up `since_ms` after the last one, as long as the topic keeps tombstones: a key reset
    /// meanwhile may be gone whole (its records and the tombstone), and reading on keeps its old
    /// offset. So the topic is read again from the start, to where reading on just stopped, and
    /// what that read does not have is forgotten, but for our own commits it cannot see yet.
    fn read_whole_again(
        &mut self,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
        since_ms: i64,
    ) -> Result<()> {
        tracing::info!(
            topic = %self.topic,
            since_ms,
            delete_retention_ms = self.keep_tombstones_ms,
            "the last catch-up is older than the topic keeps tombstones: reading it whole again"
        );
        let ends = std::mem::replace(&mut self.next, vec![0; self.partitions as usize]);
        let mut fresh = State::default();
        fresh.expect(state.len());
        let read = self.start().and_then(|()| {
            let read = self.read_to(&ends, &mut fresh, dead, settings);
            let stopped = self.stop();
            read.and(stopped)
        });
        let complete = self.next.iter().zip(&ends).all(|(n, e)| n >= e);
        self.next = ends;
        read?;
        if !complete {
            return Err(Error::store(
                "kafka",
                "the topic could not be read again to where it was read (a record was refused)",
            ));
        }
        fresh.settle_room();
        state.adopt(fresh, self.read_at_ms - self.keep_tombstones_ms);
        Ok(())
    }

    fn caught_up(&self, ends: &[i64]) -> bool {
        self.next.iter().zip(ends).all(|(next, end)| next >= end)
    }

    fn catch_up_rounds(
        &mut self,
        mut ends: Vec<i64>,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<u64> {
        let mut read = 0;
        for round in 1.. {
            read += self.read_to(&ends, state, dead, settings)?;
            ends = self.end_offsets(settings)?;
            if self.caught_up(&ends) {
                break;
            }
            if round == MAX_ROUNDS {
                tracing::debug!(topic = %self.topic, "the topic keeps growing; stopping the catch-up here");
                break;
            }
        }
        Ok(read)
    }

    /// Reads every partition to `ends`. This thread polls and hands the records, in batches, to
    /// a second one that decodes and applies them: decoding and the state's inserts were two
    /// thirds of a cold load on one core. When a record is refused (strict mode), `next` goes
    /// back to the first record not applied in each partition, so the next catch-up meets it again.
    fn read_to(
        &mut self,
        ends: &[i64],
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<u64> {
        let failed = &std::sync::atomic::AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Polled>(8);
        let (give_back, back) = std::sync::mpsc::sync_channel::<Polled>(16);
        let handoff = Handoff { tx, back };
        let partitions = self.partitions as usize;
        let (polled, applied) = std::thread::scope(|scope| {
            // Named, so that a profile tells the two halves apart.
            let applier = std::thread::Builder::new()
                .name("offsets-load".into())
                .spawn_scoped(scope, move || {
                    apply_all(rx, give_back, partitions, state, dead, settings, failed)
                })
                .expect("a thread to apply the records read");
            let polled = self.poll_to(ends, &handoff, failed, settings);
            drop(handoff);
            let applied = applier
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (polled, applied)
        });
        if let Err((e, unapplied)) = applied {
            for (next, first) in self.next.iter_mut().zip(unapplied) {
                *next = (*next).min(first);
            }
            return Err(e);
        }
        polled
    }

    /// The polling half of [`read_to`](Reader::read_to): hands every record it reads to the
    /// applier (also when it fails), and stops early once `failed` says the applier refused one.
    fn poll_to(
        &mut self,
        ends: &[i64],
        handoff: &Handoff,
        failed: &std::sync::atomic::AtomicBool,
        settings: &Settings,
    ) -> Result<u64> {
        let mut batch = Polled::default();
        let result = self.poll_into(ends, handoff, &mut batch, failed, settings);
        // Polled records are counted in `next` already: they must reach the state.
        handoff.pass(&mut batch);
        result
    }

    fn poll_into(
        &mut self,
        ends: &[i64],
        handoff: &Handoff,
        batch: &mut Polled,
        failed: &std::sync::atomic::AtomicBool,
        settings: &Settings,
    ) -> Result<u64> {
        let n = self.partitions as usize;
        let mut pending: Vec<bool> = (0..n).map(|p| self.next[p] < ends[p]).collect();
        let mut left = pending.iter().filter(|p| **p).count();
        let mut low_checked = vec![false; n];
        let mut read = 0u64;
        let mut last_progress = Instant::now();
        let mut since_check = 0u32;
        let mut progressed = false;
        while left > 0 && !failed.load(std::sync::atomic::Ordering::Relaxed) {
            let mut check = false;
            match self.consumer.poll(Duration::from_millis(20)) {
                Some(Ok(msg)) => {
                    let p = msg.partition();
                    let o = msg.offset();
                    // Only this topic's partitions are assigned (its name, read for every
                    // record, cost a string check each).
                    if (0..self.partitions).contains(&p) {
                        batch.push(&msg, self.headers);
                        if batch.recs.len() >= BATCH && !handoff.pass(batch) {
                            break;
                        }
                        let pi = p as usize;
                        self.next[pi] = self.next[pi].max(o + 1);
                        read += 1;
                        // Noted here, timed at the next check: a clock read per record costs 4%.
                        progressed = true;
                        if pending[pi] && self.next[pi] >= ends[pi] {
                            pending[pi] = false;
                            left -= 1;
                        }
                        since_check += 1;
                        check = since_check >= 4096;
                    }
                }
                Some(Err(e)) => {
                    check = true;
                    let ctx = self.consumer.context();
                    ctx.note_error(&e);
                    if let Some(reason) = ctx.auth_error() {
                        return Err(auth_error(&settings.bootstrap, &reason));
                    }
                    if matches!(e, KafkaError::MessageConsumptionFatal(_)) {
                        return Err(kafka_error(
                            ctx,
                            &format!("read topic `{}`", self.topic),
                            &e,
                        ));
                    }
                }
                None => check = true,
            }
            if check {
                since_check = 0;
                if std::mem::take(&mut progressed) {
                    last_progress = Instant::now();
                }
                // Control records (transaction markers) are never delivered but move the position.
                if self.advance_positions(ends, &mut pending, &mut left)? {
                    last_progress = Instant::now();
                }
                if left > 0 && last_progress.elapsed() > Duration::from_secs(1) {
                    // A partition whose records were all deleted starts past where we think it does.
                    for p in 0..n {
                        if pending[p] && !low_checked[p] {
                            low_checked[p] = true;
                            let (low, _) = self
                                .consumer
                                .fetch_watermarks(&self.topic, p as i32, settings.timeout)
                                .map_err(|e| {
                                    kafka_error(
                                        self.consumer.context(),
                                        &format!("watermarks of `{}` partition {p}", self.topic),
                                        &e,
                                    )
                                })?;
                            if low >= ends[p] {
                                self.next[p] = self.next[p].max(low);
                                pending[p] = false;
                                left -= 1;
                                last_progress = Instant::now();
                            }
                        }
                    }
                }
            }
            if check && left > 0 && last_progress.elapsed() > settings.timeout {
                let stuck: Vec<String> = (0..n)
                    .filter(|p| pending[*p])
                    .take(5)
                    .map(|p| format!("partition {p} at offset {} of {}", self.next[p], ends[p]))
                    .collect();
                return Err(timeout_error(
                    self.consumer.context(),
                    format!(
                        "reading topic `{}` to its end ({}) with no progress",
                        self.topic,
                        stuck.join(", ")
                    ),
                    settings.timeout,
                ));
            }
        }
        Ok(read)
    }

    /// Moves `next` up to the consumer's positions; true when something moved.
    fn advance_positions(
        &mut self,
        ends: &[i64],
        pending: &mut [bool],
        left: &mut usize,
    ) -> Result<bool> {
        let positions = self
            .consumer
            .position()
            .map_err(|e| kafka_error(self.consumer.context(), "reader position", &e))?;
        let mut moved = false;
        for elem in positions.elements() {
            let p = elem.partition();
            if elem.topic() != self.topic || !(0..self.partitions).contains(&p) {
                continue;
            }
            let pi = p as usize;
            if let KafkaOffset::Offset(pos) = elem.offset()
                && pos > self.next[pi]
            {
                self.next[pi] = pos;
                moved = true;
            }
            if pending[pi] && self.next[pi] >= ends[pi] {
                pending[pi] = false;
                *left -= 1;
            }
        }
        Ok(moved)
    }
}

/// Records per batch handed from the polling thread to the applying one (a quarter of the
/// hand-offs of 1,024, and their wake-ups, made a cold load of 1M records ~15% faster here).
const BATCH: usize = 4096;

/// One polled record, its bytes in its batch's buffer.
struct PolledRecord {
    partition: i32,
    offset: i64,
    timestamp: i64,
    key: Option<std::ops::Range<usize>>,
    value: Option<std::ops::Range<usize>>,
    /// The `(writer, seq)` headers: the writer's bytes, and the seq.
    batch: Option<(std::ops::Range<usize>, u64)>,
    /// A plain record, read by the polling thread while its bytes are in that core's cache.
    plain: Option<Plain>,
}

/// What [`scan`] read of a plain record: where its connector name and canonical partition are
/// in the key's bytes, and whether it holds an offset (else it resets).
struct Plain {
    namespace: std::ops::Range<usize>,
    canonical: std::ops::Range<usize>,
    live: bool,
}

impl Plain {
    fn read(key: Option<&[u8]>, value: Option<&[u8]>) -> Option<Plain> {
        let key = key?;
        let (namespace, canonical) = scan::key(key)?;
        let live = value.map_or(Some(false), scan::value)?;
        let within = |part: &[u8]| {
            let at = part.as_ptr() as usize - key.as_ptr() as usize;
            at..at + part.len()
        };
        Some(Plain {
            namespace: within(namespace.as_bytes()),
            canonical: within(canonical),
            live,
        })
    }
}

impl PolledRecord {
    fn stamp(&self) -> Stamp {
        Stamp {
            timestamp: self.timestamp,
            partition: self.partition,
            offset: self.offset,
        }
    }
}

/// Records on their way from the polling thread to the applying one, their bytes back to back in
/// one buffer (a record costs no allocation of its own).
#[derive(Default)]
struct Polled {
    bytes: Vec<u8>,
    recs: Vec<PolledRecord>,
}

impl Polled {
    fn push<M: Message>(&mut self, msg: &M, headers: bool) {
        let mut copy = |b: &[u8]| {
            let at = self.bytes.len();
            self.bytes.extend_from_slice(b);
            at..self.bytes.len()
        };
        let plain = Plain::read(msg.key(), msg.payload());
        let key = msg.key().map(&mut copy);
        let value = msg.payload().map(&mut copy);
        let batch = headers
            .then(|| msg.headers())
            .flatten()
            .and_then(|h| batch_headers(h))
            .map(|(writer, seq)| (copy(writer.as_bytes()), seq));
        self.recs.push(PolledRecord {
            partition: msg.partition(),
            offset: msg.offset(),
            timestamp: msg.timestamp().to_millis().unwrap_or(-1),
            key,
            value,
            batch,
            plain,
        });
    }
}

/// The two channels between the polling thread and the applying one: full batches one way, their
/// emptied buffers back (a fresh buffer a batch was a page fault and a cross-thread free each).
struct Handoff {
    tx: std::sync::mpsc::SyncSender<Polled>,
    back: std::sync::mpsc::Receiver<Polled>,
}

impl Handoff {
    /// Sends `batch` and leaves an empty buffer in its place; false once the applier is gone.
    fn pass(&self, batch: &mut Polled) -> bool {
        let empty = self.back.try_recv().unwrap_or_default();
        self.tx.send(std::mem::replace(batch, empty)).is_ok()
    }
}

/// The applying half of [`Reader::read_to`]: applies every record received, in order, and gives
/// the emptied buffers back. After a refused record it sets `failed` and applies nothing more,
/// and returns with the error the first offset not applied in each partition.
fn apply_all(
    rx: std::sync::mpsc::Receiver<Polled>,
    give_back: std::sync::mpsc::SyncSender<Polled>,
    partitions: usize,
    state: &mut State,
    dead: &DeadLetters,
    settings: &Settings,
    failed: &std::sync::atomic::AtomicBool,
) -> std::result::Result<(), (Error, Vec<i64>)> {
    let mut refused: Option<(Error, Vec<i64>)> = None;
    for mut batch in rx {
        for rec in &batch.recs {
            if let Some((_, unapplied)) = &mut refused {
                if let Some(first) = unapplied.get_mut(rec.partition as usize) {
                    *first = (*first).min(rec.offset);
                }
                continue;
            }
            if let Err(e) = apply(&batch.bytes, rec, state, dead, settings) {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                let mut unapplied = vec![i64::MAX; partitions];
                unapplied[rec.partition as usize] = rec.offset;
                refused = Some((e, unapplied));
            }
        }
        batch.bytes.clear();
        batch.recs.clear();
        let _ = give_back.try_send(batch);
    }
    refused.map_or(Ok(()), Err)
}

/// Applies one record to `state`, or hands it to the dead letters when it does not decode.
fn apply(
    bytes: &[u8],
    rec: &PolledRecord,
    state: &mut State,
    dead: &DeadLetters,
    settings: &Settings,
) -> Result<()> {
    let key = rec.key.clone().map(|r| &bytes[r]);
    let value = rec.value.clone().map(|r| &bytes[r]);
    // Almost every record is plain: read in place, no key built (see `codec::scan`).
    if let (Some(raw), Some(plain)) = (key, &rec.plain)
        && let Ok(namespace) = std::str::from_utf8(&raw[plain.namespace.clone()])
    {
        let canonical = &raw[plain.canonical.clone()];
        match (plain.live, value) {
            (true, Some(value)) => state.put_parts(raw, namespace, canonical, value, rec.stamp()),
            _ => state.reset_parts(raw, namespace, canonical, rec.partition),
        }
        note_batch(bytes, rec, state);
        return Ok(());
    }
    match decode(key, value) {
        Ok(Record::Offset { key: k, live }) => {
            let raw = key.unwrap_or_default();
            match (live, value) {
                // Kept as the record holds it; decoded again only on lookup.
                (true, Some(value)) => state.put_raw(raw, &k, value, rec.stamp()),
                _ => state.reset(raw, &k, rec.partition),
            }
        }
        Ok(Record::Marker { writer, seq }) => match seq {
            Some(seq) => state.note_seq(&writer, seq),
            None => state.note_deleted_marker(),
        },
        Err(reason) => {
            // Rare: decode the key alone to learn whose offset it was.
            let k = key.and_then(|k| json::decode_key(k).ok());
            let verdict = dead.bad(
                settings,
                rec.partition,
                rec.offset,
                key,
                value,
                &reason,
                k.as_ref(),
            )?;
            if let (Verdict::Reset, Some(k)) = (verdict, &k) {
                state.reset(key.unwrap_or_default(), k, rec.partition);
            }
            return Ok(());
        }
    }
    note_batch(bytes, rec, state);
    Ok(())
}

/// Notes the `(writer, seq)` headers of an offset record.
fn note_batch(bytes: &[u8], rec: &PolledRecord, state: &mut State) {
    if let Some((writer, seq)) = &rec.batch
        && let Ok(writer) = std::str::from_utf8(&bytes[writer.clone()])
    {
        state.note_seq(writer, *seq);
    }
}

/// The `at` offset of each of the `partitions` of `topic` through `consumer` (whose isolation
/// level decides what `End` is). Retries while partitions are between leaders until `timeout`.
fn list_offsets(
    consumer: &BaseConsumer<Ctx>,
    topic: &str,
    partitions: i32,
    timeout: Duration,
    at: KafkaOffset,
    which: &str,
) -> Result<Vec<i64>> {
    let what = format!("ask for the {which} offsets of topic `{topic}`");
    let deadline = Instant::now() + timeout;
    // A topic created a moment ago is often between leaders once: ask again soon, then less.
    let mut backoff = Duration::from_millis(10);
    loop {
        match list_offsets_of(consumer, topic, partitions, timeout, at, deadline) {
            Ok(ends) => return Ok(ends),
            Err(e) => {
                consumer.context().note_error(&e);
                if Instant::now() >= deadline {
                    return Err(timeout_error(consumer.context(), what, timeout));
                }
                if !retriable(&e) {
                    return Err(kafka_error(consumer.context(), &what, &e));
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(100));
            }
        }
    }
}

fn list_offsets_of(
    consumer: &BaseConsumer<Ctx>,
    topic: &str,
    partitions: i32,
    timeout: Duration,
    at: KafkaOffset,
    deadline: Instant,
) -> std::result::Result<Vec<i64>, KafkaError> {
    let mut tpl = TopicPartitionList::with_capacity(partitions as usize);
    for p in 0..partitions {
        // Offset::End asks for the latest offset: the last stable one for a read_committed
        // client, the high watermark for a read_uncommitted one.
        tpl.add_partition_offset(topic, p, at)?;
    }
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100))
        .min(timeout);
    let got = consumer.offsets_for_times(tpl, left)?;
    let mut ends = vec![0; partitions as usize];
    for elem in got.elements() {
        let p = elem.partition();
        if p < 0 || p >= partitions {
            continue;
        }
        elem.error()?;
        ends[p as usize] = match elem.offset() {
            KafkaOffset::Offset(o) => o,
            _ => return Err(KafkaError::OffsetFetch(RDKafkaErrorCode::OffsetOutOfRange)),
        };
    }
    Ok(ends)
}
