//! Disk faults, not crashes: a full disk on an append and on a segment rotation, EIO on `fdatasync`,
//! a failed snapshot rename, a failed directory sync. Through the file-system seam (`SimFs` faults)
//! on the memory and RocksDB stores, and on real file systems made to fail: tmpfs mounts that fill
//! up, run out of inodes, are read-only or have an immutable log directory, and an ext4 on a loop
//! device whose backing tmpfs is full, for EIO from `fdatasync` (needs root, mount(8), losetup(8) and
//! mkfs.ext4: the real-disk tests fail, never skip, without them). Each test checks that the commit that hit
//! the fault fails clearly or is safe, what later commits do, and that a reopen, and a crash after
//! it, hold every acknowledged batch. The failure behaviour is documented in docs/operations.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::internal::fs::{Fault, SimFs, SimOp};
use connect_offsets::store::rocksdb::RocksDbStore;
use connect_offsets::store::{MemoryStore, OffsetStore};
use connect_offsets::{Offset, OffsetKey, Partition, Value};

fn key(i: i64) -> OffsetKey {
    OffsetKey::new("c", Partition::new().with("p", i))
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn pos(n: i64) -> Offset {
    Offset::new().with("pos", n)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Memory,
    RocksDb,
}

const KINDS: [Kind; 2] = [Kind::Memory, Kind::RocksDb];

/// One writer's life over a `SimFs` log and a store, and what it was promised: every offer gets a
/// higher position than the last for its key, and a successful commit acknowledges all offers so far.
struct Rig {
    kind: Kind,
    sim: SimFs,
    root: tempfile::TempDir,
    /// The RocksDB directory of the current lifetime (a crash moves to a copy of it).
    rocks_path: PathBuf,
    rocks: Option<Arc<RocksDbStore>>,
    lifetimes: u32,
    segment_bytes: u64,
    next_pos: i64,
    offered: BTreeMap<i64, i64>,
    acked: BTreeMap<i64, i64>,
}

impl Rig {
    fn new(kind: Kind) -> Self {
        let root = tempfile::tempdir().unwrap();
        let rocks_path = root.path().join("rocks-0");
        Rig {
            kind,
            sim: SimFs::new(),
            root,
            rocks_path,
            rocks: None,
            lifetimes: 0,
            segment_bytes: 16 << 20,
            next_pos: 0,
            offered: BTreeMap::new(),
            acked: BTreeMap::new(),
        }
    }

    fn config(&self) -> CommitBufferConfig {
        let mut c = CommitBufferConfig::new("/wal");
        c.with_fs(Arc::new(self.sim.clone()));
        c.flush_interval = None;
        c.dead_letter = None;
        c.segment_bytes = self.segment_bytes;
        c
    }

    fn try_open(&mut self) -> connect_offsets::Result<CommitBuffer> {
        let store: Arc<dyn OffsetStore> = match self.kind {
            Kind::Memory => Arc::new(MemoryStore::new()),
            Kind::RocksDb => {
                self.rocks = None;
                let rocks = Arc::new(RocksDbStore::open_for_crash_tests(&self.rocks_path)?);
                self.rocks = Some(Arc::clone(&rocks));
                rocks
            }
        };
        self.lifetimes += 1;
        // Offers a closed or poisoned buffer still held are gone with it: only the acks bind.
        self.offered = self.acked.clone();
        CommitBuffer::open(store, self.config())
    }

    fn open(&mut self) -> CommitBuffer {
        let buf = self
            .try_open()
            .unwrap_or_else(|e| panic!("{:?}: reopen failed: {e}", self.kind));
        self.check(&buf);
        buf
    }

    /// Offers to `k` and commits (durable in the log); returns the commit's outcome.
    fn commit(&mut self, buf: &CommitBuffer, k: i64) -> connect_offsets::Result<u64> {
        self.next_pos += 1;
        buf.offer(key(k), pos(self.next_pos))?;
        self.offered.insert(k, self.next_pos);
        let r = buf.commit().wait();
        if r.is_ok() {
            self.acked = self.offered.clone();
        }
        r
    }

    fn commit_ok(&mut self, buf: &CommitBuffer, k: i64) -> u64 {
        self.commit(buf, k)
            .unwrap_or_else(|e| panic!("{:?}: commit failed: {e}", self.kind))
    }

    /// Every acknowledged offer, or a later one of its key, is in the store (after a reopen, or a
    /// commit waiting for the store).
    fn check(&self, buf: &CommitBuffer) {
        for (k, acked) in &self.acked {
            let got = buf.store().get(&key(*k)).unwrap();
            let got = got.as_ref().and_then(|o| o.get("pos")).and_then(as_int);
            assert!(
                got.is_some_and(|g| g >= *acked),
                "{:?}, lifetime {}: key {k} was acknowledged at {acked}, the store has {got:?}",
                self.kind,
                self.lifetimes
            );
        }
    }

    /// Power loss: what was not synced vanishes from the log, and RocksDB keeps only its files
    /// (its memtable, past its own log, is gone).
    fn crash(&mut self, buf: CommitBuffer) {
        drop(buf);
        self.crash_nothing();
    }

    /// The same power loss when no buffer is open (after an open that failed, say).
    fn crash_nothing(&mut self) {
        if let Some(rocks) = self.rocks.take() {
            let next = self.root.path().join(format!("rocks-{}", self.lifetimes));
            rocks.crash_image(&next).unwrap();
            self.rocks_path = next;
        }
        self.sim.crash();
    }

    fn files(&self, suffix: &str) -> usize {
        use connect_offsets::internal::fs::WalFs;
        self.sim
            .list(Path::new("/wal"))
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(suffix))
            .count()
    }
}

fn assert_error(e: &connect_offsets::Error, parts: &[&str]) {
    let text = e.to_string();
    for p in parts {
        assert!(text.contains(p), "error `{text}` should name `{p}`");
    }
}

#[test]
fn enospc_on_append_fails_that_commit_and_later_commits_succeed_once_space_is_back() {
    for kind in KINDS {
        let mut rig = Rig::new(kind);
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        rig.sim
            .inject(Fault::enospc(SimOp::Append).on(".wal").times(2));
        for _ in 0..2 {
            let e = rig.commit(&buf, 2).unwrap_err();
            assert_error(
                &e,
                &[
                    "write log segment",
                    "/wal/",
                    ".wal",
                    "No space left on device",
                ],
            );
        }
        // Space is back: the merged-back offers go out with the next commit.
        assert_eq!(rig.commit_ok(&buf, 3), 2, "{kind:?}: no seq was used up");
        buf.commit_with(Durability::Store).wait().unwrap();
        rig.check(&buf);
        drop(buf);
        let buf = rig.open();
        rig.commit_ok(&buf, 4);
        rig.crash(buf);
        rig.open();
    }
}

#[test]
fn enospc_creating_a_segment_keeps_commits_going_in_the_active_one() {
    for kind in KINDS {
        let mut rig = Rig::new(kind);
        rig.segment_bytes = 1; // every batch rotates
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        let segments = rig.files(".wal");
        rig.sim
            .inject(Fault::enospc(SimOp::Create).on(".wal").times(u32::MAX));
        for k in 2..6 {
            rig.commit_ok(&buf, k);
        }
        buf.commit_with(Durability::Store).wait().unwrap();
        assert!(
            rig.files(".wal") <= segments,
            "{kind:?}: no segment could be made, the active one took the batches"
        );
        rig.sim.heal();
        rig.commit_ok(&buf, 6);
        rig.commit_ok(&buf, 7);
        rig.crash(buf);
        let buf = rig.open();
        rig.commit_ok(&buf, 8);
        rig.crash(buf);
        rig.open();
    }
}

#[test]
fn eio_on_fdatasync_fails_until_reopen_and_a_later_sync_is_not_trusted() {
    for kind in KINDS {
        let mut rig = Rig::new(kind);
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        rig.sim.inject(Fault::eio(SimOp::Sync).on(".wal"));
        let e = rig.commit(&buf, 2).unwrap_err();
        assert_error(&e, &["sync log segment", "/wal/", "Input/output error"]);
        // The disk answers again, but the bytes of batch 2 may be gone from it while still
        // readable: nothing more may be acknowledged on top of them.
        let e = rig.commit(&buf, 3).unwrap_err();
        assert_error(&e, &["sync log segment"]);
        drop(buf);
        // A reopen reads what is there, writes it afresh (store or snapshot) and goes on.
        let buf = rig.open();
        rig.commit_ok(&buf, 4);
        rig.commit_ok(&buf, 5);
        rig.crash(buf);
        let buf = rig.open();
        rig.commit_ok(&buf, 6);
        drop(buf);

        // The same fault, then power loss before any reopen.
        rig.sim.inject(Fault::eio(SimOp::Sync).on(".wal"));
        let buf = rig.open();
        rig.commit(&buf, 7).unwrap_err();
        rig.crash(buf);
        rig.open();
    }
}

#[test]
fn simfs_a_sync_after_a_failed_one_does_not_make_the_dropped_bytes_durable() {
    use connect_offsets::internal::fs::WalFs;
    let sim = SimFs::new();
    let path = Path::new("/d/f");
    let mut f = sim.open_append(path).unwrap();
    f.append(b"abc").unwrap();
    f.sync().unwrap();
    sim.inject(Fault::eio(SimOp::Sync));
    f.append(b"def").unwrap();
    let e = f.sync().unwrap_err();
    assert!(e.to_string().contains("Input/output error"), "{e}");
    f.append(b"ghi").unwrap();
    f.sync().unwrap();
    sim.sync_dir(Path::new("/d")).unwrap();
    assert_eq!(sim.contents(path).unwrap(), b"abcdefghi", "still readable");
    assert_eq!(
        sim.durable_contents(path).unwrap(),
        b"abc\0\0\0ghi",
        "the bytes whose sync failed never reach the disk"
    );
}

#[test]
fn a_snapshot_that_cannot_be_made_keeps_the_segments_it_would_replace() {
    // Only a volatile store writes snapshots: create, write, sync and rename of the temporary file.
    let faults = [
        (Fault::enospc(SimOp::Create), "create snapshot"),
        (Fault::enospc(SimOp::Append), "write snapshot"),
        (Fault::eio(SimOp::Sync), "sync snapshot"),
        (Fault::eio(SimOp::Rename), "rename snapshot"),
    ];
    for (fault, op) in faults {
        let mut rig = Rig::new(Kind::Memory);
        rig.segment_bytes = 1;
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        rig.sim.inject(fault.on(".snap.tmp").times(u32::MAX));
        for k in 2..6 {
            // The batch is in the log, synced: the commit succeeds; compaction waits.
            rig.commit_ok(&buf, k);
            buf.commit_with(Durability::Store).wait().unwrap();
        }
        assert!(
            rig.files(".wal") >= 4,
            "{op}: the segments the snapshot would replace stay"
        );
        rig.crash(buf);
        // At open the snapshot cannot be made either: a clear error, and the log stays as it was.
        let e = rig.try_open().unwrap_err();
        assert_error(&e, &[op, "/wal/", ".snap.tmp"]);
        rig.crash_nothing();
        rig.sim.heal();
        let buf = rig.open();
        rig.commit_ok(&buf, 6);
        buf.commit_with(Durability::Store).wait().unwrap();
        assert!(rig.files(".wal") <= 2, "{op}: compaction caught up");
        rig.crash(buf);
        rig.open();
    }
}

#[test]
fn a_failed_segment_removal_keeps_the_segment_until_a_later_release() {
    let mut rig = Rig::new(Kind::RocksDb);
    rig.segment_bytes = 1;
    let buf = rig.open();
    rig.sim
        .inject(Fault::eio(SimOp::Remove).on(".wal").times(u32::MAX));
    for k in 1..5 {
        rig.commit_ok(&buf, k);
        buf.commit_with(Durability::Store).wait().unwrap();
    }
    assert!(rig.files(".wal") >= 4, "released segments stay");
    rig.sim.heal();
    rig.crash(buf);
    let buf = rig.open();
    rig.commit_ok(&buf, 5);
    buf.commit_with(Durability::Store).wait().unwrap();
    assert!(rig.files(".wal") <= 2, "release caught up");
    rig.crash(buf);
    rig.open();
}

#[test]
fn a_failed_directory_sync() {
    for kind in KINDS {
        let mut rig = Rig::new(kind);
        rig.segment_bytes = 1;
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        // On rotation (and release or compaction): commits go on in the active segment.
        let segments = rig.files(".wal");
        rig.sim
            .inject(Fault::eio(SimOp::SyncDir).on("/wal").times(u32::MAX));
        for k in 2..5 {
            rig.commit_ok(&buf, k);
        }
        buf.commit_with(Durability::Store).wait().unwrap();
        assert!(
            rig.files(".wal") <= segments,
            "{kind:?}: a failed rotation leaves no empty segment behind"
        );
        rig.crash(buf);
        // At open a new segment must be made durable: refused, clearly, while the fault lasts.
        let e = rig.try_open().unwrap_err();
        assert_error(&e, &["sync log directory", "/wal", "Input/output error"]);
        rig.crash_nothing();
        rig.sim.heal();
        let buf = rig.open();
        rig.commit_ok(&buf, 5);
        rig.crash(buf);
        rig.open();
    }
}

// ---- On real file systems made to fail (root: tmpfs mounts, remounts, the immutable attribute).

mod real {
    use super::*;
    use std::process::Command;

    /// A tmpfs mounted for one test, unmounted when dropped.
    pub(super) struct Tmpfs {
        _dir: tempfile::TempDir,
        pub(super) mnt: PathBuf,
    }

    pub(super) fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
        let out = Command::new(cmd)
            .args(args)
            .output()
            .map_err(|e| format!("{cmd}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// One real-disk test at a time: a child forked for `mount` or `chattr` holds a copy of every
    /// open descriptor until it execs, the log's LOCK among them, which can make a parallel test's
    /// reopen see its own log as locked.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(super) fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    impl Tmpfs {
        /// Mounts a tmpfs with `options` (`size=...,nr_inodes=...`); panics (never skips) when the
        /// test cannot mount: these tests need root, as in CI.
        pub(super) fn mount(options: &str) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let mnt = dir.path().join("mnt");
            std::fs::create_dir(&mnt).unwrap();
            let m = mnt.to_str().unwrap();
            if let Err(e) = run("mount", &["-t", "tmpfs", "-o", options, "tmpfs", m]) {
                panic!(
                    "the real-disk fault tests need root and mount(8) (CI runs them as root): {e}"
                );
            }
            Tmpfs { _dir: dir, mnt }
        }

        pub(super) fn remount(&self, mode: &str) {
            let opt = format!("remount,{mode}");
            run("mount", &["-o", &opt, self.mnt.to_str().unwrap()]).unwrap();
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let m = self.mnt.to_str().unwrap();
            let _ = run("chattr", &["-R", "-i", m]);
            if let Err(e) = run("umount", &[m]) {
                eprintln!("could not unmount {m}: {e}");
            }
        }
    }

    pub(super) fn chattr(flag: &str, path: &Path) {
        run("chattr", &[flag, path.to_str().unwrap()]).unwrap();
    }

    /// Fills the file system holding `dir` with `ballast`: data until ENOSPC, or (with `inodes`)
    /// empty files until no inode is left.
    pub(super) fn fill(dir: &Path, inodes: bool) -> Vec<PathBuf> {
        use std::io::Write;
        let mut made = Vec::new();
        for i in 0.. {
            let p = dir.join(format!("ballast-{i}"));
            match std::fs::File::create(&p) {
                Ok(mut f) => {
                    made.push(p);
                    if inodes {
                        continue;
                    }
                    let block = vec![0xAB_u8; 4096];
                    loop {
                        if let Err(e) = f.write_all(&block) {
                            assert_eq!(e.raw_os_error(), Some(28), "{e}");
                            return made;
                        }
                    }
                }
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(28), "{e}");
                    return made;
                }
            }
        }
        unreachable!()
    }
}

/// A buffer on a real log directory with a store of `kind` (RocksDB beside the mount, on the disk).
struct RealRig {
    kind: Kind,
    wal: PathBuf,
    store_dir: tempfile::TempDir,
    segment_bytes: u64,
    next_pos: i64,
    offered: BTreeMap<i64, i64>,
    acked: BTreeMap<i64, i64>,
}

impl RealRig {
    fn new(kind: Kind, wal: PathBuf) -> Self {
        RealRig {
            kind,
            wal,
            store_dir: tempfile::tempdir().unwrap(),
            segment_bytes: 16 << 20,
            next_pos: 0,
            offered: BTreeMap::new(),
            acked: BTreeMap::new(),
        }
    }

    fn try_open(&mut self) -> connect_offsets::Result<CommitBuffer> {
        let store: Arc<dyn OffsetStore> = match self.kind {
            Kind::Memory => Arc::new(MemoryStore::new()),
            Kind::RocksDb => Arc::new(RocksDbStore::open(self.store_dir.path().join("db"))?),
        };
        // Offers a closed or poisoned buffer still held are gone with it: only the acks bind.
        self.offered = self.acked.clone();
        let mut c = CommitBufferConfig::new(&self.wal);
        c.flush_interval = None;
        c.dead_letter = None;
        c.segment_bytes = self.segment_bytes;
        CommitBuffer::open(store, c)
    }

    fn open(&mut self) -> CommitBuffer {
        let buf = self
            .try_open()
            .unwrap_or_else(|e| panic!("{:?}: reopen failed: {e}", self.kind));
        for (k, acked) in &self.acked {
            let got = buf.store().get(&key(*k)).unwrap();
            let got = got.as_ref().and_then(|o| o.get("pos")).and_then(as_int);
            assert!(
                got.is_some_and(|g| g >= *acked),
                "{:?}: key {k} was acknowledged at {acked}, the store has {got:?}",
                self.kind
            );
        }
        buf
    }

    /// Offers a big offset (each batch needs fresh pages on tmpfs) to `k` and commits.
    fn commit(&mut self, buf: &CommitBuffer, k: i64) -> connect_offsets::Result<u64> {
        self.next_pos += 1;
        let offset = pos(self.next_pos).with("pad", "x".repeat(6000));
        buf.offer(key(k), offset)?;
        self.offered.insert(k, self.next_pos);
        let r = buf.commit().wait();
        if r.is_ok() {
            self.acked = self.offered.clone();
        }
        r
    }

    fn commit_ok(&mut self, buf: &CommitBuffer, k: i64) -> u64 {
        self.commit(buf, k)
            .unwrap_or_else(|e| panic!("{:?}: commit failed: {e}", self.kind))
    }

    fn segments(&self) -> usize {
        std::fs::read_dir(&self.wal)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".wal"))
            })
            .count()
    }
}

#[test]
fn real_tmpfs_full_on_append() {
    let _serial = real::serial();
    for kind in KINDS {
        let fs = real::Tmpfs::mount("size=512k");
        let mut rig = RealRig::new(kind, fs.mnt.join("wal"));
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        let ballast = real::fill(&fs.mnt, false);
        for _ in 0..2 {
            let e = rig.commit(&buf, 2).unwrap_err();
            let wal = rig.wal.display().to_string();
            assert_error(
                &e,
                &["write log segment", &wal, ".wal", "No space left on device"],
            );
        }
        for p in &ballast {
            std::fs::remove_file(p).unwrap();
        }
        rig.commit_ok(&buf, 3);
        drop(buf);
        let buf = rig.open();
        rig.commit_ok(&buf, 4);
        drop(buf);
        rig.open();
    }
}

#[test]
fn real_tmpfs_out_of_inodes_on_rotation() {
    let _serial = real::serial();
    for kind in KINDS {
        let fs = real::Tmpfs::mount("size=8m,nr_inodes=64");
        let mut rig = RealRig::new(kind, fs.mnt.join("wal"));
        rig.segment_bytes = 1;
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        let ballast = real::fill(&fs.mnt, true);
        let segments = rig.segments();
        for k in 2..5 {
            rig.commit_ok(&buf, k);
        }
        assert_eq!(
            rig.segments(),
            segments,
            "{kind:?}: no segment could be made"
        );
        for p in &ballast {
            std::fs::remove_file(p).unwrap();
        }
        rig.commit_ok(&buf, 5);
        buf.commit_with(Durability::Store).wait().unwrap();
        drop(buf);
        rig.open();
    }
}

#[test]
fn real_read_only_remount_refuses_the_open_clearly() {
    let _serial = real::serial();
    // A file system with a log open for writing cannot be remounted read-only (EBUSY), so the fault
    // a running buffer can meet is a log that is read-only when it opens.
    for kind in KINDS {
        let fs = real::Tmpfs::mount("size=8m");
        let mut rig = RealRig::new(kind, fs.mnt.join("wal"));
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        drop(buf);
        fs.remount("ro");
        let e = rig.try_open().unwrap_err();
        assert_error(
            &e,
            &[&rig.wal.display().to_string(), "Read-only file system"],
        );
        fs.remount("rw");
        let buf = rig.open();
        rig.commit_ok(&buf, 2);
        drop(buf);
        rig.open();
    }
}

#[test]
fn real_immutable_log_directory() {
    let _serial = real::serial();
    // Root ignores permission bits, so a directory without write permission fails nothing for us;
    // the immutable attribute (`chattr +i`) does: no file can be created, renamed or removed in it.
    for kind in KINDS {
        let fs = real::Tmpfs::mount("size=8m");
        let mut rig = RealRig::new(kind, fs.mnt.join("wal"));
        rig.segment_bytes = 1;
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        real::chattr("+i", &rig.wal);
        // Rotation, release and compaction fail; appends to the open segment go on.
        for k in 2..5 {
            rig.commit_ok(&buf, k);
            buf.commit_with(Durability::Store).wait().unwrap();
        }
        drop(buf);
        let e = rig.try_open().unwrap_err();
        assert_error(
            &e,
            &[&rig.wal.display().to_string(), "Operation not permitted"],
        );
        real::chattr("-i", &rig.wal);
        let buf = rig.open();
        rig.commit_ok(&buf, 5);
        drop(buf);
        rig.open();
    }
}

/// An ext4 file system on a loop device whose backing file lives on a tmpfs smaller than the ext4
/// thinks it is: once the tmpfs is full, writeback fails and `fdatasync` returns EIO, as a dying disk
/// does (device-mapper's error target is not available on this machine). Dropped: unmounted, detached.
struct ShortExt4 {
    back: real::Tmpfs,
    lo: String,
    mnt: PathBuf,
}

impl ShortExt4 {
    fn new() -> Self {
        let back = real::Tmpfs::mount("size=6m");
        let img = back.mnt.join("disk.img");
        let img_s = img.to_str().unwrap();
        real::run("truncate", &["-s", "64M", img_s]).unwrap();
        real::run("mkfs.ext4", &["-q", "-F", img_s]).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show", img_s])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup (needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lo = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let mnt = back.mnt.with_file_name("ext4");
        std::fs::create_dir_all(&mnt).unwrap();
        let fs = ShortExt4 { back, lo, mnt };
        fs.mount();
        fs
    }

    fn mount(&self) {
        real::run(
            "mount",
            &[
                "-o",
                "errors=continue",
                &self.lo,
                self.mnt.to_str().unwrap(),
            ],
        )
        .unwrap();
    }

    /// Unmounts (dropping the page cache), gives the backing tmpfs room, repairs and mounts again:
    /// what is on the image is what the disk really got.
    fn replace_disk(&self) {
        real::run("umount", &[self.mnt.to_str().unwrap()]).unwrap();
        self.back.remount("size=128m");
        // e2fsck exits 1 when it fixed something: only 4 and up are failures.
        let st = std::process::Command::new("e2fsck")
            .args(["-f", "-y", &self.lo])
            .output()
            .unwrap();
        assert!(st.status.code().is_some_and(|c| c < 4), "e2fsck: {st:?}");
        self.mount();
    }
}

impl Drop for ShortExt4 {
    fn drop(&mut self) {
        let _ = real::run("umount", &[self.mnt.to_str().unwrap()]);
        let _ = real::run("losetup", &["-d", &self.lo]);
    }
}

#[test]
fn real_eio_on_fdatasync_from_a_failing_block_device() {
    let _serial = real::serial();
    for kind in KINDS {
        let disk = ShortExt4::new();
        let mut rig = RealRig::new(kind, disk.mnt.join("wal"));
        let buf = rig.open();
        let mut first = None;
        for k in 0..2000 {
            if let Err(e) = rig.commit(&buf, k % 50) {
                first = Some(e);
                break;
            }
        }
        let e = first.expect("the short disk never failed");
        assert_error(&e, &[&rig.wal.display().to_string(), "Input/output error"]);
        assert!(
            rig.acked.len() > 10,
            "{kind:?}: only {} keys acknowledged before the fault",
            rig.acked.len()
        );
        // Whatever the disk does now, nothing more is acknowledged on top of what it dropped.
        for k in 0..3 {
            assert!(rig.commit(&buf, k).is_err(), "{kind:?}: commit after EIO");
        }
        drop(buf);
        disk.replace_disk();
        let buf = rig.open();
        rig.commit_ok(&buf, 1);
        drop(buf);
        rig.open();
    }
}
