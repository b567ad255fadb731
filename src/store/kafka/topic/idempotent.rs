//! The writer of [`WriteMode::Idempotent`](super::WriteMode): an idempotent `acks=all` producer
//! without transactions. A batch's offset records are produced and every one is acknowledged
//! before its marker is produced, so the marker (what `applied_seq` is read from) never names a
//! batch that is not wholly in the topic; a batch a crash cut short is replayed whole from the
//! commit buffer's log. The producer polls on a thread of its own and reports failed records only;
//! the writer waits for a batch with a flush, which returns once nothing is undelivered (every
//! failure's report handled), and its records leave at once whatever `linger.ms` is (see
//! `ffi::flush`).

use std::ffi::CString;
use std::time::Instant;

use rdkafka::bindings as rd;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{Producer, ThreadedProducer};

use crate::store::kafka::client::{Ctx, auth_error, timeout_error};
use crate::store::kafka::config::Settings;
use crate::store::kafka::ffi::{STEP, TopicHandle, flush};
use crate::store::kafka::producer::{Failure, Rec, create};
use crate::{Error, Result};

/// An idempotent producer of one writer.
pub(crate) struct IdemProducer {
    // Declared first: dropped before the producer it belongs to.
    topic: TopicHandle,
    producer: ThreadedProducer<Ctx>,
    id: String,
    topic_name: String,
}

impl IdemProducer {
    /// Creates the producer and learns the topic's leaders (its producer id comes with the first
    /// record).
    pub(crate) fn create(settings: &Settings, id: &str) -> Result<IdemProducer> {
        let producer: ThreadedProducer<Ctx> =
            create(settings.idempotent_producer_config(), settings, id)?;
        if let Err(e) = producer
            .client()
            .fetch_metadata(Some(&settings.topic), settings.timeout)
        {
            let ctx = producer.context();
            if let Some(reason) = ctx.auth_error() {
                return Err(auth_error(&settings.bootstrap, &reason));
            }
            tracing::debug!(client = id, error = %ctx.scrub(&e.to_string()), "metadata warm-up failed");
        }
        let name = CString::new(settings.topic.as_str()).map_err(|_| {
            Error::InvalidData(format!("topic name {:?} holds a NUL", settings.topic))
        })?;
        let Some(topic) = TopicHandle::new(producer.client(), &name) else {
            return Err(Error::store(
                "kafka",
                format!(
                    "cannot make a handle of topic `{}` for `{id}`",
                    settings.topic
                ),
            ));
        };
        Ok(IdemProducer {
            topic,
            producer,
            id: id.to_string(),
            topic_name: settings.topic.clone(),
        })
    }

    /// Enqueues one record, waiting (within `deadline`) while librdkafka's queue is full.
    pub(crate) fn send(&self, rec: Rec<'_>, deadline: Instant) -> std::result::Result<(), Failure> {
        loop {
            let code: RDKafkaErrorCode = self.produce(rec).into();
            match code {
                RDKafkaErrorCode::NoError => return Ok(()),
                RDKafkaErrorCode::QueueFull if Instant::now() < deadline => {
                    // Room comes as records are delivered: a full queue is sent at once, not
                    // after `linger.ms`.
                    let _ = flush(self.producer.client(), deadline.min(Instant::now() + STEP));
                }
                code => {
                    return Err(self.lost(&format!(
                        "produce to `{}` partition {}: {code}",
                        self.topic_name, rec.partition
                    )));
                }
            }
        }
    }

    /// One `rd_kafka_producev` of `rec` (librdkafka copies its bytes), with no delivery opaque.
    fn produce(&self, rec: Rec<'_>) -> rd::rd_kafka_resp_err_t {
        self.topic.produce(
            self.producer.client(),
            rec.partition,
            rec.key,
            rec.value,
            rec.timestamp,
        )
    }

    /// Waits until every record sent so far is acknowledged. A failed record (librdkafka retried it
    /// until `delivery.timeout.ms`) or no answer by `deadline` gives the producer up: the batch is
    /// written again, whole, by a new one.
    pub(crate) fn wait_acknowledged(
        &self,
        failures_before: u64,
        deadline: Instant,
        settings: &Settings,
    ) -> std::result::Result<(), Failure> {
        // Returns once no record is undelivered: acknowledged, or failed with its report handled.
        let all_done = flush(self.producer.client(), deadline);
        let ctx = self.producer.context();
        let got = ctx.deliveries.now();
        if got.failures > failures_before {
            let why = got.first_failure.unwrap_or_default();
            return Err(self.lost(&format!("a record was not acknowledged: {why}")));
        }
        if !all_done {
            return Err(Failure::Lost(timeout_error(
                ctx,
                format!(
                    "waiting for `{}`'s records to be acknowledged ({} outstanding)",
                    self.id,
                    self.producer.in_flight_count()
                ),
                settings.timeout,
            )));
        }
        Ok(())
    }

    /// Failures reported so far (a batch fails if this grows while it waits).
    pub(crate) fn failures(&self) -> u64 {
        self.producer.context().deliveries.now().failures
    }

    fn lost(&self, what: &str) -> Failure {
        let text = match self.producer.client().fatal_error() {
            Some((_, reason)) => format!(
                "{what}; producer `{}` failed for good: {}",
                self.id,
                self.producer.context().scrub(&reason)
            ),
            None => what.to_string(),
        };
        Failure::Lost(Error::store("kafka", text))
    }
}
