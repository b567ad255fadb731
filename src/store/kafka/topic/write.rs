//! Writing batches: one transactional producer per writer, the encoding of a batch into Connect's
//! records (plus the writer's marker), and what each kind of transaction failure means.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};

use super::idempotent::IdemProducer;
use super::record::{self, marker_key, marker_value};
use super::state::{Stamp, State};
use crate::codec::{json, murmur2};
use crate::model::{Batch, Offset, OffsetKey};
use crate::store::kafka::client::{Ctx, auth_error, timeout_error};
use crate::store::kafka::config::{Settings, WriteMode, unique_suffix};
use crate::store::kafka::ffi::{STEP, flush};
use crate::store::kafka::producer::{Failure, Rec, base_record, create, is_fence};
use crate::{Error, Result};

/// Events a transactional producer serves at a time (an empty queue answers a poll at once).
const EVENTS_PER_SERVE: usize = 64;

/// Where one record's bytes sit in [`Recs::bytes`].
struct Span {
    entry: Option<usize>,
    partition: i32,
    key: Range<usize>,
    value: Option<Range<usize>>,
}

/// A batch's records, every key and value encoded into one buffer: two allocations a batch, not
/// three a record (the allocator was a fifth of the apply thread's time at 10,000 offsets a batch).
pub(crate) struct Recs {
    bytes: Vec<u8>,
    spans: Vec<Span>,
    timestamp: i64,
}

thread_local! {
    /// The buffers of this thread's last batch, for its next: a fresh large buffer a batch (and its
    /// free) made glibc consolidate its free lists each time, a tenth of the apply thread.
    static SPARE: RefCell<(Vec<u8>, Vec<Span>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Buffers larger than this are given back to the allocator, not kept for the next batch.
const SPARE_MAX_BYTES: usize = 16 << 20;

impl Drop for Recs {
    fn drop(&mut self) {
        if self.bytes.capacity() <= SPARE_MAX_BYTES
            && self.spans.capacity() * size_of::<Span>() <= SPARE_MAX_BYTES
        {
            let bytes = std::mem::take(&mut self.bytes);
            let spans = std::mem::take(&mut self.spans);
            // A thread being torn down keeps nothing.
            let _ = SPARE.try_with(|s| *s.borrow_mut() = (bytes, spans));
        }
    }
}

impl Recs {
    pub(crate) fn iter(&self) -> impl Iterator<Item = Rec<'_>> {
        self.spans.iter().map(|s| Rec {
            entry: s.entry,
            partition: s.partition,
            key: &self.bytes[s.key.clone()],
            value: s.value.clone().map(|v| &self.bytes[v]),
            timestamp: self.timestamp,
        })
    }

    /// The offset records, without the marker.
    pub(crate) fn offsets(&self) -> impl Iterator<Item = Rec<'_>> {
        self.iter().filter(|r| r.entry.is_some())
    }

    /// The writer's marker, if the batch has one.
    pub(crate) fn marker(&self) -> Option<Rec<'_>> {
        self.iter().find(|r| r.entry.is_none())
    }

    /// The one topic partition of every offset record of a sequenced batch, if there is one.
    pub(crate) fn one_partition(&self) -> Option<i32> {
        let mut offsets = self.offsets();
        let first = offsets.next()?.partition;
        (self.marker().is_some() && offsets.all(|r| r.partition == first)).then_some(first)
    }

    /// Moves the marker to topic partition `partition`.
    pub(crate) fn place_marker(&mut self, partition: i32) {
        for s in self.spans.iter_mut().filter(|s| s.entry.is_none()) {
            s.partition = partition;
        }
    }
}

/// What a one-record batch adds to its key and value: the batch header (61 bytes), the record's
/// length, attributes, timestamp and offset deltas and its lengths (varints), rounded up.
const RECORD_OVERHEAD: usize = 128;

/// Room for a live form's key spelling being longer than ours (a JDK 17 double's extra digit).
const SPELLING_SLACK: usize = 64;

/// Refuses a record of key bytes `raw` and a value of `value_len` bytes that the topic or the
/// producer would refuse as too large (`settings.max_message_bytes` is the smaller of the two).
/// `slack`: bytes the key may yet grow by.
fn check_size(
    raw: &[u8],
    value_len: usize,
    slack: usize,
    writer: &str,
    settings: &Settings,
) -> Result<()> {
    let size = raw.len() + slack + value_len + RECORD_OVERHEAD + record::headers_size(writer);
    if size > settings.max_message_bytes {
        return Err(Error::InvalidData(format!(
            "the record for {} is {size} bytes with its overhead, over the {} bytes the topic \
             and the producer take (max.message.bytes, message.max.bytes)",
            String::from_utf8_lossy(&raw[..raw.len().min(200)]),
            settings.max_message_bytes
        )));
    }
    Ok(())
}

/// At most the bytes `map`'s JSON takes: every string byte escaped as `\u00XX` at worst.
fn json_bound(map: &crate::FieldMap) -> usize {
    use crate::Value;
    2 + map
        .iter()
        .map(|(name, v)| {
            6 * name.len()
                + 4
                + match v {
                    Value::Null | Value::Bool(_) => 5,
                    Value::Int(_) => 20,
                    Value::Float(_) => 26,
                    Value::String(s) => 6 * s.len() + 2,
                    Value::Bytes(b) => 2 * b.len() + 6,
                }
        })
        .sum::<usize>()
}

/// Refuses an entry whose record no write could ever send, as [`encode`] would (before a buffer
/// logs it): a bound of its size first, its exact encoding only when the bound is over.
pub(crate) fn admit(
    writer: &str,
    key: &OffsetKey,
    offset: Option<&Offset>,
    settings: &Settings,
) -> Result<()> {
    let partition = key.partition().map_or(4, json_bound);
    let value = offset.map_or(0, json_bound);
    let bound = 6 * key.namespace().len() + 5 + partition + value + SPELLING_SLACK;
    if bound + RECORD_OVERHEAD + record::headers_size(writer) <= settings.max_message_bytes {
        return Ok(());
    }
    let mut raw = Vec::new();
    json::encode_key(key, &mut raw);
    let value_len = offset.map_or(0, |o| {
        let mut v = Vec::new();
        json::encode_value(o, &mut v);
        v.len()
    });
    check_size(&raw, value_len, SPELLING_SLACK, writer, settings)
}

/// Encodes a whole batch before any transaction is opened: each entry's records (Connect's key and
/// value bytes, or tombstones), and, for a sequenced batch, the writer's marker. Fails on a record
/// the brokers would refuse as too large, naming its key.
///
/// Which records an entry makes (see [`super::state`]): for a key with live forms in the topic, one
/// per live form, under that form's exact key bytes and in the topic partition that holds it (the
/// new offset, or a tombstone for a reset), so that every reader that looks any of them up (the
/// connector that wrote it, whatever its member order or its JDK's spelling of doubles) finds the
/// new offset, and a reset leaves none behind. For a key with no live form, one record in the
/// caller's member order, spelled as JDK 19+ does, on the partition murmur2 gives.
pub(crate) fn encode(
    batch: &Batch,
    state: &State,
    partitions: i32,
    settings: &Settings,
) -> Result<Recs> {
    let place = |key: &[u8]| murmur2::partition_for(key, partitions as u32) as i32;
    let timestamp = crate::time::now_ms() as i64;
    let (mut bytes, mut spans) = SPARE
        .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
        .unwrap_or_default();
    bytes.clear();
    spans.clear();
    bytes.reserve(batch.entries.len() * 64 + 64);
    spans.reserve(batch.entries.len() + 1);
    for (i, (key, offset)) in batch.entries.iter().enumerate() {
        // Every live form of the key gets the same value bytes: encoded once.
        let value = offset.as_ref().map(|o| {
            let start = bytes.len();
            json::encode_value(o, &mut bytes);
            start..bytes.len()
        });
        let first = spans.len();
        let mut target = |key: Range<usize>, partition| {
            spans.push(Span {
                entry: Some(i),
                partition,
                key,
                value: value.clone(),
            })
        };
        if state.live_records_into(key, &mut bytes, &mut target) == 0 {
            let start = bytes.len();
            json::encode_key(key, &mut bytes);
            target(start..bytes.len(), place(&bytes[start..]));
        }
        let value_len = value.as_ref().map_or(0, Range::len);
        for s in &spans[first..] {
            check_size(&bytes[s.key.clone()], value_len, 0, &batch.writer, settings)?;
        }
    }
    if batch.seq != 0 {
        let start = bytes.len();
        bytes.extend_from_slice(&marker_key(&batch.writer));
        let key = start..bytes.len();
        let partition = place(&bytes[key.clone()]);
        bytes.extend_from_slice(&marker_value(batch.seq));
        spans.push(Span {
            entry: None,
            partition,
            key: key.clone(),
            value: Some(key.end..bytes.len()),
        });
    }
    Ok(Recs {
        bytes,
        spans,
        timestamp,
    })
}

/// Applies committed records to the in-memory state, as reading them back would: each with the
/// timestamp it was produced with, in its topic partition, after every record read there so far.
pub(crate) fn apply_to_state(state: &mut State, batch: &Batch, recs: &Recs) {
    for rec in recs.offsets() {
        let Some(i) = rec.entry else { continue };
        let (key, _) = batch.entries.get_index(i).expect("a record of the batch");
        let stamp = Stamp {
            timestamp: rec.timestamp,
            partition: rec.partition,
            offset: Stamp::UNREAD,
        };
        match rec.value {
            Some(value) => state.put_written(rec.key, key, value, stamp),
            None => state.reset(rec.key, key, rec.partition),
        }
    }
    if batch.seq != 0 {
        state.note_seq(&batch.writer, batch.seq);
    }
}

/// A writer's producer, of the store's [`WriteMode`].
pub(crate) enum Producer {
    Transaction(TxnProducer),
    Idempotent(IdemProducer),
}

impl Producer {
    /// A producer for `transactional.id` `id` (the idempotent one takes it as its client name).
    pub(crate) fn create(settings: &Settings, id: &str) -> Result<Producer> {
        Ok(match settings.write_mode {
            WriteMode::Transaction => Producer::Transaction(TxnProducer::create(settings, id)?),
            WriteMode::Idempotent => Producer::Idempotent(IdemProducer::create(settings, id)?),
        })
    }
}

/// A writer's producer slot.
pub(crate) enum Slot {
    /// No producer yet, or the last one was lost (fatal error, unknown commit outcome): the next
    /// batch makes a new one, which settles the old one's transaction before the store re-reads.
    Empty,
    Ready(Producer),
    /// A newer producer with the same `transactional.id` took over: this writer is a zombie.
    Fenced(String),
}

/// The transactional producers of one store: one per writer, and one for unsequenced batches, with
/// a `transactional.id` unique to this store handle, or the handle's `exclusive.id`.
pub(crate) struct Writers {
    slots: Mutex<HashMap<String, Arc<Mutex<Slot>>>>,
    unsequenced: Arc<Mutex<Slot>>,
    unsequenced_id: String,
}

impl Writers {
    /// `exclusive`: the name this handle's unsequenced batches are written under
    /// ([`KafkaStoreBuilder::exclusive`](super::KafkaStoreBuilder::exclusive)), if any.
    pub(crate) fn new(settings: &Settings, exclusive: Option<&str>) -> Self {
        let prefix = &settings.transactional_id_prefix;
        Writers {
            slots: Mutex::new(HashMap::new()),
            unsequenced: Arc::new(Mutex::new(Slot::Empty)),
            unsequenced_id: match exclusive {
                Some(name) => format!("{prefix}~{name}"),
                None => format!("{prefix}~unsequenced-{}", unique_suffix()),
            },
        }
    }

    /// The slot and `transactional.id` of unsequenced batches (claiming an `exclusive.id` at open).
    pub(crate) fn unsequenced(&self) -> (Arc<Mutex<Slot>>, String) {
        (self.unsequenced.clone(), self.unsequenced_id.clone())
    }

    /// The slot and `transactional.id` for `batch`.
    pub(crate) fn slot_for(
        &self,
        settings: &Settings,
        batch: &Batch,
    ) -> (Arc<Mutex<Slot>>, String) {
        if batch.seq == 0 {
            return (self.unsequenced.clone(), self.unsequenced_id.clone());
        }
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots
            .entry(batch.writer.clone())
            .or_insert_with(|| Arc::new(Mutex::new(Slot::Empty)))
            .clone();
        (slot, settings.transactional_id(&batch.writer))
    }

    /// The slot of a named writer (claiming at open).
    pub(crate) fn slot_of(&self, settings: &Settings, writer: &str) -> (Arc<Mutex<Slot>>, String) {
        self.slot_for(settings, &Batch::new(writer, 1, []))
    }
}

pub(crate) fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// A transactional producer of one writer.
pub(crate) struct TxnProducer {
    producer: BaseProducer<Ctx>,
    id: String,
}

impl TxnProducer {
    /// Creates the producer and initializes its transactions: from here on, any older producer with
    /// the same `transactional.id` is fenced and its open transaction is settled.
    pub(crate) fn create(settings: &Settings, id: &str) -> Result<TxnProducer> {
        let producer: BaseProducer<Ctx> = create(settings.producer_config(id), settings, id)?;
        let t = Instant::now();
        if let Err(e) = producer.init_transactions(settings.timeout) {
            // Serve the error events so the context knows why.
            producer.poll(Duration::ZERO);
            let ctx = producer.context();
            if let Some(reason) = ctx.auth_error() {
                return Err(auth_error(&settings.bootstrap, &reason));
            }
            let code = e.rdkafka_error_code();
            if matches!(
                code,
                Some(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut)
            ) || t.elapsed() >= settings.timeout
            {
                return Err(timeout_error(
                    ctx,
                    format!(
                        "initializing the transactions of producer `{id}`: {}",
                        ctx.scrub(&e.to_string())
                    ),
                    settings.timeout,
                ));
            }
            return Err(Error::store(
                "kafka",
                format!(
                    "initializing the transactions of producer `{id}`: {}",
                    ctx.scrub(&e.to_string())
                ),
            ));
        }
        tracing::debug!(transactional_id = id, elapsed = ?t.elapsed(), "transactions initialized");
        // Learn the topic's leaders now rather than on the first record of the first batch.
        if let Err(e) = producer
            .client()
            .fetch_metadata(Some(&settings.topic), settings.timeout)
        {
            tracing::debug!(transactional_id = id, error = %producer.context().scrub(&e.to_string()), "metadata warm-up failed");
        }
        Ok(TxnProducer {
            producer,
            id: id.to_string(),
        })
    }

    fn describe(&self, e: &KafkaError) -> String {
        self.producer.context().scrub(&e.to_string())
    }

    /// Classifies `e` from step `what`, aborting the transaction when that is what it needs.
    pub(crate) fn fail(&self, what: &str, e: &KafkaError, settings: &Settings) -> Failure {
        if let Some((code, reason)) = self.producer.client().fatal_error() {
            let reason = self.producer.context().scrub(&reason);
            return if is_fence(code) {
                Failure::Fenced(reason)
            } else {
                Failure::Lost(Error::store(
                    "kafka",
                    format!("{what}: producer `{}` failed for good: {reason}", self.id),
                ))
            };
        }
        let code = e.rdkafka_error_code();
        if code.is_some_and(is_fence) {
            return Failure::Fenced(self.describe(e));
        }
        let text = format!("{what}: {}", self.describe(e));
        if let KafkaError::Transaction(rde) = e
            && rde.is_fatal()
        {
            return Failure::Lost(Error::store("kafka", text));
        }
        match self.abort(settings) {
            Ok(()) => Failure::Aborted(Error::store(
                "kafka",
                format!("{text}; the transaction was aborted, nothing of the batch was written"),
            )),
            // Say what failed first: the abort's own error alone hides it (a coordinator that
            // aborted a timed-out transaction answers the abort with "invalid state").
            Err(Failure::Lost(Error::Store {
                message, source, ..
            })) => Failure::Lost(Error::Store {
                store: "kafka",
                message: format!("{text}; then could not {message}"),
                source,
            }),
            Err(f) => f,
        }
    }

    /// Aborts the open transaction. The abort purges the records still queued and waits for their
    /// delivery reports, which only a poll serves: so abort in short steps and poll in between
    /// (librdkafka continues an abort that timed out when asked again).
    pub(crate) fn abort(&self, settings: &Settings) -> std::result::Result<(), Failure> {
        let deadline = Instant::now() + settings.timeout;
        loop {
            match self.producer.abort_transaction(Duration::from_millis(50)) {
                Ok(()) => return Ok(()),
                Err(KafkaError::Transaction(rde))
                    if rde.is_retriable() && !rde.is_fatal() && Instant::now() < deadline =>
                {
                    self.producer.poll(Duration::from_millis(2));
                }
                Err(e) => {
                    if let Some((code, reason)) = self.producer.client().fatal_error() {
                        let reason = self.producer.context().scrub(&reason);
                        if is_fence(code) {
                            return Err(Failure::Fenced(reason));
                        }
                    }
                    if e.rdkafka_error_code().is_some_and(is_fence) {
                        return Err(Failure::Fenced(self.describe(&e)));
                    }
                    return Err(Failure::Lost(Error::store(
                        "kafka",
                        format!(
                            "abort the transaction of `{}`: {}",
                            self.id,
                            self.describe(&e)
                        ),
                    )));
                }
            }
        }
    }

    pub(crate) fn begin(&self, settings: &Settings) -> std::result::Result<(), Failure> {
        self.producer
            .begin_transaction()
            .map_err(|e| self.fail("begin a transaction", &e, settings))
    }

    /// Enqueues one record, waiting (within `deadline`) while librdkafka's queue is full.
    pub(crate) fn send(
        &self,
        topic: &str,
        rec: Rec<'_>,
        headers: Option<&OwnedHeaders>,
        deadline: Instant,
        settings: &Settings,
    ) -> std::result::Result<(), Failure> {
        self.send_record(base_record(topic, rec, headers), deadline, settings, || {
            format!("produce to `{topic}` partition {}", rec.partition)
        })
    }

    /// Enqueues `record`, waiting (within `deadline`) while librdkafka's queue is full; `what`
    /// names the step in an error.
    pub(crate) fn send_record(
        &self,
        mut record: BaseRecord<'_, [u8], [u8], ()>,
        deadline: Instant,
        settings: &Settings,
        what: impl Fn() -> String,
    ) -> std::result::Result<(), Failure> {
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if Instant::now() < deadline =>
                {
                    // Room comes as records are delivered: send the full queue at once, not after
                    // `linger.ms`, and serve failures (see `commit`).
                    let _ = flush(self.producer.client(), deadline.min(Instant::now() + STEP));
                    self.serve_events();
                    record = r;
                }
                Err((e, _)) => return Err(self.fail(&what(), &e, settings)),
            }
        }
    }

    /// Serves the events waiting in the producer's queue (a failed record's report, errors, log
    /// lines): nothing else polls it, and each poll takes one event.
    fn serve_events(&self) {
        for _ in 0..EVENTS_PER_SERVE {
            self.producer.poll(Duration::ZERO);
        }
    }

    /// Commits the open transaction. A retriable failure is retried until the timeout; after that
    /// the outcome is unknown and the producer is given up ([`Failure::Lost`]).
    pub(crate) fn commit(&self, settings: &Settings) -> std::result::Result<(), Failure> {
        let deadline = Instant::now() + settings.timeout;
        // Send and wait for the records before committing: the commit's own flush is rdkafka's,
        // which polls in steps of 100 ms (a 100 ms floor under every commit). Successes make no
        // report; a failure's report is an event only a poll serves, so flush in short steps.
        while !flush(self.producer.client(), deadline.min(Instant::now() + STEP))
            && Instant::now() < deadline
        {
            self.serve_events();
        }
        // Log lines and errors queue up between commits too.
        self.serve_events();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .producer
                .commit_transaction(left.max(Duration::from_millis(1)))
            {
                Ok(()) => return Ok(()),
                Err(KafkaError::Transaction(rde))
                    if rde.is_retriable() && !rde.is_fatal() && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    if let KafkaError::Transaction(rde) = &e
                        && rde.txn_requires_abort()
                    {
                        return Err(self.fail("commit the transaction", &e, settings));
                    }
                    if self.producer.client().fatal_error().is_some()
                        || e.rdkafka_error_code().is_some_and(is_fence)
                    {
                        return Err(self.fail("commit the transaction", &e, settings));
                    }
                    let ctx = self.producer.context();
                    return Err(Failure::Lost(if Instant::now() >= deadline {
                        timeout_error(
                            ctx,
                            format!(
                                "committing the transaction of `{}` (outcome unknown until the next \
                                 batch re-reads the topic): {}",
                                self.id,
                                self.describe(&e)
                            ),
                            settings.timeout,
                        )
                    } else {
                        Error::store(
                            "kafka",
                            format!(
                                "commit the transaction of `{}` (outcome unknown until the next batch \
                                 re-reads the topic): {}",
                                self.id,
                                self.describe(&e)
                            ),
                        )
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Offset;
    use crate::Partition;
    use crate::model::OffsetKey;
    use crate::store::kafka::KafkaStoreBuilder;

    fn pos(n: i64) -> Offset {
        Offset::new().with("position", n)
    }

    fn settings() -> Settings {
        KafkaStoreBuilder::new("h:1", "t").settings().unwrap()
    }

    fn at(timestamp: i64, partition: i32, offset: i64) -> Stamp {
        Stamp {
            timestamp,
            partition,
            offset,
        }
    }

    /// A connector's 9-member partition, and the same members in reverse order.
    fn nine() -> (OffsetKey, OffsetKey) {
        let members: Vec<(String, crate::Value)> = (0..9)
            .map(|i| (format!("fïeld-{i}-😀"), crate::Value::from(i as i64)))
            .collect();
        let forward = members.iter().cloned().collect::<Partition>();
        let reverse = members.into_iter().rev().collect::<Partition>();
        (OffsetKey::new("c", forward), OffsetKey::new("c", reverse))
    }

    /// What reading the offset records of `recs` back would make of `state`: each at a real offset
    /// after `base`.
    fn read_back(state: &mut State, recs: &Recs, base: i64) {
        for (n, rec) in recs.iter().enumerate().filter(|(_, r)| r.entry.is_some()) {
            let key = json::decode_key(rec.key).unwrap();
            let stamp = at(rec.timestamp, rec.partition, base + n as i64);
            match rec.value {
                Some(v) => {
                    let o = json::decode_value(v).unwrap().unwrap();
                    state.put(rec.key, key, o, stamp)
                }
                None => state.reset(rec.key, &key, rec.partition),
            }
        }
    }

    /// `set` with the members in another order writes under the connector's own
    /// key bytes, in the partition that holds them, and tombstones nothing.
    #[test]
    fn a_reordered_set_writes_the_live_forms_bytes() {
        let (forward, reverse) = nine();
        let mut state = State::default();
        state.put(
            &forward.connect_key(),
            forward.clone(),
            pos(1),
            at(10, 4, 0),
        );
        let batch = Batch::new("w", 1, [(reverse.clone(), Some(pos(2)))]);
        let recs = encode(&batch, &state, 25, &settings()).unwrap();
        let offsets: Vec<_> = recs.offsets().collect();
        assert_eq!(offsets.len(), 1);
        assert_eq!(
            offsets[0].key,
            forward.connect_key(),
            "the connector's bytes"
        );
        assert_eq!(offsets[0].partition, 4, "the partition that holds them");
        assert_eq!(offsets[0].value, Some(&br#"{"position":2}"#[..]));
        assert!(recs.iter().all(|r| r.value.is_some()), "no tombstone");
        let mut replay = State::default();
        replay.put(
            &forward.connect_key(),
            forward.clone(),
            pos(1),
            at(10, 4, 0),
        );
        read_back(&mut replay, &recs, 1);
        apply_to_state(&mut state, &batch, &recs);
        assert_eq!(state.get(&reverse), Some(pos(2)));
        assert_eq!(state.get(&reverse), replay.get(&reverse));
        assert_eq!(
            state.partitions("c")[0].0.connect_key(),
            forward.connect_key()
        );
        assert_eq!(
            state.partitions("c")[0].0.connect_key(),
            replay.partitions("c")[0].0.connect_key(),
            "listed in the connector's order, as a reload lists it"
        );
        assert_eq!(state.live_records(&reverse).len(), 1);
    }

    /// A JDK 17 worker's spelling of 1e23 and another order, both live: the new
    /// offset goes under both forms' bytes; a reset tombstones both.
    #[test]
    fn every_live_form_gets_the_new_value_and_a_reset_tombstones_every_one() {
        let jdk17 = r#"["c",{"d":9.999999999999999E22,"s":"ü"}]"#.as_bytes();
        let ours = OffsetKey::new("c", Partition::new().with("s", "ü").with("d", 1e23));
        let jdk17_key = json::decode_key(jdk17).unwrap();
        assert_eq!(jdk17_key, ours, "one structural key");
        assert_ne!(
            jdk17_key.connect_key(),
            jdk17.to_vec(),
            "a spelling we do not write"
        );
        let mut state = State::default();
        state.put(jdk17, jdk17_key.clone(), pos(1), at(10, 2, 0));
        state.put(&ours.connect_key(), ours.clone(), pos(0), at(5, 9, 0));
        let batch = Batch::new("w", 1, [(ours.clone(), Some(pos(7)))]);
        let recs = encode(&batch, &state, 25, &settings()).unwrap();
        let mut written: Vec<_> = recs
            .iter()
            .filter(|r| r.entry.is_some())
            .map(|r| (r.key.to_vec(), r.partition, r.value.map(<[u8]>::to_vec)))
            .collect();
        written.sort();
        let value = Some(br#"{"position":7}"#.to_vec());
        let mut want = vec![
            (jdk17.to_vec(), 2, value.clone()),
            (ours.connect_key(), 9, value),
        ];
        want.sort();
        assert_eq!(written, want);
        let stamp = recs.iter().next().unwrap().timestamp;
        assert!(recs.iter().all(|r| r.timestamp == stamp), "one timestamp");
        apply_to_state(&mut state, &batch, &recs);
        assert_eq!(state.get(&ours), Some(pos(7)));
        assert_eq!(state.live_records(&ours).len(), 2);

        let reset = Batch::new("w", 2, [(ours.clone(), None)]);
        let recs = encode(&reset, &state, 25, &settings()).unwrap();
        let mut tombstones: Vec<_> = recs
            .iter()
            .filter(|r| r.entry.is_some())
            .map(|r| (r.key.to_vec(), r.partition, r.value.is_none()))
            .collect();
        tombstones.sort();
        let mut want = vec![(jdk17.to_vec(), 2, true), (ours.connect_key(), 9, true)];
        want.sort();
        assert_eq!(tombstones, want);
        apply_to_state(&mut state, &reset, &recs);
        assert_eq!(state.get(&ours), None);
        assert!(state.live_records(&ours).is_empty());
    }

    /// A batch encoded into the buffers a larger one left behind holds its own records only.
    #[test]
    fn a_batch_after_a_larger_one_holds_its_own_records() {
        let key = |i: i64| OffsetKey::new("c", Partition::new().with("p", i));
        let state = State::default();
        let large = Batch::new("w", 1, (0..1000).map(|i| (key(i), Some(pos(i)))));
        drop(encode(&large, &state, 25, &settings()).unwrap());
        let small = Batch::new("w", 2, [(key(7), Some(pos(70))), (key(8), None)]);
        let recs = encode(&small, &state, 25, &settings()).unwrap();
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.entry, r.key.to_vec(), r.value.map(<[u8]>::to_vec)))
            .collect();
        let want = vec![
            (
                Some(0),
                key(7).connect_key(),
                Some(br#"{"position":70}"#.to_vec()),
            ),
            (Some(1), key(8).connect_key(), None),
            (None, marker_key("w"), Some(marker_value(2))),
        ];
        assert_eq!(got, want);
    }

    /// A key with no live record: the caller's order, JDK 19+ spelling, murmur2's partition.
    #[test]
    fn a_new_key_is_written_in_the_callers_order() {
        let (_, reverse) = nine();
        let key = OffsetKey::new("c", Partition::new().with("b", 1e23).with("a", 1));
        let state = State::default();
        let batch = Batch::new(
            "w",
            0,
            [(key.clone(), Some(pos(1))), (reverse.clone(), None)],
        );
        let encoded = encode(&batch, &state, 25, &settings()).unwrap();
        let recs: Vec<_> = encoded.iter().collect();
        assert_eq!(recs.len(), 2, "no marker for an unsequenced batch");
        assert_eq!(recs[0].key, br#"["c",{"b":1.0E23,"a":1}]"#.to_vec());
        assert_eq!(
            recs[0].partition,
            murmur2::partition_for(recs[0].key, 25) as i32
        );
        assert_eq!(recs[1].key, reverse.connect_key());
        assert_eq!(
            recs[1].value, None,
            "a reset of an unknown key: one tombstone"
        );
    }
}
