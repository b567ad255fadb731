//! `KafkaStore` and a real Kafka Connect 4.4.0 distributed worker sharing one offsets topic.
//!
//! The test starts its own worker (`scripts/connect start`, on Java 25 so doubles are spelled as the
//! codec spells them) against the test broker (`KAFKA_BOOTSTRAP`, default 127.0.0.1:9092, started by
//! `scripts/kafka start`), with a fresh offsets topic and group per run, created by Connect itself
//! (25 partitions, compacted, replication 1); the worker is stopped when the test ends, also when it
//! fails. Then, with the real `FileStreamSourceConnector`:
//! 1. offsets Connect committed are read by our store: the same partition and offset as Connect's
//!    `GET /connectors/{name}/offsets`, from a record with our key bytes on our murmur2 partition;
//! 2. offsets our store writes for the stopped connector are returned exactly by Connect's `GET`, and
//!    the resumed connector really continues from our position (it sends the file's lines after it
//!    again);
//! 3. Connect's `DELETE /connectors/{name}/offsets` is seen by our store after `refresh()` as a reset;
//! 4. the `PATCH` bodies `connect-offsets serve` accepts (tests/rest.rs) are accepted by the worker
//!    too, with the same result whichever of the two applied them.
#![cfg(all(feature = "kafka", feature = "cli"))]

mod http_util;
mod kafka_util;
#[path = "kafka_util/scripts.rs"]
mod scripts;

use std::time::Duration;

use connect_offsets::codec::json::{self, Json};
use connect_offsets::connector_offsets::ConnectorOffsets;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::store::kafka::KafkaStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use http_util::{Serve, request as http};
use kafka_util::{BOUNDS, bootstrap, create_topic, read_all, unique_topic};
use scripts::{ConnectWorker, wait_for};

const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);

/// A JSON string literal as the codec writes it.
fn js(s: &str) -> String {
    let mut out = Vec::new();
    json::encode_str(s, &mut out);
    String::from_utf8(out).unwrap()
}

/// The entries of an offsets document, normalized (bytes and non-finite doubles as Connect reads
/// them back) and sorted, for comparing documents whose member and entry order may differ.
fn entries(doc: &ConnectorOffsets) -> Vec<String> {
    let mut v: Vec<String> = doc
        .offsets
        .iter()
        .map(|(p, o)| {
            let sorted = |m: &Offset| {
                let mut members: Vec<(String, String)> = m
                    .connect_normalized()
                    .iter()
                    .map(|(n, v)| (n.to_string(), format!("{v:?}")))
                    .collect();
                members.sort();
                members
            };
            format!(
                "{:?} => {:?}",
                p.as_ref().map(sorted),
                o.as_ref().map(sorted)
            )
        })
        .collect();
    v.sort();
    v
}

fn parse_offsets(body: &str) -> ConnectorOffsets {
    ConnectorOffsets::parse(body.as_bytes())
        .unwrap_or_else(|e| panic!("GET offsets answered `{body}`: {e}"))
}

/// The worker, and one connector on it.
struct Connect<'a> {
    worker: &'a ConnectWorker,
    name: String,
}

impl Connect<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}/connectors/{}{path}", self.worker.base, self.name)
    }

    fn offsets(&self) -> ConnectorOffsets {
        let (st, body) = http("GET", &self.url("/offsets"), None);
        assert_eq!(st, 200, "GET offsets: {body}");
        parse_offsets(&body)
    }

    /// Connect's view after a change is eventually consistent (its GET re-reads the topic): polls
    /// until `done` holds, for up to 60 s, and returns the last answer either way.
    fn offsets_until(&self, done: impl Fn(&ConnectorOffsets) -> bool) -> ConnectorOffsets {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let o = self.offsets();
            if done(&o) || std::time::Instant::now() >= deadline {
                return o;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    fn offsets_text(&self) -> String {
        let (st, body) = http("GET", &self.url("/offsets"), None);
        assert_eq!(st, 200, "GET offsets: {body}");
        body
    }

    /// The connector's state and its tasks' states from `GET /connectors/{name}/status`.
    fn status(&self) -> Option<(String, Vec<String>)> {
        let (st, body) = http("GET", &self.url("/status"), None);
        if st != 200 {
            return None;
        }
        let Ok(Json::Object(obj)) = json::parse(body.as_bytes()) else {
            return None;
        };
        let state = |v: &Json| match v {
            Json::Object(m) => m
                .iter()
                .find(|(n, _)| n == "state")
                .and_then(|(_, s)| match s {
                    Json::String(s) => Some(s.clone()),
                    _ => None,
                }),
            _ => None,
        };
        let connector = obj
            .iter()
            .find(|(n, _)| n == "connector")
            .and_then(|(_, v)| state(v))?;
        let tasks = match obj.iter().find(|(n, _)| n == "tasks") {
            Some((_, Json::Array(ts))) => ts.iter().filter_map(state).collect(),
            _ => Vec::new(),
        };
        Some((connector, tasks))
    }

    fn wait_state(&self, connector: &str, tasks: &[&str]) {
        wait_for(
            || {
                format!(
                    "connector {} {connector} with tasks {tasks:?} (last status {:?}; worker log:\n{})",
                    self.name,
                    self.status(),
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                let (c, t) = self.status()?;
                (c == connector && t == tasks).then_some(())
            },
        )
    }

    fn stop(&self) {
        let (st, body) = http("PUT", &self.url("/stop"), None);
        assert!(matches!(st, 202 | 204), "PUT stop: {st} {body}");
        self.wait_state("STOPPED", &[]);
    }

    fn resume(&self) {
        let (st, body) = http("PUT", &self.url("/resume"), None);
        assert_eq!(st, 202, "PUT resume: {body}");
        self.wait_state("RUNNING", &["RUNNING"]);
    }

    /// Waits until `GET offsets` shows `position` for `partition`.
    fn wait_position(&self, partition: &Partition, position: i64) -> ConnectorOffsets {
        let want = Offset::new().with("position", position);
        wait_for(
            || {
                format!(
                    "Connect's GET offsets to show position {position} (last: {}; worker log:\n{})",
                    self.offsets_text(),
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                let doc = self.offsets();
                doc.offsets
                    .iter()
                    .any(|(p, o)| p.as_ref() == Some(partition) && o.as_ref() == Some(&want))
                    .then_some(doc)
            },
        )
    }
}

#[test]
fn a_real_connect_worker_and_our_store_share_the_offsets_topic() {
    let bootstrap = bootstrap();
    let offsets_topic = unique_topic("connect-offsets");
    let group = unique_topic("connect-group");
    let data_topic = unique_topic("file-lines");
    create_topic(&data_topic, 1, &[]);
    let worker = ConnectWorker::start(&bootstrap, &offsets_topic, &group);

    // A file to read; its name has a non-ASCII and an astral character, so the key bytes hold an
    // escaped surrogate pair. Its lines are ASCII: FileStreamSourceTask counts its position in
    // characters read but resumes by skipping bytes.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ünï😀 lines.txt");
    let lines = [
        "first line",
        "second \"quoted\"",
        "third\tline",
        "fourth",
        "fifth and last",
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &text).unwrap();
    let filename = file.to_str().unwrap().to_string();
    let partition = Partition::new().with("filename", filename.as_str());

    let name = format!("file-source-{}", std::process::id());
    let c = Connect {
        worker: &worker,
        name: name.clone(),
    };
    let config = format!(
        r#"{{"name":{},"config":{{"connector.class":"{FILE_SOURCE}","tasks.max":"1","file":{},"topic":{}}}}}"#,
        js(&name),
        js(&filename),
        js(&data_topic)
    );
    let (st, body) = http(
        "POST",
        &format!("{}/connectors", worker.base),
        Some(&config),
    );
    assert_eq!(st, 201, "create the connector: {body}");
    c.wait_state("RUNNING", &["RUNNING"]);

    // (a) Connect commits the position after the last line; our store reads the same.
    let file_len = text.len() as i64;
    let from_connect = c.wait_position(&partition, file_len);
    assert_eq!(
        from_connect.offsets,
        vec![(
            Some(partition.clone()),
            Some(Offset::new().with("position", file_len))
        )],
        "Connect reports exactly one partition"
    );
    let store_url =
        format!("kafka://{bootstrap}/{offsets_topic}?partitions=25&replication=1&{BOUNDS}");
    let store = KafkaStore::open(&store_url).unwrap();
    assert_eq!(store.partition_count(), 25, "Connect made 25 partitions");
    assert_eq!(
        store.dead_letters(),
        0,
        "every record Connect wrote decodes"
    );
    let key = OffsetKey::new(name.as_str(), partition.clone());
    assert_eq!(
        store.get(&key).unwrap(),
        Some(Offset::new().with("position", file_len))
    );
    let ours = ConnectorOffsets::from_stored(&store.partitions(&name).unwrap());
    assert_eq!(ours, from_connect, "our store reads what Connect reports");
    // Connect's record: our key bytes, on the partition our murmur2 gives.
    let records = read_all(&offsets_topic, "read_uncommitted");
    let connect_records: Vec<_> = records
        .iter()
        .filter(|r| r.key.as_deref() == Some(key.connect_key().as_slice()))
        .collect();
    assert!(
        !connect_records.is_empty(),
        "no record with our key bytes {} among {:?}",
        String::from_utf8_lossy(&key.connect_key()),
        records
            .iter()
            .map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned())
            .collect::<Vec<_>>()
    );
    for r in &connect_records {
        assert_eq!(r.partition, store.partition_of(&key), "Connect's placement");
    }
    eprintln!(
        "connect_interop (a): Connect committed {} and our store reads it from topic partition {}",
        from_connect.to_json(),
        store.partition_of(&key)
    );

    // (b) Stopped: offsets our store writes are what Connect returns, exactly.
    c.stop();
    let first_line = (lines[0].len() + 1) as i64;
    store
        .set(key.clone(), Offset::new().with("position", first_line))
        .unwrap();
    // Another partition of the same connector, with values that are hard to spell.
    let odd_partition = Partition::new().with("filename", "/tmp/other ünï😀\u{2028}\"q\".txt");
    let odd_offset = Offset::new()
        .with("position", 1234)
        .with("ratio", 1e20)
        .with("neg", -0.0)
        .with("tiny", 5e-324)
        .with("third", 1.0 / 3.0)
        .with("nan", f64::NAN)
        .with("big", i64::MAX)
        .with("raw", vec![0u8, 0xff, 0x10])
        .with("flag", true)
        .with("none", connect_offsets::Value::Null)
        .with("text", "tab\tcontrol\u{1}astral😀");
    let odd_key = OffsetKey::new(name.as_str(), odd_partition.clone());
    store.set(odd_key.clone(), odd_offset.clone()).unwrap();
    // Connect's JsonConverter reads fractional numbers through BigDecimal, which has no negative
    // zero: the record says -0.0 (Connect's own spelling, checked below), Connect reads 0.0.
    let mut odd_as_connect_reads = odd_offset.clone();
    odd_as_connect_reads.insert("neg", 0.0);
    let want = ConnectorOffsets {
        offsets: vec![
            (
                Some(partition.clone()),
                Some(Offset::new().with("position", first_line)),
            ),
            (Some(odd_partition.clone()), Some(odd_as_connect_reads)),
        ],
    };
    let got_text = c.offsets_text();
    let got = parse_offsets(&got_text);
    assert_eq!(
        entries(&got),
        entries(&want),
        "Connect's GET returns what our store wrote: {got_text}"
    );
    let mut odd_value = Vec::new();
    json::encode_value(&odd_offset, &mut odd_value);
    assert!(
        String::from_utf8_lossy(&odd_value).contains(r#""neg":-0.0"#),
        "we write Connect's spelling of -0.0"
    );
    let odd_record = read_all(&offsets_topic, "read_committed")
        .into_iter()
        .rfind(|r| r.key.as_deref() == Some(odd_key.connect_key().as_slice()))
        .expect("our record");
    assert_eq!(odd_record.value, Some(odd_value));
    // Single-member maps come back in our member order: the whole entry is byte for byte ours.
    let mut file_entry = Vec::new();
    connect_offsets::connector_offsets::encode_entry(
        Some(&partition),
        Some(&Offset::new().with("position", first_line)),
        &mut file_entry,
    );
    let file_entry = String::from_utf8(file_entry).unwrap();
    assert!(
        got_text.contains(&file_entry),
        "{got_text} does not contain {file_entry}"
    );
    eprintln!("connect_interop (b): Connect's GET after our write: {got_text}");
    // The connector really uses it: resumed, it sends the lines after our position again and
    // commits the end of the file.
    c.resume();
    c.wait_position(&partition, file_len);
    let sent: Vec<String> = read_all(&data_topic, "read_uncommitted")
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
        .collect();
    let want_sent: Vec<String> = lines.iter().chain(&lines[1..]).map(|l| js(l)).collect();
    assert_eq!(sent, want_sent, "the lines after our position, sent again");
    store.refresh().unwrap();
    assert_eq!(
        store.get(&key).unwrap(),
        Some(Offset::new().with("position", file_len))
    );

    // (c) Connect's DELETE resets every partition of the stopped connector; our store sees it.
    c.stop();
    let (st, body) = http("DELETE", &c.url("/offsets"), None);
    assert_eq!(st, 200, "DELETE offsets: {body}");
    assert!(body.contains("reset successfully"), "{body}");
    assert_eq!(c.offsets_text(), r#"{"offsets":[]}"#);
    let report = store.refresh().unwrap();
    assert!(report.records >= 2, "the tombstones were read: {report:?}");
    assert_eq!(store.get(&key).unwrap(), None, "reset");
    assert_eq!(store.get(&odd_key).unwrap(), None, "reset");
    assert!(store.partitions(&name).unwrap().is_empty());
    eprintln!("connect_interop (c): Connect's DELETE answered {body}; our store sees no offsets");

    // (d) The PATCH bodies `connect-offsets serve` accepts (tests/rest.rs), sent to the worker and
    // to our server on the same topic: both accept them, with the same result.
    let serve = Serve::start(&["--store", &store_url, "--connector", &name]);
    let source = format!(
        r#"{{"offsets":[{{"partition":{{"filename":"/tmp/ünï😀.txt"}},"offset":{{"position":1234,"ratio":1.0E20}}}},{{"partition":{{"filename":{}}},"offset":{{"position":{first_line}}}}}]}}"#,
        js(&filename)
    );
    let reset_one = r#"{"offsets":[{"partition":{"filename":"/tmp/ünï😀.txt"},"offset":null}]}"#;
    let serve_get = || {
        let (st, body) = http("GET", &serve.offsets_url(&name), None);
        assert_eq!(st, 200, "serve GET: {body}");
        parse_offsets(&body)
    };
    // Connect applies `source`; both read it.
    let (st, body) = http("PATCH", &c.url("/offsets"), Some(&source));
    assert_eq!(st, 200, "Connect PATCH {source}: {body}");
    let after_connect = c.offsets_until(|o| o.offsets.len() == 2);
    assert_eq!(
        after_connect.offsets.len(),
        2,
        "{}",
        after_connect.to_json()
    );
    assert_eq!(entries(&serve_get()), entries(&after_connect));
    store.refresh().unwrap();
    assert_eq!(
        entries(&ConnectorOffsets::from_stored(
            &store.partitions(&name).unwrap()
        )),
        entries(&after_connect)
    );
    // Connect resets one partition, we reset it again (accepted, nothing left to do).
    for url in [c.url("/offsets"), serve.offsets_url(&name)] {
        let (st, body) = http("PATCH", &url, Some(reset_one));
        assert_eq!(st, 200, "PATCH {reset_one} to {url}: {body}");
    }
    let want_after_reset = entries(&ConnectorOffsets {
        offsets: vec![(
            Some(partition.clone()),
            Some(Offset::new().with("position", first_line)),
        )],
    });
    assert_eq!(
        entries(&c.offsets_until(|o| entries(o) == want_after_reset)),
        want_after_reset
    );
    assert_eq!(entries(&serve_get()), want_after_reset);
    // Connect resets everything; our server applies `source`: Connect reads what it wrote itself.
    let (st, body) = http("DELETE", &c.url("/offsets"), None);
    assert_eq!(st, 200, "DELETE: {body}");
    let (st, body) = http("PATCH", &serve.offsets_url(&name), Some(&source));
    assert_eq!(st, 200, "serve PATCH {source}: {body}");
    assert_eq!(
        entries(&c.offsets_until(|o| entries(o) == entries(&after_connect))),
        entries(&after_connect)
    );
    assert_eq!(entries(&serve_get()), entries(&after_connect));
    // A PATCH with -0.0: Connect normalizes the body through its JsonConverter (write, read back)
    // before writing, so its record says 0.0; `serve` writes the body's -0.0.
    let zero_partition = Partition::new().with("filename", "/tmp/zero.txt");
    let zero_key = OffsetKey::new(name.as_str(), zero_partition.clone());
    let zero_body = r#"{"offsets":[{"partition":{"filename":"/tmp/zero.txt"},"offset":{"position":0,"z":-0.0}}]}"#;
    let zero_sign = |who: &str| {
        let rec = read_all(&offsets_topic, "read_committed")
            .into_iter()
            .rfind(|r| r.key.as_deref() == Some(zero_key.connect_key().as_slice()))
            .unwrap_or_else(|| panic!("no record of {who} for {zero_key:?}"));
        let v = json::decode_value(&rec.value.expect("a value"))
            .unwrap()
            .unwrap();
        match v.get("z") {
            Some(connect_offsets::Value::Float(z)) if *z == 0.0 => z.is_sign_negative(),
            other => panic!("{who} wrote z = {other:?}"),
        }
    };
    let (st, body) = http("PATCH", &c.url("/offsets"), Some(zero_body));
    assert_eq!(st, 200, "Connect PATCH {zero_body}: {body}");
    let connect_negative = zero_sign("Connect");
    let (st, body) = http("PATCH", &serve.offsets_url(&name), Some(zero_body));
    assert_eq!(st, 200, "serve PATCH {zero_body}: {body}");
    let serve_negative = zero_sign("serve");
    assert!(
        !connect_negative,
        "Connect's PATCH writes what its converter reads back: 0.0"
    );
    eprintln!(
        "connect_interop (d): PATCH {zero_body}: Connect wrote z = {}0.0, serve wrote z = {}0.0",
        if connect_negative { "-" } else { "" },
        if serve_negative { "-" } else { "" }
    );
    // tests/rest.rs's source body, with its null partition: `serve` takes it; Connect's framework
    // would too, but FileStreamSourceConnector.alterOffsets refuses every offset without a
    // `position` and every null partition (with a 500, as Connect answers connector errors).
    let with_null = r#"{"offsets":[{"partition":{"filename":"/tmp/ünï😀.txt"},"offset":{"position":1234,"ratio":1.0E20}},{"partition":null,"offset":{"pos":-0.0}}]}"#;
    let null_partition = r#"{"offsets":[{"partition":null,"offset":{"position":5}}]}"#;
    for (body, why) in [
        (
            with_null,
            "Offset objects should either be null or contain the key 'position'",
        ),
        (null_partition, "Partition objects cannot be null"),
    ] {
        let (st, text) = http("PATCH", &c.url("/offsets"), Some(body));
        assert!(
            st == 500 && text.contains(why),
            "Connect PATCH {body}: {st} {text}"
        );
        let (st, text) = http("PATCH", &serve.offsets_url(&name), Some(body));
        assert_eq!(st, 200, "serve PATCH {body}: {text}");
    }
    // An empty list: both refuse it with Connect's 400.
    for url in [c.url("/offsets"), serve.offsets_url(&name)] {
        let (st, body) = http("PATCH", &url, Some(r#"{"offsets":[]}"#));
        assert_eq!(st, 400, "PATCH with no offsets to {url}: {body}");
        assert!(
            body.contains("Partitions / offsets need to be provided for an alter offsets request"),
            "{body}"
        );
    }
    eprintln!(
        "connect_interop (d): Connect and `serve` both accepted {source} and {reset_one}, same \
         result: {}",
        c.offsets_text()
    );
}
