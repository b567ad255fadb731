//! Kafka Connect's config topic (`config.storage.topic`), read for what a worker's herder checks
//! before it modifies a connector's offsets: the connector exists (it has a `connector-<name>`
//! config) and it is stopped (its latest `target-state-<name>` says `STOPPED` and its latest
//! `commit-<name>` has no tasks). Records as `KafkaConfigBackingStore` writes them: string keys,
//! schemaless JSON values, `{"state":"PAUSED","state.v2":"STOPPED"}` for a stopped connector
//! (`state` alone from workers before 3.5), `{"tasks":N}` for a commit of task configs, and
//! tombstones for a deleted connector.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::Offset as RdOffset;
use rdkafka::{ClientConfig, TopicPartitionList};

use crate::model::{FieldMap, Value};
use crate::store::kafka::KafkaStoreBuilder;
use crate::store::url::StoreUrl;
use crate::{Error, Result};

/// A connector's state as the config topic says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorState {
    /// `STARTED` (the default), `PAUSED` or `STOPPED`.
    pub target_state: String,
    /// Tasks in the connector's latest commit of task configs (0 without one).
    pub tasks: i64,
    /// Its `connector.class`, when its config names one.
    pub class: Option<String>,
    /// Its `consumer.override.group.id`, when its config sets one: the consumer group a sink's
    /// tasks use instead of Connect's `connect-<name>`.
    pub group_override: Option<String>,
}

impl ConnectorState {
    /// Whether it is a sink connector, whose offsets are its consumer group's: by its class's
    /// name (`…SinkConnector`, as sinks are named, Connect's own, Confluent's, Debezium's, Camel's).
    pub fn is_sink(&self) -> bool {
        self.class
            .as_deref()
            .is_some_and(|c| c.ends_with("SinkConnector"))
    }

    /// Whether Connect lets its offsets be modified.
    pub fn stopped(&self) -> bool {
        self.target_state == "STOPPED" && self.tasks == 0
    }
}

/// The connectors a Connect cluster's config topic holds.
#[derive(Debug, Clone, Default)]
pub struct ConnectConfigs {
    configured: BTreeSet<String>,
    classes: BTreeMap<String, String>,
    group_overrides: BTreeMap<String, String>,
    target_states: BTreeMap<String, String>,
    tasks: BTreeMap<String, i64>,
}

impl ConnectConfigs {
    /// Reads the topic a `kafka://host:port/<config topic>` URL names, to its end (the URL's
    /// client settings, SASL included, apply).
    pub fn read(url: &str) -> Result<ConnectConfigs> {
        let url = StoreUrl::parse(url)?;
        if url.scheme != "kafka" {
            return Err(url.error("Connect's config topic is read from kafka://host:port/<topic>"));
        }
        let settings = KafkaStoreBuilder::from_url(&url)?.settings()?;
        let mut config: ClientConfig = settings.consumer_config();
        config.set("isolation.level", "read_committed");
        let consumer: BaseConsumer = config.create().map_err(|e| {
            Error::store_caused("kafka", format!("client for {}", settings.bootstrap), e)
        })?;
        let topic = settings.topic.as_str();
        let read = |what: &str, e: rdkafka::error::KafkaError| {
            Error::store(
                "kafka",
                format!(
                    "{what} of Connect's config topic `{topic}` on {}: {e}",
                    settings.bootstrap
                ),
            )
        };
        let meta = consumer
            .fetch_metadata(Some(topic), settings.timeout)
            .map_err(|e| read("metadata", e))?;
        let partitions: Vec<i32> = meta
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if partitions.is_empty() {
            return Err(Error::Settings(format!(
                "Connect's config topic `{topic}` does not exist on {} (a worker's `config.storage.topic`)",
                settings.bootstrap
            )));
        }
        let mut ends = BTreeMap::new();
        let mut tpl = TopicPartitionList::new();
        for &p in &partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, settings.timeout)
                .map_err(|e| read("watermarks", e))?;
            if high > low {
                ends.insert(p, high);
            }
            tpl.add_partition_offset(topic, p, RdOffset::Beginning)
                .map_err(|e| read("assignment", e))?;
        }
        consumer.assign(&tpl).map_err(|e| read("assignment", e))?;
        let mut configs = ConnectConfigs::default();
        let deadline = Instant::now() + settings.timeout;
        while !ends.is_empty() {
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    op: format!("read Connect's config topic `{topic}` to its end"),
                    after: settings.timeout,
                });
            }
            if let Some(m) = consumer.poll(Duration::from_millis(50)) {
                let m = m.map_err(|e| read("read", e))?;
                if let Some(key) = m.key().and_then(|k| std::str::from_utf8(k).ok()) {
                    configs.apply(key, m.payload());
                }
            }
            // Transaction markers are never delivered, but they move the position.
            let positions = consumer.position().map_err(|e| read("position", e))?;
            for e in positions.elements() {
                if let RdOffset::Offset(at) = e.offset()
                    && ends.get(&e.partition()).is_some_and(|end| at >= *end)
                {
                    ends.remove(&e.partition());
                }
            }
        }
        Ok(configs)
    }

    /// One record, in the order the topic holds them.
    fn apply(&mut self, key: &str, value: Option<&[u8]>) {
        let map = || value.and_then(|v| FieldMap::from_json(std::str::from_utf8(v).ok()?).ok());
        if let Some(name) = key.strip_prefix("connector-") {
            if let Some(v) = value {
                self.configured.insert(name.to_string());
                match property(v, "connector.class") {
                    Some(class) => self.classes.insert(name.to_string(), class),
                    None => self.classes.remove(name),
                };
                match property(v, "consumer.override.group.id") {
                    Some(group) => self.group_overrides.insert(name.to_string(), group),
                    None => self.group_overrides.remove(name),
                };
            } else {
                self.configured.remove(name);
                self.classes.remove(name);
                self.group_overrides.remove(name);
                self.tasks.remove(name);
            }
        } else if let Some(name) = key.strip_prefix("target-state-") {
            let state = map().and_then(|m| {
                ["state.v2", "state"].iter().find_map(|f| match m.get(f) {
                    Some(Value::String(s))
                        if matches!(s.as_str(), "STARTED" | "PAUSED" | "STOPPED") =>
                    {
                        Some(s.clone())
                    }
                    _ => None,
                })
            });
            match (value, state) {
                (None, _) => {
                    self.target_states.remove(name);
                }
                (Some(_), Some(s)) => {
                    self.target_states.insert(name.to_string(), s);
                }
                // A value Connect would not take either (it logs and ignores it).
                (Some(_), None) => {}
            }
        } else if let Some(name) = key.strip_prefix("commit-")
            // Not only for a connector configured before it: compaction may leave a connector's
            // config after its task commit.
            && let Some(Value::Int(n)) = map().and_then(|m| m.get("tasks").cloned())
        {
            self.tasks.insert(name.to_string(), n);
        }
    }

    /// The configured connectors, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.configured.iter().map(String::as_str)
    }

    /// `name`'s state; `None` when it has no config.
    pub fn connector(&self, name: &str) -> Option<ConnectorState> {
        self.configured.contains(name).then(|| ConnectorState {
            target_state: self
                .target_states
                .get(name)
                .cloned()
                .unwrap_or_else(|| "STARTED".into()),
            tasks: self.tasks.get(name).copied().unwrap_or(0),
            class: self.classes.get(name).cloned(),
            group_override: self.group_overrides.get(name).cloned(),
        })
    }
}

/// A string property of a connector config record (`{"properties":{...}}`).
fn property(value: &[u8], name: &str) -> Option<String> {
    use crate::codec::json::{self, Json};
    let member = |j: Json, name: &str| match j {
        Json::Object(m) => m.into_iter().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    };
    match member(member(json::parse(value).ok()?, "properties")?, name)? {
        Json::String(c) => Some(c),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(records: &[(&str, Option<&str>)]) -> ConnectConfigs {
        let mut c = ConnectConfigs::default();
        for (k, v) in records {
            c.apply(k, v.map(str::as_bytes));
        }
        c
    }

    #[test]
    fn a_sink_is_told_by_its_class() {
        let c = configs(&[
            (
                "connector-s",
                Some(
                    r#"{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSinkConnector"}}"#,
                ),
            ),
            (
                "connector-m",
                Some(
                    r#"{"properties":{"connector.class":"org.apache.kafka.connect.mirror.MirrorSourceConnector","topics":".*"}}"#,
                ),
            ),
            ("connector-n", Some(r#"{"properties":{}}"#)),
        ]);
        assert!(c.connector("s").unwrap().is_sink());
        assert!(!c.connector("m").unwrap().is_sink());
        assert!(!c.connector("n").unwrap().is_sink());
    }

    #[test]
    fn a_connector_is_stopped_with_the_state_and_no_tasks() {
        let c = configs(&[
            ("connector-a", Some(r#"{"properties":{"x":"1"}}"#)),
            ("task-a-0", Some(r#"{"properties":{}}"#)),
            ("commit-a", Some(r#"{"tasks":1}"#)),
        ]);
        assert_eq!(c.connector("a").unwrap().target_state, "STARTED");
        assert!(!c.connector("a").unwrap().stopped());
        assert_eq!(c.connector("b"), None);
        let c = configs(&[
            ("connector-a", Some(r#"{"properties":{"x":"1"}}"#)),
            ("commit-a", Some(r#"{"tasks":1}"#)),
            ("commit-a", Some(r#"{"tasks":0}"#)),
            (
                "target-state-a",
                Some(r#"{"state":"PAUSED","state.v2":"STOPPED"}"#),
            ),
        ]);
        assert!(c.connector("a").unwrap().stopped());
        // Paused is not stopped; an older worker's `state` alone counts.
        let c = configs(&[
            ("connector-a", Some("{}")),
            ("target-state-a", Some(r#"{"state":"PAUSED"}"#)),
        ]);
        assert_eq!(c.connector("a").unwrap().target_state, "PAUSED");
        assert!(!c.connector("a").unwrap().stopped());
        // Deleted: unknown again.
        let c = configs(&[
            ("connector-a", Some("{}")),
            ("target-state-a", Some(r#"{"state.v2":"STOPPED"}"#)),
            ("connector-a", None),
            ("target-state-a", None),
        ]);
        assert_eq!(c.connector("a"), None);
        assert_eq!(c.names().count(), 0);
    }
}
