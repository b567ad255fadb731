//! The reserved namespaces: where the crate keeps its own records, beside the connectors' offsets.
//! A leaf, so that the stores (fences) and the modules above them (history, alarms, overrides,
//! the commit buffer's writers) can all tell them apart without importing each other. Each name
//! is re-exported by the module whose records live there.

/// The namespace the markers of applied overrides live in ([`once`](crate::once)); no connector
/// may use it.
pub const ONCE_NAMESPACE: &str = "__connect-offsets-once";

/// The namespace history records live in ([`history`](crate::history)); no connector may use it.
pub const HISTORY_NAMESPACE: &str = "__connect-offsets-history";

/// The reserved namespace of the alarm records ([`alarms`](crate::alarms)): partition
/// `{"connector":C,"writer":W}`.
pub const ALARMS_NAMESPACE: &str = "__connect-offsets-alarms";

/// The namespace fences live in (`store::fence`); no connector may use it.
pub const FENCES_NAMESPACE: &str = "__connect-offsets-fences";

/// The namespace of the writers' records (`buffer::register`); no connector may use it.
pub const WRITERS_NAMESPACE: &str = "__connect-offsets-writers";

/// True for the reserved namespaces whose records describe this very store's writers (their
/// fences, where their logs are): `export` and `migrate` leave them where they are.
pub fn is_store_local_namespace(namespace: &str) -> bool {
    namespace == FENCES_NAMESPACE || namespace == WRITERS_NAMESPACE
}

/// True for the namespaces the crate keeps its own records in (overrides' markers, history,
/// alarms, fences, writers' logs): offsets like any others to a store, but no connector's, so
/// never listed as one, recorded in history, judged by the alarms or expired.
pub fn is_reserved_namespace(namespace: &str) -> bool {
    namespace == ONCE_NAMESPACE
        || namespace == HISTORY_NAMESPACE
        || namespace == ALARMS_NAMESPACE
        || namespace == FENCES_NAMESPACE
        || namespace == WRITERS_NAMESPACE
}
