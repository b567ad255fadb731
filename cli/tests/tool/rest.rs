//! `connect-offsets serve`: Kafka Connect's offsets REST API, exercised with a real HTTP client
//! against the real binary.

use crate::http_util;

use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::store::MemoryStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use http_util::{Serve, call};

const ALTERED: &str = r#"{"message":"The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses."}"#;
const RESET: &str = r#"{"message":"The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses."}"#;
const NO_OFFSETS: &str = r#"{"error_code":400,"message":"Partitions / offsets need to be provided for an alter offsets request"}"#;

const SINK_BODY: &str = r#"{"offsets":[{"partition":{"kafka_topic":"orders","kafka_partition":0},"offset":{"kafka_offset":5}},{"partition":{"kafka_topic":"orders","kafka_partition":1},"offset":{"kafka_offset":17}}]}"#;
/// [`SINK_BODY`] as written: new partitions go in the member order Connect's `PATCH` writes
/// (its `java.util.HashMap`'s).
const SINK_WRITTEN: &str = r#"{"offsets":[{"partition":{"kafka_partition":0,"kafka_topic":"orders"},"offset":{"kafka_offset":5}},{"partition":{"kafka_partition":1,"kafka_topic":"orders"},"offset":{"kafka_offset":17}}]}"#;

#[test]
fn get_patch_delete_like_kafka_connect() {
    let s = Serve::start(&["--store", "memory://", "--connector", "sink"]);
    // An unknown connector: 404 with Connect's error shape and text.
    let (st, ctype, body) = call("GET", &s.url("/connectors/nobody/offsets"), None);
    assert_eq!(
        (st, body.as_str()),
        (
            404,
            r#"{"error_code":404,"message":"Connector nobody not found"}"#
        )
    );
    assert_eq!(ctype, "application/json");
    let (st, _, _) = call("DELETE", &s.url("/connectors/nobody/offsets"), None);
    assert_eq!(st, 404);
    let (st, _, _) = call(
        "PATCH",
        &s.url("/connectors/nobody/offsets"),
        Some(SINK_BODY),
    );
    assert_eq!(st, 404);

    // A known connector without offsets: an empty list.
    let (st, _, body) = call("GET", &s.url("/connectors/sink/offsets"), None);
    assert_eq!((st, body.as_str()), (200, r#"{"offsets":[]}"#));

    // Sink-style partitions are taken and stored like any other.
    let (st, _, body) = call("PATCH", &s.url("/connectors/sink/offsets"), Some(SINK_BODY));
    assert_eq!((st, body.as_str()), (200, ALTERED));
    let (st, _, body) = call("GET", &s.url("/connectors/sink/offsets"), None);
    assert_eq!((st, body.as_str()), (200, SINK_WRITTEN));
    let (st, _, body) = call("GET", &s.url("/connectors"), None);
    assert_eq!((st, body.as_str()), (200, r#"["sink"]"#));

    // "offset": null resets one partition.
    let reset_one =
        r#"{"offsets":[{"partition":{"kafka_topic":"orders","kafka_partition":0},"offset":null}]}"#;
    let (st, _, body) = call("PATCH", &s.url("/connectors/sink/offsets"), Some(reset_one));
    assert_eq!((st, body.as_str()), (200, ALTERED));
    let (_, _, body) = call("GET", &s.url("/connectors/sink/offsets"), None);
    assert_eq!(
        body,
        r#"{"offsets":[{"partition":{"kafka_partition":1,"kafka_topic":"orders"},"offset":{"kafka_offset":17}}]}"#
    );

    // Source-style partitions, Connect's escaping and doubles, and the null partition; -0.0 is
    // written as Connect's PATCH writes it (read back through a BigDecimal): 0.0.
    let source = r#"{"offsets":[{"partition":{"filename":"/tmp/ünï😀.txt"},"offset":{"position":1234,"ratio":1.0E20}},{"partition":null,"offset":{"pos":-0.0}}]}"#;
    let want = r#"{"offsets":[{"partition":null,"offset":{"pos":0.0}},{"partition":{"filename":"/tmp/ünï\uD83D\uDE00.txt"},"offset":{"position":1234,"ratio":1.0E20}}]}"#;
    let (st, _, _) = call("PATCH", &s.url("/connectors/sink/offsets"), Some(source));
    assert_eq!(st, 200);
    let (_, _, body) = call("GET", &s.url("/connectors/sink/offsets"), None);
    assert!(
        body.contains(r#"{"partition":{"filename":"/tmp/ünï\uD83D\uDE00.txt"},"offset":{"position":1234,"ratio":1.0E20}}"#)
            && body.contains(r#"{"partition":null,"offset":{"pos":0.0}}"#),
        "{body} (wanted the entries of {want})"
    );

    // DELETE resets everything; the connector stays known.
    let (st, _, body) = call("DELETE", &s.url("/connectors/sink/offsets"), None);
    assert_eq!((st, body.as_str()), (200, RESET));
    let (st, _, body) = call("GET", &s.url("/connectors/sink/offsets"), None);
    assert_eq!((st, body.as_str()), (200, r#"{"offsets":[]}"#));
}

#[test]
fn bad_requests_get_connects_errors() {
    let s = Serve::start(&["--store", "memory://", "--connector", "c"]);
    let url = s.url("/connectors/c/offsets");
    // Empty bodies, and bodies without offsets: Connect's 400 and text.
    for body in [
        None,
        Some(""),
        Some("  \n"),
        Some("{}"),
        Some(r#"{"offsets":[]}"#),
    ] {
        let (st, _, text) = call("PATCH", &url, body);
        assert_eq!((st, text.as_str()), (400, NO_OFFSETS), "body {body:?}");
    }
    // Malformed JSON and shapes Connect refuses: 400 with a message saying what is wrong.
    for (body, want) in [
        (r#"{"offsets":["#, "not valid JSON"),
        (
            r#"{"offsets":{"a":1}}"#,
            "`offsets` in the body must be an array",
        ),
        (r#"[1]"#, "must be a JSON object"),
        (
            r#"{"offsets":[{"partition":{"a":{"b":1}},"offset":null}]}"#,
            "field `a` of the partition is an object",
        ),
        (
            r#"{"offsets":[{"partition":{"a":1},"offset":{"x":[1]}}]}"#,
            "field `x` of the offset is an array",
        ),
        (
            r#"{"offsets":[{"offset":{"x":1}}]}"#,
            "offsets[0]: the partition is missing",
        ),
    ] {
        let (st, ctype, text) = call("PATCH", &url, Some(body));
        assert_eq!(st, 400, "{body}: {text}");
        assert_eq!(ctype, "application/json");
        assert!(
            text.starts_with(r#"{"error_code":400,"message":""#) && text.contains(want),
            "{body}: {text}"
        );
    }
    let (_, _, text) = call("GET", &url, None);
    assert_eq!(text, r#"{"offsets":[]}"#, "nothing was written");
    let (st, _, text) = call("GET", &s.url("/nowhere"), None);
    assert_eq!(
        (st, text.as_str()),
        (404, r#"{"error_code":404,"message":"HTTP 404 Not Found"}"#)
    );
    let (st, _, _) = call("PUT", &url, None);
    assert_eq!(st, 405);
}

#[test]
fn metrics_are_prometheus_text() {
    let s = Serve::start(&["--store", "memory://"]);
    let _ = call("GET", &s.url("/connectors/x/offsets"), None);
    let (st, ctype, text) = call("GET", &s.url("/metrics"), None);
    assert_eq!(st, 200);
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    for want in [
        "# TYPE connect_offsets_commits_total counter",
        "# TYPE connect_offsets_commit_duration_seconds histogram",
        "# TYPE connect_offsets_offset_commit_avg_time_ms gauge",
        "# TYPE connect_offsets_offset_commit_max_time_ms gauge",
        "# TYPE connect_offsets_connector_oldest_pending_age_seconds gauge",
        "# TYPE connect_offsets_wal_bytes gauge",
        "# TYPE connect_offsets_replayed_batches_total counter",
        "# TYPE connect_offsets_dead_letter_records_total counter",
        "connect_offsets_http_requests_total{method=\"GET\",status=\"404\"} 1",
    ] {
        assert!(text.contains(want), "missing `{want}` in\n{text}");
    }
}

#[test]
fn a_log_held_by_a_running_writer_refuses_modification() {
    let tmp = tempfile::tempdir().unwrap();
    let wal = tmp.path().join("wal");
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let mut cfg = CommitBufferConfig::new(&wal);
    cfg.writer = "worker-1".into();
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(Arc::clone(&store), cfg).unwrap();
    let s = Serve::start(&[
        "--store",
        "memory://",
        "--connector",
        "c",
        "--wal-dir",
        wal.to_str().unwrap(),
    ]);
    let url = s.url("/connectors/c/offsets");
    let body = r#"{"offsets":[{"partition":{"f":"a"},"offset":{"p":1}}]}"#;
    for (method, body) in [("PATCH", Some(body)), ("DELETE", None)] {
        let (st, _, text) = call(method, &url, body);
        assert_eq!(st, 400, "{method}: {text}");
        assert!(
            text.contains(
                "Connectors must be in the STOPPED state before their offsets can be modified"
            ) && text.contains("locked by another process")
                && text.contains(&wal.display().to_string()),
            "{text}"
        );
    }
    // Reads too (409, retry later): the running worker goes on from what its log holds.
    let (st, _, text) = call("GET", &url, None);
    assert_eq!(st, 409, "{text}");
    assert!(text.contains("while its worker runs"), "{text}");
    // The writer commits a batch and stops; the server's store has not applied it (another
    // store): changing offsets now would be undone by the replay, so 409.
    buffer
        .offer(
            OffsetKey::new("c", Partition::new().with("f", "a")),
            Offset::new().with("p", 9),
        )
        .unwrap();
    buffer.commit_with(Durability::Local).wait().unwrap();
    buffer.close().unwrap();
    drop(buffer);
    let (st, _, text) = call("PATCH", &url, Some(body));
    assert_eq!(st, 409, "{text}");
    assert!(
        text.contains("worker-1") && text.contains("has not applied"),
        "{text}"
    );
    // A read would answer offsets older than the replay makes them.
    let (st, _, text) = call("GET", &url, None);
    assert_eq!(st, 409, "{text}");
    assert!(
        text.contains("has not applied")
            && text.contains("older than what the writer goes on from"),
        "{text}"
    );
}

#[test]
fn a_rocksdb_store_in_use_is_refused_then_served() {
    use connect_offsets::store::rocksdb::RocksDbStore;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    let wal = tmp.path().join("wal");
    let url = format!("rocksdb://{}", path.display());
    // A worker: a commit buffer over the RocksDB store, running.
    let store: Arc<dyn OffsetStore> = Arc::new(RocksDbStore::open(&path).unwrap());
    let mut cfg = CommitBufferConfig::new(&wal);
    cfg.writer = "worker-1".into();
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(Arc::clone(&store), cfg).unwrap();
    let key = OffsetKey::new("src", Partition::new().with("table", "orders"));
    buffer
        .offer(key.clone(), Offset::new().with("lsn", 10))
        .unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();

    let s = Serve::start(&["--store", &url, "--wal-dir", wal.to_str().unwrap()]);
    let o = s.url("/connectors/src/offsets");
    let body = r#"{"offsets":[{"partition":{"table":"orders"},"offset":{"lsn":5}}]}"#;
    let (st, _, text) = call("PATCH", &o, Some(body));
    assert_eq!(st, 400, "{text}");
    assert!(
        text.contains("Connectors must be in the STOPPED state") && text.contains("locked"),
        "{text}"
    );
    let (st, _, text) = call("DELETE", &o, None);
    assert_eq!(st, 400, "{text}");
    // Reads of a store a writer holds: 409, retry later.
    let (st, _, text) = call("GET", &o, None);
    assert_eq!(st, 409, "{text}");
    assert!(text.contains("in use by a running writer"), "{text}");

    // The worker stops: everything it logged is in the store, so changes are allowed.
    buffer.close().unwrap();
    drop(buffer);
    drop(store);
    let (st, _, text) = call("GET", &o, None);
    assert_eq!(
        (st, text.as_str()),
        (
            200,
            r#"{"offsets":[{"partition":{"table":"orders"},"offset":{"lsn":10}}]}"#
        )
    );
    let (st, _, text) = call("PATCH", &o, Some(body));
    assert_eq!((st, text.as_str()), (200, ALTERED));
    // The server closed the store after the request: the worker can open it and sees the change.
    let store = RocksDbStore::open(&path).unwrap();
    assert_eq!(store.get(&key).unwrap(), Some(Offset::new().with("lsn", 5)));
    // While we hold it again, the server refuses.
    let (st, _, _) = call("DELETE", &o, None);
    assert_eq!(st, 400);
    drop(store);
    let (st, _, text) = call("DELETE", &o, None);
    assert_eq!((st, text.as_str()), (200, RESET));
    let (st, _, text) = call("GET", &o, None);
    // Reset through this server: it still knows the connector.
    assert_eq!((st, text.as_str()), (200, r#"{"offsets":[]}"#));
}

/// The markers of overrides applied once are offsets in a reserved namespace, not a connector:
/// `GET /connectors` leaves them out; their own offsets endpoint shows them.
#[test]
fn markers_of_applied_overrides_are_not_connectors() {
    use connect_offsets::once::{ONCE_NAMESPACE, OnceOverride};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let store = connect_offsets::store::rocksdb::RocksDbStore::open(&db).unwrap();
        let key = OffsetKey::new("sink", Partition::new().with("p", 0));
        OnceOverride::new("seed", vec![(key, Some(Offset::new().with("o", 1)))])
            .unwrap()
            .apply_to(&store, "test")
            .unwrap();
    }
    let url = format!("rocksdb://{}", db.display());
    let s = Serve::start(&["--store", &url]);
    let (st, _, body) = call("GET", &s.url("/connectors"), None);
    assert_eq!((st, body.as_str()), (200, r#"["sink"]"#));
    let (st, _, body) = call(
        "GET",
        &s.url(&format!("/connectors/{ONCE_NAMESPACE}/offsets")),
        None,
    );
    assert_eq!(st, 200);
    assert!(body.contains(r#""partition":{"id":"seed"}"#), "{body}");
}

/// Sends `raw` on a new connection and returns everything the server answers until it closes
/// (or 30 s pass).
fn raw_exchange(s: &Serve, raw: &[u8]) -> String {
    use std::io::{Read, Write};
    let addr = s.base.strip_prefix("http://").unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    c.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The HTTP layer: one client's request cannot stop or stall the server for the others, and the
/// corners of HTTP/1.1 a client may use are answered as a Connect worker's Jetty answers them.
#[test]
fn the_http_layer_holds_against_odd_and_hostile_clients() {
    use std::io::Write;
    let s = Serve::start(&["--store", "memory://", "--connector", "c"]);
    let alive = || {
        let (st, _, body) = call("GET", &s.url("/connectors/c/offsets"), None);
        assert_eq!((st, body.as_str()), (200, r#"{"offsets":[]}"#));
    };
    // A body declared far beyond any offsets request: refused from its length, and the server
    // lives on (it once tried to allocate the declared length to throw the body away).
    for method in ["GET", "PATCH", "DELETE"] {
        let answer = raw_exchange(
            &s,
            format!("{method} /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000\r\n\r\n")
                .as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 413 "), "{method}: {answer}");
        assert!(answer.contains("larger than"), "{answer}");
        alive();
    }
    // A client that sends half a body and waits: the others are served meanwhile.
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    let mut stuck = std::net::TcpStream::connect(&addr).unwrap();
    stuck
        .write_all(
            b"PATCH /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n{",
        )
        .unwrap();
    let mut stuck_chunked = std::net::TcpStream::connect(&addr).unwrap();
    stuck_chunked
        .write_all(b"PATCH /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    alive();
    drop((stuck, stuck_chunked));

    // A chunked body, an absolute-form target, Expect: 100-continue and keep-alive.
    let body = r#"{"offsets":[{"partition":{"p":1},"offset":{"o":2}}]}"#;
    let (a, b) = body.split_at(10);
    let answer = raw_exchange(
        &s,
        format!(
            "PATCH {}/connectors/c/offsets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\nGET /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            s.base,
            a.len(),
            b.len()
        )
        .as_bytes(),
    );
    assert!(
        answer.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"),
        "{answer}"
    );
    assert!(answer.contains(ALTERED), "{answer}");
    assert!(
        answer.ends_with(r#"{"offsets":[{"partition":{"p":1},"offset":{"o":2}}]}"#),
        "{answer}"
    );

    // HEAD is GET without the body; OPTIONS and 405 name the methods.
    let answer = raw_exchange(
        &s,
        b"HEAD /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "no body: {answer}");
    let answer = raw_exchange(
        &s,
        b"OPTIONS /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(
        answer.contains("Allow: GET, HEAD, PATCH, DELETE, OPTIONS"),
        "{answer}"
    );
    let answer = raw_exchange(&s, b"POST /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    assert!(
        answer.contains("Allow: GET, HEAD, PATCH, DELETE, OPTIONS"),
        "{answer}"
    );

    // A body declared as something other than JSON: Jersey's 415, nothing written.
    let answer = raw_exchange(
        &s,
        format!("PATCH /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", body.len(), r#"{"offsets":[{"partition":{"p":9},"offset":{"o":9}}]}"#).as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 415 "), "{answer}");
    assert!(
        answer.contains("application/x-www-form-urlencoded"),
        "{answer}"
    );

    // A name that is not UTF-8 once decoded, a malformed request line, a head past 8 KiB.
    let answer = raw_exchange(
        &s,
        b"GET /connectors/caf%E9/offsets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("not UTF-8"), "{answer}");
    let answer = raw_exchange(&s, b"GARBAGE\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // Framing two readers could disagree on: a space before a header's colon, a signed length.
    let answer = raw_exchange(
        &s,
        b"PATCH /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let answer = raw_exchange(
        &s,
        b"PATCH /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}",
    );
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let long = format!(
        "GET /connectors/c/offsets HTTP/1.1\r\nX-Long: {}\r\n\r\n",
        "a".repeat(9000)
    );
    let answer = raw_exchange(&s, long.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    let (st, _, body) = call("GET", &s.url("/connectors/c/offsets"), None);
    assert_eq!(
        (st, body.as_str()),
        (
            200,
            r#"{"offsets":[{"partition":{"p":1},"offset":{"o":2}}]}"#
        ),
        "the 415 wrote nothing"
    );
}

/// The connection cap: 128 connections at once; the next is answered 503 and closed, and once the
/// others close, a new one is served again.
#[test]
fn connections_beyond_the_cap_are_refused_then_served() {
    let s = Serve::start(&["--store", "memory://", "--connector", "c"]);
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    // Accepted in order: these hold every slot until they close (or idle for 30 s).
    let held: Vec<_> = (0..128)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let get = b"GET /connectors/c/offsets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let answer = raw_exchange(&s, get);
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("too many connections"), "{answer}");
    drop(held);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let answer = raw_exchange(&s, get);
        if answer.starts_with("HTTP/1.1 200 ") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused: {answer}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
