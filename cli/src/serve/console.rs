//! The console's side of `serve`: the page and its assets (built into the binary), and the
//! endpoints it needs beside Connect's: a summary of every connector, a page of partitions, dry
//! runs, rewind, export and import, and offsets whose connector is gone.
//!
//! | request | answer |
//! |---|---|
//! | `GET /` | the console (`cli/console/`) |
//! | `GET /console/info` | `{"store","history","connect_configs","version"}` (the URL's secrets masked) |
//! | `GET /connectors?expand=summary` | `{"name":{"summary":{"partitions","last_write","type","state","configured","alarms","lag","modifiable"}}}` |
//! | `GET /connectors/{name}/offsets/partitions?page&size&q&sort&order` | `{"total","page","size","partitions":[{"partition","offset","last_write"}]}` |
//! | `PATCH`, `DELETE /connectors/{name}/offsets?dry_run=true` | `{"dry_run":true,"changes":[{"partition","from","to"}]}`, nothing written |
//! | `POST /connectors/{name}/offsets/rewind` | `{"to","partition"?,"dry_run"?}` → `{"dry_run","at","changes","message"}` |
//! | `GET /offsets` | every connector's offsets (what `export` writes) |
//! | `POST /offsets/import[?dry_run=true]`, `POST /connectors/{name}/offsets/import` | `{"dry_run","connectors":[{"name","changes"}],"message"}` |
//! | `GET /orphans`, `DELETE /orphans/{name}[?dry_run=true]` | offsets whose connector has no config (`--connect-configs`) |

use std::collections::{BTreeMap, BTreeSet};

use connect_offsets::history::{self, HISTORY_PARAM, RewindTo};
use connect_offsets::internal::codec::json::{self, Json};
use connect_offsets::internal::connector_offsets::{ConnectorOffsets, OffsetsExport};
use connect_offsets::internal::store::url::StoreUrl;
use connect_offsets::internal::time;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Result};

use super::{Access, Reply, Server};
use crate::history::{offset_json, partition_json};
use crate::{orphans, quoted};

const PAGE: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/console.js");
const STYLE: &str = include_str!("../../console/console.css");

/// What the page may load and run: its own script and style, nothing inline, nothing from
/// elsewhere, and it may not be framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Partitions a page holds when the request names no size, and at most.
const PAGE_SIZE: usize = 50;
const MAX_PAGE_SIZE: usize = 1000;

/// A request's query parameters, percent-decoded.
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    pub(super) fn parse(target: &str) -> Query {
        let query = target.split_once('?').map_or("", |(_, q)| q);
        Query(
            query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    /// `name`, `name=true` or `name=1`.
    pub(super) fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("" | "true" | "1"))
    }
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// The headers every answer of the console's own files carries.
fn page_headers() -> Vec<(&'static str, String)> {
    vec![
        ("content-security-policy", CSP.to_string()),
        ("x-content-type-options", "nosniff".to_string()),
        ("x-frame-options", "DENY".to_string()),
        ("referrer-policy", "no-referrer".to_string()),
        ("cache-control", "no-store".to_string()),
    ]
}

/// The page, with the token its state-changing requests must carry.
pub(super) fn page(csrf_token: &str) -> Reply {
    Reply {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: PAGE.replace("{{CSRF_TOKEN}}", csrf_token),
        allow: None,
        headers: page_headers(),
    }
}

/// One of the page's files, by name.
pub(super) fn asset(name: &str) -> Option<Reply> {
    let (content_type, body) = match name {
        "console.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "console.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    Some(Reply {
        status: 200,
        content_type,
        body: body.to_string(),
        allow: None,
        headers: page_headers(),
    })
}

/// What a change would do to each partition: `(key, offset now, offset after)`.
pub(super) type Changes = Vec<(OffsetKey, Option<Offset>, Option<Offset>)>;

/// The changes `entries` make to `store`, leaving out partitions they leave as they are.
pub(super) fn changes(
    store: &dyn OffsetStore,
    entries: &[(OffsetKey, Option<Offset>)],
) -> Result<Changes> {
    let keys: Vec<OffsetKey> = entries.iter().map(|(k, _)| k.clone()).collect();
    let now = store.get_many(&keys)?;
    Ok(entries
        .iter()
        .zip(now)
        .filter(|((_, to), from)| to != from)
        .map(|((k, to), from)| (k.clone(), from, to.clone()))
        .collect())
}

fn changes_json(changes: &Changes) -> String {
    let items: Vec<String> = changes
        .iter()
        .map(|(k, from, to)| {
            format!(
                "{{\"partition\":{},\"from\":{},\"to\":{}}}",
                partition_json(k),
                offset_json(from.as_ref()),
                offset_json(to.as_ref())
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

pub(super) fn dry_run_reply(changes: &Changes) -> Reply {
    Reply::json(
        200,
        format!("{{\"dry_run\":true,\"changes\":{}}}", changes_json(changes)),
    )
}

fn time_json(ms: Option<u64>) -> String {
    ms.map_or("null".into(), |ms| {
        format!("\"{}\"", time::format_rfc3339(ms as i64 * 1000))
    })
}

/// The body of a console request: a JSON object's members.
fn object(body: &[u8]) -> std::result::Result<Vec<(String, Json)>, Reply> {
    match json::parse_strict(body) {
        Ok(Json::Object(members)) => Ok(members),
        Ok(other) => Err(Reply::error(
            400,
            &format!(
                "the request body must be a JSON object, not {}",
                other.kind()
            ),
        )),
        Err(e) => Err(Reply::error(
            400,
            &format!("the request body is not valid JSON: {e}"),
        )),
    }
}

impl Server {
    pub(super) fn info(&self) -> Reply {
        let history = StoreUrl::parse(self.url())
            .map(|u| u.param(HISTORY_PARAM).is_some())
            .unwrap_or(false);
        Reply::json(
            200,
            format!(
                "{{\"store\":{},\"history\":{history},\"connect_configs\":{},\"version\":{}}}",
                quoted(&self.shown_url),
                self.configs_url.is_some(),
                quoted(env!("CARGO_PKG_VERSION"))
            ),
        )
    }

    /// The URL the store is opened from.
    pub(super) fn url(&self) -> &str {
        match &self.access {
            Access::Shared(_) => &self.raw_url,
            Access::PerRequest(url) => url,
        }
    }

    /// Every connector with what the connectors view shows of it.
    pub(super) fn summary(&self) -> Reply {
        let cluster = match self.cluster() {
            Ok(c) => c,
            Err(r) => return r,
        };
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, "", false),
        };
        let store = handle.get();
        let mut names: BTreeSet<String> = self.known.clone();
        match store.namespaces() {
            Ok(n) => names.extend(
                n.into_iter()
                    .filter(|n| !connect_offsets::internal::namespaces::is_reserved_namespace(n)),
            ),
            Err(e) => return self.store_error(e, "", false),
        }
        if let Some(c) = &cluster {
            names.extend(c.names().map(str::to_string));
        }
        let now = time::now_ms();
        let alarms: BTreeMap<String, (bool, bool)> = connect_offsets::alarms::read(store)
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.connector.clone(), (r.stalled(now), r.backwards > 0)))
            .collect();
        let brokers = crate::ops::store_brokers(self.url());
        let unapplied = self
            .check_logs_applied(store, false)
            .err()
            .map(|r| message_of(&r));
        let mut rows = Vec::new();
        for name in &names {
            let configured = cluster.as_ref().map(|c| c.0.get(name));
            // A sink's offsets sit in a group a config may name (`consumer.override.group.id`).
            let own = match (configured.flatten(), self.sinks_store) {
                (Some(c), Some(true)) if c.group.is_some() => Some(self.open_for(name)),
                _ => None,
            };
            let parts = match &own {
                Some(Ok(h)) => h.get().partitions(name),
                Some(Err(_)) | None => store.partitions(name),
            };
            let parts = match parts {
                Ok(p) => p,
                Err(e) => return self.store_error(e, name, false),
            };
            let keys: Vec<OffsetKey> = parts.iter().map(|(k, _)| k.clone()).collect();
            let last = store
                .change_times(&keys)
                .ok()
                .and_then(|t| t.into_iter().flatten().max());
            let sink = match configured.flatten() {
                Some(c) => Some(c.sink),
                None => self.sinks_store,
            };
            let kind = sink.map_or("null", |s| if s { "\"sink\"" } else { "\"source\"" });
            let state = configured.flatten().map_or("null".into(), |c| {
                quoted(match c.state.as_str() {
                    "STARTED" => "RUNNING",
                    other => other,
                })
            });
            let configured_json =
                configured.map_or("null", |c| if c.is_some() { "true" } else { "false" });
            let (stalled, backwards) = alarms.get(name).copied().unwrap_or_default();
            let reason = match configured {
                Some(None) => Some(format!(
                    "connector {name} has no config in the Connect cluster: its offsets are orphaned (reset them from the orphans list)"
                )),
                _ => self.refusal(name, cluster.as_ref(), &unapplied),
            };
            let modifiable = format!(
                "{{\"ok\":{},\"reason\":{}}}",
                reason.is_none(),
                reason.as_deref().map_or("null".into(), quoted)
            );
            let head = format!(
                "{}:{{\"summary\":{{\"partitions\":{},\"last_write\":{},\"type\":{kind},\"state\":{state},\"configured\":{configured_json},\"alarms\":{{\"stalled\":{stalled},\"backwards\":{backwards}}}",
                quoted(name),
                parts.len(),
                time_json(last),
            );
            rows.push((name, sink == Some(true), parts, head, modifiable));
        }
        // Sinks' lag: their topics' log ends, from the store's brokers, all read at once.
        let lags = match &brokers {
            Some((b, security)) => {
                let sinks: Vec<(&str, &[(OffsetKey, Offset)])> = rows
                    .iter()
                    .filter(|r| r.1)
                    .map(|r| (r.0.as_str(), r.2.as_slice()))
                    .collect();
                crate::ops::sink_lags(b, security, &sinks, std::time::Duration::from_secs(2))
                    .unwrap_or_default()
            }
            None => Default::default(),
        };
        let items: Vec<String> = rows
            .iter()
            .map(|(name, _, _, head, modifiable)| {
                let lag = lags.get(name.as_str()).copied().flatten();
                let lag = lag.map_or("null".into(), |l| l.to_string());
                format!("{head},\"lag\":{lag},\"modifiable\":{modifiable}}}}}")
            })
            .collect();
        Reply::json(200, format!("{{{}}}", items.join(",")))
    }

    /// Why a modification of connector `name` would be refused now, if it would: the checks of
    /// [`Server::modify_many`] that need no lock of the store; `unapplied` is the refusal of
    /// [`Server::check_logs_applied`] (the same for every connector: it scans the logs).
    fn refusal(
        &self,
        name: &str,
        cluster: Option<&super::Cluster>,
        unapplied: &Option<String>,
    ) -> Option<String> {
        if let Some(c) = cluster {
            match c.connector(name) {
                Some(false) => return Some(super::not_stopped(name)),
                None => return Some(format!("Connector {name} not found")),
                Some(true) => {}
            }
            if let Some(r) = self.wrong_store(c, name) {
                return Some(message_of(&r));
            }
        }
        if let Err(r) = self.lock_logs(name) {
            return Some(message_of(&r));
        }
        unapplied.clone()
    }

    /// One page of a connector's partitions: those whose partition's JSON holds `q` (any case),
    /// newest write first (`sort=last_write`, the default) or in partition order.
    pub(super) fn partitions_page(&self, name: &str, query: &Query) -> Reply {
        let number = |key: &str, default: usize| -> std::result::Result<usize, Reply> {
            match query.get(key) {
                None | Some("") => Ok(default),
                Some(v) => v
                    .parse()
                    .map_err(|_| Reply::error(400, &format!("{key}={v}: not a whole number"))),
            }
        };
        let (page, size) = match (number("page", 0), number("size", PAGE_SIZE)) {
            (Ok(p), Ok(s)) if (1..=MAX_PAGE_SIZE).contains(&s) => (p, s),
            (Ok(_), Ok(s)) => {
                return Reply::error(
                    400,
                    &format!("size={s}: a page holds 1 to {MAX_PAGE_SIZE} partitions"),
                );
            }
            (Err(r), _) | (_, Err(r)) => return r,
        };
        let by_time = match query.get("sort") {
            None | Some("" | "last_write") => true,
            Some("partition") => false,
            Some(other) => {
                return Reply::error(
                    400,
                    &format!("sort={other}: sort by last_write or partition"),
                );
            }
        };
        let descending = match query.get("order") {
            None | Some("") => by_time,
            Some("desc") => true,
            Some("asc") => false,
            Some(other) => return Reply::error(400, &format!("order={other}: asc or desc")),
        };
        let (handle, parts) = match self.read_partitions(name) {
            Ok(r) => r,
            Err(r) => return r,
        };
        // At 100,000 partitions every step counts: a partition's JSON only to search it, change
        // times of every partition only to sort by them.
        let needle = query.get("q").unwrap_or("").to_lowercase();
        let mut rows: Vec<usize> = (0..parts.len())
            .filter(|&i| {
                needle.is_empty() || partition_json(&parts[i].0).to_lowercase().contains(&needle)
            })
            .collect();
        let times_of = |rows: &[usize]| {
            let keys: Vec<OffsetKey> = rows.iter().map(|&i| parts[i].0.clone()).collect();
            handle.get().change_times(&keys)
        };
        let mut times: Vec<Option<u64>> = vec![None; parts.len()];
        if by_time {
            match times_of(&rows) {
                Ok(t) => rows.iter().zip(t).for_each(|(&i, t)| times[i] = t),
                Err(e) => return self.store_error(e, name, false),
            }
            // Ties in partition order whichever way the times go.
            rows.sort_by(|&a, &b| times[a].cmp(&times[b]).then(b.cmp(&a)));
        }
        if descending {
            rows.reverse();
        }
        let total = rows.len();
        let shown: Vec<usize> = rows
            .into_iter()
            .skip(page.saturating_mul(size))
            .take(size)
            .collect();
        if !by_time {
            match times_of(&shown) {
                Ok(t) => shown.iter().zip(t).for_each(|(&i, t)| times[i] = t),
                Err(e) => return self.store_error(e, name, false),
            }
        }
        drop(handle);
        let items: Vec<String> = shown
            .iter()
            .map(|&i| {
                format!(
                    "{{\"partition\":{},\"offset\":{},\"last_write\":{}}}",
                    partition_json(&parts[i].0),
                    offset_json(Some(&parts[i].1)),
                    time_json(times[i])
                )
            })
            .collect();
        Reply::json(
            200,
            format!(
                "{{\"total\":{total},\"page\":{page},\"size\":{size},\"partitions\":[{}]}}",
                items.join(",")
            ),
        )
    }

    /// `POST /connectors/{name}/offsets/rewind`: the offsets the connector (or one partition)
    /// held at a time, from the store's history; a dry run shows the moves.
    pub(super) fn rewind(&mut self, name: &str, body: &[u8]) -> Reply {
        let members = match object(body) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let (mut to, mut key, mut dry_run) = (None, None, false);
        for (field, value) in members {
            match (field.as_str(), value) {
                ("to", Json::String(s)) => match s.parse::<RewindTo>() {
                    Ok(t) => to = Some(t),
                    Err(e) => return Reply::error(400, &format!("to: {e}")),
                },
                ("partition", Json::Null) => key = Some(OffsetKey::null_partition(name)),
                ("partition", Json::Object(m)) => match json::to_map(m, "partition") {
                    Ok(p) => key = Some(OffsetKey::new(name, p)),
                    Err(e) => return Reply::error(400, &e),
                },
                ("dry_run", Json::Bool(b)) => dry_run = b,
                (f @ ("to" | "partition" | "dry_run"), v) => {
                    return Reply::error(400, &format!("{f} cannot be {}", v.kind()));
                }
                (other, _) => {
                    return Reply::error(
                        400,
                        &format!(
                            "unknown field `{other}`: a rewind takes to, partition and dry_run"
                        ),
                    );
                }
            }
        }
        let Some(to) = to else {
            return Reply::error(
                400,
                "to is missing: the time to rewind to (RFC 3339, as 2026-12-07T10:00:00Z) or seq:N",
            );
        };
        let has_history = StoreUrl::parse(self.url())
            .map(|u| u.param(HISTORY_PARAM).is_some())
            .unwrap_or(false);
        if !has_history {
            return Reply::error(
                400,
                &format!(
                    "the store {} keeps no history to rewind with: serve it with ?{HISTORY_PARAM}=<retention> (e.g. {HISTORY_PARAM}=7d), which records offsets' moves from then on",
                    self.shown_url
                ),
            );
        }
        let plan = |store: &dyn OffsetStore| {
            history::plan_rewind(store, name, to, key.as_ref(), time::now_us())
        };
        let write = |store: &dyn OffsetStore| {
            let plan = plan(store)?;
            if !dry_run && !plan.moves.is_empty() {
                store.write(plan.entries())?;
            }
            Ok(plan)
        };
        let plan = match self.modify(name, dry_run, || Ok(()), write) {
            Ok(((), plan)) => plan,
            Err(r) => return r,
        };
        let changes: Changes = plan
            .moves
            .iter()
            .map(|m| (m.key.clone(), m.from.clone(), m.to.clone()))
            .collect();
        let at = time::format_rfc3339(plan.at_us);
        let n = changes.len();
        let what = format!(
            "{n} partition{} of connector {name} to {at}",
            if n == 1 { "" } else { "s" }
        );
        let message = match (dry_run, n) {
            (true, _) => format!("would rewind {what}; nothing written"),
            (false, 0) => format!("nothing to rewind: connector {name} is where it was then"),
            (false, _) => {
                tracing::info!(
                    connector = name,
                    partitions = n,
                    "offsets rewound through the REST API"
                );
                format!("rewound {what}")
            }
        };
        Reply::json(
            200,
            format!(
                "{{\"dry_run\":{dry_run},\"at\":\"{at}\",\"changes\":{},\"message\":{}}}",
                changes_json(&changes),
                quoted(&message)
            ),
        )
    }

    /// `GET /offsets`: every connector's offsets, in the document `export` writes.
    pub(super) fn export_all(&self) -> Reply {
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, "", false),
        };
        if let Err(r) = self.check_logs_idle("") {
            return r;
        }
        if let Err(r) = self.check_logs_applied(handle.get(), true) {
            return r;
        }
        // Connectors only: the crate's own records (history, markers, alarms) stay with the store.
        let store = handle.get();
        let mut doc = OffsetsExport::default();
        let names = match store.namespaces() {
            Ok(n) => n,
            Err(e) => return self.store_error(e, "", false),
        };
        for name in names
            .into_iter()
            .filter(|n| !connect_offsets::internal::namespaces::is_reserved_namespace(n))
        {
            match store.partitions(&name) {
                Ok(parts) => doc
                    .connectors
                    .push((name, ConnectorOffsets::from_stored(&parts))),
                Err(e) => return self.store_error(e, &name, false),
            }
        }
        let mut out = Vec::new();
        doc.encode(&mut out);
        Reply::json(200, String::from_utf8_lossy(&out).into_owned())
    }

    /// `POST /offsets/import` (an export document) or `POST /connectors/{name}/offsets/import`
    /// (one connector's `{"offsets":[…]}`): every connector's offsets in one atomic write.
    pub(super) fn import(&mut self, connector: Option<&str>, body: &[u8], dry_run: bool) -> Reply {
        let doc = match connector {
            Some(name) => ConnectorOffsets::parse(body).map(|offsets| OffsetsExport {
                connectors: vec![(name.to_string(), offsets)],
            }),
            None => OffsetsExport::parse(body, None).map_err(|e| e.to_string()),
        };
        let doc = match doc {
            Ok(d) => d,
            Err(e) => return Reply::error(400, &e),
        };
        let mut names = Vec::new();
        let mut entries = Vec::new();
        let mut left_out = Vec::new();
        for (name, offsets) in doc.connectors {
            // An export of a store with history holds its records: the store records its own.
            if connect_offsets::internal::namespaces::is_reserved_namespace(&name) {
                left_out.push(name);
                continue;
            }
            entries.push((name.clone(), offsets.into_entries(&name)));
            names.push(name);
        }
        if names.is_empty() {
            return Reply::error(400, "the document holds no connector");
        }
        let all: Vec<(OffsetKey, Option<Offset>)> = entries
            .iter()
            .flat_map(|(_, e)| e.iter().cloned())
            .collect();
        let change = |store: &dyn OffsetStore| {
            let per: Vec<(String, Changes)> = entries
                .iter()
                .map(|(name, e)| Ok((name.clone(), changes(store, e)?)))
                .collect::<Result<_>>()?;
            if !dry_run {
                store.write(all.clone())?;
            }
            Ok(per)
        };
        let per = match self.modify_many(&names, true, dry_run, || Ok(()), change) {
            Ok(((), per)) => per,
            Err(r) => return r,
        };
        let n: usize = per.iter().map(|(_, c)| c.len()).sum();
        let mut message = if dry_run {
            format!(
                "would change {n} partition(s) of {} connector(s); nothing written",
                per.len()
            )
        } else {
            tracing::info!(
                connectors = per.len(),
                partitions = n,
                "offsets imported through the REST API"
            );
            format!(
                "imported: {n} partition(s) of {} connector(s) changed",
                per.len()
            )
        };
        if !left_out.is_empty() {
            message.push_str(&format!(
                " (left out {}: the crate's own records, not connectors)",
                left_out.join(", ")
            ));
        }
        let items: Vec<String> = per
            .iter()
            .map(|(name, c)| {
                format!(
                    "{{\"name\":{},\"changes\":{}}}",
                    quoted(name),
                    changes_json(c)
                )
            })
            .collect();
        Reply::json(
            200,
            format!(
                "{{\"dry_run\":{dry_run},\"connectors\":[{}],\"message\":{}}}",
                items.join(","),
                quoted(&message)
            ),
        )
    }

    /// The connectors whose offsets are in use, or the 400 saying orphans need
    /// `--connect-configs`.
    fn configured(&self) -> std::result::Result<BTreeSet<String>, Reply> {
        match self.cluster()? {
            Some(c) => c
                .in_use(self.url())
                .map_err(|e| Reply::error(500, &e.to_string())),
            None => Err(Reply::error(
                400,
                "which connectors are gone is known from Connect's config topic: serve with --connect-configs kafka://<brokers>/<config topic>",
            )),
        }
    }

    /// `GET /orphans`: connectors with offsets and no config.
    pub(super) fn orphans(&self) -> Reply {
        let configured = match self.configured() {
            Ok(c) => c,
            Err(r) => return r,
        };
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, "", false),
        };
        let found = match orphans::find(handle.get(), &configured) {
            Ok(f) => f,
            Err(e) => return self.store_error(e, "", false),
        };
        let items: Vec<String> = found
            .iter()
            .map(|o| {
                format!(
                    "{{\"name\":{},\"partitions\":{},\"last_write\":{},\"type\":\"{}\"}}",
                    quoted(&o.name),
                    o.partitions,
                    time_json(o.last_write_ms),
                    if o.sink { "sink" } else { "source" }
                )
            })
            .collect();
        Reply::json(200, format!("[{}]", items.join(",")))
    }

    /// `DELETE /orphans/{name}`: resets every partition of a connector that has no config.
    pub(super) fn reset_orphan(&mut self, name: &str, dry_run: bool) -> Reply {
        let configured = match self.configured() {
            Ok(c) => c,
            Err(r) => return r,
        };
        if configured.contains(name) {
            return Reply::error(
                400,
                &format!(
                    "connector {name} has a config in the Connect cluster: it is not an orphan (reset its offsets with DELETE /connectors/{name}/offsets once it is stopped)"
                ),
            );
        }
        if connect_offsets::internal::namespaces::is_reserved_namespace(name) {
            return Reply::error(
                400,
                &format!(
                    "{name} is a namespace the crate keeps its own records in, no connector's; nothing written"
                ),
            );
        }
        let _guards = match self.lock_logs(name) {
            Ok(g) => g,
            Err(r) => return r,
        };
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, name, true),
        };
        let store = handle.get();
        if let Err(r) = self.check_logs_applied(store, false) {
            return r;
        }
        let parts = match store.partitions(name) {
            Ok(p) if p.is_empty() => {
                return Reply::error(404, &format!("connector {name} holds no offsets"));
            }
            Ok(p) => p,
            Err(e) => return self.store_error(e, name, true),
        };
        let changes: Changes = parts.into_iter().map(|(k, o)| (k, Some(o), None)).collect();
        let n = changes.len();
        let message = if dry_run {
            format!("would reset {n} partition(s) of orphaned connector {name}; nothing written")
        } else {
            if let Err(e) = orphans::reset(store, name) {
                return self.store_error(e, name, true);
            }
            tracing::info!(
                connector = name,
                partitions = n,
                "orphaned offsets reset through the REST API"
            );
            format!("reset {n} partition(s) of orphaned connector {name}")
        };
        Reply::json(
            200,
            format!(
                "{{\"dry_run\":{dry_run},\"changes\":{},\"message\":{}}}",
                changes_json(&changes),
                quoted(&message)
            ),
        )
    }
}

/// The message of an error reply.
fn message_of(r: &Reply) -> String {
    match json::parse(r.body.as_bytes()) {
        Ok(Json::Object(m)) => m
            .into_iter()
            .find_map(|(k, v)| match (k.as_str(), v) {
                ("message", Json::String(s)) => Some(s),
                _ => None,
            })
            .unwrap_or_else(|| r.body.clone()),
        _ => r.body.clone(),
    }
}

/// The page and its files: served without a bearer token (they hold no offsets; the page asks
/// for the token).
pub(super) fn is_page_file(method: &str, target: &str) -> bool {
    let path = target.split('?').next().unwrap_or("");
    matches!(method, "GET" | "HEAD")
        && (path == "/" || (path.starts_with("/console/") && path != "/console/info"))
}

/// Whether answering `target` needs what Connect's config topic says.
pub(super) fn needs_cluster(target: &str) -> bool {
    let path = target.split('?').next().unwrap_or("");
    ["/connectors", "/orphans", "/offsets"]
        .iter()
        .any(|p| path.starts_with(p))
}
