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
//! 4. the `PATCH` bodies `connect-offsets serve` accepts (cli/tests/tool/rest.rs) are accepted by the worker
//!    too, with the same result whichever of the two applied them, and a new partition of 14
//!    members is written in the same member order (Java's `HashMap`'s) by both;
//! 5. an offset Connect wrote for a 9-member partition (unicode names, a double) and that our CLI
//!    `set`s with the members reversed is what Connect's `GET` returns, under Connect's own key.
//!
//! A second test runs the worker on JDK 17, whose `Double.toString(1e23)` is
//! `9.999999999999999E22` (JDK 19+: `1.0E23`, as the codec writes): offsets our CLI sets with the
//! members reversed and the double spelled as JDK 19+ does are what that worker returns, and the
//! resumed `FileStreamSourceConnector` continues from the position set through the CLI. Its one
//! partition member (`filename`) cannot be reordered and holds no number, so the resume is proved
//! for that key only; for the 9-member partition, which no connector shipped with Connect has,
//! Connect's `GET` (which looks each key up by the bytes its JVM encodes) is the witness. The two
//! tests take turns: one worker at a time on the port.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;
use crate::scripts;

use std::time::Duration;

use connect_offsets::internal::codec::json;
use connect_offsets::internal::connector_offsets::ConnectorOffsets;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::store::kafka::KafkaStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use http_util::{Serve, request as http};
use kafka_util::{
    BOUNDS, bootstrap, cli, create_topic, produce_plain, read_all, unique_topic, written_since,
};
use scripts::{ConnectWorker, connector_status, java17_home, wait_for};

const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);

/// A 9-member partition for Connect's `PATCH`: unicode names, an astral character, and 1e23, which
/// a JDK 17 worker spells `9.999999999999999E22`. (`FileStreamSourceConnector.alterOffsets` wants a
/// `filename` member in every partition; its task only ever looks up `{"filename":...}` alone.)
const NINE: &str = r#"{"sërver 😀":"db-ü","tablé":"ördërs","shard":7,"ratio":1e23,"third":0.3333333333333333,"snapshot":true,"filename":"/tmp/nine ünï😀.txt","ключ":-3,"zone":"\"q\""}"#;

/// Connect writes an offset for `partition` (its
/// `PATCH`, connector stopped: Connect's member order and its JVM's spelling of doubles); our CLI
/// `set`s a new one with doubles spelled as JDK 19+ does, and with Connect's members reversed when
/// `reverse`. Then Connect's `GET` returns exactly our offset, which is under Connect's key bytes,
/// and no tombstone hit that key. Returns Connect's key bytes.
fn set_through_the_cli(
    c: &Connect<'_>,
    store_url: &str,
    offsets_topic: &str,
    partition: &str,
    reverse: bool,
    position: i64,
) -> Vec<u8> {
    let want_key = OffsetKey::new(c.name.as_str(), Partition::from_json(partition).unwrap());
    let body = format!(r#"{{"offsets":[{{"partition":{partition},"offset":{{"position":5}}}}]}}"#);
    let (st, text) = http("PATCH", &c.url("/offsets"), Some(&body));
    assert_eq!(st, 200, "Connect PATCH {body}: {text}");
    let of_key = |r: &kafka_util::Seen| {
        r.key
            .as_deref()
            .and_then(|k| json::decode_key(k).ok())
            .is_some_and(|k| k == want_key)
    };
    let connect_key = wait_for(
        || format!("Connect's record for {partition} in {offsets_topic}"),
        WAIT,
        POLL,
        || {
            read_all(offsets_topic, "read_uncommitted")
                .into_iter()
                .rfind(|r| of_key(r) && r.value.is_some())
                .and_then(|r| r.key)
        },
    );
    let connects = json::decode_key(&connect_key).unwrap();
    let members = connects.partition().unwrap().iter();
    let reversed: Partition = if reverse {
        members
            .rev()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    } else {
        members.map(|(n, v)| (n.to_string(), v.clone())).collect()
    };
    let ours = OffsetKey::new(c.name.as_str(), reversed.clone());
    assert_ne!(
        ours.connect_key(),
        connect_key,
        "our spelling differs from Connect's"
    );
    let before = read_all(offsets_topic, "read_uncommitted");
    cli(&[
        "set",
        "--store",
        store_url,
        "--connector",
        &c.name,
        "--partition",
        &reversed.to_json(),
        "--offset",
        &format!(r#"{{"position":{position}}}"#),
    ]);
    let want = Offset::new().with("position", position);
    let found = |doc: &ConnectorOffsets| {
        doc.offsets.iter().any(|(p, o)| {
            p.as_ref()
                .is_some_and(|p| OffsetKey::new(c.name.as_str(), p.clone()) == want_key)
                && o.as_ref() == Some(&want)
        })
    };
    let got = c.offsets_until(found);
    assert!(
        found(&got),
        "Connect's GET does not return our offset {} for {partition}: {}",
        want.to_json(),
        got.to_json()
    );
    let after = read_all(offsets_topic, "read_uncommitted");
    let written: Vec<_> = written_since(&before, after.clone())
        .into_iter()
        .filter(of_key)
        .collect();
    assert_eq!(written.len(), 1, "one record for the one live form");
    assert_eq!(
        written[0].key.as_deref(),
        Some(&connect_key[..]),
        "under Connect's key bytes, not {}",
        String::from_utf8_lossy(written[0].key.as_deref().unwrap_or_default())
    );
    assert_eq!(written[0].value.as_deref(), Some(want.to_json().as_bytes()));
    assert!(
        after
            .iter()
            .filter(|r| r.key.as_deref() == Some(&connect_key[..]))
            .all(|r| r.value.is_some()),
        "no tombstone for Connect's key"
    );
    eprintln!(
        "connect_interop: Connect wrote {}; our CLI set {} for {}; Connect's GET: {}",
        String::from_utf8_lossy(&connect_key),
        want.to_json(),
        reversed.to_json(),
        got.to_json()
    );
    connect_key
}

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

impl<'a> Connect<'a> {
    /// Creates a FileStreamSource connector `name` reading `file` into `topic`, and waits until it
    /// and its task run.
    fn file_source(worker: &'a ConnectWorker, name: &str, file: &str, topic: &str) -> Connect<'a> {
        let config = format!(
            r#"{{"name":{},"config":{{"connector.class":"{FILE_SOURCE}","tasks.max":"1","file":{},"topic":{}}}}}"#,
            js(name),
            js(file),
            js(topic)
        );
        let (st, body) = http(
            "POST",
            &format!("{}/connectors", worker.base),
            Some(&config),
        );
        assert_eq!(st, 201, "create the connector: {body}");
        let c = Connect {
            worker,
            name: name.to_string(),
        };
        c.wait_state("RUNNING", &["RUNNING"]);
        c
    }

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
        connector_status(&body)
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
    let c = Connect::file_source(&worker, &name, &filename, &data_topic);

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
    // Our writes here go without transactions (`write.mode=idempotent`); the JDK 17 test below
    // writes with them: a Connect worker resumes from either.
    let store_url = format!(
        "kafka://{bootstrap}/{offsets_topic}?partitions=25&replication=1&write.mode=idempotent&{BOUNDS}"
    );
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

    // (a') `serve --connect-configs` follows the cluster as its herder does: the running
    // connector's offsets are not modified (Connect's own 400, byte for byte), an unconfigured
    // connector is not found, and the connectors are the configured ones.
    let configs_url = format!("kafka://{bootstrap}/{group}-configs");
    let follow = Serve::start(&["--store", &store_url, "--connect-configs", &configs_url]);
    let rewind = format!(
        r#"{{"offsets":[{{"partition":{{"filename":{}}},"offset":{{"position":0}}}}]}}"#,
        js(&filename)
    );
    let ours = http("PATCH", &follow.offsets_url(&name), Some(&rewind));
    let connects = http("PATCH", &c.url("/offsets"), Some(&rewind));
    assert_eq!(ours.0, 400, "{}", ours.1);
    assert_eq!(ours, connects, "Connect's refusal");
    let (st, body) = http("DELETE", &follow.offsets_url(&name), None);
    assert_eq!(st, 400, "{body}");
    let (st, body) = http("GET", &follow.offsets_url("co-test-never-configured"), None);
    assert_eq!(st, 404, "{body}");
    let (st, body) = http("GET", &follow.url("/connectors"), None);
    assert_eq!((st, body), (200, format!("[{}]", js(&name))));
    assert_eq!(
        store.get(&key).unwrap(),
        Some(Offset::new().with("position", file_len)),
        "nothing was modified"
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
    // Connect's GET lists the partitions its log thread has consumed so far: a new one may be
    // missing for a moment (seen once in four runs), so wait for it before reading the text.
    c.offsets_until(|o| entries(o) == entries(&want));
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
    connect_offsets::internal::connector_offsets::encode_entry(
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
    // Stopped, the connector's offsets may be modified through `serve --connect-configs` too.
    let (st, body) = http("DELETE", &follow.offsets_url(&name), None);
    assert_eq!(
        st, 200,
        "serve --connect-configs DELETE of a stopped connector: {body}"
    );
    drop(follow);

    // (d) The PATCH bodies `connect-offsets serve` accepts (cli/tests/tool/rest.rs), sent to the worker and
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
        !connect_negative && !serve_negative,
        "Connect's PATCH writes what its converter reads back, 0.0, and so does serve's"
    );
    // A partition of 14 members, new to the topic, in an order of the body's: Connect writes it in
    // its HashMap's order (14 members: 32 buckets), and so does `serve` (another filename, the same
    // names, so the same order).
    let members = |file: &str| {
        format!(
            r#"{{"zone":"z","ключ":1,"tablé":"t","sërver 😀":"s","cluster":"c","topic":"t","partition":2,"filename":{},"shard":3,"db":"d","schema":"s","kafka_topic":"k","kafka_partition":4,"Ea":5}}"#,
            js(file)
        )
    };
    let written_order = |file: &str| {
        let want = OffsetKey::new(name.as_str(), Partition::from_json(&members(file)).unwrap());
        let rec = read_all(&offsets_topic, "read_committed")
            .into_iter()
            .rfind(|r| {
                r.key.as_deref().and_then(|k| json::decode_key(k).ok()) == Some(want.clone())
            })
            .unwrap_or_else(|| panic!("no record of {file}"));
        let key = json::decode_key(&rec.key.unwrap()).unwrap();
        let names: Vec<String> = key
            .partition()
            .unwrap()
            .iter()
            .map(|(n, _)| n.to_owned())
            .collect();
        names
    };
    for (url, file) in [
        (c.url("/offsets"), "/tmp/order-connect.txt"),
        (serve.offsets_url(&name), "/tmp/order-serve.txt"),
    ] {
        let body = format!(
            r#"{{"offsets":[{{"partition":{},"offset":{{"position":1}}}}]}}"#,
            members(file)
        );
        let (st, text) = http("PATCH", &url, Some(&body));
        assert_eq!(st, 200, "PATCH {body} to {url}: {text}");
    }
    let connect_order = written_order("/tmp/order-connect.txt");
    assert_ne!(connect_order[0], "zone", "Connect reorders the members");
    assert_eq!(written_order("/tmp/order-serve.txt"), connect_order);
    eprintln!("connect_interop (d): Connect and serve both wrote 14 members as {connect_order:?}");
    // cli/tests/tool/rest.rs's source body, with its null partition: `serve` takes it; Connect's framework
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

    // A partition whose latest record's value does not decode (another tool's): Connect's reader
    // returns no offset for it, not the value before, and neither does our store.
    let bad = Partition::new().with("filename", "/tmp/bad value.txt");
    let bad_key = OffsetKey::new(name.as_str(), bad.clone()).connect_key();
    let offset_of_bad = |o: &ConnectorOffsets| {
        o.offsets
            .iter()
            .find(|(p, _)| p.as_ref() == Some(&bad))
            .and_then(|(_, off)| off.clone())
    };
    produce_plain(
        &offsets_topic,
        &[(None, Some(&bad_key), Some(br#"{"position":7}"#))],
    );
    let seen = c.offsets_until(|o| offset_of_bad(o).is_some());
    assert_eq!(
        offset_of_bad(&seen),
        Some(Offset::new().with("position", 7))
    );
    produce_plain(
        &offsets_topic,
        &[(None, Some(&bad_key), Some(br#"{"position":"#))],
    );
    let after = c.offsets_until(|o| offset_of_bad(o).is_none());
    assert_eq!(offset_of_bad(&after), None, "Connect: {}", c.offsets_text());
    store.refresh().unwrap();
    let bad_offset_key = OffsetKey::new(name.as_str(), bad.clone());
    assert_eq!(
        store.get(&bad_offset_key).unwrap(),
        None,
        "ours, as Connect's"
    );
    assert!(
        store
            .partitions(&name)
            .unwrap()
            .iter()
            .all(|(k, _)| *k != bad_offset_key),
        "not listed either"
    );
    eprintln!("connect_interop (d): a bad latest value: Connect and our store answer no offset");

    // (e) A 9-member partition written by Connect, set through our CLI with the members reversed.
    drop(serve);
    let connect_key = set_through_the_cli(&c, &store_url, &offsets_topic, NINE, true, 22);
    assert!(
        String::from_utf8_lossy(&connect_key).contains(r#""ratio":1.0E23"#),
        "Java 25 spells 1e23 as we do"
    );
}

/// With a worker on JDK 17 (see the module documentation).
#[test]
fn a_jdk17_worker_finds_offsets_set_with_members_reordered_and_doubles_respelled() {
    let bootstrap = bootstrap();
    let offsets_topic = unique_topic("connect-offsets-jdk17");
    let group = unique_topic("connect-group-jdk17");
    let data_topic = unique_topic("file-lines-jdk17");
    create_topic(&data_topic, 1, &[]);
    let worker = ConnectWorker::start_on(&java17_home(), &bootstrap, &offsets_topic, &group);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jdk17 ünï😀.txt");
    let lines = ["one", "two", "three"];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &text).unwrap();
    let filename = file.to_str().unwrap().to_string();
    let partition = Partition::new().with("filename", filename.as_str());
    let name = format!("jdk17-source-{}", std::process::id());
    let c = Connect::file_source(&worker, &name, &filename, &data_topic);
    let file_len = text.len() as i64;
    c.wait_position(&partition, file_len);
    c.stop();

    let store_url =
        format!("kafka://{bootstrap}/{offsets_topic}?partitions=25&replication=1&{BOUNDS}");
    // Connect's member order, only the double spelled otherwise (part 3 alone); then reversed too.
    let same_order = NINE.replace("nine", "same order");
    let connect_key = set_through_the_cli(&c, &store_url, &offsets_topic, &same_order, false, 33);
    assert!(
        String::from_utf8_lossy(&connect_key).contains(r#""ratio":9.999999999999999E22"#),
        "JDK 17 spells 1e23 with 16 digits: {}",
        String::from_utf8_lossy(&connect_key)
    );
    set_through_the_cli(&c, &store_url, &offsets_topic, NINE, true, 22);

    // The connector resumes from the position set through the CLI: it sends the lines after the
    // first one again and commits the end of the file; the 9-member offset stays ours.
    let first_line = (lines[0].len() + 1) as i64;
    cli(&[
        "set",
        "--store",
        &store_url,
        "--connector",
        &name,
        "--partition",
        &partition.to_json(),
        "--offset",
        &format!(r#"{{"position":{first_line}}}"#),
    ]);
    c.wait_position(&partition, first_line);
    c.resume();
    let doc = c.wait_position(&partition, file_len);
    let sent: Vec<String> = read_all(&data_topic, "read_uncommitted")
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
        .collect();
    let want_sent: Vec<String> = lines.iter().chain(&lines[1..]).map(|l| js(l)).collect();
    assert_eq!(sent, want_sent, "the lines after our position, sent again");
    for (partition, position) in [(NINE.to_string(), 22), (same_order, 33)] {
        let p = Partition::from_json(&partition).unwrap();
        assert!(
            doc.offsets.iter().any(|(q, o)| q.as_ref() == Some(&p)
                && o.as_ref() == Some(&Offset::new().with("position", position))),
            "{}",
            doc.to_json()
        );
    }
    eprintln!(
        "connect_interop (jdk17): after the resume Connect's GET: {}",
        doc.to_json()
    );
}
