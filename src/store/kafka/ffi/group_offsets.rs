//! librdkafka's `DeleteConsumerGroupOffsets` (Kafka's `OffsetDelete`: what Connect's `PATCH` does
//! for an `"offset": null`), which rdkafka's safe API does not expose. A group's committed offsets
//! are read through a consumer of the group instead (`KafkaGroupStore::committed_in`): librdkafka's
//! `ListConsumerGroupOffsets` crashed the process when a coordinator answered `NOT_COORDINATOR`
//! (librdkafka issue #5040).

use std::ffi::{CStr, CString, c_char};
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::RDKafkaErrorCode;

/// Why a call failed as a whole: librdkafka's code (to tell "the group has members" or "no such
/// group" from the rest) and text.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: RDKafkaErrorCode,
    pub text: String,
}

/// One partition of a group's answer: its topic, partition, offset (negative: none) and error
/// code.
type Row = (String, i32, i64, RDKafkaErrorCode);

/// Deletes `group`'s offsets of `partitions` (topic and partition number). `Ok` holds the
/// partitions the broker refused, each with its error code (`GroupSubscribedToTopic` while a
/// member consumes the topic).
pub(crate) fn delete_offsets<'a, C: ClientContext>(
    client: &Client<C>,
    group: &str,
    partitions: impl IntoIterator<Item = (&'a str, i32)>,
    timeout: Duration,
) -> Result<Vec<(String, i32, RDKafkaErrorCode)>, Failure> {
    let name = c_group(group)?;
    let list = tpl(partitions);
    let rk = client.native_ptr();
    // SAFETY: `name` and `list` outlive the request, which librdkafka copies when it is sent.
    let request = unsafe { rd::rd_kafka_DeleteConsumerGroupOffsets_new(name.as_ptr(), list.ptr()) };
    let mut requests = [request];
    let send = |options: *mut rd::rd_kafka_AdminOptions_t, queue: *mut rd::rd_kafka_queue_t| {
        // SAFETY: `rk` is borrowed from `client` for the whole call; one request in the array.
        unsafe {
            rd::rd_kafka_DeleteConsumerGroupOffsets(rk, requests.as_mut_ptr(), 1, options, queue)
        }
    };
    let read = |event: *mut rd::rd_kafka_event_t| {
        // SAFETY: `event` is the live event `call` polled; everything is copied out of it.
        unsafe {
            let result = rd::rd_kafka_event_DeleteConsumerGroupOffsets_result(event);
            if result.is_null() {
                return Err(other_event("DeleteConsumerGroupOffsets"));
            }
            let mut n = 0usize;
            let groups = rd::rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, &mut n);
            group_rows(groups, n)
        }
    };
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DELETECONSUMERGROUPOFFSETS;
    // SAFETY: `rk` is a live handle borrowed from `client` for the whole call.
    let rows = unsafe { call(rk, op, millis(timeout), send, read) };
    // SAFETY: made above, used no more.
    unsafe { rd::rd_kafka_DeleteConsumerGroupOffsets_destroy(request) };
    let rows = rows?;
    Ok(rows
        .into_iter()
        .filter(|(_, _, _, code)| *code != RDKafkaErrorCode::NoError)
        .map(|(topic, partition, _, code)| (topic, partition, code))
        .collect())
}

fn c_group(group: &str) -> Result<CString, Failure> {
    CString::new(group).map_err(|_| Failure {
        code: RDKafkaErrorCode::InvalidArgument,
        text: "the group id holds a NUL byte".into(),
    })
}

fn tpl<'a>(partitions: impl IntoIterator<Item = (&'a str, i32)>) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for (topic, partition) in partitions {
        list.add_partition(topic, partition);
    }
    list
}

fn millis(timeout: Duration) -> i32 {
    timeout.as_millis().clamp(1, i32::MAX as u128) as i32
}

fn other_event(op: &str) -> Failure {
    Failure {
        code: RDKafkaErrorCode::Fail,
        text: format!("{op} answered with another event"),
    }
}

/// Runs one admin request: options with `ms` as the request timeout, a queue, `send(options,
/// queue)`, one event polled (up to a second past the timeout), `read(event)`; everything made
/// here is destroyed before returning.
///
/// # Safety
/// `rk` is a live client handle for the whole call.
unsafe fn call<T>(
    rk: *mut rd::rd_kafka_t,
    op: rd::rd_kafka_admin_op_t,
    ms: i32,
    send: impl FnOnce(*mut rd::rd_kafka_AdminOptions_t, *mut rd::rd_kafka_queue_t),
    read: impl FnOnce(*mut rd::rd_kafka_event_t) -> Result<T, Failure>,
) -> Result<T, Failure> {
    // SAFETY: `rk` is live (the caller's promise); the options, queue and event are made and
    // destroyed here, and `read` copies out what it needs before the event is destroyed.
    unsafe {
        let options = rd::rd_kafka_AdminOptions_new(rk, op);
        let mut errstr = [0 as c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options,
            ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        let queue = rd::rd_kafka_queue_new(rk);
        send(options, queue);
        let event = rd::rd_kafka_queue_poll(queue, ms.saturating_add(1000));
        let answer = if event.is_null() {
            Err(Failure {
                code: RDKafkaErrorCode::RequestTimedOut,
                text: "no answer in time".into(),
            })
        } else {
            let code = rd::rd_kafka_event_error(event);
            if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                Err(Failure {
                    code: code.into(),
                    text: text(rd::rd_kafka_event_error_string(event), "the request failed"),
                })
            } else {
                read(event)
            }
        };
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_AdminOptions_destroy(options);
        answer
    }
}

/// A C string librdkafka gave (or `default` for none), copied.
///
/// # Safety
/// `p` is null or a NUL-terminated string alive for this call.
unsafe fn text(p: *const c_char, default: &str) -> String {
    if p.is_null() {
        default.to_string()
    } else {
        // SAFETY: non-null and NUL-terminated (the caller's promise).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The partitions of every group result, or the first group's error.
///
/// # Safety
/// `groups` points at `n` live group results of an event not yet destroyed.
unsafe fn group_rows(
    groups: *mut *const rd::rd_kafka_group_result_t,
    n: usize,
) -> Result<Vec<Row>, Failure> {
    let mut rows = Vec::new();
    // SAFETY: `n` live results (the caller's promise); each list and element is read in place
    // and copied out.
    unsafe {
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
                rows.push((text(e.topic, ""), e.partition, e.offset, e.err.into()));
            }
        }
    }
    Ok(rows)
}
