//! `serve`'s console endpoints and its guards (authentication, TLS, cross-site requests, the page's
//! headers), over HTTP against the real binary and a RocksDB store with history.

use std::process::Command;
use std::time::Duration;

use crate::http_util::{Serve, request};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_connect-offsets"));
    c.env_remove("CONNECT_OFFSETS_STORE");
    c
}

fn run_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Status, the named response headers and body of a request with `headers`.
fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, Vec<(String, String)>, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = match body {
        Some(b) => agent.run(
            req.header("Content-Type", "application/json")
                .body(b.to_string())
                .unwrap(),
        ),
        None => agent.run(req.body(()).unwrap()),
    };
    let mut resp = resp.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let hs = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    (status, hs, resp.body_mut().read_to_string().unwrap())
}

fn header<'a>(hs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    hs.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A RocksDB store with history holding connector `src`: `orders` moved 10 → 20, `users` at 5,
/// and 120 partitions `{"n":i}` of connector `big`; returns the URL and the time between the two
/// writes of `orders`.
fn store_with_history(dir: &std::path::Path) -> (String, String) {
    let url = format!("rocksdb://{}?history=7d", dir.join("db").display());
    run_ok(&[
        "set",
        "--store",
        &url,
        "--connector",
        "src",
        "--partition",
        r#"{"table":"orders"}"#,
        "--offset",
        r#"{"pos":10}"#,
    ]);
    std::thread::sleep(Duration::from_millis(50));
    let between = jiff_now();
    std::thread::sleep(Duration::from_millis(50));
    run_ok(&[
        "set",
        "--store",
        &url,
        "--connector",
        "src",
        "--partition",
        r#"{"table":"orders"}"#,
        "--offset",
        r#"{"pos":20}"#,
    ]);
    run_ok(&[
        "set",
        "--store",
        &url,
        "--connector",
        "src",
        "--partition",
        r#"{"table":"users"}"#,
        "--offset",
        r#"{"pos":5}"#,
    ]);
    let items: Vec<String> = (0..120)
        .map(|i| format!(r#"{{"partition":{{"n":{i}}},"offset":{{"o":{i}}}}}"#))
        .collect();
    let file = dir.join("big.json");
    std::fs::write(&file, format!(r#"{{"offsets":[{}]}}"#, items.join(","))).unwrap();
    run_ok(&[
        "import",
        "--store",
        &url,
        "--connector",
        "big",
        "--input",
        file.to_str().unwrap(),
    ]);
    (url, between)
}

/// Now as RFC 3339 (UTC, microseconds).
fn jiff_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    connect_offsets::internal::time::format_rfc3339(d.as_micros() as i64)
}

fn get_offsets(url: &str, connector: &str) -> String {
    run_ok(&["list", "--store", url, "--connector", connector])
        .trim()
        .to_string()
}

#[test]
fn the_console_endpoints_page_search_dry_run_rewind_export_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let (url, between) = store_with_history(dir.path());
    let s = Serve::start(&["--store", &url]);

    // The summary: both connectors, their partition counts, a last write, modifiable.
    let (st, body) = request("GET", &s.url("/connectors?expand=summary"), None);
    assert_eq!(st, 200, "{body}");
    assert!(
        body.contains(r#""big":{"summary":{"partitions":120,"last_write":"20"#),
        "{body}"
    );
    assert!(
        body.contains(r#""src":{"summary":{"partitions":2,"#),
        "{body}"
    );
    assert!(
        body.contains(r#""modifiable":{"ok":true,"reason":null}"#),
        "{body}"
    );

    // Pages, search and sort.
    let (st, body) = request(
        "GET",
        &s.url("/connectors/big/offsets/partitions?page=2&size=50&sort=partition&order=asc"),
        None,
    );
    assert_eq!(st, 200, "{body}");
    assert!(
        body.starts_with(r#"{"total":120,"page":2,"size":50,"partitions":[{"partition":{"n":"#),
        "{body}"
    );
    assert_eq!(
        body.matches(r#""partition":{"n""#).count(),
        20,
        "the last page holds 20: {body}"
    );
    let (_, body) = request(
        "GET",
        &s.url("/connectors/big/offsets/partitions?q=%22n%22%3A11"),
        None,
    );
    assert!(
        body.starts_with(r#"{"total":11,"#),
        "n:11 and n:110..119: {body}"
    );
    let (_, body) = request("GET", &s.url("/connectors/src/offsets/partitions"), None);
    let users = body.find("users").unwrap();
    let orders = body.find("orders").unwrap();
    assert!(users < orders, "newest write first: {body}");
    for bad in ["size=0", "size=1001", "page=x", "sort=offset", "order=up"] {
        let (st, body) = request(
            "GET",
            &s.url(&format!("/connectors/big/offsets/partitions?{bad}")),
            None,
        );
        assert_eq!(st, 400, "{bad}: {body}");
        assert!(
            body.contains(bad.split('=').next().unwrap()),
            "{bad}: {body}"
        );
    }
    let (st, _) = request("GET", &s.url("/connectors/nobody/offsets/partitions"), None);
    assert_eq!(st, 404);

    // Dry runs answer what would change and write nothing.
    let before = get_offsets(&url, "src");
    let patch = r#"{"offsets":[{"partition":{"table":"orders"},"offset":{"pos":99}},{"partition":{"table":"users"},"offset":{"pos":5}}]}"#;
    let (st, body) = request(
        "PATCH",
        &s.url("/connectors/src/offsets?dry_run=true"),
        Some(patch),
    );
    assert_eq!(
        (st, body.as_str()),
        (
            200,
            r#"{"dry_run":true,"changes":[{"partition":{"table":"orders"},"from":{"pos":20},"to":{"pos":99}}]}"#
        ),
        "an unchanged partition is left out"
    );
    let (st, body) = request(
        "DELETE",
        &s.url("/connectors/src/offsets?dry_run=true"),
        None,
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(body.matches(r#""to":null"#).count(), 2, "{body}");
    assert_eq!(get_offsets(&url, "src"), before, "dry runs wrote nothing");
    // A dry run refuses as the real request does.
    let (st, body) = request(
        "PATCH",
        &s.url("/connectors/src/offsets?dry_run=true"),
        Some(r#"{"offsets":[{"partition":{"t":{"x":1}},"offset":{"p":1}}]}"#),
    );
    assert_eq!(st, 400, "{body}");
    let (st, _) = request(
        "PATCH",
        &s.url("/connectors/nobody/offsets?dry_run=true"),
        Some(patch),
    );
    assert_eq!(st, 404);

    // Rewind to between the two writes of `orders`: a dry run, then for real, one partition.
    let rewind = format!(r#"{{"to":"{between}","dry_run":true}}"#);
    let (st, body) = request(
        "POST",
        &s.url("/connectors/src/offsets/rewind"),
        Some(&rewind),
    );
    assert_eq!(st, 200, "{body}");
    assert!(
        body.contains(r#"{"partition":{"table":"orders"},"from":{"pos":20},"to":{"pos":10}}"#),
        "{body}"
    );
    assert!(
        body.contains(r#"{"partition":{"table":"users"},"from":{"pos":5},"to":null}"#),
        "{body}"
    );
    assert_eq!(get_offsets(&url, "src"), before);
    let rewind = format!(r#"{{"to":"{between}","partition":{{"table":"orders"}}}}"#);
    let (st, body) = request(
        "POST",
        &s.url("/connectors/src/offsets/rewind"),
        Some(&rewind),
    );
    assert_eq!(st, 200, "{body}");
    assert!(
        body.contains(r#""message":"rewound 1 partition of connector src"#),
        "{body}"
    );
    let after = get_offsets(&url, "src");
    assert!(
        after.contains(r#"{"partition":{"table":"orders"},"offset":{"pos":10}}"#),
        "{after}"
    );
    assert!(
        after.contains(r#"{"partition":{"table":"users"},"offset":{"pos":5}}"#),
        "{after}"
    );
    for (bad, says) in [
        (r#"{"to":"yesterday"}"#, "to: `yesterday`"),
        (r#"{"dry_run":true}"#, "to is missing"),
        (r#"{"to":"seq:1","when":1}"#, "unknown field `when`"),
        (r#"[1]"#, "must be a JSON object"),
    ] {
        let (st, body) = request("POST", &s.url("/connectors/src/offsets/rewind"), Some(bad));
        assert_eq!(st, 400, "{bad}: {body}");
        assert!(body.contains(says), "{bad}: {body}");
    }

    // Export every connector, import it into a second store: a dry run first, then for real.
    let (st, export) = request("GET", &s.url("/offsets"), None);
    assert_eq!(st, 200, "{export}");
    assert!(
        export.starts_with(r#"{"connectors":{"big":"#),
        "connectors only: {export}"
    );
    assert!(!export.contains("__connect-offsets"), "{export}");
    let other = format!(
        "rocksdb://{}?history=7d",
        dir.path().join("other").display()
    );
    run_ok(&[
        "set",
        "--store",
        &other,
        "--connector",
        "seed",
        "--partition",
        "{}",
        "--offset",
        r#"{"o":1}"#,
    ]);
    let t = Serve::start(&["--store", &other]);
    let (st, body) = request(
        "POST",
        &t.url("/offsets/import?dry_run=true"),
        Some(&export),
    );
    assert_eq!(st, 200, "{body}");
    assert!(body.contains(r#""dry_run":true"#) && body.contains(r#"{"name":"src","changes":[{"partition":{"table":"orders"},"from":null,"to":{"pos":10}}"#), "{body}");
    assert!(
        !body.contains(r#""name":"__"#),
        "the crate's own records are left out: {body}"
    );
    assert_eq!(run_ok(&["connectors", "--store", &other]).trim(), "seed");
    let (st, body) = request("POST", &t.url("/offsets/import"), Some(&export));
    assert_eq!(st, 200, "{body}");
    assert_eq!(get_offsets(&other, "src"), after);
    assert_eq!(get_offsets(&other, "big"), get_offsets(&url, "big"));
    // One connector's document through its own endpoint.
    let (st, body) = request(
        "POST",
        &t.url("/connectors/seed/offsets/import"),
        Some(r#"{"offsets":[{"partition":{},"offset":{"o":2}}]}"#),
    );
    assert_eq!(st, 200, "{body}");
    assert!(get_offsets(&other, "seed").contains(r#"{"o":2}"#));
    let (st, body) = request(
        "POST",
        &t.url("/offsets/import"),
        Some(r#"{"connectors":{"x":{"offsets":[{"partition":{"a":[1]},"offset":{}}]}}}"#),
    );
    assert_eq!(st, 400, "{body}");
    // Orphans need Connect's config topic.
    let (st, body) = request("GET", &s.url("/orphans"), None);
    assert_eq!(st, 400);
    assert!(body.contains("--connect-configs"), "{body}");
}

#[test]
fn the_page_is_built_in_and_sent_with_a_strict_content_security_policy() {
    let s = Serve::start(&["--store", "memory://"]);
    let (st, hs, page) = send("GET", &s.url("/"), &[], None);
    assert_eq!(st, 200);
    assert_eq!(
        header(&hs, "content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = header(&hs, "content-security-policy").expect("a CSP header");
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(header(&hs, "x-frame-options"), Some("DENY"));
    assert_eq!(header(&hs, "x-content-type-options"), Some("nosniff"));
    // Nothing from elsewhere, no inline script, and the token filled in.
    for attr in [" src=\"", " href=\""] {
        for (at, _) in page.match_indices(attr) {
            let value = &page[at + attr.len()..];
            assert!(
                value.starts_with('/') || value.starts_with('#') || value.starts_with("data:"),
                "{}",
                &value[..40.min(value.len())]
            );
        }
    }
    assert!(!page.contains("<script>"), "no inline script");
    assert!(!page.contains("{{CSRF_TOKEN}}"), "the token is filled in");
    assert!(
        page.contains(r#"<script src="/console/console.js""#),
        "{page}"
    );
    for asset in ["/console/console.js", "/console/console.css"] {
        let (st, hs, body) = send("GET", &s.url(asset), &[], None);
        assert_eq!(st, 200, "{asset}");
        assert!(header(&hs, "content-security-policy").is_some(), "{asset}");
        assert!(
            !body.contains("https://") || asset.ends_with(".js"),
            "{asset} loads nothing from elsewhere"
        );
    }
    let (st, _, _) = send("GET", &s.url("/console/nothing.js"), &[], None);
    assert_eq!(st, 404);
}

/// The page's token, from its meta element.
fn csrf_token(s: &Serve, auth: &[(&str, &str)]) -> String {
    let (_, _, page) = send("GET", &s.url("/"), auth, None);
    let at = page
        .find(r#"name="csrf-token" content=""#)
        .expect("the token's meta element")
        + 27;
    page[at..at + page[at..].find('"').unwrap()].to_string()
}

#[test]
fn browsers_change_offsets_only_from_the_console_with_its_token() {
    let s = Serve::start(&["--store", "memory://", "--connector", "c"]);
    let host = s.base.strip_prefix("http://").unwrap().to_string();
    let own = s.base.clone();
    let token = csrf_token(&s, &[]);
    assert_eq!(token.len(), 48, "{token}");
    assert_ne!(
        token,
        csrf_token(&Serve::start(&["--store", "memory://"]), &[]),
        "new at each start"
    );
    let body = r#"{"offsets":[{"partition":{"p":1},"offset":{"o":1}}]}"#;
    let url = s.offsets_url("c");
    // Another site's page, with or without the token.
    for headers in [
        vec![("Origin", "http://evil.example")],
        vec![
            ("Origin", "http://evil.example"),
            ("X-CSRF-Token", token.as_str()),
        ],
        vec![
            ("Sec-Fetch-Site", "cross-site"),
            ("X-CSRF-Token", token.as_str()),
        ],
        vec![("Origin", "null")],
    ] {
        let (st, _, answer) = send("PATCH", &url, &headers, Some(body));
        assert_eq!(st, 403, "{headers:?}: {answer}");
    }
    // The console's own origin without the token, or with a wrong one.
    let (st, _, answer) = send("PATCH", &url, &[("Origin", &own)], Some(body));
    assert_eq!(st, 403, "{answer}");
    assert!(answer.contains("X-CSRF-Token"), "{answer}");
    let (st, _, _) = send(
        "DELETE",
        &url,
        &[("Sec-Fetch-Site", "same-origin"), ("X-CSRF-Token", "0000")],
        None,
    );
    assert_eq!(st, 403);
    assert_eq!(
        request("GET", &url, None),
        (200, r#"{"offsets":[]}"#.into()),
        "nothing written"
    );
    // The console: its origin and its token.
    let (st, _, answer) = send(
        "PATCH",
        &url,
        &[
            ("Origin", &own),
            ("Sec-Fetch-Site", "same-origin"),
            ("X-CSRF-Token", &token),
        ],
        Some(body),
    );
    assert_eq!(st, 200, "{answer}");
    // A script (no Origin, no Sec-Fetch-Site) is not a browser: Connect's API works as before.
    let (st, _, answer) = send("DELETE", &url, &[], None);
    assert_eq!(st, 200, "{answer}");
    // DNS rebinding: a browser at a name that resolves here is refused, even for reads.
    let (st, _, answer) = send(
        "GET",
        &url,
        &[("Host", "evil.example"), ("Sec-Fetch-Site", "same-origin")],
        None,
    );
    assert_eq!(st, 403, "{answer}");
    assert!(answer.contains("not a loopback name"), "{answer}");
    let (st, _, _) = send(
        "GET",
        &url,
        &[
            ("Host", &host.replace("127.0.0.1", "localhost")),
            ("Sec-Fetch-Site", "none"),
        ],
        None,
    );
    assert_eq!(st, 200);
}

#[test]
fn beyond_loopback_the_server_needs_credentials_from_a_file() {
    // Refused at start, saying how to enable it.
    // (Through `timeout`: a server that started instead would never end.)
    let out = Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_connect-offsets")])
        .args(["serve", "--store", "memory://", "--listen", "0.0.0.0:0"])
        .env_remove("CONNECT_OFFSETS_STORE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "refused at start, not served");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("0.0.0.0 is not a loopback address")
            && err.contains("--token-file")
            && err.contains("--basic-auth-file"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let out = bin()
        .args([
            "serve",
            "--store",
            "memory://",
            "--listen",
            "0.0.0.0:0",
            "--token-file",
            short.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16 characters"));

    // A bearer token: the page is public, every API call needs it.
    let token = "s3cret-token-0123456789";
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let s = Serve::start(&[
        "--store",
        "memory://",
        "--connector",
        "c",
        "--token-file",
        file.to_str().unwrap(),
    ]);
    let url = s.offsets_url("c");
    let (st, hs, body) = send("GET", &url, &[], None);
    assert_eq!(st, 401, "{body}");
    assert_eq!(
        header(&hs, "www-authenticate"),
        Some(r#"Bearer realm="connect-offsets""#)
    );
    for wrong in [
        "Bearer s3cret-token-012345678",
        "Bearer s3cret-token-01234567890",
        "Basic czNjcmV0",
    ] {
        let (st, _, _) = send("GET", &url, &[("Authorization", wrong)], None);
        assert_eq!(st, 401, "{wrong}");
    }
    let bearer = format!("Bearer {token}");
    let (st, _, body) = send("GET", &url, &[("Authorization", &bearer)], None);
    assert_eq!((st, body.as_str()), (200, r#"{"offsets":[]}"#));
    let (st, _, _) = send("GET", &s.url("/metrics"), &[], None);
    assert_eq!(st, 401);
    let (st, _, _) = send("GET", &s.url("/"), &[], None);
    assert_eq!(st, 200, "the page asks for the token itself");
    assert!(!csrf_token(&s, &[]).is_empty());

    // Basic credentials: everything needs them, the page too (the browser asks).
    let file = dir.path().join("basic");
    std::fs::write(&file, "admin:pa55word\n").unwrap();
    let s = Serve::start(&[
        "--store",
        "memory://",
        "--connector",
        "c",
        "--basic-auth-file",
        file.to_str().unwrap(),
    ]);
    let (st, hs, _) = send("GET", &s.url("/"), &[], None);
    assert_eq!(st, 401);
    assert_eq!(
        header(&hs, "www-authenticate"),
        Some(r#"Basic realm="connect-offsets""#)
    );
    // base64("admin:pa55word"), and of a wrong password.
    let (st, _, _) = send(
        "GET",
        &s.url("/"),
        &[("Authorization", "Basic YWRtaW46cGE1NXdvcmQ=")],
        None,
    );
    assert_eq!(st, 200);
    let (st, _, _) = send(
        "GET",
        &s.offsets_url("c"),
        &[("Authorization", "Basic YWRtaW46cGE1NXdvcmR4")],
        None,
    );
    assert_eq!(st, 401);
    let out = bin()
        .args([
            "serve",
            "--store",
            "memory://",
            "--token-file",
            "/nonexistent/token",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/token"));
}

#[test]
fn tls_serves_https_with_the_given_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl, from Debian's openssl package");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let s = Serve::start(&[
        "--store",
        "memory://",
        "--connector",
        "c",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(s.base.starts_with("https://127.0.0.1:"), "{}", s.base);
    let curl = |extra: &[&str]| {
        Command::new("curl")
            .args(["-sS", "--max-time", "60", "-o", "-", "-w", " %{http_code}"])
            .args(extra)
            .arg(s.offsets_url("c"))
            .output()
            .unwrap()
    };
    let out = curl(&["--cacert", cert.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        r#"{"offsets":[]} 200"#,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without trusting the certificate the client refuses it; plain HTTP gets no answer.
    assert!(!curl(&[]).status.success());
    let plain = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .arg(s.offsets_url("c").replace("https://", "http://"))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("offsets"));
    // A key without its certificate, and a file that is not PEM.
    let out = bin()
        .args([
            "serve",
            "--store",
            "memory://",
            "--listen",
            "127.0.0.1:0",
            "--tls-key",
            key.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2) && err.contains("--tls-cert <FILE>"),
        "a usage error naming the missing flag: {err}"
    );
    let out = bin()
        .args([
            "serve",
            "--store",
            "memory://",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            key.to_str().unwrap(),
            "--tls-key",
            cert.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--tls-"), "{err}");
}

/// Flags that cannot go together, or need another, are usage errors (exit 2) naming them, before
/// anything is opened; so is a grace period that is not a duration longer than zero.
#[test]
fn serve_flag_misuse_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
    let f = file.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["--token-file", f, "--basic-auth-file", f],
            "--basic-auth-file",
        ),
        (&["--tls-cert", f], "--tls-key"),
        (&["--reset-orphans-after", "10m"], "--connect-configs"),
        (
            &[
                "--reset-orphans-after",
                "0s",
                "--connect-configs",
                "kafka://127.0.0.1:1/c",
            ],
            "longer than zero",
        ),
        (
            &[
                "--reset-orphans-after",
                "ten",
                "--connect-configs",
                "kafka://127.0.0.1:1/c",
            ],
            "not a duration",
        ),
        (
            &[
                "--reset-orphans-after",
                "10",
                "--connect-configs",
                "kafka://127.0.0.1:1/c",
            ],
            "no unit",
        ),
    ];
    for (extra, named) in cases {
        let mut args = vec![
            "60",
            env!("CARGO_BIN_EXE_connect-offsets"),
            "serve",
            "--store",
            "memory://",
            "--listen",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        // Through `timeout`: a server that started instead would never end.
        let out = Command::new("timeout").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(2) && err.contains(named),
            "{extra:?}: exit {:?}, {err}",
            out.status.code()
        );
    }
}

/// A store without `?history=` has no history to show: refused with the CLI's reason (400), not
/// an empty one.
#[test]
fn serve_refuses_the_history_of_a_store_that_keeps_none() {
    let s = Serve::start(&["--store", "memory://", "--connector", "c"]);
    let (st, body) = request("GET", &s.url("/connectors/c/offsets/history"), None);
    assert_eq!(st, 400, "{body}");
    assert!(
        body.contains("holds no history for connector `c`") && body.contains("history=7d"),
        "{body}"
    );
    let (st, _) = request("GET", &s.url("/connectors/nobody/offsets/history"), None);
    assert_eq!(st, 404);
}
