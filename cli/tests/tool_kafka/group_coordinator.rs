//! Reading sink connectors' consumer groups while their coordinators load or move (issue 43, 3):
//! librdkafka's `ListConsumerGroupOffsets` on a handle without a group crashed the process
//! (SIGSEGV) when a broker answered `NOT_COORDINATOR`, which brokers do right after they start
//! and while a coordinator moves. Every read here must end without a signal, and succeed once the
//! coordinator is back (the store asks again within its `timeout.ms`).
//!
//! On the three-broker cluster (`scripts/kafka start --cluster`), freshly started: reads of
//! several groups (spread over `__consumer_offsets` partitions, so over coordinators) at once
//! after the start, then after SIGKILLing a node (its coordinators move), then after its restart
//! (they may move back).

use crate::scripts;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use scripts::Cluster;

const CONNECTORS: usize = 8;

fn url() -> String {
    format!(
        "kafka-group://{}/?group=coord-{{connector}}&timeout.ms=60000",
        Cluster::BOOTSTRAP
    )
}

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
        .args(args)
        .env_remove("CONNECT_OFFSETS_STORE")
        .output()
        .expect("run connect-offsets")
}

/// `list` of every connector's group, each in a process of its own, all at once; each must exit
/// without a signal, and 0.
fn read_every_group(when: &str) {
    let url = url();
    let children: Vec<_> = (0..CONNECTORS)
        .map(|i| {
            let connector = format!("sink-{i}");
            let url = url.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let out = cli(&["list", "--store", &url, "--connector", &connector]);
                (connector, out, started.elapsed())
            })
        })
        .collect();
    for child in children {
        let (connector, out, took) = child.join().expect("reader thread");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.signal().is_none(),
            "{when}: `list --connector {connector}` died of signal {:?} after {took:?} (librdkafka's \
             NOT_COORDINATOR crash):\n{stderr}",
            out.status.signal()
        );
        assert!(
            out.status.success(),
            "{when}: `list --connector {connector}` failed ({}) after {took:?}:\n{stderr}",
            out.status
        );
    }
}

#[test]
fn group_reads_never_crash_while_coordinators_load_or_move() {
    let mut cluster = Cluster::start();
    // Right after the start: __consumer_offsets is created by the first group request and its
    // partitions load on three brokers.
    for round in 0..4 {
        read_every_group(&format!("fresh cluster, round {round}"));
        std::thread::sleep(Duration::from_millis(500));
    }
    for node in [2, 3] {
        cluster.kill(node);
        for round in 0..3 {
            read_every_group(&format!("node {node} killed, round {round}"));
        }
        cluster.restart(node);
        for round in 0..3 {
            read_every_group(&format!("node {node} restarted, round {round}"));
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}
