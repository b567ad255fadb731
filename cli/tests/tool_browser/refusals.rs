//! Where the REST API refuses a modification, the console says why (`#modify-disabled`) and its
//! buttons are disabled: a store held by a running writer, a commit log held by a running writer,
//! a log holding batches the store has not applied. Once the writer is gone, the same page
//! modifies again. (A running connector, `--connect-configs`, needs a Connect cluster: the Kafka
//! group's tests.)

use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::store::MemoryStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use serde_json::json;

use crate::browser_util::Browser;
use crate::fixture::*;

/// Waits for `#modify-disabled` shown with a reason holding one of `words`; checks that every
/// modifying button of the connector view is disabled; returns the reason.
fn refused_with(b: &Browser, words: &[&str]) -> String {
    let why = b.find_visible("#modify-disabled");
    let reason = b.wait_until(&format!("#modify-disabled naming one of {words:?}"), || {
        let t = why.text();
        words.iter().any(|w| t.contains(w)).then_some(t)
    });
    b.wait_until("#reset-all disabled", || {
        (!b.find("#reset-all").enabled()).then_some(())
    });
    for css in [
        "#partitions button.edit",
        "#partitions button.reset",
        "#import-submit",
    ] {
        for e in b.find_all(css) {
            if e.displayed() {
                assert!(
                    !e.enabled(),
                    "{css} is enabled while modifications are refused ({reason})"
                );
            }
        }
    }
    reason
}

/// After a reload, modifications are allowed again: no reason shown, `#reset-all` enabled.
fn allowed_again(b: &Browser) {
    b.wait_until("modifications allowed again", || {
        b.refresh();
        b.find_visible("#connector");
        let shown = b
            .try_find("#modify-disabled")
            .is_some_and(|e| e.displayed());
        let enabled = b
            .try_find("#reset-all")
            .is_some_and(|e| e.displayed() && e.enabled());
        (!shown && enabled).then_some(())
    });
}

#[test]
fn a_store_held_by_a_running_writer_disables_modifications_with_the_reason() {
    let store = Store::new();
    store.import(&seed(3));
    let wal = store.dir.path().join("wal");

    // A worker: a commit buffer over the same RocksDB store, running and committing.
    let held: Arc<dyn OffsetStore> =
        Arc::from(connect_offsets::open_for_writer(&store.url, "worker-1").unwrap());
    let mut cfg = CommitBufferConfig::new(&wal);
    cfg.writer = "worker-1".into();
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(Arc::clone(&held), cfg).unwrap();
    let key = OffsetKey::new("jdbc-orders", Partition::new().with("table", "orders"));
    buffer
        .offer(key.clone(), Offset::new().with("lsn", 500))
        .unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
    let serve = store.serve(&["--wal-dir", wal.to_str().unwrap()]);
    let b = browser();

    open_connector(&b, &serve, "jdbc-orders");
    let reason = refused_with(&b, &["locked", "in use", "running writer", "STOPPED"]);
    println!("held store: #modify-disabled says: {reason}");
    shot(&b, "20-refused-store-held");
    // Nothing was written by the page (the writer's own commit stands).
    assert_eq!(
        held.get(&key).unwrap(),
        Some(Offset::new().with("lsn", 500))
    );

    // The worker stops: the console modifies again.
    buffer.close().unwrap();
    drop(buffer);
    drop(held);
    allowed_again(&b);
    let orders = json!({"table": "orders"});
    let row = partition_row(&b, &orders);
    assert!(
        row.find(".offset").text().contains("500"),
        "the writer's commit is shown: {}",
        row.find(".offset").text()
    );
    b.find("#reset-all").click();
    let changes = dialog_changes(&b);
    assert_eq!(changes.len(), 4, "every partition is reset: {changes:#?}");
    let msg = confirm(&b);
    assert!(msg.contains("reset"), "toast: {msg}");
    assert_eq!(store.offsets("jdbc-orders"), vec![]);
    assert_eq!(store.offsets("file-src").len(), 1, "other connectors stay");
    shot(&b, "21-store-released-reset-all");
    assert_no_page_problems(&b, "after the writer stopped");
}

#[test]
fn a_log_held_by_a_running_writer_then_unapplied_disables_modifications() {
    let store = Store::new();
    store.import(&seed(3));
    let wal = store.dir.path().join("wal");
    // A worker whose store is elsewhere: its log is what the server watches.
    let elsewhere: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let mut cfg = CommitBufferConfig::new(&wal);
    cfg.writer = "worker-1".into();
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(Arc::clone(&elsewhere), cfg).unwrap();
    let serve = store.serve(&["--wal-dir", wal.to_str().unwrap()]);
    let b = browser();

    open_connector(&b, &serve, "jdbc-orders");
    let reason = refused_with(&b, &["locked", "running", "STOPPED"]);
    println!("held log: #modify-disabled says: {reason}");
    shot(&b, "22-refused-log-held");

    // The writer commits a batch to its log and stops: the log holds a batch this store has
    // not applied.
    buffer
        .offer(
            OffsetKey::new("jdbc-orders", Partition::new().with("table", "orders")),
            Offset::new().with("lsn", 9),
        )
        .unwrap();
    buffer.commit_with(Durability::Local).wait().unwrap();
    buffer.close().unwrap();
    drop(buffer);
    let reason = b.wait_until("the reason turning to the unapplied batch", || {
        b.refresh();
        b.find_visible("#connector");
        let t = b.find_visible("#modify-disabled").text();
        t.contains("has not applied").then_some(t)
    });
    refused_with(&b, &["has not applied"]);
    assert!(reason.contains("worker-1"), "the writer is named: {reason}");
    println!("unapplied log: #modify-disabled says: {reason}");
    shot(&b, "23-refused-log-unapplied");
    assert_eq!(
        store.get("jdbc-orders", &json!({"table": "orders"})),
        Some(json!({"lsn": 100, "txid": 1000})),
        "nothing written"
    );
    assert_no_page_problems(&b, "refusals");
}
