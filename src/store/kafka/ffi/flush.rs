//! Sending what a producer holds at once and waiting for it, without rdkafka's 100 ms steps.
//!
//! While `rd_kafka_flush` runs, librdkafka takes `linger.ms` as elapsed, so a batch's records go
//! out the moment its writer waits for them, and while it sends them they gather in full requests
//! instead of waking the broker thread again and again (as `linger.ms=0` does). So the writers keep
//! librdkafka's linger and flush. rdkafka's `Producer::flush` calls it with a zero timeout and
//! then polls in steps of up to 100 ms, and the polling thread of a `ThreadedProducer` may take
//! the report it waits for: a 100 ms floor. rdkafka asks for delivery reports as events, so
//! librdkafka's flush waits on its count of undelivered messages instead of polling, and returns
//! once every report was handled.

use std::time::{Duration, Instant};

use rdkafka::client::{Client, ClientContext};

/// How long one flush waits where the caller must do something else in between (serve a failed
/// record's report, retry a record the full queue refused).
pub(crate) const STEP: Duration = Duration::from_millis(5);

/// Flushes `client`'s producer until nothing is undelivered or `deadline` passes; true if nothing is.
#[must_use = "false: records are still undelivered"]
pub(crate) fn flush<C: ClientContext>(client: &Client<C>, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `client` is a live producer handle (the borrow keeps it so for the call), and
    // `rd_kafka_flush` may be called from any thread, concurrently with produce and poll calls.
    let err = unsafe { rdkafka::bindings::rd_kafka_flush(client.native_ptr(), ms) };
    err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
}
