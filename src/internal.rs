//! The crate's internals, for its own tool (`connect-offsets-cli`), JNI library (`java/native`),
//! tests, benches and fuzz targets. Not part of the public API: hidden from the docs, no stability
//! promise, anything here may change or go in any release.
//!
//! Each internal keeps the path it has inside the crate, under `internal`:
//! * `wal`: the write-ahead log (`frame`, the segment `reader`, `inspect`'s scan and repair);
//! * `fs`: the file-system seam of the log and the dead-letter file (with `testkit`, `SimFs`, the
//!   crash-simulating one);
//! * `crash`: the crash points (with `testkit`, `CrashPlan`);
//! * `time`: the crate's clock, durations and RFC 3339 times;
//! * `connector_offsets`: Connect's offsets documents (REST, `export`/`import`);
//! * `dead_letter`: the dead-letter file;
//! * `fuzz_checks` (`testkit`): the checks behind the fuzz targets;
//! * `namespaces`: the reserved namespaces, and which of them stay in one store;
//! * `buffer::register`: where a commit buffer's log is, recorded in its store;
//! * `codec::json`: Connect's JSON, beyond the four functions `codec` exports;
//! * `metrics`: the alarm series the tool records itself;
//! * `model`: the hasher of maps keyed by `OffsetKey`;
//! * `once`: an override's id, the digests its marker records, its key, the URL a tool opens;
//! * `store`: `fault` (the `ApplyFault` seam), `fence` (a tool's fences against log replay),
//!   `url` (`StoreUrl`, `redact`), `group` (`GroupNames`) and the hooks plumbing (`Hooks`, `hooks`).
//!
//! The modules here are globs of the crate's own: their docs, and the links in them, are read
//! where the modules are (`cargo doc --document-private-items`).

/// The write-ahead log.
pub mod wal {
    pub use crate::wal::*;
}

/// The file-system seam of the log and the dead-letter file.
pub mod fs {
    pub use crate::fs::*;
}

/// Crash points.
pub mod crash {
    pub use crate::crash::*;
}

/// The crate's clock, durations and RFC 3339 times.
pub mod time {
    pub use crate::time::*;
}

/// Connect's offsets documents.
pub mod connector_offsets {
    pub use crate::connector_offsets::*;
}

/// The dead-letter file.
pub mod dead_letter {
    pub use crate::dead_letter::*;
}

/// The checks behind the fuzz targets.
#[cfg(feature = "testkit")]
pub mod fuzz_checks {
    pub use crate::fuzz_checks::*;
}

/// The reserved namespaces.
pub mod namespaces {
    pub use crate::namespaces::*;
}

/// The commit buffer's internals.
pub mod buffer {
    /// Where a commit buffer's log is, recorded in its store.
    pub mod register {
        pub use crate::buffer::register::*;
    }
}

/// The codec's internals.
pub mod codec {
    /// Connect's JSON.
    pub mod json {
        pub use crate::codec::json::*;
    }
}

/// Series the tool records itself.
pub mod metrics {
    pub use crate::metrics::recorded::*;
}

/// The hasher of maps keyed by `OffsetKey`.
pub mod model {
    pub use crate::model::key_hash::*;
}

/// An override's id and marker.
pub mod once {
    pub use crate::once::marker::*;
}

/// The store's internals.
pub mod store {
    pub use crate::store::hooks::{Hooks, hooks};

    /// The `ApplyFault` seam.
    pub mod fault {
        pub use crate::store::fault::*;
    }

    /// Fences against the replay of a writer's log.
    pub mod fence {
        pub use crate::store::fence::*;
    }

    /// Store URLs.
    pub mod url {
        pub use crate::store::url::*;
    }

    /// How a sink's consumer-group names are made.
    #[cfg(feature = "kafka")]
    pub mod group {
        pub use crate::store::kafka::group::names::*;
    }
}
