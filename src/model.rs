//! The data model: values, partition and offset maps, keys and batches.
//!
//! Kafka Connect's offsets are maps from string to a primitive value. Connect looks offsets up by the
//! exact bytes of the encoded key, so member order matters to Connect; to us it does not: an
//! [`OffsetKey`] compares structurally (members sorted), while encoding keeps the caller's order so the
//! bytes equal what Connect writes for the same map. How these types are spelled in Connect's JSON
//! (and a key's structural identity, which is its sorted JSON) lives in [`codec`](crate::codec), which
//! builds on this module; this module uses no other of the crate.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

pub(crate) mod key_hash;

pub(crate) use key_hash::BuildKeyHasher;

/// One value in a partition or offset map. Kafka Connect allows nothing nested.
#[derive(Clone, Debug)]
pub enum Value {
    /// JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit integer (Connect's `INT64`).
    Int(i64),
    /// A double (Connect's `FLOAT64`). NaN and the infinities are written as the strings `"NaN"`,
    /// `"Infinity"` and `"-Infinity"`, so they read back as strings, as in Connect.
    Float(f64),
    /// A UTF-8 string.
    String(String),
    /// Raw bytes, written as a padded standard Base64 string (so they read back as that string).
    Bytes(Vec<u8>),
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            // Bitwise, so -0.0 != 0.0 (Connect writes them differently); every NaN is one value.
            (Value::Float(a), Value::Float(b)) => {
                (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
            }
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident $(via $conv:ty)?),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self { Value::$variant((v $(as $conv)?).into()) }
        }
    )*};
}
value_from!(bool => Bool, i64 => Int, i32 => Int via i64, u32 => Int via i64, f64 => Float,
            String => String, &str => String, Vec<u8> => Bytes, &[u8] => Bytes);

/// An ordered map from string to [`Value`]: a partition or an offset.
///
/// Insertion order is kept (it is the order Connect would write); inserting an existing name replaces
/// its value in place, as Java's `LinkedHashMap` does. Equality ignores order.
#[derive(Clone, Default)]
pub struct FieldMap {
    fields: Vec<(String, Value)>,
}

/// A source partition: which table, file or shard an offset belongs to.
pub type Partition = FieldMap;
/// How far a connector got in one partition.
pub type Offset = FieldMap;

impl FieldMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder form of [`insert`](Self::insert).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.insert(name, value);
        self
    }

    /// Sets `name` to `value`, keeping the position of an existing `name`.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        let name = name.into();
        let value = value.into();
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((name, value)),
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Members in insertion order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &Value)> + ExactSizeIterator {
        self.fields.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The same map with every value [normalized](Value::connect_normalized).
    pub fn connect_normalized(&self) -> FieldMap {
        FieldMap {
            fields: self
                .fields
                .iter()
                .map(|(n, v)| (n.clone(), v.connect_normalized()))
                .collect(),
        }
    }

    /// True when [`connect_normalized`](Self::connect_normalized) would change something.
    pub fn needs_normalizing(&self) -> bool {
        self.fields.iter().any(|(_, v)| {
            matches!(v, Value::Bytes(_)) || matches!(v, Value::Float(f) if !f.is_finite())
        })
    }
}

impl PartialEq for FieldMap {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(n, v)| other.get(n) == Some(v))
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for FieldMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = FieldMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl fmt::Debug for FieldMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.fields.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

/// Which offset: a connector (the namespace) and one of its source partitions.
///
/// Cheap to clone (shared). Equality and hashing are structural: the same partition written with its
/// members in another order is the same key, and so are values that Connect writes identically
/// (bytes and their Base64 string, a NaN and the string `"NaN"`). The structural identity is computed
/// once, when the key is made, so map lookups on the hot path hash one precomputed number.
#[derive(Clone)]
pub struct OffsetKey(pub(crate) Arc<KeyInner>);

pub(crate) struct KeyInner {
    pub(crate) namespace: String,
    pub(crate) partition: Option<Partition>,
    /// `u32` big-endian namespace length, namespace, canonical partition JSON (members sorted).
    /// Sorts by namespace first, so it doubles as an ordered storage key.
    pub(crate) id: Box<[u8]>,
    pub(crate) hash: u64,
}

pub(crate) fn id_hasher() -> &'static std::hash::RandomState {
    static STATE: OnceLock<std::hash::RandomState> = OnceLock::new();
    STATE.get_or_init(std::hash::RandomState::new)
}

impl OffsetKey {
    /// The prefix every [`id`](Self::id) of `namespace` starts with.
    pub fn namespace_prefix(namespace: &str) -> Vec<u8> {
        let mut id = Vec::with_capacity(4 + namespace.len());
        id.extend_from_slice(&(namespace.len() as u32).to_be_bytes());
        id.extend_from_slice(namespace.as_bytes());
        id
    }

    /// The connector name.
    pub fn namespace(&self) -> &str {
        &self.0.namespace
    }

    /// The partition map, `None` for the null partition.
    pub fn partition(&self) -> Option<&Partition> {
        self.0.partition.as_ref()
    }

    /// Structural identity bytes: equal for equal keys whatever the member order.
    pub fn id(&self) -> &[u8] {
        &self.0.id
    }
}

impl PartialEq for OffsetKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || (self.0.hash == other.0.hash && self.0.id == other.0.id)
    }
}
impl Eq for OffsetKey {}

impl Hash for OffsetKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl PartialOrd for OffsetKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OffsetKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.id.cmp(&other.0.id)
    }
}

impl fmt::Debug for OffsetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.connect_key()))
    }
}

/// The entries of one batch: each key once, `None` meaning reset (a tombstone). Iteration follows
/// insertion order, so a batch encodes to the same bytes every time.
pub type Entries = indexmap::IndexMap<OffsetKey, Option<Offset>, BuildKeyHasher>;

/// One sealed unit of commit: every entry is applied together or not at all.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Which commit buffer (write-ahead log) produced the batch.
    pub writer: String,
    /// Rises by one per sealed batch of that writer, starting at 1.
    pub seq: u64,
    /// The offsets, `None` for a reset.
    pub entries: Entries,
}

impl Batch {
    /// A batch from any list of entries (a later entry for the same key wins).
    pub fn new(
        writer: impl Into<String>,
        seq: u64,
        entries: impl IntoIterator<Item = (OffsetKey, Option<Offset>)>,
    ) -> Self {
        Batch {
            writer: writer.into(),
            seq,
            entries: entries.into_iter().collect(),
        }
    }
}
