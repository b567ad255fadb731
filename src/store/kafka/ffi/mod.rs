//! Every librdkafka call this crate makes that rdkafka's safe API lacks: the only unsafe code of
//! `store::kafka`, behind safe functions.
//!
//! * [`flush()`]: `rd_kafka_flush` with a deadline, without rdkafka's 100 ms polling steps (both
//!   writers wait for their records with it).
//! * [`topic_id()`]: the topic id from the admin `DescribeTopics` (warm starts tell a re-created
//!   topic from the one a snapshot was taken of).
//! * [`TopicHandle`]: a topic handle made once for the idempotent writer's `rd_kafka_producev`.
//! * [`delete_offsets`]: `DeleteConsumerGroupOffsets` (Kafka's `OffsetDelete`) for the
//!   consumer-group store's resets.
//!
//! Safety rules here: every `unsafe` block has a `// SAFETY:` line saying why it holds; an
//! `unsafe fn` says its caller's promise under `# Safety`, and its body's blocks are checked
//! anyway (`unsafe_op_in_unsafe_fn` is denied); client handles are borrowed from a live rdkafka
//! client for the whole call; every object made here (options, queues, events, requests) is
//! destroyed before the function returns, and what is read from an event is copied out first;
//! a topic handle lives no longer than its client (its owner declares it first). The tests
//! against the real broker exercise each call: `cli/tests/tool_kafka/kafka.rs` (both write
//! modes), `tests/kafka/kafka_snapshot.rs` (topic ids) and `cli/tests/tool_kafka/sink_offsets.rs`
//! (group offsets deleted).
#![deny(unsafe_op_in_unsafe_fn)]

mod flush;
mod group_offsets;
mod topic_handle;
mod topic_id;

pub(crate) use flush::{STEP, flush};
pub(crate) use group_offsets::delete_offsets;
pub(crate) use topic_handle::TopicHandle;
pub(crate) use topic_id::topic_id;
