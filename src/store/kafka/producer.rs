//! The producer plumbing both writers share (the transactional one in `write`, the idempotent
//! one in `idempotent`): a record to produce, creating a producer, what a failed step means.
//! A leaf: it knows neither writer.

use rdkafka::ClientConfig;
use rdkafka::config::FromClientConfigAndContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::BaseRecord;

use super::client::Ctx;
use super::config::Settings;
use crate::{Error, Result};

/// One record to produce: a view into its batch's bytes (`write::Recs`).
#[derive(Clone, Copy)]
pub(crate) struct Rec<'a> {
    /// Index of the batch entry it belongs to; `None` for the writer's marker.
    pub entry: Option<usize>,
    pub partition: i32,
    pub key: &'a [u8],
    /// The offset JSON; `None` for a tombstone. Memory keeps these very bytes once the record is in,
    /// as reading the record back would.
    pub value: Option<&'a [u8]>,
    /// The record timestamp it is produced with (milliseconds since the epoch), the same for every
    /// record of a batch, and what the in-memory state notes for it.
    pub timestamp: i64,
}

/// The record `rec` of `topic`, as librdkafka takes it.
pub(crate) fn base_record<'a>(
    topic: &'a str,
    rec: Rec<'a>,
    headers: Option<&OwnedHeaders>,
) -> BaseRecord<'a, [u8], [u8], ()> {
    let mut record: BaseRecord<'_, [u8], [u8], ()> = BaseRecord::to(topic)
        .key(rec.key)
        .partition(rec.partition)
        .timestamp(rec.timestamp);
    if let Some(v) = rec.value {
        record = record.payload(v);
    }
    if let Some(h) = headers {
        record = record.headers(h.clone());
    }
    record
}

/// A producer of either kind with `config`, for writer client `id`.
pub(crate) fn create<P: FromClientConfigAndContext<Ctx>>(
    config: ClientConfig,
    settings: &Settings,
    id: &str,
) -> Result<P> {
    let ctx = Ctx::new(settings.secrets.clone(), format!("writer {id}"));
    config.create_with_context(ctx).map_err(|e| {
        Error::store(
            "kafka",
            format!(
                "cannot create the producer `{id}`: {}",
                settings.secrets.scrub(&e.to_string())
            ),
        )
    })
}

/// The codes that mean another producer with our `transactional.id` took over.
pub(crate) fn is_fence(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

/// What a failed transaction step means.
pub(crate) enum Failure {
    /// A newer producer took over: stop for good.
    Fenced(String),
    /// The producer is unusable, or the outcome of a commit is unknown: drop it; the next batch makes
    /// a new one (whose initialization settles the transaction) and re-reads the topic first.
    Lost(Error),
    /// The transaction was aborted (or never began); the producer can go on.
    Aborted(Error),
}
