//! Kafka Connect's offsets documents, as its REST API reads and writes them (KIP-875), and the
//! all-connectors export shape of `connect-offsets export`.
//!
//! * One connector (`GET`/`PATCH /connectors/{name}/offsets`, `export --connector`):
//!   `{"offsets":[{"partition":{...},"offset":{...}}, ...]}`. In a request, `"offset": null` resets
//!   the partition; `"partition": null` is the connector's null partition (`["name",null]`).
//! * Every connector (`export` without `--connector`):
//!   `{"connectors":{"name":{"offsets":[...]}, ...}}`, connectors sorted by name.
//!
//! Partitions and offsets are encoded by [`codec::json`](crate::codec::json), so the bytes are those
//! Kafka Connect writes (member order kept, Java spelling of doubles, surrogate-pair escapes).

use crate::codec::json::{self, Json};
use crate::model::{Offset, OffsetKey, Partition};
use crate::{Error, Result};

/// One `{"partition":...,"offset":...}` entry: `None` partition is the null partition, `None`
/// offset a reset.
pub type OffsetEntry = (Option<Partition>, Option<Offset>);

/// The offsets of one connector, in Kafka Connect's REST shape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnectorOffsets {
    /// The entries in document order.
    pub offsets: Vec<OffsetEntry>,
}

impl ConnectorOffsets {
    /// The offsets stored for one connector (as returned by `OffsetStore::partitions`).
    pub fn from_stored(entries: &[(OffsetKey, Offset)]) -> Self {
        ConnectorOffsets {
            offsets: entries
                .iter()
                .map(|(k, o)| (k.partition().cloned(), Some(o.clone())))
                .collect(),
        }
    }

    /// Appends `{"offsets":[...]}` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"offsets\":[");
        for (i, (p, o)) in self.offsets.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            encode_entry(p.as_ref(), o.as_ref(), out);
        }
        out.extend_from_slice(b"]}");
    }

    /// The document as a string.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.encode(&mut out);
        String::from_utf8(out).expect("the encoder writes UTF-8")
    }

    /// Parses `{"offsets":[...]}`. Errors are plain sentences meant for the person who sent the body.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let json =
            json::parse_strict(bytes).map_err(|e| format!("the body is not valid JSON: {e}"))?;
        Self::from_json(json, "the body")
    }

    fn from_json(json: Json, what: &str) -> std::result::Result<Self, String> {
        let Json::Object(members) = json else {
            return Err(format!(
                "{what} must be a JSON object {{\"offsets\":[...]}}"
            ));
        };
        let mut offsets = None;
        for (name, value) in members {
            match name.as_str() {
                "offsets" => offsets = Some(value),
                other => {
                    return Err(format!(
                        "{what} has an unknown member `{other}` (expected only `offsets`)"
                    ));
                }
            }
        }
        let list = match offsets {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(items)) => items,
            Some(_) => return Err(format!("`offsets` in {what} must be an array")),
        };
        let mut out = Vec::with_capacity(list.len());
        // Where each partition was given: a second entry for one would quietly replace the first.
        let mut seen: std::collections::HashMap<OffsetKey, usize> =
            std::collections::HashMap::with_capacity(list.len());
        for (i, item) in list.into_iter().enumerate() {
            let entry = parse_entry(item).map_err(|e| format!("offsets[{i}]: {e}"))?;
            let key = match &entry.0 {
                Some(p) => OffsetKey::new("", p.clone()),
                None => OffsetKey::null_partition(""),
            };
            if let Some(first) = seen.insert(key, i) {
                return Err(format!(
                    "offsets[{i}]: the same partition as offsets[{first}] (give each partition once)"
                ));
            }
            out.push(entry);
        }
        Ok(ConnectorOffsets { offsets: out })
    }

    /// The document as Connect's `PATCH` of it writes it: every partition and offset as
    /// [`FieldMap::as_connect_patch_writes`] says (a partition with no live record goes under the
    /// key bytes Connect would give it).
    ///
    /// [`FieldMap::as_connect_patch_writes`]: crate::FieldMap::as_connect_patch_writes
    pub fn as_connect_patch_writes(self) -> ConnectorOffsets {
        let offsets = self.offsets.into_iter();
        ConnectorOffsets {
            offsets: offsets
                .map(|(p, o)| {
                    (
                        p.map(|p| p.as_connect_patch_writes()),
                        o.map(|o| o.as_connect_patch_writes()),
                    )
                })
                .collect(),
        }
    }

    /// The entries as store keys of `connector`, with their offsets (`None` = reset).
    pub fn into_entries(self, connector: &str) -> Vec<(OffsetKey, Option<Offset>)> {
        self.offsets
            .into_iter()
            .map(|(p, o)| {
                let key = match p {
                    Some(p) => OffsetKey::new(connector, p),
                    None => OffsetKey::null_partition(connector),
                };
                (key, o)
            })
            .collect()
    }
}

fn parse_entry(item: Json) -> std::result::Result<OffsetEntry, String> {
    let Json::Object(members) = item else {
        return Err("an entry must be an object {\"partition\":...,\"offset\":...}".into());
    };
    let mut partition = None;
    let mut offset = None;
    for (name, value) in members {
        match name.as_str() {
            "partition" => partition = Some(value),
            "offset" => offset = Some(value),
            other => {
                return Err(format!(
                    "unknown member `{other}` (expected `partition` and `offset`)"
                ));
            }
        }
    }
    let partition = match partition {
        None => return Err("the partition is missing (use null for the null partition)".into()),
        Some(Json::Null) => None,
        Some(Json::Object(m)) => Some(json::to_map(m, "partition")?),
        Some(_) => return Err("the partition must be a JSON object or null".into()),
    };
    let offset = match offset {
        None => return Err("the offset is missing (use null to reset the partition)".into()),
        Some(Json::Null) => None,
        Some(Json::Object(m)) => Some(json::to_map(m, "offset")?),
        Some(_) => return Err("the offset must be a JSON object, or null to reset".into()),
    };
    Ok((partition, offset))
}

/// Appends one `{"partition":...,"offset":...}` entry.
pub fn encode_entry(partition: Option<&Partition>, offset: Option<&Offset>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"partition\":");
    match partition {
        Some(p) => json::encode_map(p, out),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"offset\":");
    match offset {
        Some(o) => json::encode_map(o, out),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// An export of several connectors: `{"connectors":{"name":{"offsets":[...]}}}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetsExport {
    /// Connector names with their offsets, in document order.
    pub connectors: Vec<(String, ConnectorOffsets)>,
}

impl OffsetsExport {
    /// Appends the document to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"connectors\":{");
        for (i, (name, offsets)) in self.connectors.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json::encode_str(name, out);
            out.push(b':');
            offsets.encode(out);
        }
        out.extend_from_slice(b"}}");
    }

    /// Parses either shape: `{"connectors":{...}}`, or `{"offsets":[...]}` for one connector when
    /// `connector` names it. Fails naming what is wrong.
    pub fn parse(bytes: &[u8], connector: Option<&str>) -> Result<Self> {
        let bad = |r: String| Error::InvalidData(r);
        let json = json::parse_strict(bytes).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let Json::Object(members) = json else {
            return Err(bad(
                "expected {\"offsets\":[...]} or {\"connectors\":{...}}".into(),
            ));
        };
        let is_all = members.iter().any(|(n, _)| n == "connectors");
        if !is_all {
            let Some(name) = connector else {
                return Err(bad(
                    "this is one connector's {\"offsets\":[...]}: say which connector with --connector"
                        .into(),
                ));
            };
            let doc = Json::Object(members);
            lacks_offsets(&doc, "the document").map_err(|e| in_connector(name, e))?;
            let one = ConnectorOffsets::from_json(doc, "the document")
                .map_err(|e| in_connector(name, e))?;
            return Ok(OffsetsExport {
                connectors: vec![(name.to_string(), one)],
            });
        }
        let mut out = Vec::new();
        for (name, value) in members {
            if name != "connectors" {
                return Err(bad(format!("unknown member `{name}` beside `connectors`")));
            }
            let Json::Object(conns) = value else {
                return Err(bad(
                    "`connectors` must be an object of connector names".into()
                ));
            };
            for (conn, doc) in conns {
                if connector.is_some_and(|c| c != conn) {
                    continue;
                }
                lacks_offsets(&doc, "its document").map_err(|e| in_connector(&conn, e))?;
                let offsets = ConnectorOffsets::from_json(doc, "its document")
                    .map_err(|e| in_connector(&conn, e))?;
                out.push((conn, offsets));
            }
        }
        if let Some(c) = connector
            && out.is_empty()
        {
            return Err(bad(format!("the document has no connector `{c}`")));
        }
        Ok(OffsetsExport { connectors: out })
    }
}

/// An import names each connector's offsets, even none (`[]`): a document without them is a
/// mistake or a cut file, and with `--replace` it would reset the whole connector.
fn lacks_offsets(doc: &Json, what: &str) -> std::result::Result<(), String> {
    match doc {
        Json::Object(members)
            if !members
                .iter()
                .any(|(n, v)| n == "offsets" && !matches!(v, Json::Null)) =>
        {
            Err(format!(
                "{what} has no `offsets` list (write `\"offsets\":[]` for a connector with none)"
            ))
        }
        _ => Ok(()),
    }
}

/// An error in the document of `connector`: an export holds thousands of entries of many connectors,
/// so `offsets[6999]` alone does not say where to look.
fn in_connector(connector: &str, reason: String) -> Error {
    Error::InvalidData(format!("connector `{connector}`: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_connects_shape() {
        let body = br#"{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":0},"offset":{"kafka_offset":5}},{"partition":null,"offset":null}]}"#;
        let doc = ConnectorOffsets::parse(body).unwrap();
        assert_eq!(doc.offsets.len(), 2);
        assert_eq!(doc.offsets[1], (None, None));
        assert_eq!(doc.to_json().as_bytes(), body);
    }

    #[test]
    fn names_what_is_wrong() {
        for (body, want) in [
            (&b"{"[..], "not valid JSON"),
            (b"[]", "must be a JSON object"),
            (b"{\"offsets\":{}}", "must be an array"),
            (
                b"{\"offsets\":[{}]}",
                "offsets[0]: the partition is missing",
            ),
            (
                b"{\"offsets\":[{\"partition\":{\"a\":[1]},\"offset\":null}]}",
                "field `a`",
            ),
            (
                b"{\"offsets\":[{\"partition\":{},\"offset\":5}]}",
                "the offset must be",
            ),
            (b"{\"offset\":[]}", "unknown member `offset`"),
            // What one reader takes as the last word and another as the first: refused.
            (
                br#"{"offsets":[{"partition":{"f":1}}]}"#,
                "offsets[0]: the offset is missing (use null",
            ),
            (
                br#"{"offsets":[{"partition":{"f":1},"offset":null},{"partition":{"f":2},"offset":{"p":1}},{"partition":{"f":1},"offset":{"p":2}}]}"#,
                "offsets[2]: the same partition as offsets[0]",
            ),
            (
                br#"{"offsets":[{"partition":null,"offset":null},{"partition":null,"offset":null}]}"#,
                "offsets[1]: the same partition as offsets[0]",
            ),
            (
                br#"{"offsets":[{"partition":{"f":1},"offset":null,"offset":{"p":1}}]}"#,
                "member `offset` is given twice",
            ),
            (
                br#"{"offsets":[{"partition":{"f":1,"f":2},"offset":null}]}"#,
                "member `f` is given twice",
            ),
            (
                br#"{"offsets":[{"partition":{"f":1},"offset":{"p":1,"p":2}}]}"#,
                "member `p` is given twice",
            ),
        ] {
            let e = ConnectorOffsets::parse(body).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        // Member order does not make another partition.
        let reordered = br#"{"offsets":[{"partition":{"a":1,"b":2},"offset":null},{"partition":{"b":2,"a":1},"offset":null}]}"#;
        let e = ConnectorOffsets::parse(reordered).unwrap_err();
        assert!(e.contains("the same partition"), "{e}");
        let twice = br#"{"connectors":{"a":{"offsets":[]},"a":{"offsets":[]}}}"#;
        let e = OffsetsExport::parse(twice, None).unwrap_err().to_string();
        assert!(e.contains("member `a` is given twice"), "{e}");
    }

    #[test]
    fn import_errors_name_the_connector_and_the_entry() {
        let good = r#"{"partition":{"f":1},"offset":{"p":2}}"#;
        let other = r#"{"partition":{"f":2},"offset":{"p":2}}"#;
        let bad = r#"{"partition":{"f":3},"offset":5}"#;
        let all = format!(
            r#"{{"connectors":{{"a":{{"offsets":[{good}]}},"orders-source":{{"offsets":[{good},{other},{bad}]}}}}}}"#
        );
        let one = format!(r#"{{"offsets":[{good},{bad}]}}"#);
        for (doc, connector, want) in [
            (
                &all,
                None,
                "connector `orders-source`: offsets[2]: the offset must be",
            ),
            (
                &all,
                Some("orders-source"),
                "connector `orders-source`: offsets[2]: the offset must be",
            ),
            (
                &one,
                Some("orders-source"),
                "connector `orders-source`: offsets[1]: the offset must be",
            ),
            (
                &r#"{"connectors":{"b":{"offsets":{}}}}"#.to_string(),
                None,
                "connector `b`: `offsets` in its document must be an array",
            ),
            (
                &r#"{"connectors":{"keep":{}}}"#.to_string(),
                None,
                "connector `keep`: its document has no `offsets` list",
            ),
            (
                &r#"{"connectors":{"keep":{"offsets":null}}}"#.to_string(),
                None,
                "connector `keep`: its document has no `offsets` list",
            ),
            (
                &"{}".to_string(),
                Some("keep"),
                "connector `keep`: the document has no `offsets` list",
            ),
        ] {
            let e = OffsetsExport::parse(doc.as_bytes(), connector)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn export_shapes() {
        let all = br#"{"connectors":{"a":{"offsets":[{"partition":{"f":1},"offset":{"p":2}}]},"b":{"offsets":[]}}}"#;
        let doc = OffsetsExport::parse(all, None).unwrap();
        let mut out = Vec::new();
        doc.encode(&mut out);
        assert_eq!(out, all);
        assert_eq!(
            OffsetsExport::parse(all, Some("b")).unwrap().connectors[0].0,
            "b"
        );
        let one = br#"{"offsets":[]}"#;
        assert!(OffsetsExport::parse(one, None).is_err());
        assert_eq!(
            OffsetsExport::parse(one, Some("x")).unwrap().connectors[0].0,
            "x"
        );
    }
}
