//! `expire`: resets the partitions of a connector not written for a while ([`connect_offsets::expire`]).

use std::process::ExitCode;
use std::time::Duration;

use connect_offsets::Result;
use connect_offsets::expire::{self, ExpirePlan};
use connect_offsets::internal::codec::json;
use connect_offsets::internal::connector_offsets::encode_entry;
use connect_offsets::internal::time::{format_duration, now_ms, parse_duration};

use super::{StoreArg, open_existing, print, quoted};

#[derive(clap::Args, Debug)]
pub(crate) struct ExpireArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The connector (namespace).
    #[arg(long)]
    connector: String,
    /// Reset partitions not written for this long: a whole number and a unit (ms, s, m, h, d, w),
    /// e.g. 30d.
    #[arg(long, value_name = "DURATION", value_parser = older_than)]
    older_than: Duration,
    /// List the partitions that would be reset, with offset and age; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// A zero age would reset every partition, whenever it was written: a slip, not an expiry.
fn older_than(text: &str) -> std::result::Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!(
            "`{text}` would reset every partition; to reset them all say `reset --all`"
        ));
    }
    Ok(d)
}

pub(crate) fn run(a: ExpireArgs) -> Result<ExitCode> {
    let store = open_existing(&a.store)?;
    super::warn_unapplied(&*store, Some(&a.connector), !a.dry_run);
    let plan = expire::plan(&*store, &a.connector, a.older_than, now_ms())?;
    let n = if a.dry_run {
        plan.stale.len()
    } else {
        plan.apply(&*store)?
    };
    if a.json {
        print(&plan_json(&plan, a.dry_run))?;
    } else {
        for s in &plan.stale {
            let mut line = Vec::new();
            encode_entry(s.key.partition(), Some(&s.offset), &mut line);
            line.extend_from_slice(format!("\tage {}", format_duration(s.age)).as_bytes());
            print(&line)?;
        }
    }
    let total = plan.stale.len() + plan.fresh + plan.untimed;
    let verb = if a.dry_run { "would reset" } else { "reset" };
    note!(
        "{verb} {n} of {total} partition{} of connector `{}` (not written for {})",
        if total == 1 { "" } else { "s" },
        a.connector,
        format_duration(a.older_than),
    );
    if plan.untimed > 0 {
        note!(
            "note: {} partition{} kept: no write time recorded (written before this version recorded them)",
            plan.untimed,
            if plan.untimed == 1 { "" } else { "s" },
        );
    }
    if a.dry_run {
        note!("dry run: nothing written");
    }
    Ok(ExitCode::SUCCESS)
}

fn plan_json(plan: &ExpirePlan, dry_run: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        format!(
            "{{\"connector\":{},\"older_than_ms\":{},\"dry_run\":{dry_run},\"expired\":[",
            quoted(&plan.connector),
            plan.older_than.as_millis()
        )
        .as_bytes(),
    );
    for (i, s) in plan.stale.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"partition\":");
        match s.key.partition() {
            Some(p) => json::encode_map(p, &mut out),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"offset\":");
        json::encode_map(&s.offset, &mut out);
        out.extend_from_slice(
            format!(
                ",\"written_ms\":{},\"age_ms\":{}}}",
                s.written_ms,
                s.age.as_millis()
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(
        format!("],\"kept\":{},\"untimed\":{}}}", plan.fresh, plan.untimed).as_bytes(),
    );
    out
}
