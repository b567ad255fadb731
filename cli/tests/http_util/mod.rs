//! `connect-offsets serve` as a child process and one HTTP call: what the REST tests share
//! (`cli/tests/tool/rest.rs`, `cli/tests/tool_kafka/operate_kafka.rs`, `cli/tests/tool_connect/connect_interop.rs`).
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `connect-offsets serve` on an ephemeral port, killed when dropped.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:<port>`, as the server printed it.
    pub base: String,
}

impl Serve {
    /// Starts `connect-offsets serve --listen 127.0.0.1:0 ARGS` (without `CONNECT_OFFSETS_STORE`
    /// from the environment) and waits for the address it prints on its first line.
    pub fn start(args: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("CONNECT_OFFSETS_STORE")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn connect-offsets serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the first line of connect-offsets serve");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line `{line}`"))
            .to_string();
        Serve { child, base }
    }

    /// `base` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The offsets endpoint of `connector`.
    pub fn offsets_url(&self, connector: &str) -> String {
        self.url(&format!("/connectors/{connector}/offsets"))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Status, content type and body of one request. A body is sent as `application/json`; error
/// statuses are answers, not errors; a request that gets no answer within 60 s panics.
pub fn call(method: &str, url: &str, body: Option<&str>) -> (u16, String, String) {
    let a: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let json = "application/json";
    let resp = match (method, body) {
        ("GET", None) => a.get(url).call(),
        ("DELETE", None) => a.delete(url).call(),
        ("PUT", None) => a.put(url).send_empty(),
        ("PUT", Some(b)) => a.put(url).header("Content-Type", json).send(b),
        ("POST", Some(b)) => a.post(url).header("Content-Type", json).send(b),
        ("PATCH", None) => a.patch(url).send_empty(),
        ("PATCH", Some(b)) => a.patch(url).header("Content-Type", json).send(b),
        _ => panic!("no test sends {method} with body {body:?}"),
    };
    let mut resp = resp.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = resp.body_mut().read_to_string().unwrap();
    (status, ctype, text)
}

/// Status and body of one request (see [`call`]).
pub fn request(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    let (status, _, text) = call(method, url, body);
    (status, text)
}
