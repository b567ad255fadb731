//! Which consumer group holds which sink connector's offsets: `group=` of a `kafka-group://` URL,
//! a template with `{connector}` (default `connect-{connector}`, Connect's own naming), or one fixed
//! group (a connector's `consumer.override.group.id`) with `connector=` naming its connector.

use crate::{Error, Result};

/// Connect's default: `connect-<connector name>`.
pub const DEFAULT_TEMPLATE: &str = "connect-{connector}";
const PLACEHOLDER: &str = "{connector}";

/// The mapping between connector names and group ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupNames {
    /// `prefix<connector>suffix`.
    Template {
        /// Before `{connector}`.
        prefix: String,
        /// After `{connector}`.
        suffix: String,
    },
    /// One group, of one connector.
    Fixed {
        /// The group id.
        group: String,
        /// The connector whose group it is.
        connector: String,
    },
}

impl GroupNames {
    /// From the URL's `group=` and `connector=` (either may be absent).
    pub fn new(group: Option<&str>, connector: Option<&str>) -> Result<GroupNames> {
        let bad = |r: String| Error::Settings(format!("kafka-group store: {r}"));
        let template = group.unwrap_or(DEFAULT_TEMPLATE);
        if template.is_empty() {
            return Err(bad("`group` must not be empty".into()));
        }
        match template.matches(PLACEHOLDER).count() {
            0 => {
                let Some(c) = connector.filter(|c| !c.is_empty()) else {
                    return Err(bad(format!(
                        "group `{template}` has no `{PLACEHOLDER}`: name its connector with `connector=NAME` (or use a template such as group=connect-{PLACEHOLDER})"
                    )));
                };
                Ok(GroupNames::Fixed {
                    group: template.to_string(),
                    connector: c.to_string(),
                })
            }
            1 => {
                if connector.is_some() {
                    return Err(bad(format!(
                        "`connector=` goes with a fixed group; group `{template}` is a template"
                    )));
                }
                let (prefix, suffix) = template.split_once(PLACEHOLDER).unwrap_or_default();
                Ok(GroupNames::Template {
                    prefix: prefix.to_string(),
                    suffix: suffix.to_string(),
                })
            }
            _ => Err(bad(format!(
                "group `{template}` holds `{PLACEHOLDER}` more than once"
            ))),
        }
    }

    /// The group of `connector`.
    pub fn group_of(&self, connector: &str) -> Result<String> {
        if connector.is_empty() {
            return Err(Error::InvalidData(
                "a sink connector's name must not be empty".into(),
            ));
        }
        match self {
            GroupNames::Template { prefix, suffix } => Ok(format!("{prefix}{connector}{suffix}")),
            GroupNames::Fixed {
                group,
                connector: c,
            } if c == connector => Ok(group.clone()),
            GroupNames::Fixed {
                group,
                connector: c,
            } => Err(Error::InvalidData(format!(
                "this kafka-group store holds group `{group}` of connector `{c}` only, not connector `{connector}`"
            ))),
        }
    }

    /// The connector whose group `group` is, if it follows the naming.
    pub fn connector_of(&self, group: &str) -> Option<String> {
        match self {
            GroupNames::Template { prefix, suffix } => group
                .strip_prefix(prefix.as_str())
                .and_then(|rest| rest.strip_suffix(suffix.as_str()))
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            GroupNames::Fixed {
                group: g,
                connector,
            } => (g == group).then(|| connector.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_and_fixed() {
        let t = GroupNames::new(None, None).unwrap();
        assert_eq!(t.group_of("orders-sink").unwrap(), "connect-orders-sink");
        assert_eq!(
            t.connector_of("connect-orders-sink").as_deref(),
            Some("orders-sink")
        );
        assert_eq!(t.connector_of("connect-"), None);
        assert_eq!(t.connector_of("other"), None);
        let t = GroupNames::new(Some("team-{connector}-v2"), None).unwrap();
        assert_eq!(t.group_of("x").unwrap(), "team-x-v2");
        assert_eq!(t.connector_of("team-x-v2").as_deref(), Some("x"));
        let f = GroupNames::new(Some("my-group"), Some("orders-sink")).unwrap();
        assert_eq!(f.group_of("orders-sink").unwrap(), "my-group");
        assert!(
            f.group_of("other")
                .unwrap_err()
                .to_string()
                .contains("only, not connector `other`")
        );
        assert_eq!(f.connector_of("my-group").as_deref(), Some("orders-sink"));
    }

    #[test]
    fn names_what_is_wrong() {
        for (g, c, want) in [
            (
                Some("my-group"),
                None,
                "name its connector with `connector=NAME`",
            ),
            (Some("{connector}-{connector}"), None, "more than once"),
            (Some(""), None, "must not be empty"),
            (None, Some("x"), "goes with a fixed group"),
        ] {
            let e = GroupNames::new(g, c).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
