//! Store URLs: `scheme://location?name=value&...`, parsed and shown with secrets masked.
//! [`open`](crate::open()) picks the backend a URL names.

use std::fmt;

use crate::{Error, Result};

/// A parsed store URL: `scheme://location?name=value&...`.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// `memory`, `rocksdb` or `kafka`.
    pub scheme: String,
    /// Everything between `://` and `?`, percent-decoded.
    pub location: String,
    /// Query parameters in order, percent-decoded.
    pub params: Vec<(String, String)>,
}

/// Parameter names whose values are secrets: never printed. Besides passwords, secrets and tokens:
/// private keys given inline (`ssl.key.pem`) and librdkafka's OAUTHBEARER configuration string.
pub(crate) fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("password")
        || n.contains("secret")
        || n.ends_with(".key")
        || n.contains("key.pem")
        || n.contains("token")
        || n.contains("jaas")
        || n.contains("oauthbearer.config")
}

impl fmt::Display for StoreUrl {
    /// The URL with secret parameters masked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.location)?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            let v = if is_secret(k) { "****" } else { v.as_str() };
            write!(f, "{}{k}={v}", if i == 0 { '?' } else { '&' })?;
        }
        Ok(())
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// Masks the values of secret-looking query parameters in a raw URL (for error messages).
pub fn redact(raw: &str) -> String {
    let Some((base, query)) = raw.split_once('?') else {
        return raw.to_string();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if is_secret(&percent_decode(k).unwrap_or_default()) => {
                format!("{k}=****")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("{base}?{}", parts.join("&"))
}

/// `s` percent-decoded as UTF-8; `None` for bytes that are not UTF-8 or a `%` without two hex digits
/// after it (which `percent-encoding` would pass through: in a store URL it is a mistake to report).
fn percent_decode(s: &str) -> Option<String> {
    let malformed = s.split('%').skip(1).any(|rest| {
        !rest
            .get(..2)
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if malformed {
        return None;
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

impl StoreUrl {
    /// Parses `raw`; fails with a message naming what is wrong.
    pub fn parse(raw: &str) -> Result<StoreUrl> {
        let bad = |reason: String| Error::InvalidUrl {
            url: redact(raw),
            reason,
        };
        let Some((scheme, rest)) = raw.split_once("://") else {
            return Err(bad(
                "expected scheme://..., e.g. memory://, rocksdb:///path or kafka://host:port/topic"
                    .into(),
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'-')
        {
            return Err(bad(format!("`{scheme}` is not a scheme")));
        }
        let (loc, query) = rest.split_once('?').unwrap_or((rest, ""));
        let location =
            percent_decode(loc).ok_or_else(|| bad(format!("bad percent-escape in `{loc}`")))?;
        let mut params = Vec::new();
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let k = percent_decode(k)
                .ok_or_else(|| bad(format!("bad percent-escape in parameter `{k}`")))?;
            let v = percent_decode(v)
                .ok_or_else(|| bad(format!("bad percent-escape in the value of `{k}`")))?;
            if k.is_empty() {
                return Err(bad("a parameter has no name".into()));
            }
            // Which of two values wins is no guess to make for the person who wrote both.
            if params.iter().any(|(n, _): &(String, String)| *n == k) {
                return Err(bad(format!("parameter `{k}` is given twice")));
            }
            params.push((k, v));
        }
        Ok(StoreUrl {
            scheme,
            location,
            params,
        })
    }

    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An error about this URL.
    pub fn error(&self, reason: impl Into<String>) -> Error {
        Error::InvalidUrl {
            url: self.to_string(),
            reason: reason.into(),
        }
    }

    /// Fails when a parameter other than `known` is present.
    pub fn only_params(&self, known: &[&str]) -> Result<()> {
        for (k, _) in &self.params {
            if !known.contains(&k.as_str()) {
                let list = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(self.error(format!(
                    "unknown parameter `{k}` for {} (known: {list})",
                    self.scheme
                )));
            }
        }
        Ok(())
    }

    /// Fails with a clear reason when `reset.policy` or `dead.letter.file` is given to a store
    /// that loads nothing it did not decode when writing it.
    pub(crate) fn refuse_load_policy(&self) -> Result<()> {
        match ["reset.policy", "dead.letter.file"]
            .into_iter()
            .find(|p| self.param(p).is_some())
        {
            Some(p) => Err(self.error(format!(
                "`{p}` (--reset-policy, --dead-letter) is for stores that load records others \
                 wrote (kafka://); a {} store holds only offsets it checked when they were \
                 written (a worker's log has its own: `offsets.reset.policy`)",
                self.scheme
            ))),
            None => Ok(()),
        }
    }

    /// A boolean parameter (`true`/`false`/`1`/`0`), `default` when absent.
    pub fn bool_param(&self, name: &str, default: bool) -> Result<bool> {
        match self.param(name) {
            None => Ok(default),
            Some("true" | "1" | "yes") => Ok(true),
            Some("false" | "0" | "no") => Ok(false),
            Some(v) => Err(self.error(format!(
                "parameter `{name}` must be true or false, not `{v}`"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        let u =
            StoreUrl::parse("kafka://h:9092/t?sasl.password=hunter2&partitions=5&x=%20y").unwrap();
        assert_eq!(u.scheme, "kafka");
        assert_eq!(u.location, "h:9092/t");
        assert_eq!(u.param("x"), Some(" y"));
        let shown = u.to_string();
        assert!(
            !shown.contains("hunter2") && shown.contains("sasl.password=****"),
            "{shown}"
        );
        let e = StoreUrl::parse("kafka://h/t?sasl.password=hunter2&bad=%zz")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && e.contains("percent"), "{e}");
    }
}
