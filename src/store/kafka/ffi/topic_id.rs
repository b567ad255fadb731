//! The topic id (Kafka's UUID for one incarnation of a topic name), which rdkafka's safe API does
//! not expose: librdkafka's admin `DescribeTopics`, called on the reader's handle. The warm start
//! compares it with the snapshot's so that a topic deleted and re-created under the same name is
//! never mistaken for the one the snapshot was taken of.

use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};

/// The id of `topic` (16 bytes, most significant half first), or why it could not be had.
pub(crate) fn topic_id<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    timeout: Duration,
) -> std::result::Result<[u8; 16], String> {
    let name = CString::new(topic).map_err(|_| "the topic name holds a NUL byte".to_string())?;
    let rk = client.native_ptr();
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `rk` is a live handle borrowed from `client` for this whole call; every object made
    // here is destroyed before returning, and nothing borrowed from the event outlives it.
    unsafe {
        let mut names = [name.as_ptr()];
        let topics = rd::rd_kafka_TopicCollection_of_topic_names(names.as_mut_ptr(), 1);
        let options = rd::rd_kafka_AdminOptions_new(
            rk,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
        );
        let mut errstr = [0 as std::ffi::c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options,
            ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        let queue = rd::rd_kafka_queue_new(rk);
        rd::rd_kafka_DescribeTopics(rk, topics, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, ms.saturating_add(1000));
        let answer = read_answer(event, topic);
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_AdminOptions_destroy(options);
        rd::rd_kafka_TopicCollection_destroy(topics);
        answer
    }
}

/// The topic id in a `DescribeTopics` result event.
///
/// # Safety
/// `event` is null or a live event returned by `rd_kafka_queue_poll`.
unsafe fn read_answer(
    event: *mut rd::rd_kafka_event_t,
    topic: &str,
) -> std::result::Result<[u8; 16], String> {
    if event.is_null() {
        return Err("DescribeTopics got no answer in time".into());
    }
    // SAFETY: `event` is live (checked above) and everything read from it is copied out before
    // the caller destroys it.
    unsafe {
        if rd::rd_kafka_event_error(event) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            let why = rd::rd_kafka_event_error_string(event);
            return Err(if why.is_null() {
                "DescribeTopics failed".into()
            } else {
                format!("DescribeTopics: {}", CStr::from_ptr(why).to_string_lossy())
            });
        }
        let result = rd::rd_kafka_event_DescribeTopics_result(event);
        if result.is_null() {
            return Err("DescribeTopics answered with another event".into());
        }
        let mut n = 0usize;
        let descriptions = rd::rd_kafka_DescribeTopics_result_topics(result, &mut n);
        for i in 0..n {
            let d = *descriptions.add(i);
            let name = rd::rd_kafka_TopicDescription_name(d);
            if name.is_null() || CStr::from_ptr(name).to_bytes() != topic.as_bytes() {
                continue;
            }
            let error = rd::rd_kafka_TopicDescription_error(d);
            if !error.is_null()
                && rd::rd_kafka_error_code(error)
                    != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            {
                let why = rd::rd_kafka_error_string(error);
                return Err(format!(
                    "DescribeTopics `{topic}`: {}",
                    if why.is_null() {
                        "an error".into()
                    } else {
                        CStr::from_ptr(why).to_string_lossy()
                    }
                ));
            }
            let id = rd::rd_kafka_TopicDescription_topic_id(d);
            if id.is_null() {
                return Err(format!("DescribeTopics `{topic}`: no topic id"));
            }
            let hi = rd::rd_kafka_Uuid_most_significant_bits(id);
            let lo = rd::rd_kafka_Uuid_least_significant_bits(id);
            if hi == 0 && lo == 0 {
                // The zero id is Kafka's "none": a broker that keeps no topic ids.
                return Err(format!("DescribeTopics `{topic}`: the zero topic id"));
            }
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&hi.to_be_bytes());
            out[8..].copy_from_slice(&lo.to_be_bytes());
            return Ok(out);
        }
        Err(format!("DescribeTopics did not describe `{topic}`"))
    }
}
