//! Reading the offsets topic into memory: the in-memory [`State`], the [`Reader`] that reads every
//! partition to its end (each record decoded by [`super::record`]), and the dead-letter sink for
//! records that do not decode.
//!
//! ## One structural key, several record keys
//! Connect looks offsets up by exact key bytes, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are two
//! records to Kafka (and usually on two different partitions), while to this crate they are one key.
//! [`State`] therefore keeps, per structural key, every *form* that is live in the topic: one exact
//! record key in one topic partition (what compaction keeps one record of). Several forms come from
//! other writers: a connector whose map iterates in another order than Connect's REST API
//! re-encodes it, or a worker on JDK 17, whose `Double.toString` spells some doubles with one digit
//! more than JDK 19+ (`9.999999999999999E22` for `1e23`).
//!
//! **Which form `get` and `partitions` answer with: the newest record.** Forms are ordered by
//! [`Stamp`]: the record timestamp first, then the topic partition, then the offset in it (the
//! tie-break, so that equal timestamps still give one answer). The greatest is current. Records of
//! one topic partition are read in their order, but the partitions arrive interleaved in no fixed
//! order; since the rule does not depend on that order, every read of the same topic gives the
//! same answer. A record without a timestamp counts as `-1`. A tombstone removes its form only;
//! the newest of the others becomes current.
//!
//! **How the writer keeps every reader right** (see [`super::write`]): a key with live forms is
//! written under *each* live form's exact bytes, in the topic partition that holds it, and with an
//! explicit record timestamp; none of them is tombstoned, so whoever looks any of them up (the
//! connector that owns the record, a JDK 17 worker) finds the new offset. A reset tombstones every
//! live form. A key with no live form is written in the caller's member order, spelled as JDK 19+
//! does, on the partition murmur2 gives. Our own committed records enter the state with the
//! timestamp they were produced with and [`Stamp::UNREAD`] as their offset, until the reader reads
//! them back with their real one.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::Offset as KafkaOffset;

use super::client::{Ctx, auth_error, kafka_error, timeout_error};
use super::config::Settings;
use super::record::{Record, batch_headers, decode};
use crate::codec::json::{self, Json};
use crate::dead_letter::{DeadLetter, DeadLetterFile};
use crate::model::{KeyMap, OffsetKey};
use crate::{Error, Offset, Result};

/// Where a record sits and when it was written: its record timestamp (milliseconds, `-1` when the
/// record has none), its topic partition and its offset there. Ordered by timestamp, then topic
/// partition, then offset: of several live forms of one key, the greatest is the newest (see the
/// module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp {
    pub timestamp: i64,
    pub partition: i32,
    pub offset: i64,
}

impl Stamp {
    /// The offset of a record we committed ourselves and have not read back yet: after every record
    /// read so far from its partition (the reader reads it back later, with its real offset).
    pub(crate) const UNREAD: i64 = i64::MAX;
}

/// One record form of a structural key: its decoded key, its exact key bytes when they differ from
/// what the encoder makes of the decoded key (another producer's spelling), its offset, and where
/// and when the record that holds it was written. A form is one key in one topic partition (what
/// compaction keeps one record of).
struct Form {
    key: OffsetKey,
    raw: Option<Box<[u8]>>,
    offset: Offset,
    stamp: Stamp,
}

impl Form {
    fn new(raw: &[u8], key: OffsetKey, offset: Offset, stamp: Stamp) -> Form {
        // Re-encode into a reused buffer: a load makes one Form per record.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let same = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            json::encode_key(&key, buf);
            buf.as_slice() == raw
        });
        let raw = (!same).then(|| raw.into());
        Form {
            key,
            raw,
            offset,
            stamp,
        }
    }

    fn raw(&self) -> Cow<'_, [u8]> {
        match &self.raw {
            Some(r) => Cow::Borrowed(r),
            None => Cow::Owned(self.key.connect_key()),
        }
    }

    /// The record key `raw` in topic partition `partition`.
    fn is(&self, raw: &[u8], partition: i32) -> bool {
        self.stamp.partition == partition && *self.raw() == *raw
    }
}

/// Every live form of one structural key; `current`, the newest by [`Stamp`], is what lookups
/// return.
struct Stored {
    current: Form,
    shadowed: Vec<Form>,
}

impl Stored {
    /// Makes the newest form current again.
    fn settle(&mut self) {
        let newest = (0..self.shadowed.len()).max_by_key(|i| self.shadowed[*i].stamp);
        if let Some(i) = newest
            && self.shadowed[i].stamp > self.current.stamp
        {
            std::mem::swap(&mut self.current, &mut self.shadowed[i]);
        }
    }
}

/// A live form of a key, as the writer needs it: the exact record key, the topic partition that
/// holds it, and the key as that record decodes (its member order).
pub(crate) struct LiveForm {
    pub raw: Vec<u8>,
    pub partition: i32,
    pub key: OffsetKey,
}

/// The topic's content as far as it was read (and as our own commits changed it).
#[derive(Default)]
pub(crate) struct State {
    namespaces: BTreeMap<String, KeyMap<Stored>>,
    seqs: HashMap<String, u64>,
}

impl State {
    /// A record `raw` → `offset` at `stamp` (read from the topic or just committed by us). A record
    /// of a form already live replaces it (records of one topic partition are read in their order);
    /// the newest form is what lookups return, whatever order the partitions were read in.
    pub(crate) fn put(&mut self, raw: &[u8], key: OffsetKey, offset: Offset, stamp: Stamp) {
        let ns = match self.namespaces.get_mut(key.namespace()) {
            Some(ns) => ns,
            None => self
                .namespaces
                .entry(key.namespace().to_owned())
                .or_default(),
        };
        let partition = stamp.partition;
        match ns.get_mut(&key) {
            None => {
                let form = Form::new(raw, key.clone(), offset, stamp);
                ns.insert(
                    key,
                    Stored {
                        current: form,
                        shadowed: Vec::new(),
                    },
                );
            }
            Some(stored) => {
                if stored.current.is(raw, partition) {
                    stored.current.offset = offset;
                    stored.current.stamp = stamp;
                } else if let Some(f) = stored.shadowed.iter_mut().find(|f| f.is(raw, partition)) {
                    f.offset = offset;
                    f.stamp = stamp;
                } else {
                    stored.shadowed.push(Form::new(raw, key, offset, stamp));
                }
                stored.settle();
            }
        }
    }

    /// A tombstone for the record key `raw` (of structural key `key`) in topic partition
    /// `partition`: that form is gone, the newest of the others (if any) is current.
    pub(crate) fn reset(&mut self, raw: &[u8], key: &OffsetKey, partition: i32) {
        let Some(ns) = self.namespaces.get_mut(key.namespace()) else {
            return;
        };
        let Some(stored) = ns.get_mut(key) else {
            return;
        };
        if stored.current.is(raw, partition) {
            match stored.shadowed.pop() {
                Some(next) => {
                    stored.current = next;
                    stored.settle();
                }
                None => {
                    ns.remove(key);
                    if ns.is_empty() {
                        self.namespaces.remove(key.namespace());
                    }
                }
            }
        } else {
            stored.shadowed.retain(|f| !f.is(raw, partition));
        }
    }

    /// Batch `seq` of `writer` is in the topic.
    pub(crate) fn note_seq(&mut self, writer: &str, seq: u64) {
        match self.seqs.get_mut(writer) {
            Some(s) => *s = (*s).max(seq),
            None => {
                self.seqs.insert(writer.to_owned(), seq);
            }
        }
    }

    /// Every live form of `key`, the current (newest) one first: what a write must overwrite and a
    /// reset tombstone.
    pub(crate) fn live_forms(&self, key: &OffsetKey) -> Vec<LiveForm> {
        self.namespaces
            .get(key.namespace())
            .and_then(|ns| ns.get(key))
            .map(|s| {
                std::iter::once(&s.current)
                    .chain(&s.shadowed)
                    .map(|f| LiveForm {
                        raw: f.raw().into_owned(),
                        partition: f.stamp.partition,
                        key: f.key.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn applied_seq(&self, writer: &str) -> u64 {
        self.seqs.get(writer).copied().unwrap_or(0)
    }

    pub(crate) fn writers(&self) -> Vec<(String, u64)> {
        let mut w: Vec<_> = self.seqs.iter().map(|(k, v)| (k.clone(), *v)).collect();
        w.sort();
        w
    }

    pub(crate) fn get(&self, key: &OffsetKey) -> Option<Offset> {
        self.namespaces
            .get(key.namespace())
            .and_then(|ns| ns.get(key))
            .map(|s| s.current.offset.clone())
    }

    pub(crate) fn partitions(&self, namespace: &str) -> Vec<(OffsetKey, Offset)> {
        let mut out: Vec<_> = self
            .namespaces
            .get(namespace)
            .map(|ns| {
                ns.values()
                    .map(|s| (s.current.key.clone(), s.current.offset.clone()))
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub(crate) fn namespaces(&self) -> Vec<String> {
        self.namespaces.keys().cloned().collect()
    }

    /// Number of keys with an offset.
    pub(crate) fn len(&self) -> usize {
        self.namespaces.values().map(|ns| ns.len()).sum()
    }
}

/// Where records that do not decode go. A bad record stays in the topic, so every open meets it
/// again: the file gets it once (records already in it, by topic, partition and offset, are not
/// written again), the count and the warning come with every read.
pub(crate) struct DeadLetters {
    file: Option<DeadLetterFile>,
    count: AtomicU64,
    /// `(topic, partition, offset)` of the Kafka records already in the file.
    in_file: std::sync::Mutex<std::collections::HashSet<(String, i32, i64)>>,
}

/// The `(topic, partition, offset)` of every Kafka record in a dead-letter file (lines that do not
/// parse are someone else's business: the file is append-only JSON lines).
fn kafka_letters(path: &std::path::Path) -> std::collections::HashSet<(String, i32, i64)> {
    let Ok(text) = std::fs::read(path) else {
        return Default::default();
    };
    let field = |members: &[(String, Json)], name: &str| -> Option<String> {
        members
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| match v {
                Json::String(s) => Some(s.clone()),
                _ => None,
            })
    };
    text.split(|b| *b == b'\n')
        .filter_map(|line| match json::parse(line) {
            Ok(Json::Object(members)) if field(&members, "source").as_deref() == Some("kafka") => {
                let location = members.iter().find(|(n, _)| n == "location")?;
                let Json::Object(loc) = &location.1 else {
                    return None;
                };
                Some((
                    field(loc, "topic")?,
                    field(loc, "partition")?.parse().ok()?,
                    field(loc, "offset")?.parse().ok()?,
                ))
            }
            _ => None,
        })
        .collect()
}

impl DeadLetters {
    pub(crate) fn new(settings: &Settings) -> Self {
        let file = settings.dead_letter.as_ref().map(DeadLetterFile::new);
        let in_file = file
            .as_ref()
            .map(|f| kafka_letters(f.path()))
            .unwrap_or_default();
        DeadLetters {
            file,
            count: AtomicU64::new(0),
            in_file: std::sync::Mutex::new(in_file),
        }
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    #[allow(clippy::too_many_arguments)]
    fn bad(
        &self,
        settings: &Settings,
        partition: i32,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        reason: &str,
    ) -> Result<()> {
        let topic = &settings.topic;
        if settings.strict {
            return Err(Error::store(
                "kafka",
                format!(
                    "topic `{topic}` partition {partition} offset {offset}: {reason} (strict mode \
                     refuses such records; without `strict` they are skipped and copied to the \
                     dead-letter file)"
                ),
            ));
        }
        let new = self
            .in_file
            .lock()
            .map(|mut seen| seen.insert((topic.clone(), partition, offset)))
            .unwrap_or(true);
        if let Some(file) = self.file.as_ref().filter(|_| new) {
            file.write(&DeadLetter {
                source: "kafka",
                location: vec![
                    ("topic", topic.clone()),
                    ("partition", partition.to_string()),
                    ("offset", offset.to_string()),
                ],
                reason: reason.to_string(),
                blobs: vec![("key", key), ("value", value)],
            })?;
        }
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if self.file.is_none() {
            // (DeadLetterFile::write counts the ones it writes.)
            crate::metrics::dead_lettered("kafka");
        }
        match &self.file {
            Some(f) if !new => tracing::warn!(
                topic = %topic, partition, offset, reason, dead_letters = n,
                file = %f.path().display(),
                "skipped an offsets record that does not decode; it was put in the dead-letter file before"
            ),
            Some(f) => tracing::warn!(
                topic = %topic, partition, offset, reason, dead_letters = n,
                file = %f.path().display(),
                "skipped an offsets record that does not decode; it is in the dead-letter file"
            ),
            None => tracing::warn!(
                topic = %topic, partition, offset, reason, dead_letters = n,
                "skipped an offsets record that does not decode (no dead-letter file configured: \
                 set `dead.letter.file` to keep such records)"
            ),
        }
        Ok(())
    }
}

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

/// How many times a read-to-end fetches the end offsets again before it settles for what it has
/// (only a topic that is written without pause keeps moving).
const MAX_ROUNDS: usize = 20;

/// Reads the topic with `read_committed`, keeping its place between catch-ups.
pub(crate) struct Reader {
    consumer: BaseConsumer<Ctx>,
    topic: String,
    partitions: i32,
    /// The next offset to read in each partition, as far as we know (records and control markers).
    next: Vec<i64>,
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
    fn end_offsets(&self, settings: &Settings) -> Result<Vec<i64>> {
        let what = format!("ask for the end offsets of topic `{}`", self.topic);
        let deadline = Instant::now() + settings.timeout;
        loop {
            match self.try_end_offsets(settings, deadline) {
                Ok(ends) => return Ok(ends),
                Err(e) => {
                    self.consumer.context().note_error(&e);
                    if Instant::now() >= deadline {
                        return Err(timeout_error(
                            self.consumer.context(),
                            what,
                            settings.timeout,
                        ));
                    }
                    if !retriable(&e) {
                        return Err(kafka_error(self.consumer.context(), &what, &e));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    fn try_end_offsets(
        &self,
        settings: &Settings,
        deadline: Instant,
    ) -> std::result::Result<Vec<i64>, KafkaError> {
        let mut tpl = TopicPartitionList::with_capacity(self.partitions as usize);
        for p in 0..self.partitions {
            // Offset::End asks for the latest offset, which the broker answers with the last stable
            // offset because the reader's isolation level is read_committed.
            tpl.add_partition_offset(&self.topic, p, KafkaOffset::End)?;
        }
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100))
            .min(settings.timeout);
        let got = self.consumer.offsets_for_times(tpl, left)?;
        let mut ends = vec![0; self.partitions as usize];
        for elem in got.elements() {
            let p = elem.partition();
            if p < 0 || p >= self.partitions {
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

    /// Reads every partition to its end into `state`, again and again until the ends stop moving
    /// (or [`MAX_ROUNDS`] rounds). Returns how many records were read.
    pub(crate) fn catch_up(
        &mut self,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<u64> {
        let ends = self.end_offsets(settings)?;
        if self.caught_up(&ends) {
            return Ok(0);
        }
        self.start()?;
        let result = self.catch_up_rounds(ends, state, dead, settings);
        let stopped = self.stop();
        let read = result?;
        stopped?;
        Ok(read)
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

    fn read_to(
        &mut self,
        ends: &[i64],
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<u64> {
        let n = self.partitions as usize;
        let mut pending: Vec<bool> = (0..n).map(|p| self.next[p] < ends[p]).collect();
        let mut left = pending.iter().filter(|p| **p).count();
        let mut low_checked = vec![false; n];
        let mut read = 0u64;
        let mut last_progress = Instant::now();
        let mut since_check = 0u32;
        while left > 0 {
            let mut check = false;
            match self.consumer.poll(Duration::from_millis(20)) {
                Some(Ok(msg)) => {
                    let p = msg.partition();
                    let o = msg.offset();
                    if msg.topic() == self.topic && (0..self.partitions).contains(&p) {
                        if let Err(e) = self.handle(&msg, state, dead, settings) {
                            // Strict mode: leave the bad record ahead of the reader so the next
                            // catch-up meets it again.
                            drop(msg);
                            if let Err(se) = self.consumer.seek(
                                &self.topic,
                                p,
                                KafkaOffset::Offset(o),
                                settings.timeout,
                            ) {
                                tracing::warn!(partition = p, offset = o, error = %se, "cannot seek back to a refused record");
                            }
                            return Err(e);
                        }
                        let pi = p as usize;
                        self.next[pi] = self.next[pi].max(o + 1);
                        read += 1;
                        last_progress = Instant::now();
                        if pending[pi] && self.next[pi] >= ends[pi] {
                            pending[pi] = false;
                            left -= 1;
                        }
                        since_check += 1;
                        check = since_check >= 4096;
                    }
                }
                Some(Err(e)) => {
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
            if left > 0 && last_progress.elapsed() > settings.timeout {
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

    fn handle<M: Message>(
        &self,
        msg: &M,
        state: &mut State,
        dead: &DeadLetters,
        settings: &Settings,
    ) -> Result<()> {
        let key = msg.key();
        let value = msg.payload();
        match decode(key, value) {
            Ok(Record::Offset { key: k, offset }) => {
                let raw = key.unwrap_or_default();
                match offset {
                    Some(o) => {
                        let stamp = Stamp {
                            timestamp: msg.timestamp().to_millis().unwrap_or(-1),
                            partition: msg.partition(),
                            offset: msg.offset(),
                        };
                        state.put(raw, k, o, stamp)
                    }
                    None => state.reset(raw, &k, msg.partition()),
                }
            }
            Ok(Record::Marker { writer, seq }) => {
                if let Some(seq) = seq {
                    state.note_seq(&writer, seq);
                }
            }
            Err(reason) => {
                return dead.bad(settings, msg.partition(), msg.offset(), key, value, &reason);
            }
        }
        if let Some(headers) = msg.headers()
            && let Some((writer, seq)) = batch_headers(headers)
        {
            state.note_seq(writer, seq);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    fn pos(n: i64) -> Offset {
        Offset::new().with("position", n)
    }

    fn at(timestamp: i64, partition: i32, offset: i64) -> Stamp {
        Stamp {
            timestamp,
            partition,
            offset,
        }
    }

    #[test]
    fn spellings_of_one_key_shadow_each_other() {
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let ba = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let spaced = br#"[ "c", {"a": 1, "b": 2} ]"#;
        let mut s = State::default();
        s.put(spaced, ab.clone(), pos(1), at(10, 0, 0));
        s.put(&ba.connect_key(), ba.clone(), pos(2), at(20, 1, 0));
        assert_eq!(s.get(&ab), Some(pos(2)), "the newer form wins");
        assert_eq!(s.live_forms(&ab).len(), 2);
        assert_eq!(s.partitions("c").len(), 1);
        // The newer form is tombstoned: the older one is what the topic still holds.
        s.reset(&ba.connect_key(), &ba, 1);
        assert_eq!(s.get(&ab), Some(pos(1)));
        let live = s.live_forms(&ab);
        assert_eq!(live.len(), 1);
        assert_eq!(
            (live[0].raw.as_slice(), live[0].partition),
            (&spaced[..], 0)
        );
        // A tombstone for a form that is not live changes nothing: not these bytes, or these
        // bytes in another topic partition.
        s.reset(&ab.connect_key(), &ab, 0);
        s.reset(spaced, &ab, 3);
        assert_eq!(s.get(&ab), Some(pos(1)));
        s.reset(spaced, &ab, 0);
        assert_eq!(s.get(&ab), None);
        assert!(s.namespaces().is_empty());
    }

    /// Issue 12, part 4: two live forms in two topic partitions, read in either order, give the
    /// newer record's offset; equal timestamps are decided by topic partition, then offset.
    #[test]
    fn the_newest_form_wins_whatever_order_the_partitions_are_read_in() {
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let ba = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let answer = |records: &[(&OffsetKey, i64, Stamp)]| {
            let mut s = State::default();
            for (k, n, stamp) in records {
                s.put(&k.connect_key(), (*k).clone(), pos(*n), *stamp);
            }
            let listed = s.partitions("c");
            assert_eq!(listed.len(), 1);
            (s.get(&ab), listed[0].0.connect_key())
        };
        for (older, newer, want) in [
            // By timestamp, whatever the partitions.
            (at(100, 7, 50), at(200, 3, 0), 2),
            // Equal timestamps: the higher topic partition.
            (at(100, 3, 50), at(100, 7, 0), 2),
            // Equal timestamps and partitions (two spellings on one partition): the later offset.
            (at(100, 3, 4), at(100, 3, 5), 2),
            // No timestamps (-1): partition, then offset.
            (at(-1, 1, 9), at(-1, 2, 0), 2),
        ] {
            let a = (&ab, 1, older);
            let b = (&ba, want, newer);
            let read_last_older = answer(&[b, a]);
            let read_last_newer = answer(&[a, b]);
            assert_eq!(read_last_older.0, Some(pos(want)), "{older:?} {newer:?}");
            assert_eq!(read_last_older, read_last_newer, "{older:?} {newer:?}");
            assert_eq!(
                read_last_older.1,
                ba.connect_key(),
                "the newer form is listed"
            );
        }
        // An update of the newer form to an older timestamp (a producer with another clock) hands
        // the answer back to the other form; its tombstone too.
        let mut s = State::default();
        s.put(&ab.connect_key(), ab.clone(), pos(1), at(100, 0, 0));
        s.put(&ba.connect_key(), ba.clone(), pos(2), at(200, 1, 0));
        s.put(&ba.connect_key(), ba.clone(), pos(3), at(50, 1, 1));
        assert_eq!(s.get(&ab), Some(pos(1)));
        s.put(&ab.connect_key(), ab.clone(), pos(4), at(300, 0, 1));
        s.put(&ba.connect_key(), ba.clone(), pos(5), at(400, 1, 2));
        assert_eq!(s.get(&ab), Some(pos(5)));
        s.reset(&ba.connect_key(), &ba, 1);
        assert_eq!(s.get(&ab), Some(pos(4)));
    }

    /// Three forms, every read order: the same answer, the newest record's.
    #[test]
    fn three_forms_in_any_read_order_give_one_answer() {
        let p = |order: &[(&str, i64)]| {
            order
                .iter()
                .fold(Partition::new(), |p, (n, v)| p.with(*n, *v))
        };
        let keys = [
            OffsetKey::new("c", p(&[("x", 1), ("y", 2), ("z", 3)])),
            OffsetKey::new("c", p(&[("z", 3), ("y", 2), ("x", 1)])),
            OffsetKey::new("c", p(&[("y", 2), ("x", 1), ("z", 3)])),
        ];
        let stamps = [at(5, 2, 0), at(9, 0, 3), at(9, 1, 0)];
        for order in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            let mut s = State::default();
            for i in order {
                s.put(
                    &keys[i].connect_key(),
                    keys[i].clone(),
                    pos(i as i64),
                    stamps[i],
                );
            }
            assert_eq!(s.get(&keys[0]), Some(pos(2)), "read order {order:?}");
            assert_eq!(s.live_forms(&keys[0]).len(), 3);
            assert_eq!(
                s.live_forms(&keys[0])[0].raw,
                keys[2].connect_key(),
                "newest first"
            );
        }
    }

    #[test]
    fn applied_seq_is_the_highest_seen() {
        let mut s = State::default();
        s.note_seq("w", 3);
        s.note_seq("w", 2);
        s.note_seq("v", 1);
        assert_eq!(s.applied_seq("w"), 3);
        assert_eq!(s.applied_seq("x"), 0);
        assert_eq!(s.writers(), vec![("v".into(), 1), ("w".into(), 3)]);
    }
}
