//! The WebDriver client itself, on a static page written to a file: finding, clicking, typing,
//! keys, scripts, a file input, a dialog, screenshots, and the recorder of CSP violations the
//! console's tests rely on (a violation it missed would pass a page that breaks under its policy).

use crate::browser_util::{Browser, keys};
use crate::fixture::shots_dir;
use serde_json::json;

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'self'">
<title>client check</title></head>
<body>
<h1 id="title">Static</h1>
<label for="name">Name</label><input id="name" type="text">
<label for="file">File</label><input id="file" type="file">
<button id="go">Go</button>
<button id="open">Open</button>
<p id="out"></p>
<dialog id="dialog" aria-labelledby="dh"><h2 id="dh">Sure?</h2><button id="yes">Yes</button><button id="no">No</button></dialog>
<div id="styled">x</div>
<script>
document.getElementById('go').addEventListener('click', () => {
  const f = document.getElementById('file').files[0];
  document.getElementById('out').textContent =
    'hello ' + document.getElementById('name').value + (f ? ' file ' + f.name : '');
});
document.getElementById('open').addEventListener('click', () => document.getElementById('dialog').showModal());
document.getElementById('no').addEventListener('click', () => document.getElementById('dialog').close());
</script>
</body></html>"#;

#[test]
fn the_webdriver_client_drives_a_static_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    std::fs::write(&page, PAGE).unwrap();
    let upload = dir.path().join("upload.json");
    std::fs::write(&upload, "{}").unwrap();

    let b = Browser::start();
    b.goto(&format!("file://{}", page.display()));
    assert_eq!(b.title(), "client check");
    assert_eq!(b.find("#title").text(), "Static");
    assert!(b.try_find("#nowhere").is_none());
    assert_eq!(b.find_all("button").len(), 4);

    // Typing, a file input, a click.
    let name = b.find("#name");
    name.send_keys("world");
    assert_eq!(name.value(), "world");
    b.find("#file").send_keys(upload.to_str().unwrap());
    b.find("#go").click();
    let out = b.wait_until("the greeting", || {
        let t = b.find("#out").text();
        (!t.is_empty()).then_some(t)
    });
    assert_eq!(out, "hello world file upload.json");
    name.clear();
    assert_eq!(name.value(), "");

    // Keys: Tab moves the focus from the name to the file input, Enter on a focused button
    // clicks it, Escape closes a modal dialog.
    name.focus();
    assert!(b.active().is(&name));
    b.press(keys::TAB);
    assert_eq!(b.active().attr("id").as_deref(), Some("file"));
    b.press(keys::TAB);
    assert_eq!(b.active().attr("id").as_deref(), Some("go"));
    b.press_shift_tab();
    assert_eq!(b.active().attr("id").as_deref(), Some("file"));
    b.find("#open").focus();
    b.press(keys::ENTER);
    let dialog = b.find("#dialog");
    b.wait_until("the dialog open", || {
        dialog.prop("open").as_bool().filter(|o| *o)
    });
    assert!(
        b.exec(
            "return document.getElementById('dialog').contains(document.activeElement)",
            vec![]
        )
        .as_bool()
        .unwrap()
    );
    b.press(keys::ESCAPE);
    b.wait_until("the dialog closed", || {
        (dialog.prop("open") == json!(false)).then_some(())
    });

    // Scripts: values, elements, arguments.
    assert_eq!(b.exec("return 1 + arguments[0]", vec![json!(2)]), json!(3));
    let h1 = b
        .exec_element("return document.querySelector('h1')", vec![])
        .unwrap();
    assert!(h1.is(&b.find("#title")));
    assert_eq!(h1.tag(), "h1");
    assert_eq!(b.find("#go").attr("id").as_deref(), Some("go"));
    assert!(b.find("#go").enabled() && b.find("#go").displayed());

    // The page is under a CSP that allows its inline script (no violation so far); an inline
    // style is then refused, and the recorder sees it.
    assert_eq!(b.csp_violations(), Vec::<String>::new());
    b.exec(
        "const s = document.createElement('style'); s.textContent = '#styled { color: red }'; document.head.appendChild(s)",
        vec![],
    );
    let seen = b.wait_until("the CSP violation recorded", || {
        let v = b.csp_violations();
        (!v.is_empty()).then_some(v)
    });
    assert!(seen.iter().any(|p| p.contains("style-src")), "{seen:?}");

    // Screenshots are PNGs.
    let png = b.png().unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    b.screenshot(&shots_dir().join("client-static-page.png"));
}
