//! Static checks of the web chat widget and demo page the edge serves (the browser test in the `tests` crate
//! runs them for real): the script parses, and it keeps the rules that keep a business's page safe.

use std::{path::PathBuf, process::Command};

fn asset(name: &str) -> (PathBuf, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("assets/webchat")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, text)
}

/// Lines of code, comment lines left out.
fn code_lines(js: &str) -> impl Iterator<Item = &str> {
    js.lines()
        .map(str::trim)
        .filter(|l| !(l.starts_with("//") || l.starts_with("/*") || l.starts_with('*')))
}

#[test]
fn widget_parses() {
    let (path, _) = asset("widget.js");
    let out = Command::new("node")
        .arg("--check")
        .arg(&path)
        .output()
        .expect("node runs (scripts/test-prereqs installs it)");
    assert!(
        out.status.success(),
        "node --check: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn widget_is_ascii_and_small() {
    let (_, js) = asset("widget.js");
    // ASCII: the page's charset (it may be anything) cannot garble the widget's text.
    let bad = js.lines().position(|l| !l.is_ascii());
    assert_eq!(bad, None, "line {} of widget.js is not ASCII", bad.unwrap_or(0) + 1);
    assert!(js.len() < 40_000, "widget.js is {} bytes", js.len());
}

#[test]
fn widget_never_renders_markup_from_data() {
    let (_, js) = asset("widget.js");
    for line in code_lines(&js) {
        for banned in [
            "insertAdjacentHTML",
            "outerHTML",
            "document.write",
            "eval(",
            "new Function",
            ".srcdoc",
        ] {
            assert!(!line.contains(banned), "widget.js uses {banned}: {line}");
        }
        // innerHTML only ever receives one of the static icon constants.
        if let Some((_, value)) = line.split_once("innerHTML =") {
            let value = value.trim().trim_end_matches(';');
            let icons = value.split([' ', '?', ':']).filter(|w| !w.is_empty() && *w != "open");
            assert!(
                icons.clone().all(|w| w.starts_with("ICON_")),
                "innerHTML from data: {line}"
            );
        }
    }
}

#[test]
fn widget_talks_to_its_own_server_only() {
    let (_, js) = asset("widget.js");
    for line in code_lines(&js) {
        assert!(!line.contains("://"), "an absolute URL in widget.js: {line}");
    }
    // Every request is built from ORIGIN, the script's own origin.
    assert!(js.contains("var ORIGIN = new URL(script.src, location.href).origin;"));
    assert!(js.contains("new URL(path, ORIGIN)"));
}

#[test]
fn widget_has_its_test_hooks() {
    let (_, js) = asset("widget.js");
    assert!(js.contains("\"frontdesk-webchat\""));
    assert!(js.contains("attachShadow({ mode: \"open\" })"));
    for hook in [
        "launcher", "panel", "thread", "input", "send", "typing", "msg", "status",
    ] {
        assert!(
            js.contains(&format!("\"data-fd\", \"{hook}\"")) || js.contains(&format!("\"data-fd\": \"{hook}\"")),
            "no data-fd=\"{hook}\""
        );
    }
}

#[test]
fn demo_page_has_the_two_placeholders_only() {
    let (_, html) = asset("demo.html");
    assert!(html.contains(r#"<script src="{{SCRIPT_URL}}" data-key="{{WIDGET_KEY}}" async></script>"#));
    let mut rest = html.replace("{{SCRIPT_URL}}", "").replace("{{WIDGET_KEY}}", "");
    rest.retain(|c| c != '\n');
    assert!(!rest.contains("{{"), "demo.html has another placeholder");
    assert!(html.contains("<title>Front Desk web chat demo</title>"));
}
