//! `orphans`: offsets that outlived their connector. Kafka Connect keeps a deleted connector's
//! offsets (its source partitions in the offsets topic, a sink's consumer group) forever, and a new
//! connector of the same name silently resumes from them. Connect's config topic says which
//! connectors exist; a connector that holds offsets in the store but has no config there is an
//! orphan: listed with its partitions and last write, and reset (all its partitions, as a tool's
//! write: fenced, and recorded by a store opened with `?history=`, so `rewind` brings them back).
//! [`find`] and [`reset`] are `serve`'s too (`GET`/`DELETE /orphans`, `--reset-orphans-after`).

use std::collections::BTreeSet;
use std::process::ExitCode;

use connect_offsets::internal::time;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::{Error, OffsetKey, OffsetStore, Result};

use super::{StoreArg, escape_controls, open_existing, open_read_only, print, quoted};
use crate::history::{offset_json, partition_json};

/// A connector that holds offsets in a store but has no config in the Connect cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Orphan {
    /// The connector (namespace).
    pub name: String,
    /// How many partitions it holds offsets for.
    pub partitions: usize,
    /// The newest write time of its partitions (ms since the Unix epoch); `None` where the store
    /// keeps no write times (`kafka-group://`) or they predate the version that recorded them.
    pub last_write_ms: Option<u64>,
    /// A sink connector's: a consumer group's committed offsets (`kafka-group://`), or partitions
    /// that all name a `kafka_topic` and `kafka_partition`.
    pub sink: bool,
}

/// Connectors holding offsets in `store` but with no config in `configured` (the names of
/// Connect's config topic, with [`in_use`] for sinks' own groups), with their partition count
/// and newest change time ([`OffsetStore::change_times`], the latest over their partitions). The
/// crate's reserved namespaces (history, alarms, fences, writers, override markers) are no
/// connector's and are left out.
pub(crate) fn find(store: &dyn OffsetStore, configured: &BTreeSet<String>) -> Result<Vec<Orphan>> {
    let group = store.kind() == "kafka-group";
    let mut out = Vec::new();
    for name in store.namespaces()? {
        if connect_offsets::internal::namespaces::is_reserved_namespace(&name)
            || configured.contains(&name)
        {
            continue;
        }
        let parts = store.partitions(&name)?;
        if parts.is_empty() {
            continue;
        }
        let keys: Vec<OffsetKey> = parts.iter().map(|(k, _)| k.clone()).collect();
        let last_write_ms = store.change_times(&keys)?.into_iter().flatten().max();
        out.push(Orphan {
            sink: group || parts.iter().all(|(k, _)| is_sink_partition(k)),
            partitions: parts.len(),
            last_write_ms,
            name,
        });
    }
    Ok(out)
}

/// Resets every partition of orphan `name` through [`OffsetStoreExt::reset_namespace`]: a tool's
/// write, fenced against the replay of writers' logs, and recorded by a store opened with
/// `?history=` (so a rewind can bring the offsets back). Returns how many partitions were reset.
/// The caller checks that `name` is an orphan ([`find`]).
pub(crate) fn reset(store: &dyn OffsetStore, name: &str) -> Result<usize> {
    store.reset_namespace(name)
}

/// The namespaces of `store_url` the configured `connectors` (name, `consumer.override.group.id`)
/// use: their names, and on `kafka-group://` the connector each override group stands for under
/// the store's group naming (a sink `a` committing to `connect-b` holds namespace `b` there, which
/// is no orphan while `a` is configured).
pub(crate) fn in_use<'a>(
    store_url: &str,
    connectors: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<BTreeSet<String>> {
    let url = connect_offsets::internal::store::url::StoreUrl::parse(store_url)?;
    let names = group_names(&url)?;
    let mut out = BTreeSet::new();
    for (name, group) in connectors {
        out.insert(name.to_string());
        if let (Some(names), Some(group)) = (&names, group)
            && let Some(held) = names(group)
        {
            out.insert(held);
        }
    }
    Ok(out)
}

/// On `kafka-group://`: the connector a group id stands for under the URL's group naming.
#[cfg(feature = "kafka")]
#[allow(clippy::type_complexity)]
fn group_names(
    url: &connect_offsets::internal::store::url::StoreUrl,
) -> Result<Option<Box<dyn Fn(&str) -> Option<String>>>> {
    use connect_offsets::internal::store::group::GroupNames;
    if url.scheme != "kafka-group" {
        return Ok(None);
    }
    let names = GroupNames::new(url.param("group"), url.param("connector"))?;
    Ok(Some(Box::new(move |g| names.connector_of(g))))
}

#[cfg(not(feature = "kafka"))]
#[allow(clippy::type_complexity)]
fn group_names(
    _: &connect_offsets::internal::store::url::StoreUrl,
) -> Result<Option<Box<dyn Fn(&str) -> Option<String>>>> {
    Ok(None)
}

fn is_sink_partition(key: &OffsetKey) -> bool {
    key.partition()
        .is_some_and(|p| p.get("kafka_topic").is_some() && p.get("kafka_partition").is_some())
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("resetting").args(["reset", "reset_all"])))]
pub(crate) struct OrphansArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Kafka Connect's config topic (the workers' `config.storage.topic`), as
    /// kafka://host:port/<topic>: a connector configured there is no orphan.
    #[arg(long, value_name = "URL")]
    connect_configs: String,
    /// Reset every partition of this orphan (repeatable); refused for a connector that has a
    /// config or holds no offsets.
    #[arg(long, value_name = "NAME")]
    reset: Vec<String>,
    /// Reset every orphan.
    #[arg(long)]
    reset_all: bool,
    /// With --reset or --reset-all: print each partition that would be reset; write nothing.
    #[arg(long, requires = "resetting")]
    dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The connectors Connect's config topic at `url` holds, as namespaces of `store_url`.
#[cfg(feature = "kafka")]
fn configured(url: &str, store_url: &str) -> Result<BTreeSet<String>> {
    let configs = connect_offsets::connect::ConnectConfigs::read(url)
        .map_err(|e| e.context("--connect-configs"))?;
    let connectors: Vec<(String, Option<String>)> = configs
        .names()
        .map(|n| {
            let group = configs.connector(n).and_then(|c| c.group_override);
            (n.to_string(), group)
        })
        .collect();
    in_use(
        store_url,
        connectors.iter().map(|(n, g)| (n.as_str(), g.as_deref())),
    )
}

#[cfg(not(feature = "kafka"))]
fn configured(_: &str, _: &str) -> Result<BTreeSet<String>> {
    Err(Error::Settings(
        "Connect's config topic is read through Kafka: this build has no Kafka support (feature `kafka`)"
            .into(),
    ))
}

fn time_text(ms: Option<u64>) -> String {
    ms.map_or("unknown".into(), |ms| {
        time::format_rfc3339(ms as i64 * 1000)
    })
}

fn time_json(ms: Option<u64>) -> String {
    ms.map_or("null".into(), |ms| {
        format!("\"{}\"", time::format_rfc3339(ms as i64 * 1000))
    })
}

fn orphan_json(o: &Orphan) -> String {
    format!(
        "\"name\":{},\"partitions\":{},\"last_write\":{},\"sink\":{}",
        quoted(&o.name),
        o.partitions,
        time_json(o.last_write_ms),
        o.sink
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A deleted connector's tasks stop after Connect has dropped its config, committing once more
/// as they do: a reset within this long of its last write may be followed by that commit.
const SETTLING_MS: u64 = 60_000;

pub(crate) fn run(a: OrphansArgs) -> Result<ExitCode> {
    let store_url = a.store.url();
    let configured = configured(&a.connect_configs, &store_url)?;
    let resetting = a.reset_all || !a.reset.is_empty();
    let store = if resetting {
        open_existing(&a.store)?
    } else {
        open_read_only(&a.store)?
    };
    let orphans = find(&*store, &configured)?;
    if !resetting {
        return list(&orphans, configured.len(), a.json);
    }

    // Every name is checked before anything is written.
    let mut targets: Vec<&Orphan> = Vec::new();
    if a.reset_all {
        targets.extend(&orphans);
    } else {
        let mut seen = BTreeSet::new();
        for name in &a.reset {
            if !seen.insert(name) {
                continue;
            }
            if let Some(o) = orphans.iter().find(|o| &o.name == name) {
                targets.push(o);
            } else if configured.contains(name) {
                return Err(Error::Input(format!(
                    "connector {} has a config in the Connect cluster ({}): its offsets are not \
                     orphaned; nothing written (delete the connector first, or stop it and \
                     `reset --all`)",
                    quoted(name),
                    a.connect_configs
                )));
            } else if connect_offsets::internal::namespaces::is_reserved_namespace(name) {
                return Err(Error::Input(format!(
                    "{} is a namespace the crate keeps its own records in, no connector's; \
                     nothing written",
                    quoted(name)
                )));
            } else {
                return Err(Error::Input(format!(
                    "unknown connector {}: the store holds no offsets for it; nothing written \
                     (`orphans` lists the orphans)",
                    quoted(name)
                )));
            }
        }
    }

    let now_ms = time::now_ms();
    let mut json_items = Vec::new();
    for o in &targets {
        super::warn_unapplied(&*store, Some(&o.name), !a.dry_run);
        let parts = store.partitions(&o.name)?;
        let mut changes = Vec::new();
        for (k, offset) in &parts {
            if a.json {
                changes.push(format!(
                    "{{\"partition\":{},\"from\":{},\"to\":null}}",
                    partition_json(k),
                    offset_json(Some(offset))
                ));
            } else {
                print(
                    format!(
                        "{}\t{}: {} -> reset",
                        escape_controls(&o.name, false),
                        partition_json(k),
                        offset_json(Some(offset))
                    )
                    .as_bytes(),
                )?;
            }
        }
        json_items.push(format!(
            "{{{},\"changes\":[{}]}}",
            orphan_json(o),
            changes.join(",")
        ));
        if let Some(t) = o.last_write_ms
            && now_ms.saturating_sub(t) < SETTLING_MS
        {
            note!(
                "warning: connector `{}` wrote offsets at {}, {} s ago: the tasks of a connector \
                 deleted just now commit once more as they stop; run `orphans` again in a minute \
                 to check that none came back",
                o.name,
                time_text(Some(t)),
                now_ms.saturating_sub(t) / 1000
            );
        }
    }

    let mut total = 0;
    if a.dry_run {
        total = targets.iter().map(|o| o.partitions).sum();
    } else if !targets.is_empty() {
        // A connector created under the name since the config topic was read is no orphan now.
        let now_configured = self::configured(&a.connect_configs, &store_url)?;
        if let Some(o) = targets.iter().find(|o| now_configured.contains(&o.name)) {
            return Err(Error::Input(format!(
                "connector {} was created in the Connect cluster meanwhile: its offsets are not \
                 orphaned; nothing written",
                quoted(&o.name)
            )));
        }
        for o in &targets {
            let n = reset(&*store, &o.name)?;
            note!(
                "reset {n} partition{} of orphaned connector `{}`",
                plural(n),
                o.name
            );
            total += n;
        }
    }
    if a.json {
        print(
            format!(
                "{{\"dry_run\":{},\"reset\":[{}]}}",
                a.dry_run,
                json_items.join(",")
            )
            .as_bytes(),
        )?;
    }
    let n = targets.len();
    if n == 0 {
        note!("no orphaned offsets: every connector with offsets has a config; nothing to reset");
    } else if a.dry_run {
        note!(
            "dry run: would reset {total} partition{} of {n} orphaned connector{}; nothing written",
            plural(total),
            plural(n)
        );
    } else if n > 1 {
        note!(
            "reset {total} partition{} of {n} orphaned connectors",
            plural(total)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn list(orphans: &[Orphan], configured: usize, json: bool) -> Result<ExitCode> {
    if json {
        let items: Vec<String> = orphans
            .iter()
            .map(|o| format!("{{{}}}", orphan_json(o)))
            .collect();
        print(format!("[{}]", items.join(",")).as_bytes())?;
    } else if !orphans.is_empty() {
        print(b"CONNECTOR\tPARTITIONS\tLAST_WRITE\tKIND")?;
        for o in orphans {
            print(
                format!(
                    "{}\t{}\t{}\t{}",
                    escape_controls(&o.name, false),
                    o.partitions,
                    time_text(o.last_write_ms),
                    if o.sink { "sink" } else { "source" }
                )
                .as_bytes(),
            )?;
        }
    }
    let n = orphans.len();
    if n == 0 {
        note!(
            "no orphaned offsets: every connector with offsets has a config ({configured} configured)"
        );
    } else {
        note!(
            "{n} connector{} hold{} offsets but no config in the Connect cluster ({configured} \
             configured); a new connector of the same name would resume from them \
             (`orphans --reset NAME --dry-run` shows what a reset writes)",
            plural(n),
            if n == 1 { "s" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use connect_offsets::store::MemoryStore;
    use connect_offsets::{Offset, Partition};

    fn key(c: &str, file: &str) -> OffsetKey {
        OffsetKey::new(c, Partition::new().with("filename", file))
    }

    #[test]
    fn orphans_are_the_unconfigured_connectors_with_offsets() {
        let store = MemoryStore::new();
        let pos = |n: i64| Offset::new().with("position", n);
        store.set(key("gone", "a"), pos(1)).unwrap();
        store.set(key("gone", "b"), pos(2)).unwrap();
        store.set(key("live", "a"), pos(3)).unwrap();
        let sink = OffsetKey::new(
            "old-sink",
            Partition::new()
                .with("kafka_topic", "t")
                .with("kafka_partition", 0),
        );
        store
            .set(sink, Offset::new().with("kafka_offset", 7))
            .unwrap();
        store
            .set(
                key(connect_offsets::history::HISTORY_NAMESPACE, "x"),
                pos(1),
            )
            .unwrap();
        let configured: BTreeSet<String> = ["live".to_string()].into();
        let found = find(&store, &configured).unwrap();
        let names: Vec<&str> = found.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["gone", "old-sink"]);
        assert_eq!(found[0].partitions, 2);
        assert!(!found[0].sink);
        assert!(found[1].sink);
        let newest = store
            .change_times(&[key("gone", "a"), key("gone", "b")])
            .unwrap()
            .into_iter()
            .flatten()
            .max();
        assert!(newest.is_some(), "the memory store keeps write times");
        assert_eq!(found[0].last_write_ms, newest);

        assert_eq!(reset(&store, "gone").unwrap(), 2);
        assert!(store.partitions("gone").unwrap().is_empty());
        assert_eq!(store.partitions("live").unwrap().len(), 1);
        let names: Vec<String> = find(&store, &configured)
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect();
        assert_eq!(names, ["old-sink"]);
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn a_sinks_own_group_is_in_use_on_kafka_group_stores_only() {
        let connectors = [("a", Some("connect-b")), ("c", None), ("d", Some("other"))];
        let got = in_use("kafka-group://127.0.0.1:9092/", connectors).unwrap();
        assert_eq!(got, ["a", "b", "c", "d"].map(String::from).into());
        let got = in_use(
            "kafka-group://127.0.0.1:9092/?group=team-{connector}",
            [("a", Some("team-x")), ("e", Some("connect-b"))],
        )
        .unwrap();
        assert_eq!(got, ["a", "e", "x"].map(String::from).into());
        let got = in_use("kafka://127.0.0.1:9092/offsets", connectors).unwrap();
        assert_eq!(got, ["a", "c", "d"].map(String::from).into());
    }
}
