//! The offsets topic: reaching the brokers within the timeout, creating the topic compacted when it is
//! missing, and refusing one whose `cleanup.policy` is not exactly `compact`, with Kafka Connect's
//! reason (`TopicAdmin.verifyTopicCleanupPolicyOnlyCompact`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

use crate::store::kafka::client::{
    Ctx, auth_error, block_on, drop_in_background, kafka_error, timeout_error,
};
use crate::store::kafka::config::Settings;
use crate::{Error, Result};

/// What the brokers said about the topic.
enum Lookup {
    Missing,
    Partitions(i32),
}

/// What the store needs to know of an existing, compacted offsets topic.
pub(crate) struct TopicInfo {
    pub partitions: i32,
    /// How long the topic keeps tombstones (`delete.retention.ms`), when the brokers said.
    pub delete_retention_ms: Option<i64>,
    /// The largest record batch the topic takes (`max.message.bytes`), when the brokers said.
    pub max_message_bytes: Option<usize>,
}

/// Makes sure the offsets topic exists and is compacted; returns its partitions and tombstone
/// retention.
pub(crate) fn ensure_topic(settings: &Settings, reader: &BaseConsumer<Ctx>) -> Result<TopicInfo> {
    let deadline = Instant::now() + settings.timeout;
    let admin = Admin(Some(admin(settings)?));
    let partitions = match lookup(settings, reader, deadline)? {
        Lookup::Partitions(n) => n,
        Lookup::Missing if settings.must_exist => {
            return Err(Error::NoStore(format!(
                "kafka store: topic `{}` does not exist on {} (it is not created here: check the \
                 name)",
                settings.topic, settings.bootstrap
            )));
        }
        Lookup::Missing => {
            create(settings, admin.get(), deadline)?;
            // The new topic reaches every broker's metadata cache a moment later.
            loop {
                match lookup(settings, reader, deadline)? {
                    Lookup::Partitions(n) => break n,
                    Lookup::Missing => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
    };
    let Configs {
        delete_retention_ms,
        max_message_bytes,
    } = check_policy(settings, admin.get(), deadline)?;
    Ok(TopicInfo {
        partitions,
        delete_retention_ms,
        max_message_bytes,
    })
}

/// The admin client, dropped on a helper thread (see [`drop_in_background`]).
struct Admin(Option<AdminClient<Ctx>>);

impl Admin {
    fn get(&self) -> &AdminClient<Ctx> {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        if let Some(admin) = self.0.take() {
            drop_in_background("kafka-admin-drop", admin);
        }
    }
}

/// Asks the brokers for the topic's metadata until they answer or the deadline passes. Fails at once
/// when the brokers refuse our credentials.
fn lookup(settings: &Settings, reader: &BaseConsumer<Ctx>, deadline: Instant) -> Result<Lookup> {
    let ctx = reader.context();
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(timeout_error(
                ctx,
                format!(
                    "reaching the Kafka brokers {} for topic `{}`",
                    settings.bootstrap, settings.topic
                ),
                settings.timeout,
            ));
        }
        let slice = (deadline - now).min(Duration::from_secs(1));
        let result = reader.fetch_metadata(Some(&settings.topic), slice);
        // Errors (connection refused, authentication failed) arrive as events on the reader's queue.
        for _ in 0..64 {
            match reader.poll(Duration::ZERO) {
                Some(Err(e)) => ctx.note_error(&e),
                Some(Ok(_)) => {}
                None => break,
            }
        }
        if let Some(reason) = ctx.auth_error() {
            return Err(auth_error(&settings.bootstrap, &reason));
        }
        match result {
            Ok(md) => {
                let Some(t) = md.topics().iter().find(|t| t.name() == settings.topic) else {
                    return Ok(Lookup::Missing);
                };
                match t.error().map(RDKafkaErrorCode::from) {
                    Some(
                        RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic,
                    ) => {
                        return Ok(Lookup::Missing);
                    }
                    Some(
                        code @ (RDKafkaErrorCode::TopicAuthorizationFailed
                        | RDKafkaErrorCode::ClusterAuthorizationFailed),
                    ) => {
                        return Err(Error::store(
                            "kafka",
                            format!("topic `{}`: {code}", settings.topic),
                        ));
                    }
                    Some(code) => ctx.note_error(&rdkafka::error::KafkaError::MetadataFetch(code)),
                    // Ready once every partition has a leader.
                    None if !t.partitions().is_empty()
                        && t.partitions()
                            .iter()
                            .all(|p| p.error().is_none() && p.leader() >= 0) =>
                    {
                        return Ok(Lookup::Partitions(t.partitions().len() as i32));
                    }
                    None => {}
                }
            }
            Err(e) => ctx.note_error(&e),
        }
        std::thread::sleep(
            Duration::from_millis(50).min(deadline.saturating_duration_since(Instant::now())),
        );
    }
}

fn admin(settings: &Settings) -> Result<AdminClient<Ctx>> {
    let ctx = Ctx::new(settings.secrets.clone(), "admin");
    settings
        .admin_config()
        .create_with_context(ctx)
        .map_err(|e| {
            Error::store(
                "kafka",
                format!(
                    "cannot create the admin client: {}",
                    settings.secrets.scrub(&e.to_string())
                ),
            )
        })
}

fn options(deadline: Instant) -> AdminOptions {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    AdminOptions::new()
        .request_timeout(Some(left))
        .operation_timeout(Some(left))
}

/// Creates the topic compacted, with the configured partitions and replication.
fn create(settings: &Settings, admin: &AdminClient<Ctx>, deadline: Instant) -> Result<()> {
    let topic = NewTopic::new(
        &settings.topic,
        settings.partitions,
        TopicReplication::Fixed(settings.replication),
    )
    .set("cleanup.policy", "compact");
    let what = format!(
        "create topic `{}` ({} partitions, replication {})",
        settings.topic, settings.partitions, settings.replication
    );
    let left = deadline.saturating_duration_since(Instant::now());
    let results = block_on(admin.create_topics([&topic], &options(deadline)), left)
        .ok_or_else(|| timeout_error(admin.inner().context(), what.clone(), settings.timeout))?
        .map_err(|e| kafka_error(admin.inner().context(), &what, &e))?;
    for r in results {
        match r {
            Ok(_) => tracing::info!(
                topic = %settings.topic,
                partitions = settings.partitions,
                replication = settings.replication,
                "created the offsets topic (cleanup.policy=compact)"
            ),
            // Someone else created it meanwhile: the policy check below decides.
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(Error::store("kafka", format!("{what}: {code}")));
            }
        }
    }
    Ok(())
}

/// Kafka Connect's refusal of an offsets topic that is not exactly `cleanup.policy=compact`.
pub(crate) fn policy_refusal(topic: &str, found: &str) -> String {
    format!(
        "Topic '{topic}' supplied via the 'offset.storage.topic' property is required to have \
         'cleanup.policy=compact' to guarantee consistency and durability of source connector offsets, \
         but found the topic currently has 'cleanup.policy={found}'. Continuing would likely result in \
         eventually losing source connector offsets and problems restarting this Connect cluster in the \
         future. Change the 'offset.storage.topic' property in the Connect worker configurations to use \
         a topic with 'cleanup.policy=compact'."
    )
}

/// The topic's settings the store uses, as far as the brokers said.
struct Configs {
    delete_retention_ms: Option<i64>,
    max_message_bytes: Option<usize>,
}

/// Reads the topic's `cleanup.policy` and refuses anything but exactly `{compact}` (Connect splits
/// on commas, trims, lowercases and compares the set). Returns the topic's other settings we use.
fn check_policy(
    settings: &Settings,
    admin: &AdminClient<Ctx>,
    deadline: Instant,
) -> Result<Configs> {
    let what = format!("describe the configuration of topic `{}`", settings.topic);
    let (found, configs) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let results = block_on(
            admin.describe_configs(
                [&ResourceSpecifier::Topic(&settings.topic)],
                &options(deadline),
            ),
            left,
        )
        .ok_or_else(|| timeout_error(admin.inner().context(), what.clone(), settings.timeout))?
        .map_err(|e| kafka_error(admin.inner().context(), &what, &e))?;
        let resource = results
            .into_iter()
            .next()
            .ok_or_else(|| Error::store("kafka", format!("{what}: no answer")))?
            .map_err(|code| Error::store("kafka", format!("{what}: {code}")))?;
        // Every topic has a `cleanup.policy` value (its default included). A broker whose metadata
        // has not caught up with a topic just created answers with no entries at all and no error
        // (Kafka 4.4, seen on a 3-broker cluster): ask again until one knows it.
        if let Some(policy) = resource.get("cleanup.policy").and_then(|e| e.value.clone()) {
            let number = |name| {
                resource
                    .get(name)
                    .and_then(|e| e.value.as_deref())
                    .and_then(|v| v.parse().ok())
            };
            let configs = Configs {
                delete_retention_ms: number("delete.retention.ms"),
                max_message_bytes: number("max.message.bytes")
                    .and_then(|n: i64| usize::try_from(n).ok()),
            };
            break (policy, configs);
        }
        if Instant::now() >= deadline {
            return Err(timeout_error(
                admin.inner().context(),
                format!("{what} (the brokers return no configuration for it)"),
                settings.timeout,
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let set: BTreeSet<String> = found
        .split(',')
        .map(|p| p.trim().to_ascii_lowercase())
        .filter(|p| !p.is_empty())
        .collect();
    if set.len() == 1 && set.contains("compact") {
        Ok(configs)
    } else if settings.read_only {
        // Reading does not make it worse, and is how its offsets get off it.
        tracing::warn!(
            "{} Reading it anyway: this command only reads.",
            policy_refusal(&settings.topic, &found)
        );
        Ok(configs)
    } else {
        Err(Error::store(
            "kafka",
            policy_refusal(&settings.topic, &found),
        ))
    }
}
