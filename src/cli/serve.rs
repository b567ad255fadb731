//! `serve`: Kafka Connect's offsets REST API (KIP-875) over any store, and `/metrics`.
//!
//! | request | answer |
//! |---|---|
//! | `GET /connectors` | 200 `["name",...]`: connectors with offsets, and those named by `--connector` or modified through this server |
//! | `GET /connectors/{name}/offsets` | 200 `{"offsets":[{"partition":...,"offset":...}]}`; 404 for an unknown connector |
//! | `PATCH /connectors/{name}/offsets` | 200 `{"message":...}`; `"offset": null` resets a partition; 400 for an empty or malformed body; 404 unknown |
//! | `DELETE /connectors/{name}/offsets` | 200 `{"message":...}`: every partition reset; 404 unknown |
//! | `GET /connectors/{name}/offsets/history` | 200 what `history --json` prints (a store with `?history=`; ours, not Connect's); 404 unknown |
//! | `GET /metrics` | Prometheus text |
//!
//! Errors are `{"error_code":N,"message":"..."}` as Connect writes them, with Connect's texts where it
//! has one. Checked against a Kafka Connect 4.4 worker: the 404 (`Connector x not found`, `HTTP 404
//! Not Found`), 405, the 400 for `{}` and `{"offsets":[]}` and the first sentence of the "must be
//! stopped" 400 are Connect's own. Where Connect answers **500** (an empty body: a
//! NullPointerException; malformed JSON, a wrong shape or a nested value: the Jackson or validation
//! error), this server answers 400 with a message naming what is wrong: the client sent a bad request,
//! and a script can tell it from a failing store. Connect's success message has two forms; this server
//! gives the one for connectors that leave their offsets to the framework (the "framework-managed"
//! text), since a store cannot know whether a connector also keeps offsets elsewhere. Sink-style
//! partitions are stored like any other; over `kafka-group://` they are the connector's consumer
//! group, as in Connect: a bad partition or offset answers 400 naming it, and a group with members
//! 500 with Connect's "zombie sink tasks" message (Connect's status for it: a plain
//! `ConnectException`). A connector is **unknown** when the store holds no offsets for it and it was neither
//! named with `--connector` nor modified through this server since it started (Connect knows its
//! connectors from their configs; a store only knows those with offsets).
//!
//! **"The connector must be stopped"**: Connect refuses to modify the offsets of a connector that is
//! not stopped (400). Here the rule is about the store: a modification is refused with 400 when a
//! running writer holds the store or its log:
//! * the store is opened for each request and closed after it (except `memory://`, which lives as
//!   long as the server), so a RocksDB store held by a worker fails to open: "locked by another
//!   process", and the worker can start whenever no request is running;
//! * every `--wal-dir` (a commit buffer's log directory) is locked for the duration of a
//!   modification; a running commit buffer holds that lock, so it is refused;
//! * a log that holds batches the store has not applied (a worker that crashed, or closed without
//!   reaching the store) would replay them over the modification when the worker starts: refused
//!   with 409 until the worker has started and closed once.
//!
//! Reads (`GET`) of a store held by a running writer answer 409 (Connect's status for "cannot be
//! done now, retry"), since the store cannot be opened beside it.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use connect_offsets::connector_offsets::ConnectorOffsets;
use connect_offsets::metrics::PrometheusHandle;
use connect_offsets::store::{OffsetStoreExt, StoreUrl};
use connect_offsets::wal::frame::FrameKind;
use connect_offsets::wal::fs::{RealFs, WalFs};
use connect_offsets::wal::inspect;
use connect_offsets::{Error, OffsetStore, Result};

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
}

/// Connect's texts (Worker.completeModifyOffsetsCallback, for connectors that do not manage their
/// offsets themselves; ConnectorsResource; AbstractHerder).
const ALTERED: &str = "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses.";
const RESET: &str = "The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses.";
const NO_OFFSETS: &str = "Partitions / offsets need to be provided for an alter offsets request";
const MAX_BODY: u64 = 64 << 20;

enum Access {
    /// One store for the server's lifetime (memory://).
    Shared(Box<dyn OffsetStore>),
    /// Opened for each request, closed after it.
    PerRequest(String),
}

struct Server {
    access: Access,
    shown_url: String,
    wal_dirs: Vec<PathBuf>,
    known: BTreeSet<String>,
    metrics: PrometheusHandle,
}

/// An HTTP answer.
struct Reply {
    status: u16,
    body: String,
    content_type: &'static str,
}

impl Reply {
    fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            body,
            content_type: "application/json",
        }
    }
    fn error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            format!(
                "{{\"error_code\":{status},\"message\":{}}}",
                quoted(message)
            ),
        )
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

    fn not_found(name: &str) -> Reply {
        Reply::error(404, &format!("Connector {name} not found"))
    }

    fn handle(&mut self, method: &str, path: &str, body: Option<Vec<u8>>) -> Reply {
        let segments: Vec<String> = path
            .split('?')
            .next()
            .unwrap_or("")
            .split('/')
            .filter(|s| !s.is_empty())
            .map(percent_decode)
            .collect();
        let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
        match (method, segs.as_slice()) {
            ("GET", ["metrics"]) => Reply {
                status: 200,
                body: {
                    self.record_alarms();
                    self.metrics.render()
                },
                content_type: "text/plain; version=0.0.4; charset=utf-8",
            },
            ("GET", ["connectors"]) => self.list_connectors(),
            ("GET", ["connectors", name, "offsets"]) => self.get_offsets(name),
            ("GET", ["connectors", name, "offsets", "history"]) => self.get_history(name),
            ("PATCH", ["connectors", name, "offsets"]) => {
                let name = name.to_string();
                self.alter_offsets(&name, body.unwrap_or_default())
            }
            ("DELETE", ["connectors", name, "offsets"]) => {
                let name = name.to_string();
                self.reset_offsets(&name)
            }
            (
                _,
                ["metrics"]
                | ["connectors"]
                | ["connectors", _, "offsets"]
                | ["connectors", _, "offsets", "history"],
            ) => Reply::error(405, "HTTP 405 Method Not Allowed"),
            _ => Reply::error(404, "HTTP 404 Not Found"),
        }
    }

    /// The stall and gap alarms the store's records hold ([`connect_offsets::alarms`]), judged
    /// now, as the series a worker's buffer exports. A store held by a running writer cannot be
    /// read here: its worker's own `/metrics` has them.
    fn record_alarms(&self) {
        let Ok(handle) = self.open() else { return };
        let Ok(records) = connect_offsets::alarms::read(handle.get()) else {
            return;
        };
        let now = connect_offsets::expire::now_ms();
        for r in records {
            connect_offsets::metrics::record_alarms(
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
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, "", false),
        };
        let mut names: BTreeSet<String> = self.known.clone();
        match handle.get().namespaces() {
            // The crate's own records (override markers, history, alarms) are offsets, not a
            // connector.
            Ok(n) => names.extend(
                n.into_iter()
                    .filter(|n| !connect_offsets::is_reserved_namespace(n)),
            ),
            Err(e) => return self.store_error(e, "", false),
        }
        let items: Vec<String> = names.iter().map(|n| quoted(n)).collect();
        Reply::json(200, format!("[{}]", items.join(",")))
    }

    fn get_offsets(&self, name: &str) -> Reply {
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, name, false),
        };
        let parts = match handle.get().partitions(name) {
            Ok(p) => p,
            Err(e) => return self.store_error(e, name, false),
        };
        if parts.is_empty() && !self.known.contains(name) {
            return Self::not_found(name);
        }
        Reply::json(200, ConnectorOffsets::from_stored(&parts).to_json())
    }

    /// The connector's history, newest first (as `history --json`); 404 when the store knows
    /// nothing of it.
    fn get_history(&self, name: &str) -> Reply {
        let handle = match self.open() {
            Ok(h) => h,
            Err(e) => return self.store_error(e, name, false),
        };
        let h = match connect_offsets::history::read(handle.get(), name) {
            Ok(h) => h,
            Err(e) => return self.store_error(e, name, false),
        };
        let known = match self.known(handle.get(), name) {
            Ok(k) => k,
            Err(e) => return self.store_error(e, name, false),
        };
        if h.changes.is_empty() && !known {
            return Self::not_found(name);
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

    /// Refuses when a log holds batches the store has not applied: they would be replayed over the
    /// modification when the writer starts.
    fn check_logs_applied(&self, store: &dyn OffsetStore) -> std::result::Result<(), Reply> {
        for dir in &self.wal_dirs {
            let scan = inspect::scan(dir).map_err(|e| Reply::error(500, &e.to_string()))?;
            let mut newest: std::collections::BTreeMap<&str, u64> = Default::default();
            for f in scan.frames() {
                if let (Some(w), Some(s), Some(FrameKind::Batch)) = (&f.writer, f.seq, f.kind) {
                    let e = newest.entry(w.as_str()).or_default();
                    *e = (*e).max(s);
                }
            }
            for (writer, seq) in newest {
                let applied = store
                    .applied_seq(writer)
                    .map_err(|e| Reply::error(500, &e.to_string()))?;
                if seq > applied {
                    return Err(Reply::error(
                        409,
                        &format!(
                            "The log {} holds batches of writer `{writer}` up to seq {seq} that the offset store {} has not applied (it has {applied}); they would be replayed over this change when the writer starts. Start the worker once so it replays them, stop it, and retry",
                            dir.display(),
                            self.shown_url
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn alter_offsets(&mut self, name: &str, body: Vec<u8>) -> Reply {
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
        if let Err(r) = self.modify(name, |store| store.write(entries)) {
            return r;
        }
        tracing::info!(
            connector = name,
            entries = n,
            "offsets altered through the REST API"
        );
        Reply::message(ALTERED)
    }

    fn reset_offsets(&mut self, name: &str) -> Reply {
        match self.modify(name, |store| store.reset_namespace(name)) {
            Ok(n) => tracing::info!(
                connector = name,
                partitions = n,
                "offsets reset through the REST API"
            ),
            Err(r) => return r,
        }
        Reply::message(RESET)
    }

    /// Runs `change` on the store for connector `name` the way every modification must: the
    /// connector's logs locked, the connector known, every logged batch applied. `Err` is the
    /// reply that refused it.
    fn modify<T>(
        &mut self,
        name: &str,
        change: impl FnOnce(&dyn OffsetStore) -> Result<T>,
    ) -> std::result::Result<T, Reply> {
        let _guards = self.lock_logs(name)?;
        let handle = self.open().map_err(|e| self.store_error(e, name, true))?;
        let store = handle.get();
        match self.known(store, name) {
            Ok(true) => {}
            Ok(false) => return Err(Self::not_found(name)),
            Err(e) => return Err(self.store_error(e, name, true)),
        }
        self.check_logs_applied(store)?;
        let done = change(store).map_err(|e| self.store_error(e, name, true))?;
        drop(handle);
        self.known.insert(name.to_string());
        Ok(done)
    }
}

/// A path segment decoded as a browser or curl sent it (a stray `%` stays as it is).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

pub(crate) fn run(a: ServeArgs) -> Result<ExitCode> {
    let url = StoreUrl::parse(&a.store.url())?;
    let shown_url = url.to_string();
    let access = if url.scheme == "memory" {
        Access::Shared(connect_offsets::open(&a.store.url())?)
    } else {
        // Fail now on a bad URL or an unreachable store; a store in use is fine (reads wait for it).
        match connect_offsets::open(&a.store.url()) {
            Ok(_) => {}
            Err(Error::Locked { path, .. }) => eprintln!(
                "note: {} is in use by a running writer now: reads answer 409 and modifications 400 until it stops",
                path.display()
            ),
            Err(e) => return Err(e),
        }
        Access::PerRequest(a.store.url())
    };
    for dir in &a.wal_dir {
        if !dir.is_dir() {
            return Err(Error::Config(format!(
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
    let http = tiny_http::Server::http(&a.listen)
        .map_err(|e| Error::io("listen on", &a.listen, std::io::Error::other(e)))?;
    let addr = http
        .server_addr()
        .to_ip()
        .map_or_else(|| a.listen.clone(), |s| s.to_string());
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on http://{addr}");
        let _ = out.flush();
    }
    eprintln!("serving Kafka Connect's offsets API over {shown_url}");
    let mut server = Server {
        access,
        shown_url,
        wal_dirs: a.wal_dir,
        known: a.connector.into_iter().collect(),
        metrics,
    };
    for mut request in http.incoming_requests() {
        let method = request.method().as_str().to_ascii_uppercase();
        let path = request.url().to_string();
        let body = if method == "PATCH" || method == "POST" || method == "PUT" {
            let mut buf = Vec::new();
            match request.as_reader().take(MAX_BODY + 1).read_to_end(&mut buf) {
                Ok(n) if n as u64 > MAX_BODY => {
                    respond(request, Reply::error(413, "the request body is too large"));
                    continue;
                }
                Ok(_) => Some(buf),
                Err(e) => {
                    respond(
                        request,
                        Reply::error(400, &format!("cannot read the request body: {e}")),
                    );
                    continue;
                }
            }
        } else {
            None
        };
        let reply = server.handle(&method, &path, body);
        ::metrics::counter!("connect_offsets_http_requests_total", "method" => method.clone(),
            "status" => reply.status.to_string())
        .increment(1);
        tracing::debug!(%method, %path, status = reply.status, "request");
        respond(request, reply);
    }
    Ok(ExitCode::SUCCESS)
}

fn respond(request: tiny_http::Request, reply: Reply) {
    let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], reply.content_type.as_bytes())
        .expect("a valid header");
    let response = tiny_http::Response::from_string(reply.body)
        .with_status_code(reply.status)
        .with_header(header);
    if let Err(e) = request.respond(response) {
        tracing::debug!(error = %e, "could not send a response (client gone?)");
    }
}
