//! The file-system seam of the write-ahead log and the dead-letter file: what they need from a file
//! system, and the real one. The test kit (feature `testkit`) adds `SimFs`, a crash-simulating one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;

#[cfg(feature = "testkit")]
mod sim;
#[cfg(feature = "testkit")]
pub use sim::{Fault, Keep, SimFs, SimOp, Unsynced};

/// An open, append-only log file.
pub trait WalFile: Send + std::fmt::Debug {
    /// Appends all of `bytes` with one write.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes the appended bytes durable (`fdatasync`).
    fn sync(&mut self) -> io::Result<()>;
    /// The file's length.
    fn len(&self) -> u64;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Cuts the file to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// What the log needs from a file system.
pub trait WalFs: Send + Sync + std::fmt::Debug {
    /// Creates `dir` and its parents (mode 0700 on real disks).
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// File names in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// A whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Opens `path` for appending, creating it (mode 0600) if missing.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WalFile>>;
    /// Renames a file.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `dir` for this process, held until the guard drops.
    fn lock(&self, dir: &Path) -> io::Result<Box<dyn std::any::Any + Send + Sync>>;
    /// True when its paths are the machine's, so another process can read a log there (a commit
    /// buffer then records the log's directory in its store: `buffer::register`).
    fn is_real(&self) -> bool {
        false
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile {
    file: File,
    len: u64,
}

impl WalFile for RealFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.len = len;
        Ok(())
    }
}

impl WalFs for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            // A log file linked from elsewhere is still the log's: leaving it out would lose it.
            let kind = entry.file_type()?;
            if kind.is_file() || kind.is_symlink() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(Box::new(RealFile { file, len }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn is_real(&self) -> bool {
        true
    }

    fn lock(&self, dir: &Path) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join("LOCK");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "another process holds the log (LOCK is taken); only one commit buffer may use a log directory",
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
