//! The crate's one public error type.

use std::path::PathBuf;

/// `Result` with this crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in connect-offsets. Each variant names what was wrong and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A partition or offset that Kafka Connect would not accept (nested value, bad JSON, ...).
    #[error("invalid offset data: {0}")]
    InvalidData(String),

    /// Bytes that do not decode as a Kafka Connect offset record.
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// What was being decoded (`"offset key"`, `"offset value"`, ...).
        what: &'static str,
        /// Why it failed, with the byte position where it applies.
        reason: String,
    },

    /// A store URL that does not name a usable backend.
    #[error("invalid store URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given (secrets removed).
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The URL names a backend whose Cargo feature is not compiled in.
    #[error(
        "store URL `{url}` needs the `{feature}` feature of connect-offsets, which this build lacks"
    )]
    FeatureDisabled {
        /// The URL as given.
        url: String,
        /// The Cargo feature to enable.
        feature: &'static str,
    },

    /// Another process (or another handle in this one) holds the store or log directory.
    #[error("{path} is locked by another process: {reason}")]
    Locked {
        /// The directory that is in use.
        path: PathBuf,
        /// What the operating system or the backend said.
        reason: String,
    },

    /// Bytes on disk that fail their checksum or framing before the end of the log.
    #[error("corrupted log {file} at byte {offset}: {reason}")]
    Corrupted {
        /// The segment file.
        file: PathBuf,
        /// Byte offset of the bad frame within the file.
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// An I/O error, with the file or directory it concerned.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation (`"open"`, `"write"`, `"sync"`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// An error reported by a storage backend.
    #[error("{store} store: {message}{}", .source.as_ref().map(|s| format!(": {s}")).unwrap_or_default())]
    Store {
        /// The backend (`"rocksdb"`, `"kafka"`, `"memory"`).
        store: &'static str,
        /// What failed, naming the path, topic or partition concerned.
        message: String,
        /// The backend's own error, when there is one (a Kafka client's with its secrets removed).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// The commit buffer or store was closed.
    #[error("{0} is closed")]
    Closed(&'static str),

    /// A bounded resource is full and the configuration says to refuse rather than wait.
    #[error("{0}")]
    Full(String),

    /// An operation did not finish in the configured time.
    #[error("{op} timed out after {} ms", .after.as_millis())]
    Timeout {
        /// What timed out (and the last error seen while waiting, if any).
        op: String,
        /// The limit that was exceeded.
        after: std::time::Duration,
    },

    /// A commit whose flush failed; the same error is given to every committer of that flush.
    #[error("commit failed: {0}")]
    CommitFailed(#[source] std::sync::Arc<Error>),

    /// Another writer with the same identity took over (a zombie writer was fenced).
    #[error("fenced: {0}")]
    Fenced(String),

    /// A simulated crash from the test kit's fault injection.
    #[cfg(feature = "testkit")]
    #[error("simulated crash at {0}")]
    Crashed(String),

    /// A configuration property (`offsets.*`, `offset.flush.*`) that cannot work, with its value
    /// and why.
    #[error("property `{name}` = `{value}`: {reason}")]
    Config {
        /// The property (`offsets.durability`).
        name: String,
        /// The value given.
        value: String,
        /// Why it cannot work, and what would.
        reason: String,
    },

    /// A URL parameter or command-line option that cannot work, or settings that cannot work
    /// together, said in a sentence that names them.
    #[error("{0}")]
    Settings(String),

    /// The store a command reads or changes does not exist (a mistyped path or topic): it is not
    /// created for it.
    #[error("{0}")]
    NoStore(String),

    /// Input that cannot be used as it is (beyond the offset data itself, see [`Error::InvalidData`]).
    #[error("{0}")]
    Input(String),

    /// An operation that makes no sense in the current state of the store, the log or the process.
    #[error("{0}")]
    State(String),

    /// An operation on one part of a larger task failed; `context` says which part and what is left.
    #[error("{context}: {source}")]
    Context {
        /// Which part failed, and what that means for the whole (e.g. "nothing of it was written").
        context: String,
        /// Why: an [`Error`] (boxed as `dyn Error`, so that `source()` gives it to `downcast_ref`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// True for a crash the test kit simulated (never in a build without it).
    pub(crate) fn is_simulated_crash(&self) -> bool {
        #[cfg(feature = "testkit")]
        if let Error::Crashed(_) = self {
            return true;
        }
        false
    }

    /// True for errors after which retrying cannot help: the process (or writer) is done.
    pub fn is_fatal(&self) -> bool {
        match self {
            #[cfg(feature = "testkit")]
            Error::Crashed(_) => true,
            Error::Fenced(_) | Error::Closed(_) => true,
            Error::CommitFailed(inner) => inner.is_fatal(),
            _ => false,
        }
    }

    /// An I/O error about `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// A decode error.
    pub(crate) fn decode(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Decode {
            what,
            reason: reason.into(),
        }
    }

    /// A backend error (also for backends outside this crate).
    pub fn store(store: &'static str, message: impl Into<String>) -> Self {
        Error::Store {
            store,
            message: message.into(),
            source: None,
        }
    }

    /// A backend error caused by `source`.
    pub fn store_caused(
        store: &'static str,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Store {
            store,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// `self` as the cause of a failed part of a larger task.
    pub fn context(self, context: impl Into<String>) -> Self {
        Error::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_part_keeps_the_error_that_failed_it() {
        let cause = Error::store_caused(
            "rocksdb",
            "write batch /var/lib/offsets",
            std::io::Error::other("No space left on device"),
        );
        let e = cause.context("importing connector `orders` failed (nothing of it was written)");
        assert_eq!(
            e.to_string(),
            "importing connector `orders` failed (nothing of it was written): rocksdb store: write \
             batch /var/lib/offsets: No space left on device"
        );
        let store = std::error::Error::source(&e).expect("the store error");
        assert!(matches!(
            store.downcast_ref::<Error>(),
            Some(Error::Store {
                store: "rocksdb",
                ..
            })
        ));
        let io = store.source().expect("the backend's own error");
        assert_eq!(io.to_string(), "No space left on device");
    }
}
