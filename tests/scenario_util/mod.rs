//! What the crash tests share: RocksDB lifetimes opened from the files the last one left.

use std::sync::Arc;

use connect_offsets::conformance::ApplyFault;
use connect_offsets::scenario::StoreFactory;
use connect_offsets::store::rocksdb::RocksDbStore;

fn shm_or_tmp() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Each lifetime opens a copy of the files the last one left, as a killed process leaves them:
/// batches written past RocksDB's log since its last flush are gone, and only the commit
/// buffer's log can bring them back.
pub struct RocksFactory {
    dir: tempfile::TempDir,
    lifetime: u32,
    last: Option<Arc<RocksDbStore>>,
}

impl RocksFactory {
    pub fn new() -> Self {
        RocksFactory {
            // In memory where there is one: RocksDB syncs at every flush, and what a crash
            // leaves is modelled by the copies, not by the disk.
            dir: tempfile::tempdir_in(shm_or_tmp()).expect("tempdir"),
            lifetime: 0,
            last: None,
        }
    }
}

impl StoreFactory for RocksFactory {
    fn open(
        &mut self,
        fault: Arc<dyn ApplyFault>,
    ) -> connect_offsets::Result<Arc<dyn connect_offsets::OffsetStore>> {
        let path = self.dir.path().join(format!("db{}", self.lifetime + 1));
        if let Some(last) = self.last.take() {
            // The scenario has dropped its buffer and store: wait for the threads to let go.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while Arc::strong_count(&last) > 1 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the last lifetime still holds its store"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            last.crash_image(&path)?;
            // The last lifetime's files are no longer needed: keep /dev/shm small.
            let old = self.dir.path().join(format!("db{}", self.lifetime));
            drop(last);
            let _ = std::fs::remove_dir_all(old);
        }
        self.lifetime += 1;
        let store = Arc::new(RocksDbStore::open_for_crash_tests(&path)?.with_fault(fault));
        self.last = Some(Arc::clone(&store));
        Ok(store)
    }
}
