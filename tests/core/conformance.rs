//! The conformance suite against each backend compiled in (Kafka's runs, history's over Kafka
//! included, live in `cli/tests/tool_kafka/kafka.rs` and `kafka_pair.rs`).

use std::sync::Arc;

use connect_offsets::conformance::ApplyFault;
use connect_offsets::conformance::{Harness, HistoryHarness};
use connect_offsets::conformance_tests;
use connect_offsets::store::{MemoryStore, OffsetStore};

/// Memory: every `open` is a handle on the same data (it lives as long as the harness); a fault gets
/// its own handle sharing that data.
struct MemoryHarness {
    store: Option<Arc<MemoryStore>>,
}

impl Harness for MemoryHarness {
    fn open(
        &mut self,
        fault: Option<Arc<dyn ApplyFault>>,
    ) -> connect_offsets::Result<Box<dyn OffsetStore>> {
        let store = self
            .store
            .get_or_insert_with(|| Arc::new(MemoryStore::new()))
            .clone();
        match fault {
            None => Ok(Box::new(store)),
            Some(fault) => Ok(Box::new(store.shared_with_fault(fault))),
        }
    }
    fn reopen_keeps_data(&self) -> bool {
        false
    }
}

conformance_tests!(memory, || MemoryHarness { store: None });

#[cfg(feature = "rocksdb")]
struct RocksDbHarness {
    dir: tempfile::TempDir,
}

#[cfg(feature = "rocksdb")]
impl Harness for RocksDbHarness {
    fn open(
        &mut self,
        fault: Option<Arc<dyn ApplyFault>>,
    ) -> connect_offsets::Result<Box<dyn OffsetStore>> {
        let store =
            connect_offsets::store::rocksdb::RocksDbStore::open(self.dir.path().join("db"))?;
        Ok(match fault {
            None => Box::new(store),
            Some(f) => Box::new(store.with_fault(f)),
        })
    }
    fn reopen_keeps_data(&self) -> bool {
        true
    }
}

#[cfg(feature = "rocksdb")]
conformance_tests!(rocksdb, || RocksDbHarness {
    dir: tempfile::tempdir().expect("tempdir")
});

conformance_tests!(history_memory, || HistoryHarness(MemoryHarness {
    store: None
}));

#[cfg(feature = "rocksdb")]
conformance_tests!(history_rocksdb, || HistoryHarness(RocksDbHarness {
    dir: tempfile::tempdir().expect("tempdir")
}));

/// `examples/custom_backend.rs`: a backend written against the public API alone passes the suite.
#[path = "../../examples/custom_backend.rs"]
mod custom_backend;

#[test]
fn custom_backend_example_passes_the_suite() {
    custom_backend::main();
}
