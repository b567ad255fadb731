//! A crash-simulating file system for the test kit.
//!
//! [`SimFs`] keeps two images of every file and of the directory listing: what the process sees
//! ("live") and what would survive a power loss ("durable"). `sync` makes a file's bytes durable;
//! `sync_dir` makes creations, renames and removals durable. [`SimFs::crash`] throws away everything
//! not durable, except that a crash inside a write may leave a prefix of the unsynced bytes (a torn
//! write), as a real disk can. [`SimFs::unsynced`] and [`SimFs::power_loss`] instead let a test
//! choose what a power loss keeps: any prefix of each file's unsynced bytes, and any subset of the
//! directory changes not yet synced.
//!
//! [`SimFs::inject`] makes chosen operations fail as a failing disk does (a [`Fault`]: ENOSPC, EIO,
//! EROFS...) while the process lives on. A failed file sync models Linux after a writeback error: the
//! dirty bytes stay readable but are marked clean, so a later successful sync does not make them
//! durable (PostgreSQL's "fsyncgate", 2018).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{WalFile, WalFs};
use crate::crash::{CrashHook, CrashPoint};

mod fault;
pub use fault::{Fault, SimOp};

/// A crash-simulating in-memory file system (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    inner: Arc<Mutex<SimState>>,
}

#[derive(Debug, Default)]
struct SimState {
    /// File contents as the process sees them, and the durable prefix length of each.
    files: BTreeMap<PathBuf, SimFile>,
    /// Directory entries that would survive a crash: path → file id.
    durable_names: BTreeMap<PathBuf, u64>,
    /// Live directory entries: path → file id.
    live_names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
    next_id: u64,
    hook: Option<Arc<dyn CrashHook>>,
    /// A torn write to keep at the next crash: file id and the bytes that reached it.
    torn: Option<(u64, usize)>,
    /// Injected faults still to fire, in the order given.
    faults: Vec<Fault>,
    writes: u64,
    syncs: u64,
}

#[derive(Debug, Default, Clone)]
struct SimFile {
    data: Vec<u8>,
    durable: Vec<u8>,
    /// Byte ranges whose sync failed: no later sync makes them durable (they read back as zeros
    /// after a crash, as never-written blocks do).
    lost: Vec<std::ops::Range<usize>>,
}

impl SimFile {
    /// What a successful sync leaves on the disk: the live bytes, except those a failed sync dropped.
    fn synced_image(&self) -> Vec<u8> {
        let mut image = self.data.clone();
        for r in &self.lost {
            let end = r.end.min(image.len());
            if r.start < end {
                image[r.start..end].fill(0);
            }
        }
        image
    }
}

impl SimState {
    /// The error of the first injected fault matching `op` on `path`, used up by this call.
    fn fault(&mut self, op: SimOp, path: &Path) -> Option<io::Error> {
        let i = self.faults.iter().position(|f| f.matches(op, path))?;
        let error = self.faults[i].error(path);
        if self.faults[i].fire() {
            self.faults.remove(i);
        }
        Some(error)
    }

    fn id_of(&self, path: &Path) -> io::Result<u64> {
        self.live_names.get(path).copied().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} not found", path.display()),
            )
        })
    }
}

/// What a power loss could still drop (see [`SimFs::unsynced`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unsynced {
    /// Each file with bytes written but not synced: a name it has (live, else durable) and how
    /// many such bytes follow its durable prefix.
    pub files: Vec<(PathBuf, usize)>,
    /// Each path whose directory entry was created, renamed or removed since its directory's last
    /// sync.
    pub names: Vec<PathBuf>,
}

/// What a power loss keeps of an [`Unsynced`]: `bytes[i]` of the unsynced bytes of `files[i]`, and
/// the live entry of `names[i]` when `names[i]` is true (else the durable one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keep {
    /// Unsynced bytes kept per file, in the order of [`Unsynced::files`].
    pub bytes: Vec<usize>,
    /// Directory changes kept, in the order of [`Unsynced::names`].
    pub names: Vec<bool>,
}

#[derive(Debug)]
struct SimHandle {
    fs: SimFs,
    id: u64,
    path: PathBuf,
}

fn dead() -> io::Error {
    io::Error::other("simulated crash: the process is dead")
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Installs the crash hook consulted inside writes (and whose crash makes every call fail).
    pub fn set_hook(&self, hook: Option<Arc<dyn CrashHook>>) {
        self.inner.lock().expect("sim lock").hook = hook;
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SimState> {
        self.inner.lock().expect("sim lock")
    }

    fn is_dead(st: &SimState) -> bool {
        st.hook.as_ref().is_some_and(|h| h.is_dead())
    }

    /// Simulates power loss: unsynced bytes and unsynced directory changes vanish (a torn write
    /// keeps its prefix), locks are released, and the hook is removed.
    pub fn crash(&self) {
        let mut st = self.state();
        let torn = st.torn.take();
        let durable_names = st.durable_names.clone();
        let live_ids: BTreeSet<u64> = durable_names.values().copied().collect();
        st.files
            .retain(|id, _| live_ids.contains(&Self::id_num(id)));
        for (path, f) in st.files.iter_mut() {
            let id = Self::id_num(path);
            let mut data = f.durable.clone();
            if let Some((tid, keep)) = torn
                && tid == id
            {
                let extra = f.data.get(f.durable.len()..).unwrap_or(&[]);
                data.extend_from_slice(&extra[..keep.min(extra.len())]);
            }
            f.data = data.clone();
            f.durable = data;
            f.lost.clear();
        }
        st.live_names = durable_names;
        st.locks.clear();
        st.hook = None;
    }

    /// What a power loss now could drop: every file's bytes past its durable prefix and every
    /// directory entry that differs from its durable one.
    pub fn unsynced(&self) -> Unsynced {
        let st = self.state();
        let named = |id: u64| {
            st.live_names
                .iter()
                .chain(&st.durable_names)
                .find(|(_, i)| **i == id)
                .map(|(p, _)| p.clone())
        };
        let files = st
            .files
            .iter()
            .filter(|(_, f)| f.data.len() > f.durable.len())
            .filter_map(|(p, f)| Some((named(Self::id_num(p))?, f.data.len() - f.durable.len())))
            .collect();
        let names = st
            .live_names
            .keys()
            .chain(st.durable_names.keys())
            .filter(|p| st.live_names.get(*p) != st.durable_names.get(*p))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .cloned()
            .collect();
        Unsynced { files, names }
    }

    /// Simulates power loss keeping what `keep` chooses of [`unsynced`](Self::unsynced) (a torn
    /// write is then whatever prefix of it `keep` gives its file); locks are released and the hook
    /// is removed.
    pub fn power_loss(&self, keep: &Keep) {
        let unsynced = self.unsynced();
        let mut st = self.state();
        st.torn = None;
        let mut names = st.durable_names.clone();
        for (path, kept) in unsynced.names.iter().zip(&keep.names) {
            match (kept, st.live_names.get(path)) {
                (true, Some(id)) => names.insert(path.clone(), *id),
                (true, None) => names.remove(path),
                (false, _) => None,
            };
        }
        let mut extra: BTreeMap<u64, usize> = BTreeMap::new();
        for ((path, _), n) in unsynced.files.iter().zip(&keep.bytes) {
            if let Some(id) = st.live_names.get(path).or(st.durable_names.get(path)) {
                extra.insert(*id, *n);
            }
        }
        let ids: BTreeSet<u64> = names.values().copied().collect();
        st.files.retain(|p, _| ids.contains(&Self::id_num(p)));
        for (p, f) in st.files.iter_mut() {
            let n = extra.get(&Self::id_num(p)).copied().unwrap_or(0);
            let unsynced = f.data.get(f.durable.len()..).unwrap_or(&[]);
            let mut data = f.durable.clone();
            data.extend_from_slice(&unsynced[..n.min(unsynced.len())]);
            f.data = data.clone();
            f.durable = data;
            f.lost.clear();
        }
        st.live_names = names.clone();
        st.durable_names = names;
        st.locks.clear();
        st.hook = None;
    }

    /// Every durable file and its durable bytes (tests: what a crash now would leave, at most).
    pub fn durable_image(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let st = self.state();
        st.durable_names
            .iter()
            .filter_map(|(p, id)| {
                Some((
                    p.clone(),
                    st.files.get(&Self::id_path(*id))?.durable.clone(),
                ))
            })
            .collect()
    }

    // Files are stored under a synthetic path "/#<id>" so names and contents stay separate.
    fn id_path(id: u64) -> PathBuf {
        PathBuf::from(format!("/#{id}"))
    }
    fn id_num(p: &Path) -> u64 {
        p.to_string_lossy()
            .trim_start_matches("/#")
            .parse()
            .unwrap_or(u64::MAX)
    }

    /// The live contents of `path` (tests).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state();
        let id = *st.live_names.get(path)?;
        st.files.get(&Self::id_path(id)).map(|f| f.data.clone())
    }

    /// Replaces the contents of `path`, durably (tests and fuzzing: arbitrary segment bytes).
    pub fn put(&self, path: &Path, bytes: &[u8]) {
        let mut st = self.state();
        if let Some(parent) = path.parent() {
            st.dirs.insert(parent.to_path_buf());
        }
        let id = match st.live_names.get(path) {
            Some(id) => *id,
            None => {
                st.next_id += 1;
                st.next_id
            }
        };
        st.live_names.insert(path.to_path_buf(), id);
        st.durable_names.insert(path.to_path_buf(), id);
        st.files.insert(
            Self::id_path(id),
            SimFile {
                data: bytes.to_vec(),
                durable: bytes.to_vec(),
                lost: Vec::new(),
            },
        );
    }

    /// Makes the next `n` appends fail with ENOSPC, half of each reaching the file (the process
    /// lives on).
    pub fn fail_appends(&self, n: u32) {
        let mut st = self.state();
        st.faults.retain(|f| f.op() != SimOp::Append);
        if n > 0 {
            st.faults.push(Fault::enospc(SimOp::Append).times(n));
        }
    }

    /// Adds `fault` to the plan: the matching operations fail while the process lives on.
    pub fn inject(&self, fault: Fault) {
        self.state().faults.push(fault);
    }

    /// Drops every injected fault not yet fired (the disk is healthy again).
    pub fn heal(&self) {
        self.state().faults.clear();
    }

    /// The bytes of `path` that would survive a crash now (tests).
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state();
        let id = *st.durable_names.get(path)?;
        st.files.get(&Self::id_path(id)).map(|f| f.durable.clone())
    }

    /// How many appends and file syncs were made.
    pub fn counts(&self) -> (u64, u64) {
        let st = self.state();
        (st.writes, st.syncs)
    }

    /// Total live bytes of the files in `dir`.
    pub fn dir_bytes(&self, dir: &Path) -> u64 {
        let st = self.state();
        st.live_names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .filter_map(|(_, id)| st.files.get(&Self::id_path(*id)))
            .map(|f| f.data.len() as u64)
            .sum()
    }
}

impl WalFile for SimHandle {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.fs.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        st.writes += 1;
        if let Some(e) = st.fault(SimOp::Append, &self.path) {
            // Like a write that ran out of space halfway: part of it reached the file.
            let f = st
                .files
                .get_mut(&SimFs::id_path(self.id))
                .ok_or_else(dead)?;
            f.data.extend_from_slice(&bytes[..bytes.len() / 2]);
            return Err(e);
        }
        let hook = st.hook.clone();
        if let Some(h) = hook
            && h.at(CrashPoint::InsideWalWrite).is_err()
        {
            let keep = h.torn_len(bytes.len());
            let f = st
                .files
                .get_mut(&SimFs::id_path(self.id))
                .ok_or_else(dead)?;
            f.data.extend_from_slice(&bytes[..keep]);
            st.torn = Some((self.id, usize::MAX));
            return Err(dead());
        }
        let f = st
            .files
            .get_mut(&SimFs::id_path(self.id))
            .ok_or_else(dead)?;
        f.data.extend_from_slice(bytes);
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        let mut st = self.fs.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        st.syncs += 1;
        let fault = st.fault(SimOp::Sync, &self.path);
        let f = st
            .files
            .get_mut(&SimFs::id_path(self.id))
            .ok_or_else(dead)?;
        if let Some(e) = fault {
            // Writeback failed: the dirty bytes are marked clean without reaching the disk.
            let dirty = f.durable.len().min(f.data.len())..f.data.len();
            if !dirty.is_empty() {
                f.lost.push(dirty);
            }
            return Err(e);
        }
        f.durable = f.synced_image();
        Ok(())
    }
    fn len(&self) -> u64 {
        let st = self.fs.state();
        st.files
            .get(&SimFs::id_path(self.id))
            .map_or(0, |f| f.data.len() as u64)
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut st = self.fs.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        let f = st
            .files
            .get_mut(&SimFs::id_path(self.id))
            .ok_or_else(dead)?;
        f.data.truncate(len as usize);
        f.lost.retain(|r| r.start < len as usize);
        // Shrinking is made durable by the sync that follows it; model it as immediate and pessimistic.
        if f.durable.len() > f.data.len() {
            f.durable.truncate(len as usize);
        }
        let _ = &self.path;
        Ok(())
    }
}

impl WalFs for SimFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        st.dirs.insert(dir.to_path_buf());
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        Ok(st
            .live_names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        let id = st.id_of(path)?;
        Ok(st
            .files
            .get(&SimFs::id_path(id))
            .map(|f| f.data.clone())
            .unwrap_or_default())
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let mut st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        let id = match st.live_names.get(path) {
            Some(id) => *id,
            None => {
                if let Some(e) = st.fault(SimOp::Create, path) {
                    return Err(e);
                }
                st.next_id += 1;
                let id = st.next_id;
                st.live_names.insert(path.to_path_buf(), id);
                st.files.insert(SimFs::id_path(id), SimFile::default());
                id
            }
        };
        Ok(Box::new(SimHandle {
            fs: self.clone(),
            id,
            path: path.to_path_buf(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        let id = st.id_of(from)?;
        if let Some(e) = st.fault(SimOp::Rename, from) {
            return Err(e);
        }
        st.live_names.remove(from);
        st.live_names.insert(to.to_path_buf(), id);
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        st.id_of(path)?;
        if let Some(e) = st.fault(SimOp::Remove, path) {
            return Err(e);
        }
        st.live_names.remove(path);
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        if let Some(e) = st.fault(SimOp::SyncDir, dir) {
            return Err(e);
        }
        let live: Vec<(PathBuf, u64)> = st
            .live_names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        st.durable_names.retain(|p, _| p.parent() != Some(dir));
        st.durable_names.extend(live);
        Ok(())
    }
    fn lock(&self, dir: &Path) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        let mut st = self.state();
        if SimFs::is_dead(&st) {
            return Err(dead());
        }
        if !st.locks.insert(dir.to_path_buf()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "another process holds the log (LOCK is taken)",
            ));
        }
        Ok(Box::new(SimLock {
            fs: self.clone(),
            dir: dir.to_path_buf(),
        }))
    }
}

#[derive(Debug)]
struct SimLock {
    fs: SimFs,
    dir: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.fs.state().locks.remove(&self.dir);
    }
}
