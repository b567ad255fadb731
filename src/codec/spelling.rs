//! How the model's types are spelled in Kafka Connect's JSON: a key's record bytes and its
//! structural identity (the partition's JSON with members sorted), maps as JSON text, and the value
//! Connect reads back after writing one. Inherent methods of the model's types, kept here so that
//! [`model`](crate::model) depends on nothing else in the crate.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use super::json;
use crate::model::{FieldMap, KeyInner, OffsetKey, Partition, Value, id_hasher};

impl Value {
    /// The value Connect reads back after writing this one: bytes become their Base64 string and
    /// non-finite doubles their string spelling. Everything else is unchanged.
    pub fn connect_normalized(&self) -> Value {
        match self {
            Value::Bytes(b) => Value::String(json::base64(b)),
            Value::Float(f) if !f.is_finite() => {
                Value::String(json::non_finite_name(*f).to_string())
            }
            v => v.clone(),
        }
    }
}

impl FieldMap {
    /// The map as Connect's REST `PATCH` writes it: Connect reads the body back through its
    /// `JsonConverter` before writing, which makes it a `java.util.HashMap` (members in that map's
    /// iteration order) and every fraction a `BigDecimal` (so `-0.0` becomes `0.0`).
    pub fn as_connect_patch_writes(&self) -> FieldMap {
        let fields: Vec<(&str, &Value)> = self.iter().collect();
        super::java_map::hash_order(fields.iter().map(|(n, _)| *n))
            .into_iter()
            .map(|i| {
                let (n, v) = fields[i];
                let v = match v {
                    Value::Float(f) if *f == 0.0 => Value::Float(0.0),
                    v => v.clone(),
                };
                (n, v)
            })
            .collect()
    }

    /// The map as Kafka Connect's JSON (compact, insertion order).
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        json::encode_map(self, &mut out);
        String::from_utf8(out).expect("the encoder writes UTF-8")
    }

    /// Parses a JSON object of primitive values (Connect's rules: nested values are refused).
    pub fn from_json(text: &str) -> crate::Result<FieldMap> {
        json::decode_map(text.as_bytes(), "JSON object")
    }
}

impl fmt::Display for FieldMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl OffsetKey {
    /// The key of `partition` under connector `namespace`.
    pub fn new(namespace: impl Into<String>, partition: Partition) -> Self {
        Self::build(namespace.into(), Some(partition))
    }

    /// The key of a connector's `null` partition (`["name",null]` in Connect's bytes).
    pub fn null_partition(namespace: impl Into<String>) -> Self {
        Self::build(namespace.into(), None)
    }

    pub(crate) fn build(namespace: String, partition: Option<Partition>) -> Self {
        let id = Self::id_for(&namespace, partition.as_ref());
        let hash = id_hasher().hash_one(&id);
        OffsetKey(Arc::new(KeyInner {
            namespace,
            partition,
            id: id.into_boxed_slice(),
            hash,
        }))
    }

    /// The storage identity of a key (see [`id`](Self::id)), without building the key.
    pub fn id_for(namespace: &str, partition: Option<&Partition>) -> Vec<u8> {
        let mut id = Vec::with_capacity(4 + namespace.len() + 32);
        id.extend_from_slice(&(namespace.len() as u32).to_be_bytes());
        id.extend_from_slice(namespace.as_bytes());
        match partition {
            None => id.extend_from_slice(b"null"),
            Some(p) => json::encode_map_sorted(p, &mut id),
        }
        id
    }

    /// Appends the partition's JSON in the caller's member order (`null` for the null partition).
    /// A partition of one member has one order: its bytes are copied from the identity.
    pub(crate) fn encode_partition(&self, out: &mut Vec<u8>) {
        match self.partition() {
            Some(p) if p.len() > 1 => json::encode_map(p, out),
            _ => out.extend_from_slice(&self.id()[4 + self.namespace().len()..]),
        }
    }

    /// The record key bytes Kafka Connect writes for this key: `["namespace",{...}]`.
    pub fn connect_key(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.id.len() + 8);
        json::encode_key(self, &mut out);
        out
    }
}
