//! A small synchronous W3C WebDriver client: Debian's headless Chromium driven through its
//! chromedriver, for the console's browser tests (`cli/tests/tool_browser/`) and benchmark
//! (`cli/benches/console.rs`).
//!
//! [`Browser::start`] starts `chromedriver --port=N` on a free port, waits for its `/status` to say
//! ready and opens one session (Chromium `--headless=new --no-sandbox --disable-gpu
//! --window-size=1280,900`); dropping the [`Browser`] closes the session (and with it Chromium) and
//! kills chromedriver. A missing Chromium or chromedriver is a failure that says how to install
//! them (`scripts/setup` does), never a skipped test.
//!
//! Before any script of a page runs, every document gets a recorder (Chrome DevTools'
//! `Page.addScriptToEvaluateOnNewDocument` through chromedriver) of Content-Security-Policy
//! violations and of uncaught errors: [`Browser::page_problems`] returns them, with the browser
//! console's errors.
#![allow(dead_code)]

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long a wait for the page lasts before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(100);

/// WebDriver's key codes (the W3C spec's table), for [`Element::send_keys`] and [`Browser::press`].
pub mod keys {
    pub const TAB: &str = "\u{E004}";
    pub const ENTER: &str = "\u{E007}";
    pub const ESCAPE: &str = "\u{E00C}";
    pub const SHIFT: &str = "\u{E008}";
    pub const CONTROL: &str = "\u{E009}";
    pub const BACKSPACE: &str = "\u{E003}";
    pub const SPACE: &str = "\u{E00D}";
    pub const ARROW_DOWN: &str = "\u{E015}";
    pub const ARROW_UP: &str = "\u{E013}";
}

thread_local! {
    /// How many [`Browser::wait_for`] calls this thread is inside: there, an element gone stale
    /// (the page re-rendered it) means "not yet", and the condition is asked again.
    static WAITING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The unwind payload of a stale element inside a wait (no panic message: it is retried).
struct StaleInWait;

/// W3C's name of an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// What each new document records before its own scripts run: CSP violations and uncaught errors.
const RECORDER: &str = r#"(() => {
  const problems = [];
  Object.defineProperty(window, '__consoleTestProblems', { value: problems });
  document.addEventListener('securitypolicyviolation', e => problems.push(
    'CSP violation: ' + e.violatedDirective + ' blocked ' + (e.blockedURI || '(inline)') +
    ' at ' + (e.sourceFile || '') + ':' + e.lineNumber + ' ' + (e.sample || '')));
  window.addEventListener('error', e => { if (e.message) problems.push(
    'uncaught error: ' + e.message + ' at ' + e.filename + ':' + e.lineno); }, true);
  window.addEventListener('unhandledrejection', e => problems.push(
    'unhandled rejection: ' + (e.reason && (e.reason.stack || e.reason.message) || e.reason)));
})();"#;

/// A WebDriver error answer: `error` is W3C's code (`no such element`, `element not interactable`...).
#[derive(Debug, Clone)]
pub struct WdError {
    pub status: u16,
    pub error: String,
    pub message: String,
}

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.error, self.status, self.message)
    }
}

/// One chromedriver and one Chromium session.
pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:<port>`.
    driver_url: String,
    session: String,
    agent: ureq::Agent,
    /// Where this browser's downloads land.
    downloads: tempfile::TempDir,
    /// Where failing waits save a screenshot (none: not saved).
    pub failure_dir: Option<PathBuf>,
}

/// An element of the current page.
#[derive(Clone)]
pub struct Element<'a> {
    b: &'a Browser,
    pub id: String,
}

impl std::fmt::Debug for Element<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Element({})", self.describe())
    }
}

/// Panics unless Chromium and chromedriver are installed, saying how to install them.
pub fn require_chromium() {
    for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
        assert!(
            Path::new(path).exists(),
            "{path} is missing (Debian package {package}): the console's browser tests drive \
             Debian's headless Chromium through chromedriver; install them with \
             `apt-get install chromium chromium-driver` (`source scripts/setup` does)"
        );
    }
}

/// Panics with `what` and the error; inside a wait, an element gone stale unwinds quietly so
/// that the wait asks again.
fn fail(e: WdError, what: String) -> ! {
    if e.error == "stale element reference" && WAITING.get() > 0 {
        std::panic::resume_unwind(Box::new(StaleInWait))
    }
    panic!("{what}: {e}")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free local port")
        .port()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session (see the module's documentation).
    pub fn start() -> Browser {
        require_chromium();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(300)))
            .build()
            .into();
        // A port taken between `free_port` and chromedriver's bind: try again with another.
        let mut last_err = String::new();
        for _ in 0..5 {
            let port = free_port();
            let log = tempfile::NamedTempFile::new().unwrap();
            let mut driver = Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log.reopen().unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("start {CHROMEDRIVER}: {e}"));
            let driver_url = format!("http://127.0.0.1:{port}");
            let deadline = Instant::now() + TIMEOUT;
            let ready = loop {
                if let Ok(Some(status)) = driver.try_wait() {
                    let mut text = String::new();
                    let _ = log.reopen().unwrap().read_to_string(&mut text);
                    last_err = format!("chromedriver exited with {status}: {text}");
                    break false;
                }
                if let Ok(mut r) = agent.get(&format!("{driver_url}/status")).call() {
                    let body = r.body_mut().read_to_string().unwrap_or_default();
                    if serde_json::from_str::<Value>(&body)
                        .ok()
                        .and_then(|v| v["value"]["ready"].as_bool())
                        == Some(true)
                    {
                        break true;
                    }
                }
                if Instant::now() > deadline {
                    let _ = driver.kill();
                    let _ = driver.wait();
                    panic!("chromedriver on port {port} was not ready within {TIMEOUT:?}");
                }
                std::thread::sleep(POLL);
            };
            if !ready {
                let _ = driver.wait();
                continue;
            }
            let downloads = tempfile::tempdir().unwrap();
            let caps = json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--window-size=1280,900", "--disable-dev-shm-usage"],
                    "prefs": {
                        "download.default_directory": downloads.path().to_str().unwrap(),
                        "download.prompt_for_download": false,
                    },
                },
                "goog:loggingPrefs": {"browser": "ALL"},
            }}});
            let mut b = Browser {
                driver,
                driver_url,
                session: String::new(),
                agent,
                downloads,
                failure_dir: None,
            };
            let v = b
                .raw("POST", "/session", Some(caps))
                .unwrap_or_else(|e| panic!("chromedriver refused a Chromium session: {e}"));
            b.session = v["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("no sessionId in {v}"))
                .to_string();
            b.cmd(
                "POST",
                "/timeouts",
                json!({"script": 120_000, "pageLoad": 120_000, "implicit": 0}),
            );
            b.cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": RECORDER}),
            );
            b.cdp(
                "Browser.setDownloadBehavior",
                json!({"behavior": "allow",
                       "downloadPath": b.downloads.path().to_str().unwrap(),
                       "eventsEnabled": false}),
            );
            return b;
        }
        panic!("could not start chromedriver: {last_err}");
    }

    /// A WebDriver request: the answer's `value`, or its error.
    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, WdError> {
        let url = format!("{}{path}", self.driver_url);
        let resp = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            "POST" => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json; charset=utf-8")
                .send(body.unwrap_or_else(|| json!({})).to_string()),
            _ => unreachable!("{method}"),
        };
        let mut resp = resp.unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: reading the answer: {e}"));
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}: {text}"));
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if status == 200 {
            Ok(value)
        } else {
            Err(WdError {
                status,
                error: value["error"].as_str().unwrap_or("?").to_string(),
                message: value["message"].as_str().unwrap_or(&text).to_string(),
            })
        }
    }

    /// A command of this session (`path` after `/session/{id}`); errors as `Err`.
    pub fn try_cmd(&self, method: &str, path: &str, body: Value) -> Result<Value, WdError> {
        let body = if method == "POST" { Some(body) } else { None };
        self.raw(method, &format!("/session/{}{path}", self.session), body)
    }

    /// A command of this session; panics on an error answer (inside a wait, an element gone
    /// stale makes the wait ask its condition again).
    pub fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        match self.try_cmd(method, path, body) {
            Ok(v) => v,
            Err(e) => fail(e, format!("WebDriver {method} {path}")),
        }
    }

    /// A Chrome DevTools command, through chromedriver's `goog/cdp/execute`.
    pub fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            json!({"cmd": cmd, "params": params}),
        )
    }

    /// Loads `url` (and waits for its load event).
    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", json!({ "url": url }));
    }

    pub fn refresh(&self) {
        self.cmd("POST", "/refresh", json!({}));
    }

    pub fn current_url(&self) -> String {
        self.cmd("GET", "/url", Value::Null)
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn title(&self) -> String {
        self.cmd("GET", "/title", Value::Null)
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Runs `script` (a function body; `arguments` are `args`, elements as [`Element::json`]) and
    /// returns what it returns (a returned promise is awaited).
    pub fn exec(&self, script: &str, args: Vec<Value>) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
    }

    /// [`Browser::exec`] returning an element.
    pub fn exec_element(&self, script: &str, args: Vec<Value>) -> Option<Element<'_>> {
        let v = self.exec(script, args);
        v.get(ELEMENT_KEY)
            .and_then(|id| id.as_str())
            .map(|id| Element {
                b: self,
                id: id.to_string(),
            })
    }

    /// The element a script returned (a W3C element reference).
    pub fn element(&self, v: &Value) -> Element<'_> {
        Element {
            b: self,
            id: v[ELEMENT_KEY]
                .as_str()
                .unwrap_or_else(|| panic!("not an element reference: {v}"))
                .to_string(),
        }
    }

    /// The first element matching `css` now, if any.
    pub fn try_find(&self, css: &str) -> Option<Element<'_>> {
        match self.try_cmd(
            "POST",
            "/element",
            json!({"using": "css selector", "value": css}),
        ) {
            Ok(v) => Some(self.element(&v)),
            Err(e) if e.error == "no such element" => None,
            Err(e) => panic!("find `{css}`: {e}"),
        }
    }

    /// The first element matching `css`, waiting for it up to [`TIMEOUT`].
    pub fn find(&self, css: &str) -> Element<'_> {
        self.wait_until(&format!("an element `{css}`"), || self.try_find(css))
    }

    /// Every element matching `css` now.
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let v = self.cmd(
            "POST",
            "/elements",
            json!({"using": "css selector", "value": css}),
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| self.element(e))
            .collect()
    }

    /// The first element matching `css` that is displayed, waiting for it.
    pub fn find_visible(&self, css: &str) -> Element<'_> {
        self.wait_until(&format!("a displayed element `{css}`"), || {
            self.find_all(css).into_iter().find(|e| e.displayed())
        })
    }

    /// The focused element (`document.activeElement`).
    pub fn active(&self) -> Element<'_> {
        let v = self.cmd("GET", "/element/active", Value::Null);
        self.element(&v)
    }

    /// Presses and releases each key of `keys` (a text, or [`keys`] codes) as a keyboard does,
    /// wherever the focus is.
    pub fn press(&self, keys: &str) {
        let mut actions = Vec::new();
        for c in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": c.to_string()}));
            actions.push(json!({"type": "keyUp", "value": c.to_string()}));
        }
        self.cmd(
            "POST",
            "/actions",
            json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]}),
        );
        let _ = self.try_cmd("DELETE", "/actions", Value::Null);
    }

    /// Shift+Tab.
    pub fn press_shift_tab(&self) {
        self.press_with(keys::SHIFT, keys::TAB);
    }

    /// `key` pressed while `modifier` is held (Control+a: [`keys::CONTROL`], "a").
    pub fn press_with(&self, modifier: &str, key: &str) {
        let actions = json!([
            {"type": "keyDown", "value": modifier},
            {"type": "keyDown", "value": key},
            {"type": "keyUp", "value": key},
            {"type": "keyUp", "value": modifier},
        ]);
        self.cmd(
            "POST",
            "/actions",
            json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]}),
        );
        let _ = self.try_cmd("DELETE", "/actions", Value::Null);
    }

    /// Waits until `cond` returns something (polling every [`POLL`], up to [`TIMEOUT`]); on
    /// timeout, saves a screenshot in [`Browser::failure_dir`] and panics naming `what`.
    pub fn wait_until<T>(&self, what: &str, cond: impl FnMut() -> Option<T>) -> T {
        self.wait_for(what, TIMEOUT, cond)
    }

    /// [`Browser::wait_until`] with another timeout.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut cond: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            WAITING.set(WAITING.get() + 1);
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut cond));
            WAITING.set(WAITING.get() - 1);
            match got {
                Ok(Some(t)) => return t,
                Ok(None) => {}
                Err(payload) if payload.is::<StaleInWait>() => {}
                Err(payload) => std::panic::resume_unwind(payload),
            }
            if Instant::now() > deadline {
                let mut shot = String::new();
                if let Some(dir) = &self.failure_dir {
                    let name: String = what
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                        .take(60)
                        .collect();
                    let path = dir.join(format!("timeout-{name}.png"));
                    if std::fs::create_dir_all(dir).is_ok() && self.try_screenshot(&path).is_ok() {
                        shot = format!("\nscreenshot: {}", path.display());
                    }
                }
                let body = self
                    .try_cmd(
                        "POST",
                        "/execute/sync",
                        json!({"script": "return document.body ? document.body.innerText : ''", "args": []}),
                    )
                    .map(|v| v.as_str().unwrap_or("").chars().take(3000).collect::<String>())
                    .unwrap_or_default();
                panic!(
                    "waited {timeout:?} for {what}; it did not happen.{shot}\nproblems: {:?}\npage text:\n{body}",
                    self.page_problems()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// A PNG of the viewport.
    pub fn png(&self) -> Result<Vec<u8>, WdError> {
        let v = self.try_cmd("GET", "/screenshot", Value::Null)?;
        Ok(base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .expect("a screenshot in base64"))
    }

    fn try_screenshot(&self, path: &Path) -> Result<(), WdError> {
        let png = self.png()?;
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        Ok(())
    }

    /// Saves a PNG of the viewport at `path` (creating its directory) and prints the path.
    pub fn screenshot(&self, path: &Path) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        self.try_screenshot(path)
            .unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
        println!("screenshot: {}", path.display());
    }

    /// The browser console's entries since the last call (chromedriver's log endpoint):
    /// (level, message).
    pub fn console_log(&self) -> Vec<(String, String)> {
        match self.try_cmd("POST", "/se/log", json!({"type": "browser"})) {
            Ok(v) => v
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| {
                            (
                                e["level"].as_str().unwrap_or("").to_string(),
                                e["message"].as_str().unwrap_or("").to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// What went wrong in the current document so far: CSP violations and uncaught errors it
    /// recorded, and the console's `SEVERE` entries (those since the last call) that are CSP
    /// violations or errors of scripts. Failed requests (an HTTP 4xx the page handles) are left out.
    pub fn page_problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .try_cmd(
                "POST",
                "/execute/sync",
                json!({"script": "return window.__consoleTestProblems ? Array.from(window.__consoleTestProblems) : []", "args": []}),
            )
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect();
        for (level, msg) in self.console_log() {
            let csp = msg.contains("Content Security Policy") || msg.contains("Refused to");
            let failed_request = msg.contains("Failed to load resource");
            if csp || (level == "SEVERE" && !failed_request) {
                out.push(format!("console {level}: {msg}"));
            }
        }
        out
    }

    /// The CSP violations the current document recorded, and those the console reported.
    pub fn csp_violations(&self) -> Vec<String> {
        self.page_problems()
            .into_iter()
            .filter(|p| {
                p.contains("CSP")
                    || p.contains("Content Security Policy")
                    || p.contains("Refused to")
            })
            .collect()
    }

    /// The directory downloads land in.
    pub fn downloads(&self) -> &Path {
        self.downloads.path()
    }

    /// Waits for a finished download whose name `name_ok` accepts; returns its path.
    pub fn wait_download(&self, name_ok: impl Fn(&str) -> bool) -> PathBuf {
        self.wait_until("a finished download", || {
            std::fs::read_dir(self.downloads.path())
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().to_string();
                    !n.ends_with(".crdownload") && !n.starts_with(".") && name_ok(&n)
                })
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closing the session ends Chromium; killing chromedriver alone would leave it running.
        if !self.session.is_empty() {
            let _ = self.raw("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl<'a> Element<'a> {
    /// The W3C JSON reference, as a script argument.
    pub fn json(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }

    fn path(&self, rest: &str) -> String {
        format!("/element/{}{rest}", self.id)
    }

    pub fn try_click(&self) -> Result<(), WdError> {
        self.b
            .try_cmd("POST", &self.path("/click"), json!({}))
            .map(|_| ())
    }

    /// Clicks it as a mouse does (it must be visible and enabled; scrolled into view first).
    pub fn click(&self) {
        if let Err(e) = self.try_click() {
            fail(e.clone(), format!("click {}", self.describe()));
        }
    }

    /// Types `text` into it (focusing it first); for a file input, `text` is a file's path.
    pub fn send_keys(&self, text: &str) {
        self.b
            .try_cmd("POST", &self.path("/value"), json!({ "text": text }))
            .unwrap_or_else(|e| fail(e, format!("send keys to {}", self.describe())));
    }

    /// Empties an input or textarea.
    pub fn clear(&self) {
        self.b
            .try_cmd("POST", &self.path("/clear"), json!({}))
            .unwrap_or_else(|e| fail(e, format!("clear {}", self.describe())));
    }

    /// Its rendered text (`innerText`, what a person reads).
    pub fn text(&self) -> String {
        self.b
            .cmd("GET", &self.path("/text"), Value::Null)
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// An attribute, as written in the document.
    pub fn attr(&self, name: &str) -> Option<String> {
        self.b
            .cmd(
                "GET",
                &self.path(&format!("/attribute/{name}")),
                Value::Null,
            )
            .as_str()
            .map(str::to_string)
    }

    /// A DOM property (`value`, `open`, `disabled`...).
    pub fn prop(&self, name: &str) -> Value {
        self.b
            .cmd("GET", &self.path(&format!("/property/{name}")), Value::Null)
    }

    /// `value` of an input, select or textarea.
    pub fn value(&self) -> String {
        self.prop("value").as_str().unwrap_or("").to_string()
    }

    pub fn enabled(&self) -> bool {
        self.b
            .cmd("GET", &self.path("/enabled"), Value::Null)
            .as_bool()
            .unwrap_or(false)
    }

    pub fn displayed(&self) -> bool {
        match self.b.try_cmd("GET", &self.path("/displayed"), Value::Null) {
            Ok(v) => v.as_bool().unwrap_or(false),
            Err(_) => false, // gone from the document
        }
    }

    pub fn tag(&self) -> String {
        self.b
            .cmd("GET", &self.path("/name"), Value::Null)
            .as_str()
            .unwrap_or("")
            .to_lowercase()
    }

    /// The first element inside it matching `css`, now.
    pub fn try_find(&self, css: &str) -> Option<Element<'a>> {
        match self.b.try_cmd(
            "POST",
            &self.path("/element"),
            json!({"using": "css selector", "value": css}),
        ) {
            Ok(v) => Some(self.b.element(&v)),
            Err(e) if e.error == "no such element" => None,
            Err(e) => fail(e, format!("find `{css}` in element {}", self.id)),
        }
    }

    /// The first element inside it matching `css`, waiting for it.
    pub fn find(&self, css: &str) -> Element<'a> {
        self.b.wait_until(
            &format!("an element `{css}` in {}", self.describe()),
            || self.try_find(css),
        )
    }

    /// Every element inside it matching `css`, now.
    pub fn find_all(&self, css: &str) -> Vec<Element<'a>> {
        let v = self.b.cmd(
            "POST",
            &self.path("/elements"),
            json!({"using": "css selector", "value": css}),
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| self.b.element(e))
            .collect()
    }

    /// Whether it is the same DOM node as `other`.
    pub fn is(&self, other: &Element<'_>) -> bool {
        self.b
            .exec(
                "return arguments[0] === arguments[1]",
                vec![self.json(), other.json()],
            )
            .as_bool()
            .unwrap_or(false)
    }

    /// Whether it matches `css`.
    pub fn matches(&self, css: &str) -> bool {
        self.b
            .exec(
                "return arguments[0].matches(arguments[1])",
                vec![self.json(), json!(css)],
            )
            .as_bool()
            .unwrap_or(false)
    }

    /// Makes it the focused element (as a click on it would, without clicking).
    pub fn focus(&self) {
        self.b.exec("arguments[0].focus()", vec![self.json()]);
    }

    /// `tag#id.class1.class2 "text"`, for messages; a stale element says so.
    pub fn describe(&self) -> String {
        match self.b.try_cmd(
            "POST",
            "/execute/sync",
            json!({"script": "const e = arguments[0]; return e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + \
                       Array.from(e.classList).map(c => '.' + c).join('') + \
                       ' \"' + (e.innerText || e.value || '').slice(0, 40) + '\"'",
                   "args": [self.json()]}),
        ) {
            Ok(v) => v.as_str().unwrap_or("?").to_string(),
            Err(e) => format!("element {} ({})", self.id, e.error),
        }
    }
}
