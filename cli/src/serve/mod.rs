//! `serve`: Kafka Connect's offsets REST API (KIP-875) over any store, and `/metrics`; the console's
//! endpoints are in `console.rs`.
//!
//! | request | answer |
//! |---|---|
//! | `GET /connectors` | 200 `["name",...]` |
//! | `GET /connectors/{name}/offsets` | 200 `{"offsets":[{"partition":...,"offset":...}]}` |
//! | `PATCH /connectors/{name}/offsets` | 200 `{"message":...}`; `"offset": null` resets a partition |
//! | `DELETE /connectors/{name}/offsets` | 200 `{"message":...}`: every partition reset |
//! | `GET /connectors/{name}/offsets/history` | 200 what `history --json` prints (ours, not Connect's) |
//! | `GET /metrics` | Prometheus text |
//!
//! Errors are `{"error_code":N,"message":"..."}` with Connect 4.4's texts where it has one; where
//! Connect answers 500 for a client's mistake (an empty body, malformed JSON) this server answers
//! 400 naming it. Success messages are Connect's "framework-managed" ones (a store cannot know
//! whether a connector keeps offsets elsewhere), MirrorMaker 2's for its connectors.
//!
//! "The connector must be stopped" is about the store here: a modification is refused with 400
//! while a running writer holds the store (it is opened per request) or a `--wal-dir` log, and a
//! read answers 409; a log holding batches the store has not applied gets 409 for both. With
//! `--connect-configs` the server follows the cluster's config topic as its herder does. The rules,
//! as a user reads them, are in `docs/cli.md` (section `serve`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use connect_offsets::connect::checks::{Managed, check_alter};
use connect_offsets::internal::connector_offsets::ConnectorOffsets;
use connect_offsets::internal::fs::{RealFs, WalFs};
use connect_offsets::internal::store::url::StoreUrl;
use connect_offsets::internal::wal::frame::FrameKind;
use connect_offsets::internal::wal::inspect;
use connect_offsets::metrics::PrometheusHandle;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::{Error, Offset, OffsetKey, OffsetStore, Result};

use super::http::{self, Limits, Request, Response};

mod auto_reset;
mod console;
mod security;
use super::{StoreArg, quoted};

#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Address to listen on (port 0 picks a free port; the address is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8083")]
    listen: String,
    /// A commit buffer's log directory: modifications are refused while a writer holds it, or
    /// while it holds batches the store has not applied. Repeatable.
    #[arg(long)]
    wal_dir: Vec<PathBuf>,
    /// A connector known even while it has no offsets (GET answers {"offsets":[]} rather than 404).
    /// Repeatable.
    #[arg(long)]
    connector: Vec<String>,
    /// Kafka Connect's config topic (a worker's `config.storage.topic`), as
    /// kafka://host:port/<topic>: the connectors are those configured there, and a modification
    /// is refused unless the connector is stopped, as the worker's herder checks.
    #[arg(long, value_name = "URL")]
    connect_configs: Option<String>,
    /// A file whose first line is a bearer token every client must send (`Authorization: Bearer`);
    /// the console asks for it. Needed to listen beyond loopback (or --basic-auth-file).
    #[arg(long, value_name = "FILE", conflicts_with = "basic_auth_file")]
    token_file: Option<PathBuf>,
    /// A file whose first line is `user:password`: every client must send them (HTTP basic
    /// authentication; the browser asks).
    #[arg(long, value_name = "FILE")]
    basic_auth_file: Option<PathBuf>,
    /// The certificate chain (PEM) to serve HTTPS with; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Resets the offsets of a connector deleted from the Connect cluster once it has been gone
    /// this long (and its offsets unchanged as long), as `10m` or `7d`; recorded in a store's
    /// history, so a rewind brings them back. Needs --connect-configs.
    #[arg(long, value_name = "DURATION", requires = "connect_configs", value_parser = grace)]
    reset_orphans_after: Option<Duration>,
}

/// Connect's texts (Worker.completeModifyOffsetsCallback, for connectors that do not manage their
/// offsets themselves; ConnectorsResource; AbstractHerder).
const ALTERED: &str = "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses.";
const RESET: &str = "The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses.";
/// Connect's texts for a connector whose `alterOffsets` returned true (MirrorMaker 2's).
const ALTERED_BY_CONNECTOR: &str = "The offsets for this connector have been altered successfully";
const RESET_BY_CONNECTOR: &str = "The offsets for this connector have been reset successfully";
const NO_OFFSETS: &str = "Partitions / offsets need to be provided for an alter offsets request";

/// A connection's limits: Jetty's defaults where a Connect worker has them (a 30 s idle timeout,
/// an 8 KiB request head), and a body no offsets request comes near.
const LIMITS: Limits = Limits {
    idle: Duration::from_secs(30),
    request: Duration::from_secs(120),
    head_bytes: 8 << 10,
    body_bytes: 16 << 20,
    connections: 128,
};

enum Access {
    /// One store for the server's lifetime (memory://).
    Shared(Box<dyn OffsetStore>),
    /// Opened for each request, closed after it.
    PerRequest(String),
}

struct Server {
    access: Access,
    /// What the config topic said for the request being answered (read before the server's
    /// lock is taken: a slow broker delays that request, not every other).
    cluster_now: Option<std::result::Result<Cluster, String>>,
    shown_url: String,
    /// `Some(true)` when the store holds sinks' offsets only (consumer groups), `Some(false)`
    /// when it holds sources' only (an offsets topic).
    sinks_store: Option<bool>,
    wal_dirs: Vec<PathBuf>,
    known: BTreeSet<String>,
    metrics: PrometheusHandle,
    /// The store's URL as given (secrets included: never shown).
    raw_url: String,
    /// `--connect-configs`.
    configs_url: Option<String>,
    /// What the console's state-changing requests carry (`security`).
    csrf_token: String,
}

/// An HTTP answer.
type Reply = Response;

impl Response {
    fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            body,
            content_type: "application/json",
            allow: None,
            headers: Vec::new(),
        }
    }
    fn message(text: &str) -> Reply {
        Reply::json(200, format!("{{\"message\":{}}}", quoted(text)))
    }
}

/// A store handle for one request: borrowed (shared) or owned (closed when dropped).
enum Handle<'a> {
    Borrowed(&'a dyn OffsetStore),
    Owned(Box<dyn OffsetStore>),
}

impl Handle<'_> {
    fn get(&self) -> &dyn OffsetStore {
        match self {
            Handle::Borrowed(s) => *s,
            Handle::Owned(s) => &**s,
        }
    }
}

impl Server {
    fn open(&self) -> Result<Handle<'_>> {
        match &self.access {
            Access::Shared(s) => Ok(Handle::Borrowed(&**s)),
            Access::PerRequest(url) => Ok(Handle::Owned(connect_offsets::open(url)?)),
        }
    }

    /// The store of connector `name`: over consumer groups, the group its config names with
    /// `consumer.override.group.id` (as Connect's worker derives it) when it names one.
    fn open_for(&self, name: &str) -> Result<Handle<'_>> {
        let group = match (&self.cluster_now, self.sinks_store, &self.access) {
            (Some(Ok(c)), Some(true), Access::PerRequest(url)) => {
                c.0.get(name)
                    .and_then(|c| c.group.clone())
                    .map(|g| (g, url))
            }
            _ => None,
        };
        match group {
            Some((group, url)) => Ok(Handle::Owned(own_group_store(url, &group, name)?)),
            None => self.open(),
        }
    }

    fn in_use_message(&self, reason: &str, connector: &str) -> String {
        format!(
            "Connectors must be in the STOPPED state before their offsets can be modified. The offset store {} is held by a running writer ({reason}); stop the worker that uses it (for a Kafka Connect worker: a 'PUT' request to the '/connectors/{connector}/stop' endpoint) and retry",
            self.shown_url
        )
    }

    fn store_error(&self, e: Error, connector: &str, modifying: bool) -> Reply {
        match e {
            Error::Locked { path, reason } if modifying => Reply::error(
                400,
                &self.in_use_message(
                    &format!("{} is locked by another process: {reason}", path.display()),
                    connector,
                ),
            ),
            Error::Locked { path, reason } => Reply::error(
                409,
                &format!(
                    "The offset store {} is in use by a running writer ({} is locked by another process: {reason}); its offsets cannot be read until it stops",
                    self.shown_url,
                    path.display()
                ),
            ),
            // A partition or offset the store cannot take (a sink connector's, say): the
            // client's mistake, as Connect's BadRequestException.
            Error::InvalidData(reason) => Reply::error(400, &reason),
            other => Reply::error(500, &other.to_string()),
        }
    }

    fn known(&self, store: &dyn OffsetStore, name: &str) -> Result<bool> {
        Ok(self.known.contains(name) || !store.partitions(name)?.is_empty())
    }

    /// The connectors Connect's config topic holds (`--connect-configs`), as read for this
    /// request.
    fn cluster(&self) -> std::result::Result<Option<Cluster>, Reply> {
        match &self.cluster_now {
            None => Ok(None),
            Some(Ok(c)) => Ok(Some(c.clone())),
            Some(Err(e)) => Err(Reply::error(
                500,
                &format!("cannot read Connect's config topic: {e}"),
            )),
        }
    }

    /// A configured connector whose offsets this server's store does not hold: a sink's are its
    /// consumer group's (kafka-group://), a source's are in an offsets topic (kafka://). Connect
    /// goes to the right place by the connector's type; a store can only say so.
    fn wrong_store(&self, cluster: &Cluster, name: &str) -> Option<Reply> {
        let (c, sinks) = (cluster.0.get(name)?, self.sinks_store?);
        if c.sink == sinks {
            return None;
        }
        let (what, held, instead) = if c.sink {
            (
                "a sink connector",
                "its consumer group",
                "kafka-group://<brokers>/?group=connect-{connector}",
            )
        } else {
            (
                "a source connector",
                "an offsets topic",
                "kafka://<brokers>/<offsets topic>",
            )
        };
        Some(Reply::error(
            400,
            &format!(
                "Connector {name} is {what} ({}): its offsets are in {held}, which the store this server serves ({}) does not hold; serve them with --store {instead}",
                c.class, self.shown_url
            ),
        ))
    }

    fn not_found(name: &str) -> Reply {
        Reply::error(404, &format!("Connector {name} not found"))
    }

    /// Answers one request; `media` is the 415 its body's declared type earns a `PATCH`.
    fn handle(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        media: Option<Reply>,
    ) -> Reply {
        let segments: Option<Vec<String>> = path
            .split('?')
            .next()
            .unwrap_or("")
            .split('/')
            .filter(|s| !s.is_empty())
            .map(percent_decode)
            .collect();
        let Some(segments) = segments else {
            return Reply::error(
                400,
                &format!("the path {path} is not UTF-8 once percent-decoded"),
            );
        };
        let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
        let query = console::Query::parse(path);
        let dry_run = query.flag("dry_run");
        if let Some(r) = media.filter(|_| matches!(method, "PATCH" | "POST")) {
            return r;
        }
        let body = body.unwrap_or_default();
        match (method, segs.as_slice()) {
            ("GET", []) => console::page(&self.csrf_token),
            ("GET", ["console", asset]) if console::asset(asset).is_some() => {
                console::asset(asset).unwrap_or_else(|| Reply::error(404, "HTTP 404 Not Found"))
            }
            ("GET", ["console", "info"]) => self.info(),
            ("GET", ["metrics"]) => Reply {
                status: 200,
                body: {
                    self.record_alarms();
                    self.metrics.render()
                },
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                allow: None,
                headers: Vec::new(),
            },
            ("GET", ["connectors"]) if query.get("expand") == Some("summary") => self.summary(),
            ("GET", ["connectors"]) => self.list_connectors(),
            ("GET", ["connectors", name, "offsets"]) => self.get_offsets(name),
            ("GET", ["connectors", name, "offsets", "history"]) => self.get_history(name),
            ("GET", ["connectors", name, "offsets", "partitions"]) => {
                self.partitions_page(name, &query)
            }
            ("PATCH", ["connectors", name, "offsets"]) => {
                let name = name.to_string();
                self.alter_offsets(&name, body, dry_run)
            }
            ("DELETE", ["connectors", name, "offsets"]) => {
                let name = name.to_string();
                self.reset_offsets(&name, dry_run)
            }
            ("POST", ["connectors", name, "offsets", "rewind"]) => {
                let name = name.to_string();
                self.rewind(&name, &body)
            }
            ("POST", ["connectors", name, "offsets", "import"]) => {
                let name = name.to_string();
                self.import(Some(&name), &body, dry_run)
            }
            ("GET", ["offsets"]) => self.export_all(),
            ("POST", ["offsets", "import"]) => self.import(None, &body, dry_run),
            ("GET", ["orphans"]) => self.orphans(),
            ("DELETE", ["orphans", name]) => {
                let name = name.to_string();
                self.reset_orphan(&name, dry_run)
            }
            (_, ["connectors", _, "offsets"]) => {
                Self::not_allowed(method, "GET, HEAD, PATCH, DELETE, OPTIONS")
            }
            (_, ["connectors", _, "offsets", "rewind" | "import"] | ["offsets", "import"]) => {
                Self::not_allowed(method, "POST, OPTIONS")
            }
            (_, ["orphans", _]) => Self::not_allowed(method, "DELETE, OPTIONS"),
            (
                _,
                ["metrics"]
                | ["connectors"]
                | ["connectors", _, "offsets", "history" | "partitions"]
                | ["offsets"]
                | ["orphans"],
            ) => Self::not_allowed(method, "GET, HEAD, OPTIONS"),
            _ => Reply::error(404, "HTTP 404 Not Found"),
        }
    }

    /// 405 with the methods the resource takes; `OPTIONS` gets them with a 200.
    fn not_allowed(method: &str, allow: &'static str) -> Reply {
        let mut r = if method == "OPTIONS" {
            Reply::json(200, String::new())
        } else {
            Reply::error(405, "HTTP 405 Method Not Allowed")
        };
        r.allow = Some(allow);
        r
    }

    /// The stall and gap alarms the store's records hold ([`connect_offsets::alarms`]), judged
    /// now, as the series a worker's buffer exports. A store held by a running writer cannot be
    /// read here: its worker's own `/metrics` has them.
    fn record_alarms(&self) {
        let Ok(handle) = self.open() else { return };
        let Ok(records) = connect_offsets::alarms::read(handle.get()) else {
            return;
        };
        let now = connect_offsets::internal::time::now_ms();
        for r in records {
            connect_offsets::internal::metrics::record_alarms(
                &r.writer,
                &[connect_offsets::metrics::ConnectorAlarm {
                    stalled: r.stalled(now),
                    unmoved: r.unmoved_for(now),
                    backwards: r.backwards,
                    connector: r.connector,
                }],
            );
        }
    }

    fn list_connectors(&self) -> Reply {
        let names: BTreeSet<String> = match self.cluster() {
            // Connect lists the connectors it has configs for.
            Ok(Some(c)) => c.names().map(str::to_string).collect(),
            Ok(None) => {
                let handle = match self.open() {
                    Ok(h) => h,
                    Err(e) => return self.store_error(e, "", false),
                };
                let mut names = self.known.clone();
                match handle.get().namespaces() {
                    // The crate's own records (override markers, history, alarms) are offsets,
                    // not a connector.
                    Ok(n) => names.extend(n.into_iter().filter(|n| {
                        !connect_offsets::internal::namespaces::is_reserved_namespace(n)
                    })),
                    Err(e) => return self.store_error(e, "", false),
                }
                names
            }
            Err(r) => return r,
        };
        let items: Vec<String> = names.iter().map(|n| quoted(n)).collect();
        Reply::json(200, format!("[{}]", items.join(",")))
    }

    fn get_offsets(&self, name: &str) -> Reply {
        match self.read_partitions(name) {
            Ok((_, parts)) => Reply::json(200, ConnectorOffsets::from_stored(&parts).to_json()),
            Err(r) => r,
        }
    }

    /// Connector `name`'s partitions, read as Connect's `GET …/offsets` reads them (404 for an
    /// unknown connector, 409 while a writer holds its store or log), with the store they came
    /// from.
    fn read_partitions(
        &self,
        name: &str,
    ) -> std::result::Result<(Handle<'_>, Vec<(OffsetKey, Offset)>), Reply> {
        let (handle, configured) = self.open_to_read(name, false)?;
        let parts = handle
            .get()
            .partitions(name)
            .map_err(|e| self.store_error(e, name, false))?;
        if parts.is_empty() && !configured && !self.known.contains(name) {
            return Err(Self::not_found(name));
        }
        Ok((handle, parts))
    }

    /// The store, opened for a read of connector `name` after the checks every read makes: 404
    /// for a connector the Connect cluster does not have (unless `orphans_too`: a deleted
    /// connector's history stays readable), 400 for one whose offsets are in another store, 409
    /// while a writer holds the store or its log. With whether the cluster has it.
    fn open_to_read(
        &self,
        name: &str,
        orphans_too: bool,
    ) -> std::result::Result<(Handle<'_>, bool), Reply> {
        let configured = match self.cluster()? {
            Some(c) if c.connector(name).is_none() && orphans_too => false,
            Some(c) if c.connector(name).is_none() => return Err(Self::not_found(name)),
            Some(c) => match self.wrong_store(&c, name) {
                Some(r) => return Err(r),
                None => true,
            },
            None => false,
        };
        let handle = self
            .open_for(name)
            .map_err(|e| self.store_error(e, name, false))?;
        self.check_logs_idle(name)?;
        self.check_logs_applied(handle.get(), true)?;
        super::warn_unapplied(handle.get(), Some(name), false);
        Ok((handle, configured))
    }

    /// The connector's history, newest first (as `history --json`); 404 when the store knows
    /// nothing of it.
    fn get_history(&self, name: &str) -> Reply {
        let (handle, configured) = match self.open_to_read(name, true) {
            Ok(h) => h,
            Err(r) => return r,
        };
        let store = handle.get();
        if store.kind() == "kafka-group" {
            return Reply::error(400, &super::history::no_history_on_groups("history"));
        }
        let h = match connect_offsets::history::read(store, name) {
            Ok(h) => h,
            Err(e) => return self.store_error(e, name, false),
        };
        let known = match self.known(store, name) {
            Ok(k) => k,
            Err(e) => return self.store_error(e, name, false),
        };
        if h.changes.is_empty() && !known && !configured {
            return Self::not_found(name);
        }
        if h.horizon_us.is_none() {
            return Reply::error(400, &super::history::no_history(name));
        }
        let mut changes: Vec<_> = h.changes.iter().collect();
        super::history::newest_first(&mut changes);
        Reply::json(
            200,
            super::history::history_json(name, h.horizon_us, &changes),
        )
    }

    /// Takes every log directory's lock for the duration of a modification. Refuses when a writer
    /// holds one.
    fn lock_logs(
        &self,
        name: &str,
    ) -> std::result::Result<Vec<Box<dyn std::any::Any + Send + Sync>>, Reply> {
        let mut guards = Vec::new();
        for dir in &self.wal_dirs {
            match RealFs.lock(dir) {
                Ok(g) => guards.push(g),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err(Reply::error(
                        400,
                        &self.in_use_message(
                            &format!(
                                "its commit buffer's log {} is locked by another process",
                                dir.display()
                            ),
                            name,
                        ),
                    ));
                }
                Err(e) => {
                    return Err(Reply::error(
                        500,
                        &format!("cannot lock the log directory {}: {e}", dir.display()),
                    ));
                }
            }
        }
        Ok(guards)
    }

    /// Refuses a read (409) while a commit buffer holds one of the logs: its worker runs, and what
    /// the store holds now is not what the worker goes on from.
    fn check_logs_idle(&self, name: &str) -> std::result::Result<(), Reply> {
        self.lock_logs(name).map(drop).map_err(|r| {
            if r.status == 400 {
                Reply::error(
                    409,
                    &format!(
                        "The offsets of connector {name} cannot be read while its worker runs (its commit buffer holds a log given with --wal-dir)"
                    ),
                )
            } else {
                r
            }
        })
    }

    /// Refuses when a log holds batches the store has not applied: they would be replayed over a
    /// modification when the writer starts, and a read would answer older offsets than the writer
    /// goes on from.
    fn check_logs_applied(
        &self,
        store: &dyn OffsetStore,
        for_read: bool,
    ) -> std::result::Result<(), Reply> {
        for dir in &self.wal_dirs {
            let scan = inspect::scan(dir).map_err(|e| Reply::error(500, &e.to_string()))?;
            // A corrupt frame may be a batch the store has not applied.
            scan.refuse_corrupt(
                "whether it holds batches the store has not applied cannot be told",
            )
            .map_err(|e| Reply::error(409, &e.to_string()))?;
            let mut newest: std::collections::BTreeMap<&str, u64> = Default::default();
            for f in scan.frames() {
                // A snapshot above the applied seq is state the store lacks too.
                if let (Some(w), Some(s), Some(FrameKind::Batch | FrameKind::Snapshot)) =
                    (&f.writer, f.seq, f.kind)
                {
                    let e = newest.entry(w.as_str()).or_default();
                    *e = (*e).max(s);
                }
            }
            for (writer, seq) in newest {
                let applied = store
                    .applied_seq(writer)
                    .map_err(|e| Reply::error(500, &e.to_string()))?;
                if seq > applied {
                    let consequence = if for_read {
                        "its offsets are older than what the writer goes on from when it starts"
                    } else {
                        "they would be replayed over this change when the writer starts"
                    };
                    return Err(Reply::error(
                        409,
                        &format!(
                            "The log {} holds batches of writer `{writer}` up to seq {seq} that the offset store {} has not applied (it has {applied}); {consequence}. Start the worker once so it replays them, stop it, and retry",
                            dir.display(),
                            self.shown_url
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn alter_offsets(&mut self, name: &str, body: Vec<u8>, dry_run: bool) -> Reply {
        // Connect checks the body first (ConnectorsResource), then the connector (the herder).
        if body.iter().all(u8::is_ascii_whitespace) {
            return Reply::error(400, NO_OFFSETS);
        }
        let doc = match ConnectorOffsets::parse(&body) {
            Ok(d) => d,
            Err(e) => return Reply::error(400, &e),
        };
        if doc.offsets.is_empty() {
            return Reply::error(400, NO_OFFSETS);
        }
        let entries = doc.as_connect_patch_writes().into_entries(name);
        let n = entries.len();
        // The connector's own check (`alterOffsets`), after the herder's: ConnectException, 500.
        let class = self.class_of(name);
        let check = || check_alter(&class, &entries).map_err(|e| Reply::error(500, &e));
        if dry_run {
            return match self.modify(name, true, check, |store| console::changes(store, &entries)) {
                Ok((_, changes)) => console::dry_run_reply(&changes),
                Err(r) => r,
            };
        }
        let managed = match self.modify(name, false, check, |store| store.write(entries.clone())) {
            Ok((managed, ())) => managed,
            Err(r) => return r,
        };
        tracing::info!(
            connector = name,
            entries = n,
            "offsets altered through the REST API"
        );
        Reply::message(match managed {
            Managed::Framework => ALTERED,
            Managed::Connector => ALTERED_BY_CONNECTOR,
        })
    }

    fn reset_offsets(&mut self, name: &str, dry_run: bool) -> Reply {
        let class = self.class_of(name);
        let check = || check_alter(&class, &[]).map_err(|e| Reply::error(500, &e));
        if dry_run {
            let all = |store: &dyn OffsetStore| {
                let entries: Vec<_> = store
                    .partitions(name)?
                    .into_iter()
                    .map(|(k, _)| (k, None))
                    .collect();
                console::changes(store, &entries)
            };
            return match self.modify(name, true, check, all) {
                Ok((_, changes)) => console::dry_run_reply(&changes),
                Err(r) => r,
            };
        }
        let managed = match self.modify(name, false, check, |store| store.reset_namespace(name)) {
            Ok((managed, n)) => {
                tracing::info!(
                    connector = name,
                    partitions = n,
                    "offsets reset through the REST API"
                );
                managed
            }
            Err(r) => return r,
        };
        Reply::message(match managed {
            Managed::Framework => RESET,
            Managed::Connector => RESET_BY_CONNECTOR,
        })
    }

    /// The `connector.class` the config topic gives `name` (empty without one).
    fn class_of(&self, name: &str) -> String {
        match self.cluster() {
            Ok(Some(c)) => c.0.get(name).map(|c| c.class.clone()).unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// Runs `change` on the store for connector `name` the way every modification must: the
    /// connector's logs locked, the connector known, every logged batch applied; `check` (the
    /// connector's own, as `alterOffsets`) runs after the herder's checks. `Err` is the reply
    /// that refused it. A dry run makes every check and lets `change` only read.
    fn modify<C, T>(
        &mut self,
        name: &str,
        dry_run: bool,
        check: impl FnOnce() -> std::result::Result<C, Reply>,
        change: impl FnOnce(&dyn OffsetStore) -> Result<T>,
    ) -> std::result::Result<(C, T), Reply> {
        self.modify_many(&[name.to_string()], false, dry_run, check, change)
    }

    /// [`modify`](Self::modify) for several connectors at once (an import): each must pass the
    /// herder's checks; `new_ok` lets a connector the store does not know yet be created (without
    /// `--connect-configs`, where nothing else tells what exists).
    fn modify_many<C, T>(
        &mut self,
        names: &[String],
        new_ok: bool,
        dry_run: bool,
        check: impl FnOnce() -> std::result::Result<C, Reply>,
        change: impl FnOnce(&dyn OffsetStore) -> Result<T>,
    ) -> std::result::Result<(C, T), Reply> {
        // As Connect's herder: an unknown connector first, then one that is not stopped.
        let cluster = self.cluster()?;
        if let Some(cluster) = &cluster {
            for name in names {
                match cluster.connector(name) {
                    None => return Err(Self::not_found(name)),
                    Some(false) => return Err(Reply::error(400, &not_stopped(name))),
                    Some(true) => {}
                }
                if let Some(r) = self.wrong_store(cluster, name) {
                    return Err(r);
                }
            }
        }
        let checked = check()?;
        let first = names.first().map_or("", String::as_str);
        let _guards = self.lock_logs(first)?;
        let handle = match names {
            [name] => self.open_for(name),
            _ => self.open(),
        }
        .map_err(|e| self.store_error(e, first, true))?;
        let store = handle.get();
        // Without the config topic, a connector is known by its offsets or by name.
        if cluster.is_none() && !new_ok {
            for name in names {
                match self.known(store, name) {
                    Ok(true) => {}
                    Ok(false) => return Err(Self::not_found(name)),
                    Err(e) => return Err(self.store_error(e, name, true)),
                }
            }
        }
        self.check_logs_applied(store, false)?;
        if !dry_run {
            super::warn_unapplied(store, (names.len() == 1).then_some(first), true);
        }
        let done = change(store).map_err(|e| self.store_error(e, first, true))?;
        drop(handle);
        if !dry_run {
            self.known.extend(names.iter().cloned());
        }
        Ok((checked, done))
    }
}

/// Connect's refusal to modify the offsets of a connector that is not stopped.
fn not_stopped(name: &str) -> String {
    format!(
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
    )
}

/// What Connect's config topic says of its connectors: each configured one, and whether it is
/// stopped.
#[derive(Clone)]
struct Cluster(BTreeMap<String, Configured>);

/// What the config topic says of one connector.
#[derive(Clone)]
struct Configured {
    stopped: bool,
    /// Connect's target state: `STARTED`, `PAUSED` or `STOPPED`.
    state: String,
    sink: bool,
    class: String,
    /// `consumer.override.group.id`: the group a sink's tasks commit to instead of the store's.
    group: Option<String>,
}

impl Cluster {
    fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
    /// The connectors whose offsets are in use: every configured one, and over consumer groups
    /// the connector a configured sink's `consumer.override.group.id` stands for.
    fn in_use(&self, store_url: &str) -> Result<BTreeSet<String>> {
        crate::orphans::in_use(
            store_url,
            self.0.iter().map(|(n, c)| (n.as_str(), c.group.as_deref())),
        )
    }
    /// `Some(stopped)` for a configured connector.
    fn connector(&self, name: &str) -> Option<bool> {
        self.0.get(name).map(|c| c.stopped)
    }
}

#[cfg(feature = "kafka")]
fn read_connect_configs(url: &str) -> Result<Cluster> {
    let configs = connect_offsets::connect::ConnectConfigs::read(url)?;
    Ok(Cluster(
        configs
            .names()
            .filter_map(|n| {
                let c = configs.connector(n)?;
                let configured = Configured {
                    stopped: c.stopped(),
                    state: c.target_state.clone(),
                    sink: c.is_sink(),
                    class: c.class.clone().unwrap_or_default(),
                    group: c.group_override.clone(),
                };
                Some((n.to_string(), configured))
            })
            .collect(),
    ))
}

/// The `kafka-group://` store at `url` with its group names replaced by one group, `group`, of
/// connector `connector`.
#[cfg(feature = "kafka")]
fn own_group_store(url: &str, group: &str, connector: &str) -> Result<Box<dyn OffsetStore>> {
    let mut url = connect_offsets::internal::store::url::StoreUrl::parse(url)?;
    url.params.retain(|(k, _)| k != "group" && k != "connector");
    url.params.push(("group".into(), group.into()));
    url.params.push(("connector".into(), connector.into()));
    let store = connect_offsets::store::kafka::KafkaGroupStore::open_url(&url).map_err(|e| {
        e.context(format!(
            "connector {connector} sets consumer.override.group.id={group}"
        ))
    })?;
    Ok(Box::new(store))
}

#[cfg(not(feature = "kafka"))]
fn own_group_store(_: &str, _: &str, _: &str) -> Result<Box<dyn OffsetStore>> {
    Err(Error::Settings(
        "consumer groups are read through Kafka: this build has no Kafka support (feature `kafka`)"
            .into(),
    ))
}

#[cfg(not(feature = "kafka"))]
fn read_connect_configs(_: &str) -> Result<Cluster> {
    Err(Error::Settings(
        "--connect-configs reads a Kafka topic: this build has no Kafka support (feature `kafka`)"
            .into(),
    ))
}

/// A path segment decoded as a browser or curl sent it (a stray `%` stays as it is); `None` when
/// the decoded bytes are not UTF-8 (a connector name always is).
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// Connect's resources consume JSON only: a body declared as anything else is refused as Jersey
/// refuses it (a request without a type is taken as JSON).
fn unsupported_media(request: &Request) -> Option<Reply> {
    let declared = request.content_type.as_deref()?;
    let json = declared == "application/json" || declared.ends_with("+json");
    (matches!(request.method.as_str(), "PATCH" | "POST") && !json).then(|| {
        Reply::error(
            415,
            &format!("HTTP 415 Unsupported Media Type (the body is declared as {declared}, not application/json)"),
        )
    })
}

/// `--reset-orphans-after`: a grace period longer than zero (clap refuses anything else, exit 2).
fn grace(text: &str) -> std::result::Result<Duration, String> {
    connect_offsets::internal::time::parse_positive_duration(text).map_err(|e| match e {
        Error::Settings(why) => why,
        other => other.to_string(),
    })
}

pub(crate) fn run(a: ServeArgs) -> Result<ExitCode> {
    let auth = security::Auth::from_files(a.token_file.as_deref(), a.basic_auth_file.as_deref())?;
    security::check_listen(&a.listen, &auth)?;
    let tls = security::tls_paths(a.tls_cert.clone(), a.tls_key.clone())?
        .map(|(cert, key)| http::tls_config(&cert, &key).map_err(Error::Settings))
        .transpose()?;
    let orphan_grace = a.reset_orphans_after;
    let url = StoreUrl::parse(&a.store.url())?;
    let shown_url = url.to_string();
    let access = if url.scheme == "memory" {
        Access::Shared(connect_offsets::open(&a.store.url())?)
    } else {
        // Fail now on a bad URL or an unreachable store; a store in use is fine (reads wait for it).
        match connect_offsets::open(&a.store.url()) {
            Ok(_) => {}
            Err(Error::Locked { path, .. }) => note!(
                "note: {} is in use by a running writer now: reads answer 409 and modifications 400 until it stops",
                path.display()
            ),
            Err(e) => return Err(e),
        }
        Access::PerRequest(a.store.url())
    };
    if let Some(url) = &a.connect_configs {
        // A wrong URL or a topic that is not there fails now, not at the first request.
        read_connect_configs(url)?;
    }
    for dir in &a.wal_dir {
        if !dir.is_dir() {
            return Err(Error::Settings(format!(
                "--wal-dir {} is not a directory",
                dir.display()
            )));
        }
    }
    let metrics = connect_offsets::metrics::install()?;
    ::metrics::describe_counter!(
        "connect_offsets_http_requests_total",
        "Requests answered by `connect-offsets serve`, by method and status."
    );
    let listener =
        std::net::TcpListener::bind(&a.listen).map_err(|e| Error::io("listen on", &a.listen, e))?;
    let addr = listener
        .local_addr()
        .map_or_else(|_| a.listen.clone(), |s| s.to_string());
    {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {scheme}://{addr}");
        let _ = out.flush();
    }
    note!("serving Kafka Connect's offsets API over {shown_url}");
    let configs_url = a.connect_configs;
    let sinks_store = match url.scheme.as_str() {
        "kafka-group" => Some(true),
        "kafka" => Some(false),
        _ => None,
    };
    let csrf_token = security::random_token()?;
    let server = Arc::new(Mutex::new(Server {
        access,
        shown_url,
        sinks_store,
        cluster_now: None,
        wal_dirs: a.wal_dir,
        known: a.connector.into_iter().collect(),
        metrics,
        raw_url: a.store.url(),
        configs_url: configs_url.clone(),
        csrf_token: csrf_token.clone(),
    }));
    if let (Some(grace), Some(url)) = (orphan_grace, &configs_url) {
        auto_reset::spawn(Arc::clone(&server), url.clone(), grace);
    }
    let handler = move |request: Request| {
        let refused = auth
            .check(
                &request,
                console::is_page_file(&request.method, &request.target),
            )
            .and_then(|()| security::check_origin(&request, &auth, &csrf_token));
        if let Err(reply) = refused {
            ::metrics::counter!("connect_offsets_http_requests_total", "method" => request.method.clone(),
                "status" => reply.status.to_string())
            .increment(1);
            return reply;
        }
        let cluster_now = configs_url
            .as_deref()
            .filter(|_| console::needs_cluster(&request.target))
            .map(|url| read_connect_configs(url).map_err(|e| e.to_string()));
        let reply = {
            let mut server = server.lock().unwrap_or_else(|p| p.into_inner());
            server.cluster_now = cluster_now;
            let media = unsupported_media(&request);
            let body =
                matches!(request.method.as_str(), "PATCH" | "POST" | "PUT").then_some(request.body);
            server.handle(&request.method, &request.target, body, media)
        };
        ::metrics::counter!("connect_offsets_http_requests_total", "method" => request.method.clone(),
            "status" => reply.status.to_string())
        .increment(1);
        tracing::debug!(method = %request.method, target = %request.target, status = reply.status, "request");
        reply
    };
    http::serve(listener, LIMITS, tls, Arc::new(handler))
        .map_err(|e| Error::io("serve on", &addr, e))?;
    Ok(ExitCode::SUCCESS)
}
