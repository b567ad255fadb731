//! A handle of the offsets topic for the idempotent writer's `rd_kafka_producev`: rdkafka's
//! `send` makes a C string of the topic's name and looks the topic up for every record (about a
//! tenth of the writing thread's time at 10,000 offsets a batch).

use std::ffi::{CStr, c_void};

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};

/// librdkafka's handle of one topic of one client, made once. Declare it before the producer
/// that made it, so that it is dropped first, and produce only through that producer.
pub(crate) struct TopicHandle(*mut rd::rd_kafka_topic_t);

// SAFETY: librdkafka's topic handles may be used from any thread.
unsafe impl Send for TopicHandle {}
// SAFETY: as for `Send`: every librdkafka call on a topic handle is thread-safe.
unsafe impl Sync for TopicHandle {}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: a handle from `rd_kafka_topic_new`, released once, while its client lives.
        unsafe { rd::rd_kafka_topic_destroy(self.0) }
    }
}

impl TopicHandle {
    /// A handle of topic `name` on `client`; `None` when librdkafka cannot make one.
    pub(crate) fn new<C: ClientContext>(client: &Client<C>, name: &CStr) -> Option<TopicHandle> {
        // SAFETY: a live client handle and a NUL-terminated name; a null conf takes the defaults.
        let handle = unsafe {
            rd::rd_kafka_topic_new(client.native_ptr(), name.as_ptr(), std::ptr::null_mut())
        };
        (!handle.is_null()).then_some(TopicHandle(handle))
    }

    /// One `rd_kafka_producev` of a record to `partition` through `client` (the client that made
    /// this handle), with no delivery opaque; librdkafka copies the bytes before it returns.
    pub(crate) fn produce<C: ClientContext>(
        &self,
        client: &Client<C>,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: i64,
    ) -> rd::rd_kafka_resp_err_t {
        let (value, value_len) = value.map_or((std::ptr::null_mut(), 0), |v| {
            (v.as_ptr() as *mut c_void, v.len())
        });
        // SAFETY: live client and topic handles; every pointer is valid for its length during the
        // call, and RD_KAFKA_MSG_F_COPY makes librdkafka copy them before it returns.
        unsafe {
            rd::rd_kafka_producev(
                client.native_ptr(),
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_RKT,
                self.0,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
                partition,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
                rd::RD_KAFKA_MSG_F_COPY,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE,
                value,
                value_len,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY,
                key.as_ptr() as *mut c_void,
                key.len(),
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_TIMESTAMP,
                timestamp,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_END,
            )
        }
    }
}
