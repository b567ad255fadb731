//! One conformance suite for every backend.
//!
//! Each check is a public function over a [`Harness`] that opens (and reopens) one backend; the
//! backends' own tests call every check through [`conformance_tests!`](crate::conformance_tests), so a
//! new backend gets the whole suite by implementing `Harness`. Differences between backends are flags
//! on the harness, never forked copies of a check. A check panics with a message naming what broke.

use std::sync::Arc;

use crate::store::fault::FailMidway;
use crate::store::{ApplyFault, OffsetStore, OffsetStoreExt};
use crate::{Batch, Offset, OffsetKey, Partition, Result, Value};

/// Opens one backend for the suite. Each test uses a fresh harness (its own directory or topic).
pub trait Harness {
    /// Opens the store; a second call opens the same data again (after the caller dropped the first
    /// handle). `fault` is installed as the backend's [`ApplyFault`] seam.
    fn open(&mut self, fault: Option<Arc<dyn ApplyFault>>) -> Result<Box<dyn OffsetStore>>;
    /// True when data outlives the handle (every backend but memory).
    fn reopen_keeps_data(&self) -> bool;
}

fn key(ns: &str, p: Partition) -> OffsetKey {
    OffsetKey::new(ns, p)
}

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

/// Set then get; a missing key is `None`; overwrite wins.
pub fn set_get(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let k = key("c1", Partition::new().with("file", "/tmp/a.txt"));
    assert_eq!(s.get(&k).expect("get"), None, "a new store has no offset");
    s.set(k.clone(), pos(10)).expect("set");
    assert_eq!(s.get(&k).expect("get"), Some(pos(10)));
    s.set(k.clone(), pos(20)).expect("set");
    assert_eq!(
        s.get(&k).expect("get"),
        Some(pos(20)),
        "the last write wins"
    );
    let other = key("c1", Partition::new().with("file", "/tmp/b.txt"));
    assert_eq!(
        s.get_many(&[k.clone(), other]).expect("get_many"),
        vec![Some(pos(20)), None]
    );
}

/// A reset removes one partition; resetting a whole namespace removes all of it.
pub fn reset(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let a = key("c1", Partition::new().with("p", 1));
    let b = key("c1", Partition::new().with("p", 2));
    s.write(vec![(a.clone(), Some(pos(1))), (b.clone(), Some(pos(2)))])
        .expect("write");
    s.reset(a.clone()).expect("reset");
    assert_eq!(
        s.get(&a).expect("get"),
        None,
        "reset partition has no offset"
    );
    assert_eq!(
        s.get(&b).expect("get"),
        Some(pos(2)),
        "other partition untouched"
    );
    assert_eq!(s.partitions("c1").expect("partitions").len(), 1);
    assert_eq!(s.reset_namespace("c1").expect("reset all"), 1);
    assert!(s.partitions("c1").expect("partitions").is_empty());
    assert!(
        !s.namespaces()
            .expect("namespaces")
            .contains(&"c1".to_string())
    );
}

/// The same partition under two connectors is two offsets; listing keeps them apart.
pub fn namespaces_apart(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let p = Partition::new().with("table", "users");
    s.set(key("alpha", p.clone()), pos(1)).expect("set");
    s.set(key("beta", p.clone()), pos(2)).expect("set");
    // A name that is a prefix of another must not leak into it.
    s.set(key("alph", p.clone()), pos(3)).expect("set");
    assert_eq!(s.get(&key("alpha", p.clone())).expect("get"), Some(pos(1)));
    assert_eq!(s.get(&key("beta", p.clone())).expect("get"), Some(pos(2)));
    assert_eq!(
        s.namespaces().expect("namespaces"),
        vec!["alph", "alpha", "beta"]
    );
    let alpha = s.partitions("alpha").expect("partitions");
    assert_eq!(alpha.len(), 1, "alpha has one partition: {alpha:?}");
    assert_eq!(alpha[0].1, pos(1));
    s.reset_namespace("alpha").expect("reset");
    assert_eq!(
        s.get(&key("alph", p.clone())).expect("get"),
        Some(pos(3)),
        "resetting alpha left alph alone"
    );
    assert_eq!(s.get(&key("beta", p)).expect("get"), Some(pos(2)));
}

/// A partition written with its members in another order is the same key.
pub fn member_order_is_one_key(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let ab = key("c", Partition::new().with("a", 1).with("b", "x"));
    let ba = key("c", Partition::new().with("b", "x").with("a", 1));
    assert_eq!(ab, ba);
    s.set(ab.clone(), pos(1)).expect("set");
    s.set(ba.clone(), pos(2)).expect("set");
    assert_eq!(s.get(&ab).expect("get"), Some(pos(2)));
    assert_eq!(
        s.partitions("c").expect("partitions").len(),
        1,
        "one key, not two"
    );
}

/// A batch at or below the writer's applied seq changes nothing; writers are independent.
pub fn replayed_batch_changes_nothing(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let k = key("c", Partition::new().with("p", 0));
    s.apply(&Batch::new("w1", 1, [(k.clone(), Some(pos(1)))]))
        .expect("apply 1");
    s.apply(&Batch::new("w1", 2, [(k.clone(), Some(pos(2)))]))
        .expect("apply 2");
    assert_eq!(s.applied_seq("w1").expect("seq"), 2);
    s.apply(&Batch::new("w1", 1, [(k.clone(), Some(pos(1)))]))
        .expect("replay 1");
    s.apply(&Batch::new("w1", 2, [(k.clone(), Some(pos(99)))]))
        .expect("replay 2");
    assert_eq!(
        s.get(&k).expect("get"),
        Some(pos(2)),
        "a replayed batch changed the store"
    );
    assert_eq!(s.applied_seq("w1").expect("seq"), 2);
    assert_eq!(s.applied_seq("w2").expect("seq"), 0);
    s.apply(&Batch::new("w2", 1, [(k.clone(), Some(pos(5)))]))
        .expect("w2");
    assert_eq!(s.applied_seq("w2").expect("seq"), 1);
    assert_eq!(s.get(&k).expect("get"), Some(pos(5)));
    let writers = s.writers().expect("writers");
    assert!(
        writers.contains(&("w1".into(), 2)) && writers.contains(&("w2".into(), 1)),
        "{writers:?}"
    );
}

/// A batch that fails midway leaves nothing behind, its seq included; the retry applies it whole.
/// A store that is not [`atomic`](crate::store::Capabilities::atomic) may leave a prefix of the batch's entries
/// behind, never its seq.
pub fn all_or_nothing_on_failure(h: &mut dyn Harness) {
    let keys: Vec<_> = (0..10)
        .map(|i| key("c", Partition::new().with("p", i)))
        .collect();
    {
        let s = h.open(None).expect("open");
        s.apply(&Batch::new(
            "w",
            1,
            keys.iter().map(|k| (k.clone(), Some(pos(1)))),
        ))
        .expect("apply 1");
        s.persist().expect("persist");
    }
    let fault = Arc::new(FailMidway::new(5));
    let s = h.open(Some(fault.clone())).expect("open with fault");
    let batch = Batch::new("w", 2, keys.iter().map(|k| (k.clone(), Some(pos(2)))));
    assert!(s.apply(&batch).is_err(), "the fault must fail the apply");
    assert!(fault.fired());
    drop(s);
    let s = h.open(None).expect("reopen");
    assert_eq!(
        s.applied_seq("w").expect("seq"),
        1,
        "a failed batch recorded its seq"
    );
    // The fault fires before entry 5: an atomic store has none of the batch, another at most the
    // five entries before it.
    let left = if s.capabilities().atomic { 0 } else { 5 };
    for (i, k) in keys.iter().enumerate() {
        let got = s.get(k).expect("get");
        assert!(
            got == Some(pos(1)) || (i < left && got == Some(pos(2))),
            "{k:?} changed by a failed batch: {got:?}"
        );
    }
    s.apply(&batch).expect("retry");
    for k in &keys {
        assert_eq!(
            s.get(k).expect("get"),
            Some(pos(2)),
            "{k:?} after the retry"
        );
    }
}

/// Everything applied and persisted is there after reopening (durable backends).
pub fn reopen_keeps_everything(h: &mut dyn Harness) {
    if !h.reopen_keeps_data() {
        return;
    }
    let a = key("c", Partition::new().with("p", 1));
    let b = key("d", Partition::new().with("p", 2));
    {
        let s = h.open(None).expect("open");
        s.apply(&Batch::new(
            "w",
            7,
            [(a.clone(), Some(pos(1))), (b.clone(), Some(pos(2)))],
        ))
        .expect("apply");
        s.persist().expect("persist");
    }
    let s = h.open(None).expect("reopen");
    assert_eq!(s.get(&a).expect("get"), Some(pos(1)));
    assert_eq!(s.get(&b).expect("get"), Some(pos(2)));
    assert_eq!(s.applied_seq("w").expect("seq"), 7);
    assert_eq!(s.namespaces().expect("namespaces"), vec!["c", "d"]);
}

/// 100,000 entries in one batch, all there afterwards.
pub fn large_batch(h: &mut dyn Harness) {
    const N: i64 = 100_000;
    let s = h.open(None).expect("open");
    let batch = Batch::new(
        "w",
        1,
        (0..N).map(|i| (key("big", Partition::new().with("shard", i)), Some(pos(i)))),
    );
    s.apply(&batch).expect("apply 100k");
    s.persist().expect("persist");
    let all = s.partitions("big").expect("partitions");
    assert_eq!(all.len(), N as usize);
    for i in [0, 1, N / 2, N - 1] {
        assert_eq!(
            s.get(&key("big", Partition::new().with("shard", i)))
                .expect("get"),
            Some(pos(i))
        );
    }
    let mut seen: Vec<i64> = all
        .iter()
        .map(|(k, o)| {
            let Some(Value::Int(shard)) = k.partition().and_then(|p| p.get("shard")) else {
                panic!("shard of {k:?}")
            };
            assert_eq!(o, &pos(*shard), "offset of shard {shard}");
            *shard
        })
        .collect();
    seen.sort_unstable();
    assert!(seen.iter().copied().eq(0..N), "every shard listed once");
}

/// Unicode, bytes, floats and null partitions survive storage with the caller's member order.
pub fn unusual_partitions(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let parts = [
        Partition::new().with("ünïcødé 😀", "\u{1}\u{1f}\"\\\u{2028}"),
        Partition::new().with("blob", vec![0u8, 1, 2, 255]),
        Partition::new()
            .with("z", 1.5)
            .with("a", -0.0)
            .with("m", 1e20)
            .with("n", 5e-324),
        Partition::new()
            .with("nan", f64::NAN)
            .with("inf", f64::INFINITY),
        Partition::new()
            .with("t", true)
            .with("n", Value::Null)
            .with("min", i64::MIN),
        Partition::new(),
    ];
    let ns = "κόσμε-connector";
    for (i, p) in parts.iter().enumerate() {
        s.set(key(ns, p.clone()), pos(i as i64)).expect("set");
    }
    s.set(OffsetKey::null_partition(ns), pos(99))
        .expect("set null partition");
    for (i, p) in parts.iter().enumerate() {
        let k = key(ns, p.clone());
        assert_eq!(
            s.get(&k).expect("get"),
            Some(pos(i as i64)),
            "partition {p:?}"
        );
        // What Connect reads back (bytes as Base64, NaN as a string) is the same key.
        let normalized = key(ns, p.connect_normalized());
        assert_eq!(
            s.get(&normalized).expect("get"),
            Some(pos(i as i64)),
            "normalized {p:?}"
        );
    }
    assert_eq!(
        s.get(&OffsetKey::null_partition(ns)).expect("get"),
        Some(pos(99))
    );
    let listed = s.partitions(ns).expect("partitions");
    assert_eq!(listed.len(), parts.len() + 1);
    // Listing gives back the record bytes Connect would write: the caller's member order.
    let float_key = key(ns, parts[2].clone());
    let listed_float = listed
        .iter()
        .find(|(k, _)| *k == float_key)
        .expect("float partition listed");
    assert_eq!(listed_float.0.connect_key(), float_key.connect_key());
    assert_eq!(
        String::from_utf8(float_key.connect_key()).expect("utf8"),
        r#"["κόσμε-connector",{"z":1.5,"a":-0.0,"m":1.0E20,"n":4.9E-324}]"#
    );
    // -0.0 and 0.0 are different bytes to Connect, so different keys.
    assert_eq!(
        s.get(&key(
            ns,
            Partition::new()
                .with("z", 1.5)
                .with("a", 0.0)
                .with("m", 1e20)
                .with("n", 5e-324)
        ))
        .expect("get"),
        None
    );
}

/// Offsets with every value type come back equal (after Connect's normalization).
pub fn offset_values_round_trip(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let k = key("c", Partition::new().with("p", 0));
    let offset = Offset::new()
        .with("lsn", i64::MAX)
        .with("ts", 1.25)
        .with("snapshot", true)
        .with("txid", Value::Null)
        .with("file", "a\nb")
        .with("raw", vec![9u8, 8]);
    s.set(k.clone(), offset.clone()).expect("set");
    assert_eq!(s.get(&k).expect("get"), Some(offset.connect_normalized()));
}

/// Generates a module named after the backend with one `#[test]` per conformance check:
/// `conformance_tests!(memory, || MemoryHarness)` gives `memory::set_get`, `memory::reset`, ... .
/// The closure makes a fresh harness for each test.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ident, $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::conformance_tests!(@checks $make;
                set_get, reset, namespaces_apart, member_order_is_one_key, replayed_batch_changes_nothing,
                all_or_nothing_on_failure, reopen_keeps_everything, large_batch, unusual_partitions,
                offset_values_round_trip);
        }
    };
    (@checks $make:expr; $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                let mut harness = ($make)();
                $crate::conformance::$check(&mut harness);
            }
        )*
    };
}
