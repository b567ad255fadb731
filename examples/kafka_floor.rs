//! What librdkafka alone does on the same broker: the floors `scripts/compare-connect` sets our
//! Kafka store against. One JSON line per run.
//!
//! ```text
//! kafka_floor read    <bootstrap> <topic>              read every partition to its end (read_committed)
//! kafka_floor map     <bootstrap> <topic>              the same, keeping key -> value in a HashMap
//! kafka_floor produce <bootstrap> <topic> <batch> <s>  batches of Connect-shaped records, acks=all,
//!                                                      idempotent, each batch flushed and waited for,
//!                                                      for <s> seconds
//! ```

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> &str {
        args.get(i).map(String::as_str).unwrap_or_else(|| {
            eprintln!("usage: kafka_floor read|map|produce <bootstrap> <topic> [batch seconds]");
            std::process::exit(2)
        })
    };
    match arg(0) {
        "read" => read(arg(1), arg(2), false),
        "map" => read(arg(1), arg(2), true),
        "produce" => produce(
            arg(1),
            arg(2),
            arg(3).parse().expect("batch"),
            arg(4).parse().expect("seconds"),
        ),
        other => panic!("unknown floor `{other}`"),
    }
}

/// Reads the whole topic once, as our store's cold load does (every partition assigned from the
/// beginning, `read_committed`), with `fetch.queue.backoff.ms=10` (librdkafka's 1 s default pauses
/// assigned partitions once `queued.min.messages` are buffered).
fn read(bootstrap: &str, topic: &str, keep: bool) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("floor-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("fetch.queue.backoff.ms", "10")
        .create()
        .expect("consumer");
    let t0 = Instant::now();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .expect("metadata");
    let n = md.topics()[0].partitions().len() as i32;
    let mut tpl = TopicPartitionList::new();
    let mut left = 0;
    let mut ends = Vec::new();
    for p in 0..n {
        let (_, high) = c
            .fetch_watermarks(topic, p, Duration::from_secs(30))
            .expect("watermarks");
        ends.push(high);
        if high > 0 {
            left += 1;
        }
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    c.assign(&tpl).expect("assign");
    let mut map: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut since_check = 0;
    while left > 0 {
        let check = match c.poll(Duration::from_millis(20)) {
            Some(Ok(m)) => {
                records += 1;
                let (k, v) = (m.key().unwrap_or_default(), m.payload().unwrap_or_default());
                bytes += (k.len() + v.len()) as u64;
                if keep {
                    map.insert(k.to_vec(), v.to_vec());
                }
                since_check += 1;
                since_check == 4096
            }
            Some(Err(e)) => panic!("read: {e}"),
            None => true,
        };
        if check {
            // Transaction markers are never delivered but move the position: the end is reached
            // when every position is at its partition's end.
            since_check = 0;
            let pos = c.position().expect("position");
            left = pos
                .elements()
                .iter()
                .filter(|e| {
                    let end = ends[e.partition() as usize];
                    end > 0 && !matches!(e.offset(), Offset::Offset(o) if o >= end)
                })
                .count();
        }
    }
    println!(
        "{{\"floor\":\"{}\",\"topic\":\"{topic}\",\"records\":{records},\"bytes\":{bytes},\"kept\":{},\"seconds\":{:.4}}}",
        if keep { "read_and_map" } else { "read" },
        map.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// Counts delivery reports; the producer's own thread polls, each report wakes the waiter.
#[derive(Default)]
struct Acks {
    done: Mutex<(u64, u64)>,
    changed: Condvar,
}

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        let mut d = self.done.lock().unwrap();
        d.0 += 1;
        d.1 += r.is_err() as u64;
        self.changed.notify_all();
    }
}

/// Batches of `batch` records (Connect-shaped keys and values over 10,000 partitions), each sent,
/// flushed and waited for before the next, for `seconds`: our writers' producer settings
/// (librdkafka's linger, idempotent, `acks=all`) without encoding, log or state.
fn produce(bootstrap: &str, topic: &str, batch: usize, seconds: f64) {
    let p: ThreadedProducer<Acks> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create_with_context(Acks::default())
        .expect("producer");
    let keys: Vec<Vec<u8>> = (0..10_000)
        .map(|i| format!(r#"["bench-0",{{"partition":{i}}}]"#).into_bytes())
        .collect();
    let mut sent = 0u64;
    let mut latencies = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < seconds {
        let t = Instant::now();
        for _ in 0..batch {
            let key = &keys[sent as usize % keys.len()];
            let value = format!(r#"{{"offset":{sent}}}"#);
            let mut rec = BaseRecord::<[u8], [u8]>::to(topic)
                .key(&key[..])
                .payload(value.as_bytes());
            loop {
                match p.send(rec) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        rec = r;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            sent += 1;
        }
        // As our writers wait: a flush sends what lingers at once (see src/store/kafka/ffi/flush.rs).
        // SAFETY: a live producer handle; rd_kafka_flush may be called from any thread.
        unsafe { rdkafka::bindings::rd_kafka_flush(p.client().native_ptr(), 30_000) };
        let ctx = p.context();
        let mut d = ctx.done.lock().unwrap();
        while d.0 < sent {
            d = ctx.changed.wait(d).unwrap();
        }
        assert_eq!(
            d.1, 0,
            "records not delivered (does topic `{topic}` exist?)"
        );
        drop(d);
        latencies.push(t.elapsed());
    }
    let secs = t0.elapsed().as_secs_f64();
    latencies.sort();
    let ms = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{{\"floor\":\"produce\",\"batch\":{batch},\"records\":{sent},\"seconds\":{secs:.4},\"records_per_sec\":{:.1},\"batch_p50_ms\":{:.3},\"batch_p99_ms\":{:.3},\"batch_max_ms\":{:.3}}}",
        sent as f64 / secs,
        ms(0.5),
        ms(0.99),
        ms(1.0)
    );
    p.flush(Duration::from_secs(30)).expect("flush");
}
