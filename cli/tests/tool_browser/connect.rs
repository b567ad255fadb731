//! The console over a Kafka offsets topic written by a real Kafka Connect worker, with the
//! worker's config topic (`--connect-configs`): needs the test broker (`scripts/kafka start`) and
//! the worker of `scripts/connect` (one at a time, on port 8083).
//! 1. A `FileStreamSourceConnector` reads 5 lines and commits its position. The console lists it
//!    RUNNING with its partition; its view refuses modifications, saying the connector must be
//!    stopped, with every modifying button disabled.
//! 2. Stopped through Connect's REST API: the console lists it STOPPED and its view modifies
//!    again. The offset is edited in the page (dry run, confirmation) back to the end of line 3.
//! 3. Resumed, the worker goes on from the console's offset: lines 4 and 5 are sent again.
//! 4. Deleted, its offsets stay: the console lists it among the orphans, and resets it from there
//!    (dry run first); the CLI then finds no offset.
#![cfg(feature = "kafka")]

use std::time::Duration;

use serde_json::{Value, json};

use crate::browser_util::Browser;
use crate::fixture::*;
use crate::http_util::{Serve, request as http};
use crate::kafka_util::{BOUNDS, TopicGuard, bootstrap, create_topic, read_all, unique_topic};
use crate::scripts::{ConnectWorker, connector_status, wait_for};

const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
/// Generous: a loaded machine takes seconds to start a connector's task.
const WAIT: Duration = Duration::from_secs(180);
const POLL: Duration = Duration::from_millis(250);

/// The worker's connector `name`: its state (and its tasks') through Connect's REST API.
fn wait_state(worker: &ConnectWorker, name: &str, want: &str) {
    let url = format!("{}/connectors/{name}/status", worker.base);
    wait_for(
        || format!("{name} {want} (log:\n{})", ConnectWorker::log_tail(30)),
        WAIT,
        POLL,
        || {
            let (st, body) = http("GET", &url, None);
            let (c, tasks) = (st == 200).then(|| connector_status(&body)).flatten()?;
            let tasks_ok = match want {
                "RUNNING" => tasks == ["RUNNING"],
                _ => true,
            };
            (c == want && tasks_ok).then_some(())
        },
    );
}

/// Connect's own `GET /connectors/{name}/offsets`.
fn connect_offsets(worker: &ConnectWorker, name: &str) -> Value {
    let (st, body) = http(
        "GET",
        &format!("{}/connectors/{name}/offsets", worker.base),
        None,
    );
    assert_eq!(st, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The values of `topic`'s records, once it holds `n`, checking that no more come within 2 s.
fn records(topic: &str, n: usize) -> Vec<String> {
    let read = || -> Vec<String> {
        read_all(topic, "read_uncommitted")
            .into_iter()
            .map(|r| String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
            .collect()
    };
    wait_for(
        || format!("{n} records in {topic} (has {:?})", read()),
        WAIT,
        POLL,
        || (read().len() >= n).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(2));
    read()
}

/// `connect-offsets get` of one partition on `store`: its offset, `None` when it has none.
fn get(store: &str, connector: &str, partition: &Value) -> Option<Value> {
    let p = partition.to_string();
    let (code, out, err) = crate::cli_util::run(&[
        "get",
        "--store",
        store,
        "--connector",
        connector,
        "--partition",
        &p,
    ]);
    match code {
        0 => Some(serde_json::from_str::<Value>(&out).unwrap()["offset"].clone()),
        3 => None,
        _ => panic!("get {connector} {p}: exit {code}: {err}"),
    }
}

/// The connector's row shows `state` (the list polls; reloading would do too).
fn row_state(b: &Browser, name: &str, state: &str) {
    b.wait_until(&format!("{name} listed {state}"), || {
        let row = b.try_find(&format!("#connectors tr[data-connector=\"{name}\"]"))?;
        row.find(".state").text().contains(state).then_some(())
    });
}

#[test]
fn a_connect_workers_connector_refused_running_edited_stopped_and_reset_orphaned() {
    let bootstrap = bootstrap();
    let offsets_topic = unique_topic("console-offsets");
    let group = unique_topic("console-worker");
    let worker = ConnectWorker::start(&bootstrap, &offsets_topic, &group);
    let configs = format!("kafka://{bootstrap}/{group}-configs?{BOUNDS}");
    let store = format!("kafka://{bootstrap}/{offsets_topic}?partitions=25&replication=1&{BOUNDS}");

    // 1. A source connector reads 5 lines and commits its position.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let text: String = (1..=5).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &text).unwrap();
    let partition = json!({"filename": file.to_str().unwrap()});
    let name = unique_topic("console-source");
    let topic = TopicGuard::new("console-lines");
    create_topic(&topic, 1, &[]);
    let config = json!({"name": name, "config": {
        "connector.class": FILE_SOURCE, "tasks.max": "1",
        "file": file.to_str().unwrap(), "topic": topic.0}});
    let (st, body) = http(
        "POST",
        &format!("{}/connectors", worker.base),
        Some(&config.to_string()),
    );
    assert_eq!(st, 201, "{body}");
    wait_state(&worker, &name, "RUNNING");
    wait_for(
        || format!("{name}'s position {}", text.len()),
        WAIT,
        POLL,
        || {
            let v = connect_offsets(&worker, &name);
            (v["offsets"][0]["offset"]["position"] == json!(text.len())).then_some(())
        },
    );
    assert_eq!(records(&topic, 5).len(), 5);

    let serve = Serve::start(&["--store", &store, "--connect-configs", &configs]);
    let b = browser();
    open_console(&b, &serve);
    row_state(&b, &name, "RUNNING");
    let row = connector_row(&b, &name);
    assert!(row.find(".partitions").text().contains('1'));
    shot(&b, "40-connect-running");
    row.find("a.open").click();
    b.find_visible("#connector");
    let why = b.find_visible("#modify-disabled");
    let reason = b.wait_until(
        "#modify-disabled saying the connector must be stopped",
        || {
            let t = why.text();
            t.contains("STOPPED").then_some(t)
        },
    );
    println!("running connector: #modify-disabled says: {reason}");
    b.wait_until("#reset-all disabled", || {
        (!b.find("#reset-all").enabled()).then_some(())
    });
    let row = partition_row(&b, &partition);
    assert!(
        !row.find(".edit").enabled(),
        "edit is disabled while it runs"
    );
    assert!(
        !row.find(".reset").enabled(),
        "reset is disabled while it runs"
    );
    shot(&b, "41-connect-running-refused");

    // 2. Stopped: listed STOPPED, modifiable; the offset goes back to the end of line 3.
    let (st, body) = http(
        "PUT",
        &format!("{}/connectors/{name}/stop", worker.base),
        None,
    );
    assert!(matches!(st, 202 | 204), "stop: {st} {body}");
    wait_state(&worker, &name, "STOPPED");
    open_console(&b, &serve);
    row_state(&b, &name, "STOPPED");
    connector_row(&b, &name).find("a.open").click();
    b.wait_until("modifications allowed once stopped", || {
        let shown = b
            .try_find("#modify-disabled")
            .is_some_and(|e| e.displayed());
        let enabled = b.try_find("#reset-all").is_some_and(|e| e.enabled());
        (!shown && enabled).then_some(())
    });
    let three = "line 1\nline 2\nline 3\n".len();
    partition_row(&b, &partition).find(".edit").click();
    let editor = b.find("#partitions textarea.offset-editor");
    editor.clear();
    editor.send_keys(&json!({"position": three}).to_string());
    b.find("#partitions button.save").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].contains(&text.len().to_string()) && changes[0].contains(&three.to_string()),
        "{}",
        changes[0]
    );
    shot(&b, "42-connect-stopped-edit-dry-run");
    let msg = confirm(&b);
    assert!(msg.contains("altered"), "toast: {msg}");
    assert_eq!(
        get(&store, &name, &partition),
        Some(json!({"position": three}))
    );
    assert_eq!(
        connect_offsets(&worker, &name)["offsets"][0]["offset"],
        json!({"position": three}),
        "Connect reads the console's offset"
    );

    // 3. Resumed, it goes on from there: lines 4 and 5 again.
    let (st, body) = http(
        "PUT",
        &format!("{}/connectors/{name}/resume", worker.base),
        None,
    );
    assert!(matches!(st, 202 | 204), "resume: {st} {body}");
    wait_state(&worker, &name, "RUNNING");
    let sent = records(&topic, 7);
    // The worker's JSON converter writes each line as a JSON string.
    assert_eq!(
        sent[5..],
        ["\"line 4\"".to_string(), "\"line 5\"".to_string()],
        "{sent:?}"
    );

    // 4. Deleted: an orphan, reset from the console.
    let (st, body) = http(
        "DELETE",
        &format!("{}/connectors/{name}", worker.base),
        None,
    );
    assert!(matches!(st, 200 | 204), "delete: {st} {body}");
    wait_for(
        || format!("{name} gone"),
        WAIT,
        POLL,
        || {
            let url = format!("{}/connectors/{name}/status", worker.base);
            (http("GET", &url, None).0 == 404).then_some(())
        },
    );
    open_console(&b, &serve);
    let orphan = b.find_visible(&format!("#orphans tr[data-orphan=\"{name}\"]"));
    shot(&b, "43-connect-orphan");
    let (st, listed) = http("GET", &serve.url("/orphans"), None);
    assert_eq!(st, 200, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    orphan.find(".reset-orphan").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        get(&store, &name, &partition).is_some(),
        "the dry run writes nothing"
    );
    confirm(&b);
    assert_eq!(get(&store, &name, &partition), None);
    b.wait_until("the orphan gone from #orphans", || {
        b.try_find(&format!("#orphans tr[data-orphan=\"{name}\"]"))
            .is_none()
            .then_some(())
    });
    shot(&b, "44-connect-orphan-reset");
    assert_no_page_problems(&b, "beside a Connect worker");
    // The contract's `GET /orphans` items: name, partitions, last write, type.
    let item = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == json!(name))
        .unwrap_or_else(|| panic!("{name} in GET /orphans: {listed}"))
        .clone();
    assert_eq!(item["partitions"], json!(1), "{item}");
    assert!(item["last_write"].is_string(), "{item}");
    assert_eq!(
        item["type"],
        json!("source"),
        "GET /orphans names the type: {item}"
    );
}
