//! `docs/configuration.md` names every URL parameter and property the parsers accept: the names
//! are read from the parsers' own match arms and parameter lists, so a name added to a parser
//! without a line in the reference fails here.

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The names in the first column of the tables of the reference's section `## {heading}`.
fn documented(doc: &str, heading: &str) -> BTreeSet<String> {
    let start = doc
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("docs/configuration.md has no section `## {heading}`"));
    let rest = &doc[start + heading.len() + 5..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The body of the function `signature` starts in `source` (to its closing brace at column 4 or 0).
fn body<'a>(source: &'a str, signature: &str) -> &'a str {
    let start = source
        .find(signature)
        .unwrap_or_else(|| panic!("no `{signature}` in the parser's source"));
    let rest = &source[start..];
    let end = rest
        .find("\n    }\n")
        .or_else(|| rest.find("\n}\n"))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The string literals of the outermost match arms (`"a" | "b" =>`) in `code`: those indented as
/// the first one (a nested match on a value is deeper).
fn arms(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut depth = None;
    for line in code.lines() {
        let indent = line.len() - line.trim_start().len();
        let line = line.trim();
        if !line.starts_with('"') || depth.is_some_and(|d| d != indent) {
            continue;
        }
        let Some(pattern) = line.split_once("=>").map(|(p, _)| p.trim()) else {
            continue;
        };
        let alternatives: Vec<&str> = pattern.split('|').map(str::trim).collect();
        if alternatives
            .iter()
            .all(|a| a.len() > 2 && a.starts_with('"') && a.ends_with('"'))
        {
            depth = Some(indent);
            out.extend(alternatives.iter().map(|a| a[1..a.len() - 1].to_string()));
        }
    }
    out
}

/// The names of `only_params(&[...])` calls in `code`.
fn only_params(code: &str) -> BTreeSet<String> {
    code.match_indices("only_params(&[")
        .flat_map(|(i, _)| {
            let list = &code[i + "only_params(&[".len()..];
            let list = &list[..list.find(']').unwrap()];
            list.split(',')
                .map(|n| n.trim().trim_matches('"').to_string())
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn missing(accepted: &BTreeSet<String>, documented: &BTreeSet<String>) -> Vec<String> {
    accepted.difference(documented).cloned().collect()
}

#[test]
fn every_parameter_and_property_the_parsers_accept_is_in_the_reference() {
    let doc = read("docs/configuration.md");
    // Every store but a consumer group takes history's parameters (`open`).
    let history: BTreeSet<String> = ["history", "history.max.bytes"].map(String::from).into();
    let open = read("src/open.rs");

    let mut memory = only_params(body(&open, "\"memory\" =>"));
    memory.extend(history.clone());
    let mut rocksdb = only_params(body(&open, "fn open_rocksdb"));
    rocksdb.extend(history.clone());
    assert!(
        rocksdb.contains("sync"),
        "the scan found RocksDB's parameters: {rocksdb:?}"
    );

    let kafka_config = read("src/store/kafka/config.rs");
    let mut kafka = arms(body(&kafka_config, "pub fn from_url"));
    assert!(
        kafka.contains("partitions"),
        "the scan found kafka's parameters: {kafka:?}"
    );
    kafka.extend(history.clone());

    let group = arms(body(
        &read("src/store/kafka/group/mod.rs"),
        "for (k, v) in &url.params",
    ));
    assert!(
        group.contains("timeout.ms"),
        "the scan found the group's parameters: {group:?}"
    );

    let properties = arms(body(&read("src/buffer/config.rs"), "pub fn set("));
    assert!(
        properties.contains("offsets.durability"),
        "the scan found the properties: {properties:?}"
    );

    let mut gaps = Vec::new();
    for (heading, accepted) in [
        ("memory://", memory),
        ("rocksdb://", rocksdb),
        ("kafka://", kafka),
        ("kafka-group://", group),
        ("Properties", properties),
    ] {
        let names = missing(&accepted, &documented(&doc, heading));
        if !names.is_empty() {
            gaps.push(format!("{heading}: {names:?}"));
        }
    }
    assert!(
        gaps.is_empty(),
        "accepted by a parser but missing from docs/configuration.md: {gaps:?}"
    );
}
