//! Offset commands: connectors, list, get, set, reset, export, import, migrate, lag.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use connect_offsets::internal::connector_offsets::{ConnectorOffsets, OffsetsExport, encode_entry};
use connect_offsets::internal::once::{
    digest_matches, digest_of, entries_digest, marker_key, store_url, validate_id,
};
use connect_offsets::internal::wal::frame::FrameKind;
use connect_offsets::internal::wal::inspect;
use connect_offsets::migrate::{MigrateOptions, MigrateReport};
use connect_offsets::once::{OnceOutcome, OnceOverride};
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::{Error, OffsetKey, OffsetStore, Result};

use super::{
    NOT_FOUND, StoreArg, open, open_existing, open_read_only, open_target, parse_key, parse_offset,
    print, quoted, refuse_volatile,
};

#[derive(clap::Args, Debug)]
pub(crate) struct ConnectorsArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Print a JSON array (what Kafka Connect's GET /connectors returns).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
}

#[derive(clap::Args, Debug)]
pub(crate) struct GetArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
    /// The partition as a JSON object (or null).
    #[arg(long)]
    partition: String,
}

#[derive(clap::Args, Debug)]
pub(crate) struct SetArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
    /// The partition as a JSON object (or null).
    #[arg(long)]
    partition: String,
    /// The offset as a JSON object.
    #[arg(long)]
    offset: String,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ResetArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
    /// The partition as a JSON object (or null).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    partition: Option<String>,
    /// Reset every partition of the connector.
    #[arg(long)]
    all: bool,
    /// Apply this reset once: record ID in the store with it (atomically); a later run with the
    /// same ID changes nothing (and fails if it resets something else); of runs racing, one applies.
    #[arg(long, value_name = "ID")]
    once: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Only this connector, as Kafka Connect's {"offsets":[...]}.
    #[arg(long)]
    connector: Option<String>,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ImportArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector a {"offsets":[...]} document is for; with {"connectors":{...}}, import only it.
    #[arg(long)]
    connector: Option<String>,
    /// Read from this file (`-` or nothing: stdin).
    #[arg(long, short)]
    input: Option<PathBuf>,
    /// Also reset the connector's partitions the document does not name (the connector then holds
    /// exactly the document's offsets).
    #[arg(long)]
    replace: bool,
    /// Print what would change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Apply this import once: every connector of the document and the ID in one atomic write; a
    /// later run with the same ID changes nothing (and fails if its document differs); of runs
    /// racing, one applies.
    #[arg(long, value_name = "ID")]
    once: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct MigrateArgs {
    /// The store to copy from.
    #[arg(long)]
    from: String,
    /// The store to copy to.
    #[arg(long)]
    to: String,
    /// Only this connector (writer seqs are then not copied).
    #[arg(long)]
    connector: Option<String>,
    /// Print what would change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Migrate even when the source holds no offsets (of the connector, or at all): resets the
    /// destination's. Without it such a migration is refused, as a mistyped source would be.
    #[arg(long)]
    allow_empty_source: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct LagArgs {
    #[command(flatten)]
    store: StoreArg,
    /// A commit buffer's log directory: batches it holds that the store has not applied, and the
    /// age of each connector's newest logged batch.
    #[arg(long)]
    wal_dir: Option<PathBuf>,
    /// Brokers of the topics that sink-style partitions (`kafka_topic`, `kafka_partition`) name, for
    /// their lag (log-end minus committed offset). Default: the store's brokers when it is
    /// kafka:// or kafka-group://.
    #[arg(long)]
    kafka: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn connectors(a: ConnectorsArgs) -> Result<ExitCode> {
    let store = open_read_only(&a.store)?;
    // The crate's own records (override markers, history, alarms) are offsets, not a connector
    // (`list` still shows them).
    let mut names = store.namespaces()?;
    names.retain(|n| !connect_offsets::internal::namespaces::is_reserved_namespace(n));
    if a.json {
        let items: Vec<String> = names.iter().map(|n| quoted(n)).collect();
        print(format!("[{}]", items.join(",")).as_bytes())?;
    } else {
        for n in names {
            print(n.as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn list(a: ListArgs) -> Result<ExitCode> {
    let store = open_read_only(&a.store)?;
    super::warn_unapplied(&*store, Some(&a.connector), false);
    let doc = ConnectorOffsets::from_stored(&store.partitions(&a.connector)?);
    print(doc.to_json().as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn get(a: GetArgs) -> Result<ExitCode> {
    let key = parse_key(&a.connector, &a.partition)?;
    let store = open_read_only(&a.store)?;
    super::warn_unapplied(&*store, Some(&a.connector), false);
    let offset = store.get(&key)?;
    let mut out = Vec::new();
    encode_entry(key.partition(), offset.as_ref(), &mut out);
    print(&out)?;
    if offset.is_none() {
        note!(
            "no offset stored for partition {} of connector `{}`",
            a.partition,
            a.connector
        );
        return Ok(ExitCode::from(NOT_FOUND));
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses a connector name no Connect worker takes (empty, or with control characters: a line
/// break in a name splits it in two in `connectors`' listing): offsets written under it would
/// belong to no connector.
fn check_connector_name(name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::InvalidData(format!(
            "the connector name {} is empty or blank; Kafka Connect takes no such name",
            quoted(name)
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::InvalidData(format!(
            "the connector name {} holds control characters; Kafka Connect takes no such name",
            quoted(name)
        )));
    }
    Ok(())
}

pub(crate) fn set(a: SetArgs) -> Result<ExitCode> {
    check_connector_name(&a.connector)?;
    let key = parse_key(&a.connector, &a.partition)?;
    let offset = parse_offset(&a.offset)?;
    refuse_volatile(&a.store, "set")?;
    let store = open(&a.store)?;
    super::warn_unapplied(&*store, Some(&a.connector), true);
    store.set(key, offset)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn reset(a: ResetArgs) -> Result<ExitCode> {
    // What was asked, digested: `--all` resets what the store holds at the time.
    let once_digest = match (&a.once, &a.partition) {
        (None, _) => None,
        (Some(id), Some(p)) => {
            validate_id(id)?;
            Some(entries_digest(&[(parse_key(&a.connector, p)?, None)]))
        }
        (Some(id), None) => {
            validate_id(id)?;
            Some(digest_of(format!("reset --all {}", a.connector).as_bytes()))
        }
    };
    let store = match &a.once {
        Some(id) => open_for_once(&a.store.url(), id, connect_offsets::open_existing)?,
        None => open_existing(&a.store)?,
    };
    if let (Some(id), Some(digest)) = (&a.once, &once_digest)
        && already_applied(&*store, id, digest)?
    {
        return Ok(ExitCode::SUCCESS);
    }
    super::warn_unapplied(&*store, Some(&a.connector), true);
    let entries = match &a.partition {
        Some(p) => {
            let key = parse_key(&a.connector, p)?;
            if store.get(&key)?.is_none() {
                note!(
                    "no offset stored for partition {p} of connector `{}`",
                    a.connector
                );
                return Ok(ExitCode::from(NOT_FOUND));
            }
            vec![(key, None)]
        }
        None => store
            .partitions(&a.connector)?
            .into_iter()
            .map(|(k, _)| (k, None))
            .collect(),
    };
    if entries.is_empty() && store.kind() == "kafka-group" {
        // A sink connector's group that does not exist counts as reset, as Connect's DELETE
        // answers 200 for it: a second reset of every partition is no error.
        note!(
            "reset 0 partitions of connector `{}` (its consumer group holds no offsets)",
            a.connector
        );
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        // Most likely a mistyped name: say so rather than report a reset of nothing.
        note!(
            "connector `{}` has no offsets in this store: nothing to reset (check the name; \
             `connectors` lists them)",
            a.connector
        );
        return Ok(ExitCode::from(NOT_FOUND));
    }
    if let (Some(id), Some(digest)) = (&a.once, once_digest) {
        let n = entries.len();
        let once = OnceOverride::new(id.clone(), entries)?.with_digest(digest);
        if !apply_once(&a.store, &*store, &once, "resetting")? {
            return Ok(ExitCode::SUCCESS);
        }
        let s = if n == 1 { "" } else { "s" };
        note!(
            "reset {n} partition{s} of connector `{}`; recorded override `{id}`",
            a.connector
        );
        return Ok(ExitCode::SUCCESS);
    }
    match a.partition {
        Some(p) => {
            let key = parse_key(&a.connector, &p)?;
            if store.get(&key)?.is_none() {
                note!(
                    "no offset stored for partition {p} of connector `{}`",
                    a.connector
                );
                return Ok(ExitCode::from(NOT_FOUND));
            }
            store.reset(key)?;
            note!("reset 1 partition of connector `{}`", a.connector);
        }
        None => {
            let n = store.reset_namespace(&a.connector)?;
            let s = if n == 1 { "" } else { "s" };
            note!("reset {n} partition{s} of connector `{}`", a.connector);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The export document of `store` (one connector, or all).
pub(crate) fn export_bytes(store: &dyn OffsetStore, connector: Option<&str>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    match connector {
        Some(c) => ConnectorOffsets::from_stored(&store.partitions(c)?).encode(&mut out),
        None => {
            let mut doc = OffsetsExport::default();
            for c in store.namespaces()? {
                if connect_offsets::internal::namespaces::is_store_local_namespace(&c) {
                    continue;
                }
                let offsets = ConnectorOffsets::from_stored(&store.partitions(&c)?);
                doc.connectors.push((c, offsets));
            }
            doc.encode(&mut out);
        }
    }
    Ok(out)
}

pub(crate) fn export(a: ExportArgs) -> Result<ExitCode> {
    let store = open_read_only(&a.store)?;
    super::warn_unapplied(&*store, a.connector.as_deref(), false);
    let out = export_bytes(&*store, a.connector.as_deref())?;
    match &a.output {
        Some(path) => {
            let mut bytes = out;
            bytes.push(b'\n');
            std::fs::write(path, bytes).map_err(|e| Error::io("write", path, e))?;
        }
        None => print(&out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// True (and says so) when `store` holds the marker of override `id`; an error when the marker
/// shows that the id applied other offsets than those of `digest` (what this run was given).
fn already_applied(store: &dyn OffsetStore, id: &str, digest: &str) -> Result<bool> {
    let Some(marker) = store.get(&marker_key(id))? else {
        return Ok(false);
    };
    report_applied(id, &marker, digest)?;
    Ok(true)
}

/// Says that override `id` was applied (its marker is `marker`) and nothing written, or fails when
/// the marker's digest is not `digest`.
fn report_applied(id: &str, marker: &connect_offsets::Offset, digest: &str) -> Result<()> {
    let mut shown = Vec::new();
    connect_offsets::internal::codec::json::encode_map(marker, &mut shown);
    let shown = String::from_utf8_lossy(&shown);
    match digest_matches(marker, digest) {
        Some(true) => note!("override `{id}` was already applied ({shown}); nothing written"),
        None => note!(
            "override `{id}` was already applied ({shown}); nothing written (its marker, from an \
             older version, records no digest: whether it applied these same offsets cannot be \
             compared)"
        ),
        Some(false) => {
            return Err(Error::Input(format!(
                "override `{id}` was already applied ({shown}) with other offsets: what this run \
                 was given (digest {digest}) differs from what the id applied; nothing written \
                 (a new change needs a new id)"
            )));
        }
    }
    Ok(())
}

/// The store `--once ID` writes to: on Kafka opened so that runs with the same id fence each other
/// (`store_url`). A store another process holds (RocksDB's lock: another run of the id, most
/// likely, which takes a moment) is waited for up to 10 s, then refused with what to do.
fn open_for_once(
    url: &str,
    id: &str,
    open: impl Fn(&str) -> Result<Box<dyn OffsetStore>>,
) -> Result<Box<dyn OffsetStore>> {
    let url = store_url(url, id)?;
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open(&url) {
            Err(Error::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e @ Error::Locked { .. }) => {
                return Err(e.context(format!(
                    "override `{id}` was not applied by this run (nothing written): run it again \
                     once the other process is done (with the same id, it applies only if no run \
                     did)"
                )));
            }
            other => return other,
        }
    }
}

/// Applies `once` through `store` (from [`open_for_once`]): true when this run applied it, false
/// when another run did (and says so). `doing` names the command in an error.
fn apply_once(
    arg: &StoreArg,
    store: &dyn OffsetStore,
    once: &OnceOverride,
    doing: &str,
) -> Result<bool> {
    let id = once.id();
    match once.apply_to(store, "cli") {
        Ok(OnceOutcome::Applied) => Ok(true),
        Ok(OnceOutcome::AlreadyApplied) => already_applied(store, id, once.digest()),
        // Another run of the same id opened after this one read the store: its marker, once it is
        // in, is read from a new handle (which fences nobody).
        Err(e) if is_fenced(&e) => match marker_after_fence(arg, id) {
            Some(marker) => {
                note!("another process applying override `{id}` at the same time took over");
                report_applied(id, &marker, once.digest()).map(|()| false)
            }
            None => Err(e.context(format!(
                "{doing} override `{id}`: another process applying it at the same time took over \
                 and its marker did not appear; nothing of this run was written: run it again \
                 (with the same id, it applies only if no run did)"
            ))),
        },
        Err(e) => Err(e.context(format!(
            "{doing} override `{id}` failed (nothing of it was written; run it again: with the \
             same id, it applies only if no run did)"
        ))),
    }
}

fn is_fenced(e: &Error) -> bool {
    match e {
        Error::Fenced(_) => true,
        Error::Context { source, .. } => source.downcast_ref::<Error>().is_some_and(is_fenced),
        _ => false,
    }
}

/// The marker of override `id`, read again from new handles while the run that fenced this one
/// finishes (it may still be reading the topic); `None` if it does not appear within 15 s.
fn marker_after_fence(arg: &StoreArg, id: &str) -> Option<connect_offsets::Offset> {
    let deadline = Instant::now() + std::time::Duration::from_secs(15);
    loop {
        if let Ok(store) = open_existing(arg)
            && let Ok(Some(marker)) = store.get(&marker_key(id))
        {
            return Some(marker);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

pub(crate) fn import(a: ImportArgs) -> Result<ExitCode> {
    if let Some(id) = &a.once {
        validate_id(id)?;
    }
    let bytes = match a.input.as_deref() {
        Some(p) if p.as_os_str() != "-" => std::fs::read(p).map_err(|e| Error::io("read", p, e))?,
        _ => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| Error::io("read", "stdin", e))?;
            buf
        }
    };
    let mut doc = OffsetsExport::parse(&bytes, a.connector.as_deref())?;
    if !a.dry_run {
        refuse_volatile(&a.store, "import")?;
    }
    for (name, _) in &doc.connectors {
        check_connector_name(name)?;
    }
    // A store that records history records this import as a change; the document's history
    // records (an export of a store with history) would be taken as they are instead, and the
    // store's history would then disagree with its offsets.
    let url = connect_offsets::internal::store::url::StoreUrl::parse(&a.store.url())?;
    let history = connect_offsets::history::HISTORY_NAMESPACE;
    if url.param("history").is_some() && doc.connectors.iter().any(|(c, _)| c == history) {
        doc.connectors.retain(|(c, _)| c != history);
        note!(
            "left out `{history}`: the document's history records; the store records its own, this import included"
        );
    }
    // What the document sets, digested (with --replace, what it replaces depends on the store).
    let once_digest = a.once.as_ref().map(|_| {
        let named: Vec<_> = (doc.connectors.iter())
            .flat_map(|(c, offsets)| offsets.clone().into_entries(c))
            .collect();
        match a.replace {
            false => entries_digest(&named),
            true => digest_of(format!("import --replace {}", entries_digest(&named)).as_bytes()),
        }
    });
    let store = match &a.once {
        Some(id) if !a.dry_run => open_for_once(&a.store.url(), id, |url| open_target(url, false))?,
        _ => open_target(&a.store.url(), a.dry_run)?,
    };
    if let (Some(id), Some(digest)) = (&a.once, &once_digest)
        && already_applied(&*store, id, digest)?
    {
        if a.json {
            print(
                format!(
                    "{{\"dry_run\":{},\"already_applied\":true,\"connectors\":[]}}",
                    a.dry_run
                )
                .as_bytes(),
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = Vec::new();
    // Every connector goes into one batch (with --once, with its marker): all or nothing.
    let mut all_entries = Vec::new();
    for (connector, offsets) in doc.connectors {
        let mut entries = offsets.into_entries(&connector);
        let (mut set, mut reset) = (0usize, 0usize);
        for (_, o) in &entries {
            if o.is_some() {
                set += 1;
            } else {
                reset += 1;
            }
        }
        if a.replace {
            let named: std::collections::HashSet<OffsetKey> =
                entries.iter().map(|(k, _)| k.clone()).collect();
            for (k, _) in store.partitions(&connector)? {
                if !named.contains(&k) {
                    entries.push((k, None));
                    reset += 1;
                }
            }
        }
        all_entries.extend(entries);
        rows.push((connector, set, reset));
    }
    // --replace: a partition only a writer's log knows stays out too (store::fence).
    let replaced: Vec<&str> = if a.replace {
        rows.iter().map(|(c, _, _)| c.as_str()).collect()
    } else {
        Vec::new()
    };
    if !a.dry_run && !all_entries.is_empty() {
        super::warn_unapplied(&*store, None, true);
    }
    if a.once.is_none() && !a.dry_run && !all_entries.is_empty() {
        store
            .write_replacing(all_entries, &replaced)
            .map_err(|e| e.context("importing failed (nothing of it was written)"))?;
    } else if let (Some(id), Some(digest)) = (&a.once, once_digest) {
        let once = OnceOverride::new(id.clone(), all_entries)?.with_digest(digest);
        if !a.dry_run && !apply_once(&a.store, &*store, &once, "importing")? {
            if a.json {
                print(b"{\"dry_run\":false,\"already_applied\":true,\"connectors\":[]}")?;
            }
            return Ok(ExitCode::SUCCESS);
        }
    }
    if a.json {
        let items: Vec<String> = rows
            .iter()
            .map(|(c, s, r)| format!("{{\"name\":{},\"set\":{s},\"reset\":{r}}}", quoted(c)))
            .collect();
        print(
            format!(
                "{{\"dry_run\":{},\"connectors\":[{}]}}",
                a.dry_run,
                items.join(",")
            )
            .as_bytes(),
        )?;
    }
    for (c, s, r) in &rows {
        let verb = if a.dry_run {
            "would import"
        } else {
            "imported"
        };
        note!("{verb} connector `{c}`: {s} set, {r} reset");
    }
    if let Some(id) = &a.once {
        let verb = if a.dry_run {
            "would record"
        } else {
            "recorded"
        };
        note!("{verb} override `{id}`");
    }
    if a.dry_run {
        note!("dry run: nothing written");
    }
    Ok(ExitCode::SUCCESS)
}

fn migrate_json(report: &MigrateReport, elapsed: f64) -> String {
    let conns: Vec<String> = report
        .connectors
        .iter()
        .map(|c| {
            format!(
                "{{\"name\":{},\"added\":{},\"changed\":{},\"removed\":{},\"unchanged\":{}}}",
                quoted(&c.connector),
                c.added,
                c.changed,
                c.removed,
                c.unchanged
            )
        })
        .collect();
    let writers: Vec<String> = report
        .writers
        .iter()
        .map(|(w, from, to)| {
            format!(
                "{{\"writer\":{},\"from_seq\":{from},\"to_seq\":{to}}}",
                quoted(w)
            )
        })
        .collect();
    format!(
        "{{\"dry_run\":{},\"verified\":{},\"connectors\":[{}],\"writers\":[{}],\"writers_skipped\":{},\"elapsed_s\":{elapsed:.3}}}",
        report.dry_run,
        !report.dry_run,
        conns.join(","),
        writers.join(","),
        report
            .writers_skipped
            .as_deref()
            .map_or_else(|| "null".to_string(), quoted)
    )
}

pub(crate) fn migrate(a: MigrateArgs) -> Result<ExitCode> {
    if a.from == a.to && !a.from.starts_with("memory:") {
        return Err(Error::Settings(format!(
            "--from and --to name the same store `{}`",
            a.from
        )));
    }
    let started = Instant::now();
    let from = connect_offsets::open_read_only(&a.from)?;
    let to = open_target(&a.to, a.dry_run)?;
    super::warn_unapplied(&*from, a.connector.as_deref(), false);
    super::warn_unapplied(&*to, a.connector.as_deref(), !a.dry_run);
    let options = MigrateOptions {
        connector: a.connector.clone(),
        dry_run: a.dry_run,
        allow_empty_source: a.allow_empty_source,
    };
    let report = connect_offsets::migrate::migrate(&*from, &*to, &options)?;
    let elapsed = started.elapsed().as_secs_f64();
    if a.json {
        print(migrate_json(&report, elapsed).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if report.dry_run { "would" } else { "did" };
    let mut written = 0;
    for c in &report.connectors {
        written += c.added + c.changed + c.removed;
        print(
            format!(
                "connector {}: {verb} add {}, change {}, remove {}; {} unchanged",
                c.connector, c.added, c.changed, c.removed, c.unchanged
            )
            .as_bytes(),
        )?;
    }
    for (w, old, new) in &report.writers {
        print(format!("writer {w}: {verb} raise applied seq {old} -> {new}").as_bytes())?;
    }
    if let Some(why) = &report.writers_skipped {
        print(format!("writer seqs not carried: {why}").as_bytes())?;
    }
    if report.dry_run {
        print(
            format!(
                "dry run: {written} partitions of {} connectors would be written; nothing written",
                report.connectors.len()
            )
            .as_bytes(),
        )?;
    } else {
        print(
            format!(
                "migrated {} connectors ({written} partitions written) from {} to {} in {elapsed:.3} s; verified: both sides equal",
                report.connectors.len(),
                from.kind(),
                to.kind()
            )
            .as_bytes(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The brokers of a Kafka store's URL and the settings to reach them as the store does (its
/// security settings).
pub(crate) fn store_brokers(url: &str) -> Option<(String, Vec<(String, String)>)> {
    let url = connect_offsets::internal::store::url::StoreUrl::parse(url)
        .ok()
        .filter(|u| u.scheme == "kafka" || u.scheme == "kafka-group")?;
    let brokers = url.location.split('/').next().filter(|h| !h.is_empty())?;
    let security = url
        .params
        .iter()
        .filter(|(k, _)| {
            k == "security.protocol" || k.starts_with("sasl.") || k.starts_with("ssl.")
        })
        .cloned()
        .collect();
    Some((brokers.to_string(), security))
}

/// Sink connectors' lag: for each of `connectors`, over its sink-style partitions
/// (`kafka_topic`, `kafka_partition`, `kafka_offset`), the sum of log end minus committed offset;
/// `None` without such partitions or when a log end is unknown. Every log end is read within
/// `within` (the console asks every few seconds, and the server answers one request at a time).
pub(crate) fn sink_lags(
    brokers: &str,
    security: &[(String, String)],
    connectors: &[(&str, &[(OffsetKey, connect_offsets::Offset)])],
    within: std::time::Duration,
) -> Result<std::collections::HashMap<String, Option<i64>>> {
    let sinks: Vec<(&str, Vec<SinkPosition>)> = connectors
        .iter()
        .map(|(c, parts)| (*c, parts.iter().filter_map(sink_position).collect()))
        .collect();
    let all: Vec<(String, i32, i64)> = sinks.iter().flat_map(|(_, s)| s.iter().cloned()).collect();
    let ends = match all.is_empty() {
        true => LogEnds::default(),
        false => log_ends(brokers, security, &all, within)?,
    };
    Ok(sinks
        .into_iter()
        .map(|(c, parts)| {
            let lag = (!parts.is_empty()).then_some(()).and_then(|()| {
                parts.iter().try_fold(0i64, |total, (t, p, committed)| {
                    match ends.get(&(t.clone(), *p)) {
                        Some(Ok(end)) => Some(total + (end - committed).max(0)),
                        _ => None,
                    }
                })
            });
            (c.to_string(), lag)
        })
        .collect())
}

fn is_sink_partition(key: &OffsetKey) -> bool {
    key.partition()
        .is_some_and(|p| p.get("kafka_topic").is_some() && p.get("kafka_partition").is_some())
}

pub(crate) fn lag(a: LagArgs) -> Result<ExitCode> {
    let store = open_read_only(&a.store)?;
    struct Row {
        connector: String,
        partitions: usize,
        sink_partitions: usize,
        /// Seconds since the newest logged batch touching the connector was written (lower bound:
        /// the segment's modification time).
        commit_age: Option<f64>,
        /// Entries logged but not yet applied to the store.
        unapplied: usize,
        /// Sum over the sink-style partitions of log-end minus committed offset.
        sink_lag: Option<i64>,
        /// (topic, partition, committed offset) of each sink-style partition.
        sinks: Vec<(String, i32, i64)>,
        /// Per sink-style partition: its log end, when known.
        ends: Vec<Option<i64>>,
    }
    let mut rows: Vec<Row> = Vec::new();
    let alarms = connect_offsets::alarms::read(&*store)?;
    let now_ms = connect_offsets::internal::time::now_ms();
    for c in store.namespaces()? {
        if connect_offsets::internal::namespaces::is_reserved_namespace(&c) {
            continue; // the crate's own records, not a connector
        }
        let parts = store.partitions(&c)?;
        rows.push(Row {
            sink_partitions: parts.iter().filter(|(k, _)| is_sink_partition(k)).count(),
            sinks: parts.iter().filter_map(sink_position).collect(),
            partitions: parts.len(),
            connector: c,
            commit_age: None,
            unapplied: 0,
            sink_lag: None,
            ends: Vec::new(),
        });
    }
    if let Some(dir) = &a.wal_dir {
        let scan = inspect::scan(dir)?;
        scan.refuse_corrupt("the batches the store has not applied cannot be counted")?;
        let mut applied = std::collections::HashMap::new();
        for f in scan.frames() {
            if let (Some(w), Some(FrameKind::Batch)) = (&f.writer, f.kind)
                && !applied.contains_key(w)
            {
                applied.insert(w.clone(), store.applied_seq(w)?);
            }
        }
        for file in &scan.files {
            let age = std::fs::metadata(&file.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .map(|d| d.as_secs_f64());
            for f in &file.frames {
                for (c, entries) in &f.connectors {
                    let row = match rows.iter_mut().position(|r| &r.connector == c) {
                        Some(i) => &mut rows[i],
                        None => {
                            rows.push(Row {
                                connector: c.clone(),
                                partitions: 0,
                                sink_partitions: 0,
                                commit_age: None,
                                unapplied: 0,
                                sink_lag: None,
                                sinks: Vec::new(),
                                ends: Vec::new(),
                            });
                            rows.last_mut().expect("just pushed")
                        }
                    };
                    // Later files are newer: the last seen is the newest.
                    row.commit_age = age.or(row.commit_age);
                    if let (Some(w), Some(seq)) = (&f.writer, f.seq)
                        && f.kind == Some(FrameKind::Batch)
                        && seq > applied.get(w).copied().unwrap_or(0)
                    {
                        row.unapplied += entries;
                    }
                }
            }
        }
        rows.sort_by(|a, b| a.connector.cmp(&b.connector));
    }
    let (brokers, security) = match (&a.kafka, store_brokers(&a.store.url())) {
        (Some(b), _) => (Some(b.clone()), Vec::new()),
        (None, Some((b, security))) => (Some(b), security),
        (None, None) => (None, Vec::new()),
    };
    let sink_note = match &brokers {
        Some(b) if cfg!(feature = "kafka") => {
            let all: Vec<(String, i32, i64)> =
                rows.iter().flat_map(|r| r.sinks.iter().cloned()).collect();
            let ends = log_ends(b, &security, &all, std::time::Duration::from_secs(15))?;
            let mut missing = Vec::new();
            for r in rows.iter_mut() {
                if r.sinks.is_empty() {
                    continue;
                }
                let mut total = Some(0);
                for (t, p, committed) in &r.sinks {
                    let end = ends.get(&(t.clone(), *p));
                    r.ends.push(end.and_then(|e| e.as_ref().ok().copied()));
                    match end {
                        Some(Ok(end)) => total = total.map(|n| n + (end - committed).max(0)),
                        Some(Err(e)) => {
                            total = None;
                            missing.push(format!("{t}-{p} ({e})"));
                        }
                        None => total = None,
                    }
                }
                r.sink_lag = total;
            }
            if missing.is_empty() {
                format!("sink lag = log-end minus committed offset, from the brokers {b}")
            } else {
                format!(
                    "sink lag = log-end minus committed offset, from the brokers {b}; unknown where a partition has no log-end offset: {}",
                    missing.join(", ")
                )
            }
        }
        Some(_) => "sink lag (log-end minus committed offset) needs the `kafka` feature".to_string(),
        None => "sink lag (log-end minus committed offset) needs the brokers: a kafka:// store or --kafka HOSTS".to_string(),
    };
    if a.json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                let per: Vec<String> = r
                    .sinks
                    .iter()
                    .enumerate()
                    .map(|(i, (t, p, c))| {
                        let end = r.ends.get(i).copied().flatten();
                        format!(
                            "{{\"kafka_topic\":{},\"kafka_partition\":{p},\"committed\":{c},\"log_end\":{},\"lag\":{}}}",
                            quoted(t),
                            end.map_or("null".to_string(), |e| e.to_string()),
                            end.map_or("null".to_string(), |e| (e - c).max(0).to_string())
                        )
                    })
                    .collect();
                format!(
                    "{{\"name\":{},\"partitions\":{},\"sink_partitions\":{},\"commit_age_s\":{},\"unapplied_entries\":{},\"sink_lag\":{},\"sink_partition_lag\":[{}]}}",
                    quoted(&r.connector),
                    r.partitions,
                    r.sink_partitions,
                    r.commit_age
                        .map_or("null".to_string(), |s| format!("{s:.3}")),
                    r.unapplied,
                    r.sink_lag.map_or("null".to_string(), |l| l.to_string()),
                    per.join(",")
                )
            })
            .collect();
        print(
            format!(
                "{{\"store\":{},\"connectors\":[{}],\"alarms\":[{}],\"note\":{}}}",
                quoted(store.kind()),
                items.join(","),
                alarms_json(&alarms, now_ms),
                quoted(&sink_note)
            )
            .as_bytes(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    print(b"CONNECTOR\tPARTITIONS\tSINK\tSINK_LAG\tCOMMIT_AGE\tUNAPPLIED")?;
    for r in &rows {
        let age = match r.commit_age {
            Some(s) => format!(">= {s:.1}s"),
            None => "unknown".into(),
        };
        let lag = r.sink_lag.map_or("-".to_string(), |l| l.to_string());
        print(
            format!(
                "{}\t{}\t{}\t{lag}\t{age}\t{}",
                r.connector, r.partitions, r.sink_partitions, r.unapplied
            )
            .as_bytes(),
        )?;
    }
    if rows.iter().any(|r| !r.sinks.is_empty()) {
        print(b"")?;
        print(b"CONNECTOR\tKAFKA_TOPIC\tKAFKA_PARTITION\tCOMMITTED\tLOG_END\tLAG")?;
        for r in &rows {
            for (i, (t, p, c)) in r.sinks.iter().enumerate() {
                let end = r.ends.get(i).copied().flatten();
                let shown = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
                print(
                    format!(
                        "{}\t{t}\t{p}\t{c}\t{}\t{}",
                        r.connector,
                        shown(end),
                        shown(end.map(|e| (e - c).max(0)))
                    )
                    .as_bytes(),
                )?;
            }
        }
    }
    if !alarms.is_empty() {
        print(b"")?;
        print(b"CONNECTOR\tWRITER\tSTALLED\tUNMOVED\tBACKWARDS")?;
        for r in &alarms {
            print(
                format!(
                    "{}\t{}\t{}\t{}\t{}",
                    r.connector,
                    r.writer,
                    if r.stalled(now_ms) { "yes" } else { "no" },
                    connect_offsets::internal::time::format_duration(r.unmoved_for(now_ms)),
                    r.backwards
                )
                .as_bytes(),
            )?;
        }
    }
    // A sink connector's position is its group's, committed by its consumer: no log to ask.
    if a.wal_dir.is_none() && store.kind() != "kafka-group" {
        note!(
            "note: the {} store keeps no commit times; pass --wal-dir (the worker's log) for commit ages, or scrape the worker's connect_offsets_connector_oldest_pending_age_seconds",
            store.kind()
        );
    }
    if rows.iter().any(|r| r.sink_partitions > 0) {
        note!("note: {sink_note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The alarm records as `lag --json` gives them, judged at `now_ms`.
fn alarms_json(alarms: &[connect_offsets::alarms::AlarmRecord], now_ms: u64) -> String {
    let secs = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    alarms
        .iter()
        .map(|r| {
            format!(
                "{{\"connector\":{},\"writer\":{},\"stalled\":{},\"unmoved_s\":{},\"stall_after_s\":{},\"last_commit_age_s\":{},\"moved_backwards\":{},\"last_backwards_age_s\":{}}}",
                quoted(&r.connector),
                quoted(&r.writer),
                r.stalled(now_ms),
                secs(now_ms.saturating_sub(r.last_moved_ms)),
                secs(r.stall_after_ms),
                secs(now_ms.saturating_sub(r.last_commit_ms)),
                r.backwards,
                r.last_backwards_ms
                    .map_or("null".to_string(), |t| secs(now_ms.saturating_sub(t)))
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `(kafka_topic, kafka_partition, kafka_offset)` of a sink-style partition with an integral offset.
fn sink_position(
    (key, offset): &(OffsetKey, connect_offsets::Offset),
) -> Option<(String, i32, i64)> {
    use connect_offsets::Value;
    let p = key.partition()?;
    let (Some(Value::String(t)), Some(Value::Int(n)), Some(Value::Int(o))) = (
        p.get("kafka_topic"),
        p.get("kafka_partition"),
        offset.get("kafka_offset"),
    ) else {
        return None;
    };
    Some((t.clone(), i32::try_from(*n).ok()?, *o))
}

/// A sink-style partition's topic, partition and committed offset.
type SinkPosition = (String, i32, i64);

/// Per topic partition, its log-end offset or why it is unknown.
type LogEnds = std::collections::HashMap<(String, i32), std::result::Result<i64, String>>;

/// The log-end offset (high watermark) of each topic partition, all read within `within`: those
/// not read by then are unknown.
#[cfg(feature = "kafka")]
fn log_ends(
    brokers: &str,
    properties: &[(String, String)],
    parts: &[(String, i32, i64)],
    within: std::time::Duration,
) -> Result<LogEnds> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let mut out = std::collections::HashMap::new();
    if parts.is_empty() {
        return Ok(out);
    }
    let mut config = rdkafka::ClientConfig::new();
    for (k, v) in properties {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config
        .set("bootstrap.servers", brokers)
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| Error::store_caused("kafka", format!("kafka client for {brokers}"), e))?;
    let deadline = std::time::Instant::now() + within;
    for (t, p, _) in parts {
        if out.contains_key(&(t.clone(), *p)) {
            continue;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let end = match left.is_zero() {
            true => Err(format!("not read within {within:?}")),
            false => consumer
                .fetch_watermarks(t, *p, left)
                .map(|(_, high)| high)
                .map_err(|e| e.to_string()),
        };
        out.insert((t.clone(), *p), end);
    }
    Ok(out)
}

#[cfg(not(feature = "kafka"))]
fn log_ends(
    _: &str,
    _: &[(String, String)],
    _: &[(String, i32, i64)],
    _: std::time::Duration,
) -> Result<LogEnds> {
    Ok(Default::default())
}
