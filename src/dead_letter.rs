//! The dead-letter file: bytes that could not be decoded, kept instead of lost.
//!
//! One JSON object per line, appended and synced before the reader moves past the bad bytes:
//! `{"time_ms":…,"source":"wal"|"kafka"|"policy","location":{…},"reason":"…","bytes_b64":"…"}` where `location`
//! names the file and byte offset, or the topic, partition and offset (with the record key and value
//! in `key_b64` / `value_b64` for Kafka records).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::codec::json::{base64, encode_str};
use crate::fs::{RealFs, WalFs};
use crate::{Error, Result};

/// An append-only dead-letter file.
#[derive(Debug, Clone)]
pub struct DeadLetterFile {
    path: PathBuf,
    fs: Arc<dyn WalFs>,
}

/// One record for the dead-letter file.
#[derive(Debug, Clone)]
pub struct DeadLetter<'a> {
    /// `"wal"` or `"kafka"`.
    pub source: &'static str,
    /// Where the bytes were: pairs of name and value, e.g. `("file", "…")`, `("offset", "123")`.
    pub location: Vec<(&'static str, String)>,
    /// Why they could not be used.
    pub reason: String,
    /// The bytes themselves (named blobs: `bytes`, or `key` and `value`).
    pub blobs: Vec<(&'static str, Option<&'a [u8]>)>,
}

impl DeadLetterFile {
    /// A dead-letter file at `path` (created on first write, mode 0600).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        DeadLetterFile {
            path: path.into(),
            fs: Arc::new(RealFs),
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same file, written through `fs` (the log's file system, so a simulated crash reaches it).
    pub fn with_fs(mut self, fs: Arc<dyn WalFs>) -> Self {
        self.fs = fs;
        self
    }

    /// Appends one record and syncs it.
    pub fn write(&self, letter: &DeadLetter<'_>) -> Result<()> {
        let mut line = Vec::with_capacity(256);
        let now = crate::time::now_ms();
        line.extend_from_slice(format!("{{\"time_ms\":{now},\"source\":").as_bytes());
        encode_str(letter.source, &mut line);
        line.extend_from_slice(b",\"location\":{");
        for (i, (k, v)) in letter.location.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            encode_str(k, &mut line);
            line.push(b':');
            encode_str(v, &mut line);
        }
        line.extend_from_slice(b"},\"reason\":");
        encode_str(&letter.reason, &mut line);
        for (name, blob) in &letter.blobs {
            line.push(b',');
            encode_str(&format!("{name}_b64"), &mut line);
            line.push(b':');
            match blob {
                Some(b) => encode_str(&base64(b), &mut line),
                None => line.extend_from_slice(b"null"),
            }
        }
        line.extend_from_slice(b"}\n");
        let parent = self.path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent {
            self.fs
                .create_dir_all(parent)
                .map_err(|e| Error::io("create directory", parent, e))?;
        }
        let mut f = self
            .fs
            .open_append(&self.path)
            .map_err(|e| Error::io("open dead-letter file", &self.path, e))?;
        let created = f.is_empty();
        f.append(&line)
            .map_err(|e| Error::io("write dead-letter file", &self.path, e))?;
        f.sync()
            .map_err(|e| Error::io("sync dead-letter file", &self.path, e))?;
        // A new file must survive a crash too, before the reader moves past the bad bytes.
        if created {
            let dir = parent.unwrap_or(Path::new("."));
            self.fs
                .sync_dir(dir)
                .map_err(|e| Error::io("sync directory", dir, e))?;
        }
        crate::metrics::dead_lettered(letter.source);
        Ok(())
    }
}
