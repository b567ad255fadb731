//! Accessibility basics and the page's security, in the browser: the keyboard reaches and
//! activates every action and the dialog traps the focus and closes on Escape; every control has
//! a label; the page is served with the contract's Content-Security-Policy, which the browser
//! enforces and the page lives with; cross-site and token-less requests change nothing; with
//! `--token-file`, the page asks for the token.

use serde_json::{Value, json};

use crate::browser_util::{Browser, Element, keys};
use crate::fixture::*;
use crate::http_util::call;

/// `tag#id.classes` of an element, for the lists of focus stops.
fn stop(e: &Element<'_>) -> String {
    e.describe().split(" \"").next().unwrap_or("").to_string()
}

/// Presses Tab until the focused element matches `css` (at most `max` times); returns the stops
/// on the way.
fn tab_to(b: &Browser, css: &str, max: usize) -> Vec<String> {
    let mut stops = Vec::new();
    for _ in 0..max {
        b.press(keys::TAB);
        let a = b.active();
        stops.push(stop(&a));
        if a.matches(css) {
            return stops;
        }
    }
    panic!("{max} presses of Tab never reached `{css}`; the focus went through:\n{stops:#?}");
}

/// Whether the focus is inside `#dialog`.
fn focus_in_dialog(b: &Browser) -> bool {
    b.exec(
        "const d = document.getElementById('dialog'); return !!d && d.contains(document.activeElement)",
        vec![],
    )
    .as_bool()
    .unwrap()
}

#[test]
fn the_keyboard_reaches_every_action_and_the_dialog_traps_focus() {
    let store = Store::new();
    store.import(&seed(3));
    let serve = store.serve(&[]);
    let b = browser();
    open_console(&b, &serve);
    connector_row(&b, "jdbc-orders");

    // From the top of the connectors view, Tab reaches the connector's link; Enter opens it.
    let stops = tab_to(
        &b,
        "#connectors tr[data-connector=\"jdbc-orders\"] .open",
        80,
    );
    println!("connectors view, focus stops: {stops:?}");
    b.press(keys::ENTER);
    b.find_visible("#connector");
    partition_row(&b, &json!({"table": "orders"}));

    // A whole round of Tab through the connector view: every control is a stop.
    let start = b.active();
    let mut seen = Vec::new();
    for _ in 0..120 {
        b.press(keys::TAB);
        let a = b.active();
        if a.is(&start) && !seen.is_empty() {
            break;
        }
        seen.push(stop(&a));
    }
    println!("connector view, focus stops: {seen:#?}");
    for want in [
        "#partition-search",
        "#partition-sort",
        "#reset-all",
        "#export-connector",
        ".edit",
        ".reset",
        ".history",
    ] {
        assert!(
            seen.iter().any(|s| s.contains(want)),
            "Tab never reaches {want}; stops: {seen:#?}"
        );
    }

    // Search by keyboard.
    tab_to(&b, "#partition-search", 120);
    b.press("orders");
    b.wait_until("the search typed on the keyboard", || {
        let rows = partition_rows(&b);
        (rows.len() == 1 && rows[0].1 == json!({"table": "orders"})).then_some(())
    });

    // Reset by keyboard: Enter on the row's reset opens the dry run with the focus in it; Tab
    // and Shift+Tab stay in the dialog; Escape cancels and nothing is written.
    tab_to(&b, "#partitions .reset", 40);
    b.press(keys::ENTER);
    dialog_changes(&b);
    assert!(
        focus_in_dialog(&b),
        "the dialog takes the focus: {}",
        b.active().describe()
    );
    for i in 0..8 {
        b.press(keys::TAB);
        assert!(
            focus_in_dialog(&b),
            "Tab #{} left the dialog for {}",
            i + 1,
            b.active().describe()
        );
    }
    for i in 0..4 {
        b.press_shift_tab();
        assert!(
            focus_in_dialog(&b),
            "Shift+Tab #{} left the dialog for {}",
            i + 1,
            b.active().describe()
        );
    }
    shot(&b, "30-keyboard-dialog");
    b.press(keys::ESCAPE);
    b.wait_until("Escape closing #dialog", || dialog_closed(&b).then_some(()));
    let back = b.active();
    assert!(
        back.matches("#partitions .reset"),
        "Escape gives the focus back to the button that opened the dialog, not to {}",
        back.describe()
    );
    assert_eq!(
        store.get("jdbc-orders", &json!({"table": "orders"})),
        Some(json!({"lsn": 100, "txid": 1000})),
        "Escape cancels"
    );

    // Again, confirmed with the keyboard.
    if !back.matches("#partitions .reset") {
        tab_to(&b, "#partitions .reset", 40);
    }
    b.press(keys::ENTER);
    dialog_changes(&b);
    if !b.active().matches("#dialog-confirm") {
        tab_to(&b, "#dialog-confirm", 10);
    }
    b.press(keys::ENTER);
    b.wait_until("#dialog closed after Enter on confirm", || {
        dialog_closed(&b).then_some(())
    });
    toast(&b);
    assert_eq!(store.get("jdbc-orders", &json!({"table": "orders"})), None);

    // Edit by keyboard: Enter on edit, the editor, Ctrl+A and typing, save, confirm.
    let t001 = json!({"table": "t001"});
    let search = b.find("#partition-search");
    search.focus();
    b.press_with(keys::CONTROL, "a");
    b.press("t001");
    b.wait_until("t001 alone", || {
        let rows = partition_rows(&b);
        (rows.len() == 1 && rows[0].1 == t001).then_some(())
    });
    tab_to(&b, "#partitions .edit", 40);
    b.press(keys::ENTER);
    b.find("#partitions textarea.offset-editor");
    if !b.active().matches("textarea.offset-editor") {
        tab_to(&b, "textarea.offset-editor", 10);
    }
    b.press_with(keys::CONTROL, "a");
    b.press(r#"{"lsn": 11, "txid": 110}"#);
    tab_to(&b, "#partitions button.save", 10);
    b.press(keys::ENTER);
    dialog_changes(&b);
    if !b.active().matches("#dialog-confirm") {
        tab_to(&b, "#dialog-confirm", 10);
    }
    b.press(keys::ENTER);
    b.wait_until("#dialog closed after the keyboard edit", || {
        dialog_closed(&b).then_some(())
    });
    toast(&b);
    assert_eq!(
        store.get("jdbc-orders", &t001),
        Some(json!({"lsn": 11, "txid": 110}))
    );

    // The history panel and its rewind buttons by keyboard.
    tab_to(&b, "#partitions .history", 40);
    b.press(keys::ENTER);
    b.find_visible("#history");
    let stops = tab_to(&b, "#rewind-connector, #rewind-partition", 60);
    println!("history panel, focus stops: {stops:?}");
    assert_no_page_problems(&b, "keyboard use");
}

/// Every input, select, textarea and progress without an accessible name, and every button or
/// link without one; and the named controls' label texts.
const LABEL_CHECK: &str = r#"
const describe = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
  Array.from(e.classList).map(c => '.' + c).join('') + (e.type ? '[type=' + e.type + ']' : '');
const text = e => (e ? e.textContent : '').replace(/\s+/g, ' ').trim();
const byIds = ids => (ids || '').split(/\s+/).filter(Boolean)
  .map(id => text(document.getElementById(id))).join(' ').trim();
const missing = [], labels = {};
for (const e of document.querySelectorAll('input, select, textarea, progress')) {
  if (e.type === 'hidden') continue;
  const label = Array.from(e.labels || []).map(text).join(' ').trim();
  const name = label || (e.getAttribute('aria-label') || '').trim() || byIds(e.getAttribute('aria-labelledby'));
  if (!name) missing.push(describe(e)); else labels[describe(e)] = { label, name };
}
for (const e of document.querySelectorAll('button, a[href], [role=button]')) {
  const name = text(e) || (e.getAttribute('aria-label') || '').trim() ||
    byIds(e.getAttribute('aria-labelledby')) || (e.getAttribute('title') || '').trim();
  if (!name) missing.push(describe(e));
}
return { missing, labels };
"#;

fn labels_in(b: &Browser, state: &str) -> serde_json::Map<String, Value> {
    let v = b.exec(LABEL_CHECK, vec![]);
    let missing = v["missing"].as_array().unwrap();
    assert!(
        missing.is_empty(),
        "{state}: controls without a label (or buttons without a name): {missing:#?}"
    );
    v["labels"].as_object().unwrap().clone()
}

/// The `<label>` text of the control `css` (a `<label>` element: `for=` or wrapping).
fn label_of(b: &Browser, css: &str) -> String {
    b.exec(
        "const e = document.querySelector(arguments[0]); return e && e.labels ? Array.from(e.labels).map(l => l.textContent.replace(/\\s+/g, ' ').trim()).join(' ') : null",
        vec![json!(css)],
    )
    .as_str()
    .unwrap_or_else(|| panic!("no `{css}` to label"))
    .to_string()
}

#[test]
fn every_control_has_a_label() {
    let store = Store::new();
    store.import(&seed(3));
    let serve = store.serve(&[]);
    let b = browser();
    open_console(&b, &serve);
    connector_row(&b, "jdbc-orders");
    let mut all = labels_in(&b, "the connectors view");
    assert!(
        !label_of(&b, "#import-file").is_empty(),
        "#import-file has a <label>"
    );
    assert!(
        !label_of(&b, "#progress").is_empty(),
        "#progress has a <label>"
    );

    open_connector(&b, &serve, "jdbc-orders");
    let orders = json!({"table": "orders"});
    partition_row(&b, &orders);
    all.extend(labels_in(&b, "the connector view"));
    assert_eq!(label_of(&b, "#partition-search"), "Search partitions");
    assert!(
        !label_of(&b, "#partition-sort").is_empty(),
        "#partition-sort has a <label>"
    );

    partition_row(&b, &orders).find(".edit").click();
    b.find("#partitions textarea.offset-editor");
    all.extend(labels_in(&b, "a row being edited"));
    b.find("#partitions button.cancel").click();

    partition_row(&b, &orders).find(".history").click();
    b.find_visible("#history");
    b.find("svg#history-chart");
    all.extend(labels_in(&b, "the history panel"));
    assert_eq!(label_of(&b, "#rewind-time"), "Rewind to");

    partition_row(&b, &orders).find(".reset").click();
    let dialog = dialog_open(&b);
    all.extend(labels_in(&b, "the dialog"));
    let named = b
        .exec(
            "const d = document.getElementById('dialog'); const by = d.getAttribute('aria-labelledby'); \
             return (d.getAttribute('aria-label') || '') + (by ? (document.getElementById(by) || {}).textContent || '' : '')",
            vec![],
        )
        .as_str()
        .unwrap()
        .trim()
        .to_string();
    assert!(
        !named.is_empty(),
        "#dialog is labelled (aria-labelledby or aria-label)"
    );
    assert_eq!(dialog.tag(), "dialog");
    assert_eq!(b.find("#toast").attr("role").as_deref(), Some("status"));
    println!("labels: {all:#?}");
    let lang = b.exec("return document.documentElement.lang", vec![]);
    assert!(
        lang.as_str().is_some_and(|l| !l.is_empty()),
        "<html lang> is set: {lang}"
    );
    assert_no_page_problems(&b, "labels");
}

/// The contract's policy, from the served page, enforced by the browser; the page's scripts and
/// styles are its own files; no view records a violation.
#[test]
fn the_page_lives_under_a_strict_content_security_policy() {
    let store = Store::new();
    store.import(&seed(3));
    let serve = store.serve(&[]);

    // The header, on the page and its assets; the HTML holds no inline script, handler or style.
    let (st, ctype, html) = call("GET", &serve.url("/"), None);
    assert_eq!(st, 200);
    assert!(ctype.starts_with("text/html"), "{ctype}");
    let csp = page_header(&serve.url("/"), "content-security-policy");
    assert_eq!(
        csp.as_deref(),
        Some(CSP),
        "the page's Content-Security-Policy"
    );
    for (path, want) in [
        ("/console/console.js", "javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let (st, ctype, _) = call("GET", &serve.url(path), None);
        assert_eq!(st, 200, "{path}");
        assert!(ctype.contains(want), "{path}: {ctype}");
    }
    let lower = html.to_lowercase();
    for bad in [
        " style=",
        " onclick=",
        " onload=",
        " onsubmit=",
        "javascript:",
    ] {
        assert!(!lower.contains(bad), "the page's HTML holds `{bad}`");
    }
    for tag in lower.match_indices("<script").map(|(i, _)| &lower[i..]) {
        let end = tag.find('>').unwrap();
        assert!(
            tag[..end].contains("src="),
            "an inline script: {}",
            &tag[..end]
        );
    }
    for external in ["http://", "https://", "//cdn"] {
        assert!(
            !lower.contains(&format!("src=\"{external}"))
                && !lower.contains(&format!("href=\"{external}")),
            "the page loads from elsewhere ({external})"
        );
    }

    let b = browser();
    open_console(&b, &serve);
    connector_row(&b, "jdbc-orders");
    let token = b
        .find("meta[name=\"csrf-token\"]")
        .attr("content")
        .unwrap_or_default();
    assert!(
        token.len() >= 16,
        "the page carries its CSRF token: `{token}`"
    );
    assert_no_page_problems(&b, "the connectors view");
    open_connector(&b, &serve, "jdbc-orders");
    let orders = json!({"table": "orders"});
    partition_row(&b, &orders).find(".history").click();
    b.find("svg#history-chart path.series");
    partition_row(&b, &orders).find(".edit").click();
    b.find("#partitions textarea.offset-editor");
    b.find("#partitions button.cancel").click();
    partition_row(&b, &orders).find(".reset").click();
    dialog_changes(&b);
    b.find("#dialog-cancel").click();
    shot(&b, "31-csp-views");
    assert_no_page_problems(&b, "the connector view, history, editor and dialog");

    // The browser enforces the policy on this page: an inline script is refused and reported.
    let ran = b.exec(
        "const s = document.createElement('script'); s.textContent = 'window.__inlineRan = true'; \
         document.body.appendChild(s); return window.__inlineRan === true",
        vec![],
    );
    assert_eq!(
        ran,
        json!(false),
        "an inline script ran: the policy is not enforced"
    );
    let seen = b.wait_until("the refused inline script reported", || {
        let v = b.csp_violations();
        (!v.is_empty()).then_some(v)
    });
    assert!(seen.iter().any(|v| v.contains("script-src")), "{seen:?}");
}

/// A response header of a GET (`None`: absent).
fn page_header(url: &str, name: &str) -> Option<String> {
    let a: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let r = a.get(url).call().unwrap();
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// Requests from another site, and the console's own page without its token, change nothing.
#[test]
fn cross_site_and_tokenless_requests_change_nothing() {
    let store = Store::new();
    store.import(&seed(3));
    let serve = store.serve(&[]);
    let b = browser();
    let doc = json!({"connectors": {"jdbc-orders": {"offsets": [
        {"partition": {"table": "orders"}, "offset": {"lsn": 666}}]}}})
    .to_string();

    // A page elsewhere (here a local file) posts to the console's API: the simple requests a
    // browser sends without asking (text/plain), and a form.
    let evil = store.file(
        "evil.html",
        "<!doctype html><html><head><title>elsewhere</title></head><body>\
         <form id=\"f\" method=\"post\" enctype=\"text/plain\"><input name=\"x\"></form></body></html>",
    );
    b.goto(&format!("file://{}", evil.display()));
    let sent = b.exec(
        "const [base, body] = arguments; return (async () => { const out = []; \
         for (const path of ['/offsets/import', '/connectors/jdbc-orders/offsets/import', \
                             '/connectors/jdbc-orders/offsets/rewind']) { \
           try { await fetch(base + path, {method: 'POST', mode: 'no-cors', \
                 headers: {'Content-Type': 'text/plain'}, body}); out.push(path + ' sent'); } \
           catch (e) { out.push(path + ': ' + e); } } \
         return out; })();",
        vec![json!(serve.base), json!(doc)],
    );
    println!("cross-site posts: {sent}");
    let form = b.find("#f");
    b.exec(
        "arguments[0].action = arguments[1]; arguments[0].querySelector('input').value = arguments[2]; arguments[0].submit()",
        vec![form.json(), json!(serve.url("/offsets/import")), json!(doc)],
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        store.get("jdbc-orders", &json!({"table": "orders"})),
        Some(json!({"lsn": 100, "txid": 1000})),
        "a cross-site request changed offsets"
    );

    // The console's own origin without the token: 403, nothing written.
    open_console(&b, &serve);
    connector_row(&b, "jdbc-orders");
    let status = b.exec(
        "return fetch('/offsets/import', {method: 'POST', \
           headers: {'Content-Type': 'application/json'}, body: arguments[0]}).then(r => r.status)",
        vec![json!(doc)],
    );
    assert_eq!(
        status,
        json!(403),
        "a same-origin request without X-CSRF-Token"
    );
    let status = b.exec(
        "return fetch('/connectors/jdbc-orders/offsets', {method: 'DELETE', \
           headers: {'X-CSRF-Token': 'not-the-token'}}).then(r => r.status)",
        vec![],
    );
    assert_eq!(
        status,
        json!(403),
        "a same-origin request with a wrong X-CSRF-Token"
    );
    assert_eq!(store.offsets("jdbc-orders").len(), 4, "nothing written");
    // With the page's token, the same request is taken (a dry run).
    let status = b.exec(
        "const t = document.querySelector('meta[name=\"csrf-token\"]').content; \
         return fetch('/offsets/import?dry_run=true', {method: 'POST', \
           headers: {'Content-Type': 'application/json', 'X-CSRF-Token': t}, body: arguments[0]}) \
           .then(async r => [r.status, await r.text()])",
        vec![json!(doc)],
    );
    assert_eq!(status[0], json!(200), "{status}");
    let answer: Value = serde_json::from_str(status[1].as_str().unwrap()).unwrap();
    assert_eq!(answer["dry_run"], json!(true), "{answer}");
    assert_eq!(
        store.get("jdbc-orders", &json!({"table": "orders"})),
        Some(json!({"lsn": 100, "txid": 1000}))
    );
}

/// With `--token-file`, the page asks for the token (`#signin`), keeps it for the tab's session,
/// and works with it.
#[test]
fn with_a_token_the_page_signs_in() {
    let store = Store::new();
    store.import(&seed(3));
    let token = "0123456789abcdef-console-token";
    let file = store.file("token", &format!("{token}\n"));
    let serve = store.serve(&["--token-file", file.to_str().unwrap()]);
    let (st, _, _) = call("GET", &serve.url("/connectors"), None);
    assert_eq!(st, 401, "the API needs the token");
    let b = browser();
    b.goto(&serve.url("/"));
    let signin = b.find_visible("#signin");
    assert!(
        !label_of(&b, "#signin-token").is_empty(),
        "#signin-token has a <label>"
    );
    assert!(
        b.try_find("#connectors tr[data-connector]").is_none(),
        "nothing shown without the token"
    );
    shot(&b, "32-signin");

    // A wrong token: still asked.
    b.find("#signin-token").send_keys("wrong-token-wrong-token");
    b.find("#signin-submit").click();
    std::thread::sleep(std::time::Duration::from_millis(500));
    b.find_visible("#signin");
    assert!(b.try_find("#connectors tr[data-connector]").is_none());

    // The right one.
    let input = b.find("#signin-token");
    input.clear();
    input.send_keys(token);
    b.find("#signin-submit").click();
    connector_row(&b, "jdbc-orders");
    b.wait_until("#signin hidden", || (!signin.displayed()).then_some(()));
    assert!(
        !b.current_url().contains(token),
        "the token is not in the URL"
    );
    // Kept for the session: a reload goes straight to the connectors.
    b.refresh();
    connector_row(&b, "jdbc-orders");
    assert!(
        b.try_find("#signin").is_none_or(|e| !e.displayed()),
        "a reload asks again"
    );
    // Modifying works with the token.
    open_connector(&b, &serve, "jdbc-orders");
    partition_row(&b, &json!({"table": "t002"}))
        .find(".reset")
        .click();
    dialog_changes(&b);
    confirm(&b);
    assert_eq!(store.get("jdbc-orders", &json!({"table": "t002"})), None);
    shot(&b, "33-signed-in");
    assert_no_page_problems(&b, "signed in");
}
