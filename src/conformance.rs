//! One conformance suite for every backend.
//!
//! Each check is a public function over a [`Harness`] that opens (and reopens) one backend; the
//! backends' own tests call every check through [`conformance_tests!`](crate::conformance_tests), so a
//! new backend gets the whole suite by implementing `Harness`. Differences between backends are flags
//! on the harness, never forked copies of a check. A check panics with a message naming what broke.

use std::sync::Arc;

use crate::store::fault::FailMidway;
#[cfg(doc)]
use crate::store::{Capabilities, CommitHooks};
use crate::store::{OffsetStore, OffsetStoreExt, hooks};
use crate::{Batch, Offset, OffsetKey, Partition, Result, Value};

/// The seam inside a backend's `apply` that [`Harness::open`] installs: the suite's failure check
/// fails an `apply` midway through it.
pub use crate::store::fault::ApplyFault;

/// Opens one backend for the suite. Each test uses a fresh harness (its own directory or topic).
pub trait Harness {
    /// Opens the store; a second call opens the same data again (after the caller dropped the first
    /// handle). `fault` is installed as the backend's [`ApplyFault`] seam.
    fn open(&mut self, fault: Option<Arc<dyn ApplyFault>>) -> Result<Box<dyn OffsetStore>>;
    /// True when data outlives the handle (every backend but memory).
    fn reopen_keeps_data(&self) -> bool;
    /// True for a wrapper that keeps entries of its own under a reserved namespace, as history
    /// does ([`HISTORY_NAMESPACE`](crate::history::HISTORY_NAMESPACE)): the suite then leaves the
    /// crate's reserved namespaces out when it lists namespaces.
    fn keeps_reserved_namespaces(&self) -> bool {
        false
    }
}

/// History's wrapper (`?history=7d`) over `H`'s store, for running the suite through it.
pub struct HistoryHarness<H>(pub H);

impl<H: Harness> Harness for HistoryHarness<H> {
    fn open(&mut self, fault: Option<Arc<dyn ApplyFault>>) -> Result<Box<dyn OffsetStore>> {
        let inner = self.0.open(fault)?;
        let config = crate::history::HistoryConfig::parse("7d", None)?;
        Ok(Box::new(crate::history::HistoryStore::open(inner, config)?))
    }
    fn reopen_keeps_data(&self) -> bool {
        self.0.reopen_keeps_data()
    }
    fn keeps_reserved_namespaces(&self) -> bool {
        true
    }
}

/// The namespaces of `s` that the suite wrote.
fn namespaces(h: &dyn Harness, s: &dyn OffsetStore) -> Vec<String> {
    let mut all = s.namespaces().expect("namespaces");
    if h.keeps_reserved_namespaces() {
        all.retain(|ns| !crate::namespaces::is_reserved_namespace(ns));
    }
    all
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
    assert_eq!(namespaces(h, &*s), vec!["alph", "alpha", "beta"]);
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
/// A store that is not [`atomic`](Capabilities::atomic) may leave a prefix of the batch's entries
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
    assert_eq!(namespaces(h, &*s), vec!["c", "d"]);
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

/// The store's name and capabilities are stable, and each capability holds: a durable store keeps
/// what it persisted across a reopen, a durable sole writer keeps a second handle out while it is
/// open, and a store that keeps change times answers [`change_times`](OffsetStore::change_times)
/// with the time of each write (one that does not answers `None`). Atomicity is checked by
/// [`all_or_nothing_on_failure`].
pub fn capabilities_hold(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let kind = s.kind();
    assert!(!kind.is_empty(), "a store names its kind");
    let caps = s.capabilities();
    assert_eq!(
        caps,
        s.capabilities(),
        "capabilities change while nothing happens"
    );
    assert_eq!(
        caps.durable,
        h.reopen_keeps_data(),
        "durable is whether data outlives the handle ({caps:?})"
    );

    let k = key("times", Partition::new().with("p", 1));
    let missing = key("times", Partition::new().with("p", 2));
    let now = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.expect("a clock after 1970").as_millis() as u64
    };
    let before = now();
    s.set(k.clone(), pos(1)).expect("set");
    let after = now();
    let times = s
        .change_times(&[k.clone(), missing.clone()])
        .expect("change_times");
    assert_eq!(times.len(), 2, "one time per key");
    assert_eq!(times[1], None, "a key without an offset has no time");
    if caps.keeps_change_times {
        // Kafka's record timestamps come from the client's clock: a minute of slack either way.
        let first = times[0].expect("the time of a write");
        assert!(
            first + 60_000 >= before && first <= after + 60_000,
            "written at {first}, between {before} and {after}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.set(k.clone(), pos(1)).expect("set the same value again");
        let again = s
            .change_times(std::slice::from_ref(&k))
            .expect("change_times")[0];
        assert!(
            again.is_some_and(|t| t > first),
            "writing the same value again is a change: {first} then {again:?}"
        );
    } else {
        assert_eq!(times[0], None, "a store that keeps no times answers none");
    }

    // (A harness of a store that does not outlive its handle hands out that one store again.)
    if caps.sole_writer && h.reopen_keeps_data() {
        assert!(
            h.open(None).is_err(),
            "a second handle opened while a sole writer ({kind}) is open"
        );
    }
    drop(s);
    let s = h.open(None).expect("reopen");
    assert_eq!(s.kind(), kind, "the kind is the same after a reopen");
}

/// A batch applied with [`apply_logged`](CommitHooks::apply_logged) and then persisted is
/// what [`apply`](OffsetStore::apply) would have made of it: same offsets, same seq, as idempotent,
/// kept across a reopen by a durable store.
pub fn hooks_apply_logged_is_apply(h: &mut dyn Harness) {
    let a = key("logged", Partition::new().with("p", 1));
    let b = key("logged", Partition::new().with("p", 2));
    {
        let s = h.open(None).expect("open");
        let hooks = hooks(&*s);
        s.set(b.clone(), pos(0)).expect("set");
        hooks
            .apply_logged(&Batch::new(
                "w",
                1,
                [(a.clone(), Some(pos(1))), (b.clone(), None)],
            ))
            .expect("apply_logged");
        hooks
            .apply_logged(&Batch::new("w", 1, [(a.clone(), Some(pos(99)))]))
            .expect("replay");
        s.persist().expect("persist");
        assert_eq!(s.get(&a).expect("get"), Some(pos(1)), "a replay changed it");
        assert_eq!(s.get(&b).expect("get"), None, "the reset");
        assert_eq!(s.applied_seq("w").expect("seq"), 1);
    }
    let s = h.open(None).expect("reopen");
    if h.reopen_keeps_data() {
        assert_eq!(s.get(&a).expect("get"), Some(pos(1)), "after a reopen");
        assert_eq!(s.get(&b).expect("get"), None, "the reset after a reopen");
        assert_eq!(s.applied_seq("w").expect("seq"), 1);
    }
}

/// [`apply_extended`](CommitHooks::apply_extended) applies the batch and the extra entries as
/// one batch under the batch's seq, logged or not; a replay of that seq adds nothing.
pub fn hooks_apply_extended(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let hooks = hooks(&*s);
    let k = |p: i64| key("extended", Partition::new().with("p", p));
    s.set(k(4), pos(0)).expect("set");
    hooks
        .apply_extended(
            &Batch::new("w", 1, [(k(1), Some(pos(1)))]),
            &[(k(2), Some(pos(2))), (k(4), None)],
            false,
        )
        .expect("apply_extended");
    hooks
        .apply_extended(
            &Batch::new("w", 2, [(k(1), Some(pos(11)))]),
            &[(k(3), Some(pos(3)))],
            true,
        )
        .expect("apply_extended, logged");
    hooks
        .apply_extended(&Batch::new("w", 3, [(k(5), Some(pos(5)))]), &[], true)
        .expect("apply_extended, nothing extra");
    hooks
        .apply_extended(
            &Batch::new("w", 2, [(k(1), Some(pos(99)))]),
            &[(k(6), Some(pos(6)))],
            false,
        )
        .expect("replay");
    s.persist().expect("persist");
    let got = s
        .get_many(&[k(1), k(2), k(3), k(4), k(5), k(6)])
        .expect("get_many");
    assert_eq!(
        got,
        vec![
            Some(pos(11)),
            Some(pos(2)),
            Some(pos(3)),
            None,
            Some(pos(5)),
            None
        ],
        "the batches with their extra entries, the replay with none of its"
    );
    assert_eq!(s.applied_seq("w").expect("seq"), 3);
}

/// The pipeline's early work changes nothing by itself and never wins over what came after it:
/// a [`prepare`](CommitHooks::prepare)d batch applies as if unprepared, after a write between
/// or not, and one never applied leaves no trace; an
/// [`encode_logged`](CommitHooks::encode_logged) write, built before the batch ahead of it is
/// applied, is that batch's write through [`apply_encoded`](CommitHooks::apply_encoded); a
/// replayed one changes nothing; a dropped one leaves the batch to be applied from its entries.
pub fn hooks_prepare_and_encode(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let hooks = hooks(&*s);
    let k = |p: i64| key("early", Partition::new().with("p", p));
    let batch = |seq: u64, entries: Vec<(OffsetKey, Option<Offset>)>| {
        Arc::new(Batch::new("w", seq, entries))
    };

    // Prepared, then a write to one of its keys, then applied: the batch wins, as it came last.
    let b1 = batch(1, vec![(k(1), Some(pos(1))), (k(2), Some(pos(1)))]);
    let prepares = hooks.prepare(&b1);
    assert_eq!(s.get(&k(1)).expect("get"), None, "a prepare wrote");
    s.set(k(1), pos(50)).expect("a write between");
    hooks.apply_logged(&b1).expect("apply the prepared batch");
    assert_eq!(s.get(&k(1)).expect("get"), Some(pos(1)));
    // Prepared and never applied: another batch is applied in its place.
    if prepares {
        assert!(hooks.prepare(&batch(2, vec![(k(3), Some(pos(2)))])));
    }
    hooks
        .apply_logged(&batch(2, vec![(k(4), Some(pos(2)))]))
        .expect("apply another batch 2");
    assert_eq!(s.get(&k(3)).expect("get"), None, "a prepared batch applied");

    // Batch 4's write built while batch 3 (which shares a key) is not yet applied.
    let b3 = batch(3, vec![(k(1), Some(pos(3))), (k(5), Some(pos(3)))]);
    let b4 = batch(4, vec![(k(1), Some(pos(4))), (k(6), None), (k(2), None)]);
    let e3 = hooks.encode_logged(&b3);
    let e4 = hooks.encode_logged(&b4);
    assert_eq!(s.get(&k(5)).expect("get"), None, "an encode wrote");
    match e3 {
        Some(e3) => hooks.apply_encoded(&b3, e3),
        None => hooks.apply_logged(&b3),
    }
    .expect("apply batch 3");
    match e4 {
        Some(e4) => hooks.apply_encoded(&b4, e4),
        None => hooks.apply_logged(&b4),
    }
    .expect("apply batch 4");
    // A replay of batch 3, encoded again: nothing changes.
    if let Some(again) = hooks.encode_logged(&b3) {
        hooks.apply_encoded(&b3, again).expect("replay batch 3");
    }
    // Batch 5's write built and dropped: the batch applied from its entries.
    let b5 = batch(5, vec![(k(7), Some(pos(5)))]);
    drop(hooks.encode_logged(&b5));
    hooks.apply_logged(&b5).expect("apply batch 5");
    s.persist().expect("persist");
    let got = s
        .get_many(&[k(1), k(2), k(3), k(4), k(5), k(6), k(7)])
        .expect("get_many");
    assert_eq!(
        got,
        vec![
            Some(pos(4)),
            None,
            None,
            Some(pos(2)),
            Some(pos(3)),
            None,
            Some(pos(5))
        ]
    );
    assert_eq!(s.applied_seq("w").expect("seq"), 5);
}

/// [`frozen`](CommitHooks::frozen) reads what [`all`](OffsetStoreExt::all) read when it was
/// taken, whatever is applied before it is read.
pub fn hooks_frozen_is_all(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let hooks = hooks(&*s);
    let k = |ns: &str, p: i64| key(ns, Partition::new().with("p", p));
    s.write(vec![
        (k("b", 2), Some(pos(2))),
        (k("b", 1), Some(pos(1))),
        (k("a", 3), Some(pos(3))),
    ])
    .expect("write");
    let before = s.all().expect("all");
    let frozen = hooks.frozen().expect("frozen");
    s.write(vec![
        (k("b", 1), None),
        (k("a", 3), Some(pos(33))),
        (k("c", 4), Some(pos(4))),
    ])
    .expect("write after");
    let read = std::thread::spawn(frozen)
        .join()
        .expect("the frozen state's reader")
        .expect("read the frozen state");
    assert_eq!(read, before, "the frozen state is what all() read then");
    assert_eq!(
        hooks.frozen().expect("frozen")().expect("read"),
        s.all().expect("all"),
        "now"
    );
}

/// [`admit`](CommitHooks::admit) takes ordinary entries and resets; what
/// [`as_stored`](CommitHooks::as_stored) says of an entry is what
/// [`partitions`](OffsetStore::partitions) lists once it is written.
pub fn hooks_admit_and_as_stored(h: &mut dyn Harness) {
    let s = h.open(None).expect("open");
    let hooks = hooks(&*s);
    let entries = [
        (key("admit", Partition::new().with("p", 1)), pos(1)),
        (
            key("admit", Partition::new().with("file", "/var/log/a.log")),
            Offset::new().with("position", 7).with("snapshot", true),
        ),
    ];
    for (k, o) in &entries {
        hooks.admit("w", k, Some(o)).expect("admit an offset");
        hooks.admit("w", k, None).expect("admit a reset");
        hooks
            .admit("", k, Some(o))
            .expect("admit an unsequenced write");
        let expected = hooks
            .as_stored(k, o)
            .expect("as_stored")
            .unwrap_or_else(|| (k.clone(), o.clone()));
        s.set(k.clone(), o.clone()).expect("set");
        let listed = s.partitions("admit").expect("partitions");
        assert!(
            listed
                .iter()
                .any(|(lk, lo)| *lk == expected.0 && *lo == expected.1),
            "{expected:?} not among {listed:?}"
        );
    }
}

/// The suite for a store of sink connectors' positions (a consumer group), which takes only
/// unsequenced writes of sink partitions: `connector`'s offsets, for partitions 0 to 2 of `topic`
/// (which exists, with at least three partitions). Each method of both traits that such a store
/// serves, as [`conformance_tests!`](crate::conformance_tests) checks them on the others; and the
/// two it keeps nothing for: [`writers`](OffsetStore::writers) is empty and
/// [`applied_seq`](OffsetStore::applied_seq) is an error, so that no commit buffer runs over it.
pub fn sink_partitions(h: &mut dyn Harness, connector: &str, topic: &str) {
    let sink = |p: Value| {
        let partition = Partition::new()
            .with("kafka_topic", topic)
            .with("kafka_partition", p);
        key(connector, partition)
    };
    let at = |n: i64| Offset::new().with("kafka_offset", n);
    let of_connector = |all: Vec<(OffsetKey, Offset)>| -> Vec<(OffsetKey, Offset)> {
        all.into_iter()
            .filter(|(k, _)| k.namespace() == connector)
            .collect()
    };
    let s = h.open(None).expect("open");
    let hooks = hooks(&*s);
    let caps = s.capabilities();
    assert!(!s.kind().is_empty(), "a store names its kind");
    assert_eq!(caps.durable, h.reopen_keeps_data(), "durable ({caps:?})");

    // Admitted, written as the pipeline writes (logged, then persisted), listed as `as_stored` said.
    let written = sink(Value::from("1"));
    hooks.admit("", &written, Some(&at(5))).expect("admit");
    hooks.admit("", &written, None).expect("admit a reset");
    let expected = hooks
        .as_stored(&written, &at(5))
        .expect("as_stored")
        .unwrap_or_else(|| (written.clone(), at(5)));
    hooks
        .apply_logged(&Batch::new("", 0, [(written.clone(), Some(at(5)))]))
        .expect("apply_logged");
    s.persist().expect("persist");
    let listed = s.partitions(connector).expect("partitions");
    assert_eq!(listed, vec![expected.clone()], "listed as as_stored said");
    assert_eq!(s.get(&expected.0).expect("get"), Some(expected.1.clone()));
    assert!(
        s.namespaces()
            .expect("namespaces")
            .contains(&connector.to_string())
    );
    // No writer sequence: unsequenced writes record none, and asking for one is an error.
    no_writer_seq(&*s);

    // Prepared and encoded when the store does either; then extended by a partition.
    let batch = Arc::new(Batch::new("", 0, [(sink(Value::Int(0)), Some(at(7)))]));
    hooks.prepare(&batch);
    match hooks.encode_logged(&batch) {
        Some(encoded) => hooks.apply_encoded(&batch, encoded),
        None => hooks.apply_logged(&batch),
    }
    .expect("apply");
    let extra = [(sink(Value::Int(2)), Some(at(9)))];
    let batch = Batch::new("", 0, [(sink(Value::Int(1)), Some(at(6)))]);
    hooks
        .apply_extended(&batch, &extra, false)
        .expect("apply_extended");
    let got = s
        .get_many(&[
            sink(Value::Int(0)),
            sink(Value::Int(1)),
            sink(Value::Int(2)),
        ])
        .expect("get_many");
    assert_eq!(got, vec![Some(at(7)), Some(at(6)), Some(at(9))]);
    let times = s
        .change_times(&[sink(Value::Int(0))])
        .expect("change_times");
    assert_eq!(times.len(), 1);
    if !caps.keeps_change_times {
        assert_eq!(
            times,
            vec![None],
            "a store that keeps no times answers none"
        );
    }

    // Frozen, then a reset: the frozen state is what all() read before it.
    let before = of_connector(s.all().expect("all"));
    let frozen = hooks.frozen().expect("frozen");
    s.reset(sink(Value::Int(0))).expect("reset");
    assert_eq!(s.get(&sink(Value::Int(0))).expect("get"), None, "reset");
    assert_eq!(
        of_connector(frozen().expect("read the frozen state")),
        before
    );
    drop(s);
    if h.reopen_keeps_data() {
        let s = h.open(None).expect("reopen");
        assert_eq!(
            s.get(&sink(Value::Int(1))).expect("get"),
            Some(at(6)),
            "after a reopen"
        );
        no_writer_seq(&*s);
    }
}

/// What a store of sink positions answers for writer sequences: no writers, and an error (not 0)
/// for any writer's applied seq, the unsequenced writer `""` included.
fn no_writer_seq(s: &dyn OffsetStore) {
    let writers = s.writers().expect("writers");
    assert!(
        writers.is_empty(),
        "a sink store lists writers: {writers:?}"
    );
    for writer in ["", "w"] {
        let seq = s.applied_seq(writer);
        assert!(
            seq.is_err(),
            "a sink store answers applied_seq({writer:?}) with {seq:?}, not an error"
        );
    }
}

/// Runs every check in turn, each on a fresh harness from `make`, printing each name as it passes:
/// the whole suite outside a test harness (as `examples/custom_backend.rs` does from `main`). A
/// failing check panics, naming what broke.
pub fn run_all<H: Harness>(mut make: impl FnMut() -> H) {
    for (name, check) in CHECKS {
        let mut harness = make();
        check(&mut harness);
        println!("conformance: {name} ok");
    }
}

macro_rules! checks_table {
    ($($check:ident),*) => {
        /// Every check of the suite by name, in the order [`conformance_tests!`](crate::conformance_tests)
        /// runs them.
        pub const CHECKS: &[(&str, fn(&mut dyn Harness))] = &[$((stringify!($check), $check)),*];
    };
}

/// The suite's checks, handed to `$callback` (an exported macro of this crate) after `$args`: the
/// one list that both [`conformance_tests!`](crate::conformance_tests) and [`CHECKS`] are made from.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_checks {
    ($callback:path; $($args:tt)*) => {
        $callback! { $($args)*
            set_get, reset, namespaces_apart, member_order_is_one_key, replayed_batch_changes_nothing,
            all_or_nothing_on_failure, reopen_keeps_everything, large_batch, unusual_partitions,
            offset_values_round_trip, capabilities_hold, hooks_apply_logged_is_apply,
            hooks_apply_extended, hooks_prepare_and_encode, hooks_frozen_is_all,
            hooks_admit_and_as_stored
        }
    };
}

__conformance_checks!(checks_table;);

/// Generates a module named after the backend with one `#[test]` per conformance check:
/// `conformance_tests!(memory, || MemoryHarness)` gives `memory::set_get`, `memory::reset`, ... .
/// The closure makes a fresh harness for each test.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ident, $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::__conformance_checks!($crate::conformance_tests; @checks $make;);
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
