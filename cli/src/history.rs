//! `history` and `rewind`: how a connector's offsets moved, and putting them back where they were.

use std::process::ExitCode;

use connect_offsets::history::{
    self, Change, HISTORY_PARAM, HistoryConfig, HistoryStore, RewindTo,
};
use connect_offsets::internal::codec::json;
use connect_offsets::internal::store::url::StoreUrl;
use connect_offsets::internal::time;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Result};

use super::{StoreArg, open_existing, open_read_only, parse_key, print, quoted};

#[derive(clap::Args, Debug)]
pub(crate) struct HistoryArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
    /// Only this partition (a JSON object or null).
    #[arg(long)]
    partition: Option<String>,
    /// Only changes at or after this RFC 3339 time.
    // Taken even when it starts with `-`, so that `-5m` gets the time's own message.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    since: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RewindArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
    /// Where to: an RFC 3339 time (2026-12-01T09:40:00Z) or seq:N (right after batch N).
    // Taken even when it starts with `-`, so that `-5m` gets the time's own message.
    #[arg(long, value_name = "TIME|seq:N", allow_hyphen_values = true)]
    to: String,
    /// Only this partition (a JSON object or null).
    #[arg(long)]
    partition: Option<String>,
    /// Print the moves and write nothing.
    #[arg(long)]
    dry_run: bool,
}

pub(crate) fn offset_json(o: Option<&Offset>) -> String {
    let mut out = Vec::new();
    match o {
        Some(o) => json::encode_map(o, &mut out),
        None => out.extend_from_slice(b"null"),
    }
    String::from_utf8(out).expect("the encoder writes UTF-8")
}

pub(crate) fn partition_json(key: &OffsetKey) -> String {
    offset_json(key.partition())
}

/// `{"partition":…}: from -> to`, a reset shown as `reset`, no offset as `none`.
fn move_line(key: &OffsetKey, from: Option<&Offset>, to: Option<&Offset>) -> String {
    let show = |o: Option<&Offset>, absent: &str| match o {
        Some(_) => offset_json(o),
        None => absent.to_string(),
    };
    format!(
        "{}: {} -> {}",
        partition_json(key),
        show(from, "none"),
        show(to, "reset")
    )
}

/// `{"connector":…,"oldest_reachable":…,"changes":[{"at","writer","seq","partition","from","to"}]}`
/// (`history --json`, and `serve`'s `GET /connectors/{name}/offsets/history`).
pub(crate) fn history_json(
    connector: &str,
    horizon_us: Option<i64>,
    changes: &[&Change],
) -> String {
    let items: Vec<String> = changes
        .iter()
        .map(|c| {
            format!(
                "{{\"at\":\"{}\",\"writer\":{},\"seq\":{},\"partition\":{},\"from\":{},\"to\":{}}}",
                time::format_rfc3339(c.at_us),
                quoted(&c.writer),
                c.seq,
                partition_json(&c.key),
                offset_json(c.from.as_ref()),
                offset_json(c.to.as_ref())
            )
        })
        .collect();
    let horizon = horizon_us.map_or("null".into(), |t| {
        format!("\"{}\"", time::format_rfc3339(t))
    });
    format!(
        "{{\"connector\":{},\"oldest_reachable\":{horizon},\"changes\":[{}]}}",
        quoted(connector),
        items.join(",")
    )
}

/// Refuses `command` on a sink connector's consumer group, which holds committed offsets only:
/// there is no `?history=` to advise (the URL refuses it), so say so.
fn refuse_sink_group(store: &dyn OffsetStore, command: &str) -> Result<()> {
    if store.kind() != "kafka-group" {
        return Ok(());
    }
    Err(connect_offsets::Error::Input(no_history_on_groups(command)))
}

/// Why `command` (`history`, `rewind`) is refused on `kafka-group://`.
pub(crate) fn no_history_on_groups(command: &str) -> String {
    format!(
        "`{command}` is not available on kafka-group://: sink connectors' consumer groups keep \
         no history (only their committed offsets), and none can be turned on for them; \
         `list` shows the committed offsets, and `set` or `reset` moves them"
    )
}

/// Why a connector's history cannot be shown: its store was not opened with `?history=`.
pub(crate) fn no_history(connector: &str) -> String {
    format!(
        "the store holds no history for connector `{connector}`: it records how offsets move when \
         opened with `?{HISTORY_PARAM}=<retention>` (e.g. {HISTORY_PARAM}=7d)"
    )
}

/// Newest batch first; a batch's changes stay in partition order.
pub(crate) fn newest_first(changes: &mut [&Change]) {
    changes.sort_by_key(|c| std::cmp::Reverse((c.at_us, c.seq)));
}

pub(crate) fn show(a: HistoryArgs) -> Result<ExitCode> {
    let key = a
        .partition
        .as_deref()
        .map(|p| parse_key(&a.connector, p))
        .transpose()?;
    let since = a
        .since
        .as_deref()
        .map(time::parse_rfc3339)
        .transpose()
        .map_err(|e| e.context("--since"))?;
    let store = open_read_only(&a.store)?;
    refuse_sink_group(&*store, "history")?;
    super::warn_unapplied(&*store, Some(&a.connector), false);
    let h = history::read(&*store, &a.connector)?;
    if h.changes.is_empty() && store.partitions(&a.connector)?.is_empty() {
        return Err(connect_offsets::Error::Input(format!(
            "unknown connector `{}`: the store holds no offsets and no history for it",
            a.connector
        )));
    }
    if h.horizon_us.is_none() {
        return Err(connect_offsets::Error::Input(no_history(&a.connector)));
    }
    let mut shown: Vec<&Change> = h
        .changes
        .iter()
        .filter(|c| key.as_ref().is_none_or(|k| *k == c.key))
        .filter(|c| since.is_none_or(|s| c.at_us >= s))
        .collect();
    newest_first(&mut shown);
    if a.json {
        print(history_json(&a.connector, h.horizon_us, &shown).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    for c in &shown {
        let by = if c.seq == 0 {
            "tool".to_string()
        } else {
            format!("{} seq {}", c.writer, c.seq)
        };
        print(
            format!(
                "{}  {by}  {}",
                time::format_rfc3339(c.at_us),
                move_line(&c.key, c.from.as_ref(), c.to.as_ref())
            )
            .as_bytes(),
        )?;
    }
    for why in &h.unreadable {
        note!("warning: a history record is left out: {why}");
    }
    if let Some(t) = h.horizon_us {
        note!(
            "{} change{} of connector `{}`, newest first; rewinds reach back to {}",
            shown.len(),
            if shown.len() == 1 { "" } else { "s" },
            a.connector,
            time::format_rfc3339(t)
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn rewind(a: RewindArgs) -> Result<ExitCode> {
    let to: RewindTo =
        a.to.parse()
            .map_err(|e: connect_offsets::Error| e.context("--to"))?;
    let key = a
        .partition
        .as_deref()
        .map(|p| parse_key(&a.connector, p))
        .transpose()?;
    let store = open_existing(&a.store)?;
    refuse_sink_group(&*store, "rewind")?;
    super::warn_unapplied(&*store, Some(&a.connector), true);
    // The rewind is a move too: recorded even when the URL names no retention, or later rewinds
    // across it would work back from offsets history never saw.
    let store: Box<dyn OffsetStore> = if StoreUrl::parse(&a.store.store)?
        .param(HISTORY_PARAM)
        .is_some()
    {
        store
    } else {
        Box::new(HistoryStore::open(store, HistoryConfig::keep_all())?)
    };
    let plan = history::plan_rewind(&*store, &a.connector, to, key.as_ref(), time::now_us())?;
    for m in &plan.moves {
        print(move_line(&m.key, m.from.as_ref(), m.to.as_ref()).as_bytes())?;
    }
    let n = plan.moves.len();
    let what = format!(
        "{n} partition{} of connector `{}` to {}",
        if n == 1 { "" } else { "s" },
        a.connector,
        time::format_rfc3339(plan.at_us)
    );
    if a.dry_run {
        note!("dry run: would rewind {what}; nothing written");
    } else if n == 0 {
        note!(
            "nothing to rewind: connector `{}` is where it was then",
            a.connector
        );
    } else {
        store.write(plan.entries())?;
        note!("rewound {what}");
    }
    Ok(ExitCode::SUCCESS)
}
