//! Who may talk to `serve`, a server that can reset offsets. On a loopback address anyone on the
//! machine may (as with Connect's own REST API), browsers only through a loopback host name, so a
//! web page whose name resolves to 127.0.0.1 cannot reach it (DNS rebinding). Anywhere else clients
//! authenticate, with a bearer token or basic credentials read from a file. Browsers' requests
//! that change offsets must come from the console's own origin and carry its token, so another
//! site cannot make a visitor's browser send them.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use connect_offsets::{Error, Result};

use super::Reply;
use crate::http::Request;

/// How clients prove who they are.
pub(super) enum Auth {
    /// Nobody does: loopback only.
    None,
    /// `Authorization: Bearer <token>` on every request but the page's files.
    Bearer(String),
    /// `Authorization: Basic …` on every request, the page's included (the browser asks).
    Basic(String),
}

impl Auth {
    /// From `--token-file` (the token on its first line) or `--basic-auth-file` (`user:password`
    /// on its first line).
    pub(super) fn from_files(token: Option<&Path>, basic: Option<&Path>) -> Result<Auth> {
        match (token, basic) {
            (Some(_), Some(_)) => Err(Error::Settings(
                "--token-file and --basic-auth-file: give one way to authenticate, not both".into(),
            )),
            (Some(path), None) => Ok(Auth::Bearer(first_line(path, "--token-file", |l| {
                (l.len() >= 16)
                    .then_some(())
                    .ok_or("a token of at least 16 characters")
            })?)),
            (None, Some(path)) => {
                let line = first_line(path, "--basic-auth-file", |l| match l.split_once(':') {
                    Some((user, password)) if !user.is_empty() && !password.is_empty() => Ok(()),
                    _ => Err("user:password"),
                })?;
                Ok(Auth::Basic(
                    base64::engine::general_purpose::STANDARD.encode(line),
                ))
            }
            (None, None) => Ok(Auth::None),
        }
    }

    /// Refuses a request without the credentials; `Ok` when none are needed.
    pub(super) fn check(
        &self,
        request: &Request,
        page_file: bool,
    ) -> std::result::Result<(), Reply> {
        let given = request.header("authorization").unwrap_or("");
        let (scheme, expected) = match self {
            Auth::None => return Ok(()),
            Auth::Bearer(_) if page_file => return Ok(()),
            Auth::Bearer(token) => ("Bearer", token),
            Auth::Basic(encoded) => ("Basic", encoded),
        };
        let presented = given
            .split_once(' ')
            .filter(|(s, _)| s.eq_ignore_ascii_case(scheme))
            .map(|(_, v)| v.trim());
        if presented.is_some_and(|p| same(p.as_bytes(), expected.as_bytes())) {
            return Ok(());
        }
        let mut r = Reply::error(
            401,
            &format!(
                "this server needs {scheme} authentication (the credentials given to it with --{})",
                match self {
                    Auth::Basic(_) => "basic-auth-file",
                    _ => "token-file",
                }
            ),
        );
        r.headers.push((
            "www-authenticate",
            format!("{scheme} realm=\"connect-offsets\""),
        ));
        Err(r)
    }
}

/// The first line of `path`, checked by `valid` (which says what the line should be).
fn first_line(
    path: &Path,
    flag: &str,
    valid: impl Fn(&str) -> std::result::Result<(), &'static str>,
) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    let line = text.lines().next().unwrap_or("").trim().to_string();
    valid(&line).map_err(|what| {
        Error::Settings(format!(
            "{flag} {}: its first line must be {what}",
            path.display()
        ))
    })?;
    Ok(line)
}

/// Compares without stopping at the first difference (a token's prefix cannot be timed out).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Refuses to listen beyond loopback without authentication, saying how to enable it.
pub(super) fn check_listen(listen: &str, auth: &Auth) -> Result<()> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| Error::Settings(format!("--listen {listen}: {e}")))?
        .collect();
    let open = addrs.iter().find(|a| !a.ip().is_loopback());
    match (open, auth) {
        (Some(addr), Auth::None) => Err(Error::Settings(format!(
            "--listen {listen}: {} is not a loopback address, and this server can change offsets: \
             other machines may use it only when they authenticate. Give --token-file FILE (a \
             token on its first line) or --basic-auth-file FILE (user:password on its first \
             line), and --tls-cert/--tls-key to encrypt; or listen on 127.0.0.1",
            addr.ip()
        ))),
        _ => Ok(()),
    }
}

/// Refuses a request a browser sent from elsewhere: with no authentication, one whose `Host` is
/// not a loopback name (a rebound DNS name); one that changes offsets from another origin, or
/// from the console without its token.
pub(super) fn check_origin(
    request: &Request,
    auth: &Auth,
    token: &str,
) -> std::result::Result<(), Reply> {
    let host = request.header("host").unwrap_or("");
    let origin = request.header("origin");
    let fetch_site = request.header("sec-fetch-site");
    // A browser says where a request comes from; a script (curl, a Connect client) does not, and
    // no web page can make it send anything.
    let browser = origin.is_some() || fetch_site.is_some();
    if browser && matches!(auth, Auth::None) && !loopback_host(host) {
        return Err(Reply::error(
            403,
            &format!(
                "Host {host} is not a loopback name: without authentication this server answers browsers only at 127.0.0.1, [::1] and localhost"
            ),
        ));
    }
    if matches!(request.method.as_str(), "GET" | "HEAD" | "OPTIONS") {
        return Ok(());
    }
    if fetch_site == Some("cross-site") {
        return Err(Reply::error(
            403,
            "a cross-site request cannot change offsets",
        ));
    }
    if let Some(origin) = origin {
        let own = origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host));
        if !own {
            return Err(Reply::error(
                403,
                &format!(
                    "a request from {origin} cannot change offsets here: only the console served by this server can"
                ),
            ));
        }
    }
    let carried = request.header("x-csrf-token").unwrap_or("");
    if browser && !same(carried.as_bytes(), token.as_bytes()) {
        return Err(Reply::error(
            403,
            "a browser's request that changes offsets must carry the console's X-CSRF-Token header (reload the console)",
        ));
    }
    Ok(())
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A fresh random token, hex.
pub(super) fn random_token() -> Result<String> {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Settings(format!("no random bytes for the console's token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `--tls-cert` and `--tls-key`: both or neither.
pub(super) fn tls_paths(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> Result<Option<(PathBuf, PathBuf)>> {
    match (cert, key) {
        (Some(c), Some(k)) => Ok(Some((c, k))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(Error::Settings(
            "--tls-cert needs --tls-key (the certificate's private key, PEM)".into(),
        )),
        (None, Some(_)) => Err(Error::Settings(
            "--tls-key needs --tls-cert (the certificate chain, PEM)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:8083",
            "127.0.0.1:1",
            "127.1.2.3",
            "[::1]:8083",
            "[::1]",
        ] {
            assert!(loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:8083",
            "10.0.0.1:80",
            "",
            "localhost.evil.example",
            "[::2]:1",
        ] {
            assert!(!loopback_host(h), "{h}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
