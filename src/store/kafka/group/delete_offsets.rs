//! Deleting some of a consumer group's committed offsets (Kafka's `OffsetDelete`), which rdkafka's
//! safe API does not expose: librdkafka's admin `DeleteConsumerGroupOffsets`, called on the admin
//! client's handle. This is what Connect's `PATCH` does for an `"offset": null`.
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::RDKafkaErrorCode;

use super::entry::TopicPartition;

/// Why a deletion failed: librdkafka's code (to tell "the group has members" from the rest) and text.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: RDKafkaErrorCode,
    pub text: String,
}

/// Deletes `group`'s offsets of `partitions`. `Ok` holds the partitions the broker refused, each
/// with its error code (`GroupSubscribedToTopic` while a member consumes the topic).
pub(crate) fn delete_offsets<C: ClientContext>(
    client: &Client<C>,
    group: &str,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<Vec<(TopicPartition, RDKafkaErrorCode)>, Failure> {
    let fail = |code, text: String| Failure { code, text };
    let name = CString::new(group).map_err(|_| {
        fail(
            RDKafkaErrorCode::InvalidArgument,
            "the group id holds a NUL byte".into(),
        )
    })?;
    let mut list = TopicPartitionList::new();
    for tp in partitions {
        list.add_partition(&tp.topic, tp.partition);
    }
    let rk = client.native_ptr();
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `rk` is a live handle borrowed from `client` for the whole call; `name` and `list`
    // outlive the request object, which librdkafka copies when the request is enqueued; every
    // object made here is destroyed before returning, and nothing borrowed from the event outlives it.
    unsafe {
        let request = rd::rd_kafka_DeleteConsumerGroupOffsets_new(name.as_ptr(), list.ptr());
        let options = rd::rd_kafka_AdminOptions_new(
            rk,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DELETECONSUMERGROUPOFFSETS,
        );
        let mut errstr = [0 as std::ffi::c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options,
            ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        let queue = rd::rd_kafka_queue_new(rk);
        let mut requests = [request];
        rd::rd_kafka_DeleteConsumerGroupOffsets(rk, requests.as_mut_ptr(), 1, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, ms.saturating_add(1000));
        let answer = read_answer(event);
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_AdminOptions_destroy(options);
        rd::rd_kafka_DeleteConsumerGroupOffsets_destroy(request);
        answer
    }
}

/// The outcome in a `DeleteConsumerGroupOffsets` result event.
///
/// # Safety
/// `event` is null or a live event returned by `rd_kafka_queue_poll`.
unsafe fn read_answer(
    event: *mut rd::rd_kafka_event_t,
) -> Result<Vec<(TopicPartition, RDKafkaErrorCode)>, Failure> {
    if event.is_null() {
        return Err(Failure {
            code: RDKafkaErrorCode::RequestTimedOut,
            text: "DeleteConsumerGroupOffsets got no answer in time".into(),
        });
    }
    // SAFETY: `event` is live (checked above); everything read from it is copied out before the
    // caller destroys it, and librdkafka's strings are NUL-terminated.
    unsafe {
        let text = |p: *const std::ffi::c_char, default: &str| {
            if p.is_null() {
                default.to_string()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let code = rd::rd_kafka_event_error(event);
        if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(Failure {
                code: code.into(),
                text: text(
                    rd::rd_kafka_event_error_string(event),
                    "DeleteConsumerGroupOffsets failed",
                ),
            });
        }
        let result = rd::rd_kafka_event_DeleteConsumerGroupOffsets_result(event);
        if result.is_null() {
            return Err(Failure {
                code: RDKafkaErrorCode::Fail,
                text: "DeleteConsumerGroupOffsets answered with another event".into(),
            });
        }
        let mut n = 0usize;
        let groups = rd::rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, &mut n);
        let mut refused = Vec::new();
        for i in 0..n {
            let g = *groups.add(i);
            let error = rd::rd_kafka_group_result_error(g);
            if !error.is_null() {
                return Err(Failure {
                    code: rd::rd_kafka_error_code(error).into(),
                    text: text(rd::rd_kafka_error_string(error), "an error"),
                });
            }
            let list = rd::rd_kafka_group_result_partitions(g);
            if list.is_null() {
                continue;
            }
            for j in 0..usize::try_from((*list).cnt).unwrap_or(0) {
                let e = &*(*list).elems.add(j);
                if e.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    let tp = TopicPartition {
                        topic: text(e.topic, ""),
                        partition: e.partition,
                    };
                    refused.push((tp, e.err.into()));
                }
            }
        }
        Ok(refused)
    }
}
