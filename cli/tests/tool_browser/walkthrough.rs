//! A person's way through the console over a RocksDB store with history: find a connector, open
//! it, page and search its partitions, edit an offset (a refused value first), reset a partition,
//! rewind the connector to a time between two commits and one partition further back, import a
//! file, export; the connectors view refreshes by itself. After each step the store is read
//! through the CLI; the page must record no CSP violation and no uncaught error throughout.

use serde_json::{Value, json};

use crate::fixture::*;

#[test]
fn a_person_finds_edits_resets_rewinds_and_imports() {
    let store = Store::new();
    store.import(&seed(120));
    // A time after the seed, before anything the console changes: the partition rewind's target.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after_seed = now_rfc3339();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let serve = store.serve(&[]);
    let b = browser();
    let orders = json!({"table": "orders"});

    // 1. The connectors: both connectors with their partition counts.
    open_console(&b, &serve);
    let row = connector_row(&b, "jdbc-orders");
    b.wait_until("jdbc-orders' partition count", || {
        row.find(".partitions").text().contains("121").then_some(())
    });
    let file_row = connector_row(&b, "file-src");
    assert!(file_row.find(".partitions").text().contains('1'));
    assert!(
        !row.find(".last-write").text().trim().is_empty(),
        "a last write time is shown"
    );
    for cell in [".state", ".lag", ".alarms"] {
        row.find(cell);
    }
    assert!(
        b.try_find("#connectors tr[data-connector^=\"__\"]")
            .is_none(),
        "the store's own namespaces (history) are not connectors"
    );
    shot(&b, "01-connectors");
    assert_no_page_problems(&b, "the connectors view");

    // 2. Open it: the first page of 50 of 121 partitions, each offset as JSON.
    row.find("a.open").click();
    b.find_visible("#connector");
    b.wait_until("#page-info saying 1–50 of 121", || {
        let t = b.find("#page-info").text();
        (t.contains("121") && t.contains("50")).then_some(())
    });
    let rows = partition_rows(&b);
    assert_eq!(rows.len(), 50, "a page holds 50 partitions");
    for (r, p) in rows.iter().take(5) {
        let shown: Value = serde_json::from_str(&r.find(".offset").text())
            .unwrap_or_else(|e| panic!("the .offset cell of {p} is not JSON: {e}"));
        let stored = store.get("jdbc-orders", p).unwrap();
        assert_eq!(shown, stored, "the offset shown for {p}");
    }
    assert!(
        b.current_url().contains("#/connector/jdbc-orders"),
        "{}",
        b.current_url()
    );
    shot(&b, "02-connector");
    // The next page, then back.
    b.find("#page-next").click();
    b.wait_until("#page-info of the second page", || {
        b.find("#page-info").text().contains("51").then_some(())
    });
    let second: Vec<Value> = partition_rows(&b).into_iter().map(|(_, p)| p).collect();
    assert_eq!(second.len(), 50);
    assert!(
        second.iter().all(|p| !rows.iter().any(|(_, q)| q == p)),
        "the second page shows other partitions"
    );
    b.find("#page-prev").click();
    b.wait_until("#page-info of the first page", || {
        b.find("#page-info").text().starts_with('1').then_some(())
    });
    // Sorted by partition: the rows come in the order of their partitions.
    select_option(&b, "#partition-sort", "partition");
    let sorted = b.wait_until("rows sorted by partition", || {
        let ps: Vec<String> = partition_rows(&b)
            .iter()
            .map(|(_, p)| p["table"].as_str().unwrap_or("").to_string())
            .collect();
        let asc = ps.windows(2).all(|w| w[0] <= w[1]);
        let desc = ps.windows(2).all(|w| w[0] >= w[1]);
        (ps.len() == 50 && (asc || desc)).then_some(ps)
    });
    println!("sorted by partition, first rows: {:?}", &sorted[..3]);
    select_option(&b, "#partition-sort", "last_write");

    // 3. Search: `orders` finds the one partition.
    let found = search(&b, "orders", 1);
    assert_eq!(found, vec![orders.clone()]);
    assert!(
        b.find("#page-info").text().contains("of 1"),
        "{}",
        b.find("#page-info").text()
    );
    // Searching by a field's JSON text works too.
    let found = search(&b, "\"table\":\"t11", 10);
    assert_eq!(found.len(), 10, "t110..t119: {found:?}");
    let found = search(&b, "orders", 1);
    assert_eq!(found, vec![orders.clone()]);
    shot(&b, "03-search");

    // 4. Edit the offset: a value the REST API refuses shows its error at the field and writes
    // nothing; a good one shows the dry run, then is written on confirmation.
    let row = partition_row(&b, &orders);
    row.find(".edit").click();
    let editor = b.find("#partitions textarea.offset-editor");
    let current: Value = serde_json::from_str(&editor.value()).unwrap_or_else(|e| {
        panic!(
            "the editor starts with the offset as JSON: {e}: {}",
            editor.value()
        )
    });
    assert_eq!(current, json!({"lsn": 100, "txid": 1000}));
    for (bad, why) in [
        (r#"{"lsn": 150,"#, "not JSON"),
        (r#"{"lsn": [150]}"#, "an array field"),
        (r#"[150]"#, "not an object"),
    ] {
        editor.clear();
        editor.send_keys(bad);
        b.find("#partitions button.save").click();
        let err = b.find_visible("#partitions .field-error");
        b.wait_until(&format!("a field error for {why}"), || {
            (!err.text().trim().is_empty()).then_some(())
        });
        assert_eq!(
            err.attr("role").as_deref(),
            Some("alert"),
            "the field error is an alert"
        );
        assert!(
            dialog_closed(&b),
            "{why}: no dry run dialog for a refused value"
        );
        println!("field error for {why}: {}", err.text());
        if why == "an array field" {
            shot(&b, "04-edit-field-error");
            assert!(
                err.text().contains("lsn"),
                "the error names the field as the REST API does: {}",
                err.text()
            );
        }
    }
    assert_eq!(
        store.get("jdbc-orders", &orders),
        Some(json!({"lsn": 100, "txid": 1000})),
        "a refused edit writes nothing"
    );
    editor.clear();
    editor.send_keys(r#"{"lsn": 150, "txid": 1500}"#);
    b.find("#partitions button.save").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].contains("orders") && changes[0].contains("100") && changes[0].contains("150"),
        "the change shows the partition, from and to: {}",
        changes[0]
    );
    shot(&b, "05-edit-dry-run");
    assert_eq!(
        store.get("jdbc-orders", &orders),
        Some(json!({"lsn": 100, "txid": 1000})),
        "the dry run writes nothing"
    );
    let msg = confirm(&b);
    assert!(msg.contains("altered"), "toast: {msg}");
    assert_eq!(
        store.get("jdbc-orders", &orders),
        Some(json!({"lsn": 150, "txid": 1500}))
    );
    b.wait_until("the row showing the new offset", || {
        let cell = partition_row(&b, &orders).find(".offset").text();
        (serde_json::from_str::<Value>(&cell).ok() == Some(json!({"lsn": 150, "txid": 1500})))
            .then_some(())
    });
    shot(&b, "06-edited");
    assert_no_page_problems(&b, "editing");

    // 5. Reset one partition: the dry run says from what to nothing; confirmed, it is gone.
    let t007 = json!({"table": "t007"});
    search(&b, "t007", 1);
    partition_row(&b, &t007).find(".reset").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].contains("t007") && changes[0].contains("70"),
        "{}",
        changes[0]
    );
    shot(&b, "07-reset-dry-run");
    assert!(
        store.get("jdbc-orders", &t007).is_some(),
        "the dry run writes nothing"
    );
    // Cancel first: nothing written.
    b.find("#dialog-cancel").click();
    b.wait_until("#dialog closed on cancel", || {
        dialog_closed(&b).then_some(())
    });
    assert!(store.get("jdbc-orders", &t007).is_some(), "cancelled");
    partition_row(&b, &t007).find(".reset").click();
    dialog_changes(&b);
    let msg = confirm(&b);
    assert!(
        msg.contains("altered") || msg.contains("reset"),
        "toast: {msg}"
    );
    assert_eq!(store.get("jdbc-orders", &t007), None);
    b.wait_until("the reset partition gone from the table", || {
        partition_rows(&b)
            .iter()
            .all(|(_, p)| *p != t007)
            .then_some(())
    });
    assert_eq!(store.offsets("jdbc-orders").len(), 120);
    shot(&b, "08-reset");

    // 6. Rewind: two commits by a writer, a time between them; the chart and the list of
    // changes show them; rewinding the connector to that time undoes the second.
    store.set("jdbc-orders", &orders, &json!({"lsn": 300, "txid": 3000}));
    std::thread::sleep(std::time::Duration::from_millis(700));
    let between = now_rfc3339();
    std::thread::sleep(std::time::Duration::from_millis(700));
    store.set("jdbc-orders", &orders, &json!({"lsn": 400, "txid": 4000}));
    let before = store.offsets("jdbc-orders");
    b.refresh();
    b.find_visible("#connector");
    search(&b, "orders", 1);
    b.wait_until("the row of orders showing the second commit", || {
        let cell = partition_row(&b, &orders).find(".offset").text();
        cell.contains("400").then_some(())
    });
    partition_row(&b, &orders).find(".history").click();
    b.find_visible("#history");
    let chart = b.find("svg#history-chart");
    for field in ["lsn", "txid"] {
        chart.find(&format!("path.series[data-field=\"{field}\"]"));
    }
    let items = b.wait_until("the partition's four changes in #history-changes", || {
        let items: Vec<String> = b
            .find_all("#history-changes li.change-item")
            .iter()
            .map(|e| e.text())
            .collect();
        (items.len() >= 4).then_some(items)
    });
    // Seed, edit, two commits: newest first.
    assert_eq!(items.len(), 4, "{items:#?}");
    assert!(items[0].contains("400"), "newest first: {items:#?}");
    assert!(items[3].contains("100"), "oldest last: {items:#?}");
    let points = chart.find_all("circle.point").len();
    assert!(points >= 4, "a point per change: {points}");
    // Clicking the chart picks a time into #rewind-time.
    chart.click();
    let rewind_time = b.find("#rewind-time");
    let picked = b.wait_until("a time picked on the chart", || {
        let v = rewind_time.value();
        connect_offsets::internal::time::parse_rfc3339(&v)
            .is_ok()
            .then_some(v)
    });
    println!("picked on the chart: {picked}");
    shot(&b, "09-history");
    // Type the time between the two commits.
    rewind_time.clear();
    rewind_time.send_keys(&between);
    b.find("#rewind-connector").click();
    let changes = dialog_changes(&b);
    assert_eq!(
        changes.len(),
        1,
        "only orders moved since {between}: {changes:?}"
    );
    assert!(
        changes[0].contains("orders") && changes[0].contains("400") && changes[0].contains("300"),
        "{}",
        changes[0]
    );
    shot(&b, "10-rewind-dry-run");
    assert_eq!(
        store.offsets("jdbc-orders"),
        before,
        "the dry run writes nothing"
    );
    let msg = confirm(&b);
    println!("rewind: {msg}");
    assert_eq!(
        store.get("jdbc-orders", &orders),
        Some(json!({"lsn": 300, "txid": 3000}))
    );
    assert_eq!(
        store.get("jdbc-orders", &t007),
        None,
        "t007 had no offset then"
    );
    assert_eq!(store.offsets("jdbc-orders").len(), 120);
    shot(&b, "11-rewound");
    // One partition, further back: to before the console's edit.
    let rewind_time = b.find("#rewind-time");
    rewind_time.clear();
    rewind_time.send_keys(&after_seed);
    b.find("#rewind-partition").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].contains("300") && changes[0].contains("100"),
        "{}",
        changes[0]
    );
    confirm(&b);
    assert_eq!(
        store.get("jdbc-orders", &orders),
        Some(json!({"lsn": 100, "txid": 1000}))
    );
    assert_eq!(
        store.get("jdbc-orders", &t007),
        None,
        "rewinding one partition leaves the others"
    );
    assert_no_page_problems(&b, "history and rewind");

    // 7. Import a file: its dry run lists every change of every connector, then it is applied.
    let doc = json!({"connectors": {
        "jdbc-orders": {"offsets": [
            {"partition": {"table": "orders"}, "offset": {"lsn": 999, "txid": 9990}},
            {"partition": {"table": "t007"}, "offset": {"lsn": 7, "txid": 70}},
        ]},
        "imported-sink": {"offsets": [
            {"partition": {"kafka_topic": "orders", "kafka_partition": 0}, "offset": {"kafka_offset": 42}},
        ]},
    }});
    let file = store.file("import.json", &doc.to_string());
    open_console(&b, &serve);
    connector_row(&b, "jdbc-orders");
    let progress = b.find("#progress");
    assert_eq!(progress.tag(), "progress");
    b.find("#import-file").send_keys(file.to_str().unwrap());
    b.find("#import-submit").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 3, "{changes:#?}");
    assert!(changes.iter().any(|c| c.contains("999")), "{changes:#?}");
    assert!(changes.iter().any(|c| c.contains("42")), "{changes:#?}");
    // The upload's progress, complete once the dry run is shown.
    assert!(progress.displayed(), "#progress shows the upload");
    assert_eq!(
        progress.prop("value").as_f64(),
        progress.prop("max").as_f64(),
        "#progress at its end once uploaded"
    );
    shot(&b, "12-import-dry-run");
    assert!(
        !store.connectors().contains(&"imported-sink".to_string()),
        "the dry run writes nothing"
    );
    confirm(&b);
    assert_eq!(
        store.get("jdbc-orders", &orders),
        Some(json!({"lsn": 999, "txid": 9990}))
    );
    assert_eq!(
        store.get("jdbc-orders", &t007),
        Some(json!({"lsn": 7, "txid": 70}))
    );
    assert_eq!(
        store.get(
            "imported-sink",
            &json!({"kafka_topic": "orders", "kafka_partition": 0})
        ),
        Some(json!({"kafka_offset": 42}))
    );
    connector_row(&b, "imported-sink");
    shot(&b, "13-imported");
    assert_no_page_problems(&b, "importing");

    // 8. Live: a connector written by someone else appears without a reload, and the refresh
    // time moves.
    let status = b.find("#refresh-status").text();
    store.set("late-arrival", &json!({"f": "x"}), &json!({"p": 1}));
    connector_row(&b, "late-arrival");
    b.wait_until("#refresh-status moving", || {
        (b.find("#refresh-status").text() != status).then_some(())
    });

    // 9. Export: every connector's offsets, as the CLI exports them.
    b.find("#export-all").click();
    let file = b.wait_download(|n| n.ends_with(".json"));
    let downloaded: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let cli = store.export_all();
    for (name, doc) in cli["connectors"].as_object().unwrap() {
        if name.starts_with("__") {
            continue;
        }
        assert_eq!(
            same_offsets(&downloaded["connectors"][name]),
            same_offsets(doc),
            "{name} downloaded as the CLI exports it"
        );
    }
    println!("downloaded {}", file.display());
    assert!(
        downloaded["connectors"].get("late-arrival").is_some(),
        "every connector: {downloaded}"
    );
    // One connector's, from its view.
    open_connector(&b, &serve, "jdbc-orders");
    partition_row(&b, &orders);
    b.find("#export-connector").click();
    let file = b.wait_download(|n| n.contains("jdbc-orders"));
    let downloaded: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let cli: Value =
        serde_json::from_str(&store.cli_ok(&["export", "--connector", "jdbc-orders"])).unwrap();
    assert_eq!(
        same_offsets(&downloaded),
        same_offsets(&cli),
        "jdbc-orders downloaded from its view as the CLI exports it"
    );
    println!("downloaded {}", file.display());
    assert_no_page_problems(&b, "exporting");
}

/// Chooses the option `value` of the select `css` as a person does (opening it by a click, then
/// picking the option), and checks the select took it.
pub fn select_option(b: &crate::browser_util::Browser, css: &str, value: &str) {
    let select = b.find(css);
    select.find(&format!("option[value=\"{value}\"]")).click();
    b.wait_until(&format!("{css} set to {value}"), || {
        (select.value() == value).then_some(())
    });
}

/// A `{"offsets":[...]}` document's entries, in a canonical order.
fn same_offsets(doc: &Value) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = doc["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no offsets in {doc}"))
        .iter()
        .map(|e| (canonical(&e["partition"]), e["offset"].clone()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// JSON text with object members sorted.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}
