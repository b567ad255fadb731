//! The writer of [`WriteMode::Idempotent`](super::WriteMode): an idempotent `acks=all` producer
//! without transactions. A batch's offset records are produced and every one is acknowledged
//! before its marker is produced, so the marker (what `applied_seq` is read from) never names a
//! batch that is not wholly in the topic; a batch a crash cut short is replayed whole from the
//! commit buffer's log. The producer polls on a thread of its own, and the writer waits for a
//! batch with a flush, so its records leave at once whatever `linger.ms` is (see
//! [`flush`](super::flush)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{Producer, ThreadedProducer};

use super::client::{Ctx, auth_error, timeout_error};
use super::config::Settings;
use super::flush::{STEP, flush};
use super::write::{Failure, Rec, base_record, create};
use crate::{Error, Result};

/// An idempotent producer of one writer.
pub(crate) struct IdemProducer {
    producer: ThreadedProducer<Ctx>,
    id: String,
    /// Records sent so far: each gets one delivery report.
    sent: AtomicU64,
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
        Ok(IdemProducer {
            producer,
            id: id.to_string(),
            sent: AtomicU64::new(0),
        })
    }

    /// Enqueues one record, waiting (within `deadline`) while librdkafka's queue is full.
    pub(crate) fn send(
        &self,
        topic: &str,
        rec: Rec<'_>,
        headers: Option<&OwnedHeaders>,
        deadline: Instant,
    ) -> std::result::Result<(), Failure> {
        let mut record = base_record(topic, rec, headers);
        loop {
            match self.producer.send(record) {
                Ok(()) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if Instant::now() < deadline =>
                {
                    // Room comes as records are delivered: a full queue is sent at once, not
                    // after `linger.ms` (the polling thread serves the reports).
                    let _ = flush(self.producer.client(), deadline.min(Instant::now() + STEP));
                    record = r;
                }
                Err((e, _)) => {
                    return Err(self.lost(&format!(
                        "produce to `{topic}` partition {}: {}",
                        rec.partition,
                        self.producer.context().scrub(&e.to_string())
                    )));
                }
            }
        }
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
        // Sends what lingers now (see `flush`); the count below says whether all of it landed.
        let _ = flush(self.producer.client(), deadline);
        let ctx = self.producer.context();
        let got = ctx
            .deliveries
            .wait_for(self.sent.load(Ordering::Relaxed), deadline);
        if got.failures > failures_before {
            let why = got.first_failure.unwrap_or_default();
            return Err(self.lost(&format!("a record was not acknowledged: {why}")));
        }
        if got.reports < self.sent.load(Ordering::Relaxed) {
            return Err(Failure::Lost(timeout_error(
                ctx,
                format!(
                    "waiting for `{}`'s records to be acknowledged ({} of {} outstanding)",
                    self.id,
                    self.sent.load(Ordering::Relaxed) - got.reports,
                    self.sent.load(Ordering::Relaxed)
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
