//! No secret of the store's URL reaches the page: the console over a Kafka offsets topic reached
//! through the test broker's SASL/PLAIN listener, its password in the URL, shows the store (masked)
//! and a refusal that names the store (a commit log held by a running writer), and the password
//! is nowhere in the document, in what the page fetched, or in its storage. Needs the test broker
//! (`scripts/kafka start`).
#![cfg(feature = "kafka")]

use std::sync::Arc;

use connect_offsets::OffsetStore;
use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};
use connect_offsets::store::MemoryStore;

use crate::fixture::*;
use crate::http_util::Serve;
use crate::kafka_util::{BOUNDS, TopicGuard, cli, sasl_bootstrap};

const PASSWORD: &str = "connect-offsets-secret";

/// Everything the page holds or fetched, as text: its document, what its API answers are, its
/// storages.
const PAGE_TEXT: &str = r#"
return (async () => {
  const parts = [document.documentElement.outerHTML, document.body.innerText,
                 JSON.stringify(Object.assign({}, sessionStorage)),
                 JSON.stringify(Object.assign({}, localStorage))];
  for (const path of ['/console/info', '/connectors?expand=summary', '/offsets',
                      '/connectors/src/offsets', '/connectors/src/offsets/partitions?page=0&size=50']) {
    const r = await fetch(path);
    parts.push(path + ' ' + r.status + ' ' + await r.text());
  }
  return parts.join('\n');
})();
"#;

#[test]
fn no_secret_of_the_store_url_reaches_the_page() {
    let topic = TopicGuard::new("console-sasl");
    let store = format!(
        "kafka://{}/{}?partitions=1&replication=1&security.protocol=SASL_PLAINTEXT\
         &sasl.mechanism=PLAIN&sasl.username=connect-offsets&sasl.password={PASSWORD}&{BOUNDS}",
        sasl_bootstrap(),
        topic.0
    );
    cli(&[
        "set",
        "--store",
        &store,
        "--connector",
        "src",
        "--partition",
        r#"{"table":"orders"}"#,
        "--offset",
        r#"{"lsn":1}"#,
    ]);
    // A running writer's log: the refusal names the store.
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let elsewhere: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let mut cfg = CommitBufferConfig::new(&wal);
    cfg.writer = "worker-1".into();
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(elsewhere, cfg).unwrap();
    let serve = Serve::start(&["--store", &store, "--wal-dir", wal.to_str().unwrap()]);
    let b = browser();

    open_console(&b, &serve);
    connector_row(&b, "src");
    let shown = b.find("#store-info").text();
    println!("the page shows the store as: {shown}");
    assert!(!shown.contains(PASSWORD), "{shown}");
    open_connector(&b, &serve, "src");
    let why = b.find_visible("#modify-disabled").text();
    println!("#modify-disabled: {why}");
    shot(&b, "34-secret-masked");
    let text = b.exec(PAGE_TEXT, vec![]);
    let text = text.as_str().unwrap();
    assert!(
        text.contains("sasl.username") || text.contains("connect-offsets"),
        "the page shows the store: {}",
        &text[..text.len().min(2000)]
    );
    for line in text.lines() {
        assert!(
            !line.contains(PASSWORD),
            "the store's password reached the page: {line}"
        );
    }
    assert_no_page_problems(&b, "a store with a password");
    buffer.close().unwrap();
}
