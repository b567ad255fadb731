//! Kafka Connect offsets topic backend (being written).
