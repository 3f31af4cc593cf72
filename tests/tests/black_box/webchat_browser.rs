//! The web chat widget in a real browser: headless Chromium (see `frontdesk_tests::browser`) opens the demo page
//! the real binary serves, and a visitor talks with the business as a person would, with the keyboard and the
//! mouse: the panel opens, a message goes out, the business's reply and typing show up live, markup stays text,
//! the thread survives a reload and a dropped connection with every message shown once, and the panel fills a
//! phone's screen. A page on another site uses the widget through CORS. Screenshots are kept in the target
//! directory (`webchat-widget.png`, `webchat-widget-phone.png`).
//!
//! `readme_screenshot` (ignored) makes the README's picture, docs/webchat-widget.png:
//! `cargo test -p frontdesk-tests --test black_box -- --ignored readme_screenshot`.

use std::{collections::HashMap, future::Future, net::SocketAddr, time::Duration};

use axum::{Router, extract::Query, response::Html, routing::get};
use frontdesk_tests::{
    Db, Server,
    browser::{Browser, Key, artifact},
    platform::Platform,
    webchat::Channel,
};
use serde_json::{Value, json};

/// How long anything the visitor or the business waits for may take on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);

/// Counts the page's WebSockets (`window.__sockets`), so the test can see the widget's connection come and go.
const COUNT_SOCKETS: &str = "(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); window.__sockets.push(this); }
  };
})();";

/// The widget's shadow root.
const ROOT: &str = "document.getElementById('frontdesk-webchat')?.shadowRoot";

/// The widget's part `data-fd=name`.
fn part(name: &str) -> String {
    format!("{ROOT}?.querySelector('[data-fd={name}]')")
}

/// The thread as the visitor sees it: `[{id, direction, pending, text}]`.
fn thread_js() -> String {
    format!(
        "[...({ROOT}?.querySelectorAll('[data-fd=thread] [data-fd=msg]') ?? [])].map(m => ({{id: m.dataset.id, \
         direction: m.dataset.direction, pending: m.dataset.pending ?? null, \
         text: m.querySelector('[data-fd=text]').textContent}}))"
    )
}

/// Whether the panel is shown.
fn panel_open() -> String {
    format!("{} ?.hidden === false", part("panel"))
}

/// Which part of the widget has the focus (its `data-fd`).
fn focused() -> String {
    format!("({ROOT}?.activeElement?.dataset?.fd ?? null)")
}

/// What failure messages show of the widget.
fn probe(key: &str) -> String {
    format!(
        "(() => {{ const r = {ROOT}; if (!r) return 'no widget on the page'; return {{
          open: {open}, focus: {focus},
          launcher: r.querySelector('[data-fd=launcher]').getAttribute('aria-label'),
          status: r.querySelector('[data-fd=status]').hidden ? null : r.querySelector('[data-fd=status]').textContent,
          typing: !r.querySelector('[data-fd=typing]').hidden,
          thread: {thread},
          sockets: (window.__sockets || []).map(s => s.readyState + ' ' + s.url.replace(/token=[^&]+/, 'token=...')),
          token: localStorage.getItem('frontdesk:{key}')
        }}; }})()",
        open = panel_open(),
        focus = focused(),
        thread = thread_js(),
    )
}

/// The thread once every message in it has reached the server (none is pending).
async fn thread(browser: &Browser) -> Vec<Value> {
    let settled = format!(
        "(() => {{ const t = {}; return t.every(m => !m.pending) && t; }})()",
        thread_js()
    );
    browser
        .wait_until("every message in the thread stored", &settled, WAIT)
        .await
        .as_array()
        .expect("thread")
        .clone()
}

/// Waits until the thread shows a stored message of `direction` with exactly `text`; its id.
async fn shown(browser: &Browser, direction: &str, text: &str) -> String {
    let js = format!(
        "{}.find(m => m.direction === {direction} && m.text === {text} && !m.pending)?.id",
        thread_js(),
        direction = json!(direction),
        text = json!(text),
    );
    let what = format!("the {direction} message {text:?} in the thread");
    let id = browser.wait_until(&what, &js, WAIT).await;
    id.as_str().expect("message id").to_owned()
}

/// Presses Tab until the focus reaches the widget's `name` part.
async fn tab_to(browser: &Browser, name: &str) {
    let at = format!("{} === {}", focused(), json!(name));
    for _ in 0..20 {
        browser.press(Key::Tab).await;
        if browser.eval(&at).await == json!(true) {
            return;
        }
    }
    browser
        .wait_until(&format!("Tab to reach the {name}"), &at, Duration::ZERO)
        .await;
}

/// The visitor writes `text` into the focused text box and presses Enter.
async fn say(browser: &Browser, text: &str) -> String {
    browser.insert_text(text).await;
    browser.press(Key::Enter).await;
    shown(browser, "inbound", text).await
}

/// Asks `check` every 100 ms until it gives a value; panics after `WAIT` saying `what` did not happen.
async fn eventually<F, Fut>(what: &str, mut check: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<Value>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "waited {WAIT:?} for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The business answers the contact; the new message's id.
async fn reply(platform: &Platform<'_>, contact_id: &str, text: &str) -> String {
    let path = format!("/v1/contacts/{contact_id}/send-message");
    let answer = platform.send("POST", &path, Some(json!({"text": text}))).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    answer.body["message_id"].as_str().expect("message_id").to_owned()
}

async fn set_typing(platform: &Platform<'_>, conversation_id: &str, on: bool) {
    let path = format!("/v1/conversations/{conversation_id}/typing");
    platform.ok("POST", &path, Some(json!({"on": on}))).await;
}

/// Waits until the platform shows message `id` with `status`.
async fn status_becomes(platform: &Platform<'_>, id: &str, status: &str) {
    let path = format!("/v1/messages/{id}");
    eventually(&format!("message {id} to become {status}"), || async {
        let message = platform.ok("GET", &path, None).await["message"].clone();
        (message["status"] == status).then_some(message)
    })
    .await;
}

/// The one web chat session the account has, as the business sees it (`GET /v1/chat-sessions/{id}`), found
/// through its contact's `webchat` identity.
async fn the_session(platform: &Platform<'_>) -> Value {
    let contacts = platform.ok("GET", "/v1/contacts", None).await["contacts"].clone();
    let contacts = contacts.as_array().expect("contacts");
    assert_eq!(contacts.len(), 1, "one visitor, one contact: {contacts:?}");
    let identity = &contacts[0]["identities"][0];
    assert_eq!(identity["type"], "webchat", "{identity}");
    let session_id = identity["external_id"].as_str().expect("session id");
    platform
        .ok("GET", &format!("/v1/chat-sessions/{session_id}"), None)
        .await
}

/// Checks that `path` holds a PNG.
fn assert_png(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    assert!(
        bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is no screenshot",
        path.display()
    );
}

async fn start_server(db: &Db) -> Server {
    Server::start(db, &[("FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE", "1000")]).await
}

async fn open_demo(server: &Server, channel: &Channel) -> Browser {
    let mut browser = Browser::launch().await;
    browser.set_probe(&probe(&channel.widget_key));
    browser.add_init_script(COUNT_SOCKETS).await;
    browser.set_viewport(1280, 800, 1.0, false).await;
    let demo = server.url(&format!("/webchat/demo?key={}", channel.widget_key));
    browser.goto(&demo).await;
    browser
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_and_the_business_talk_in_a_real_browser() {
    let db = Db::sqlite();
    let server = start_server(&db).await;
    let platform = Platform::new(&server).await;
    let config = json!({"title": "Acme support", "greeting": "Hi! Ask us anything.", "color": "#0f766e"});
    let channel = Channel::connect(&platform, "site", config).await;
    let browser = open_demo(&server, &channel).await;
    let store = format!("localStorage.getItem('frontdesk:{}')", channel.widget_key);

    // The launcher wears the channel's colour at once; a page view alone starts no session.
    let accent = format!(
        "getComputedStyle({}).backgroundColor === 'rgb(15, 118, 110)'",
        part("launcher")
    );
    browser
        .wait_until("the launcher in the channel's colour", &accent, WAIT)
        .await;
    assert_eq!(browser.eval(&store).await, Value::Null);
    assert_eq!(
        platform.ok("GET", "/v1/contacts", None).await["contacts"],
        json!([]),
        "a page view starts no session"
    );

    // Keyboard only: Tab reaches the launcher, Enter opens the panel with the focus in the text box, showing the
    // channel's title and greeting.
    tab_to(&browser, "launcher").await;
    browser.press(Key::Enter).await;
    let ready = format!("{} && {} === 'input'", panel_open(), focused());
    browser
        .wait_until("the panel open with the focus in the text box", &ready, WAIT)
        .await;
    let look = format!(
        "[{ROOT}.querySelector('h2').textContent, {}.textContent]",
        part("greeting")
    );
    assert_eq!(
        browser.eval(&look).await,
        json!(["Acme support", "Hi! Ask us anything."])
    );

    // Enter sends; the business sees the visitor, online, with the message.
    let question = say(&browser, "Hi! Do you ship to Canada?").await;
    assert_eq!(browser.eval(&format!("{}.value", part("input"))).await, "");
    browser.wait_until("the session's token kept", &store, WAIT).await;
    let session = eventually("the visitor to be online", || async {
        let session = the_session(&platform).await;
        (session["chat_session"]["online"] == true).then_some(session)
    })
    .await;
    let chat = &session["chat_session"];
    assert_eq!(chat["channel"], "site");
    assert!(
        chat["page_url"].as_str().unwrap().contains("/webchat/demo?key="),
        "{chat}"
    );
    assert_eq!(session["messages"][0]["id"], question.as_str());
    assert_eq!(session["messages"][0]["text"], "Hi! Do you ship to Canada?");
    let contact_id = chat["contact_id"].as_str().unwrap().to_owned();
    let conversation_id = chat["conversation_id"].as_str().unwrap().to_owned();

    // The business types, then answers: both show live, and the open panel tells the server the visitor read it.
    set_typing(&platform, &conversation_id, true).await;
    let typing_shown = format!("{}?.hidden === false", part("typing"));
    browser.wait_until("the typing indicator", &typing_shown, WAIT).await;
    let answer = reply(
        &platform,
        &contact_id,
        "Yes! Delivery to Canada takes 3-5 business days.",
    )
    .await;
    let answer_shown = shown(&browser, "outbound", "Yes! Delivery to Canada takes 3-5 business days.").await;
    assert_eq!(answer_shown, answer);
    let typing_hidden = format!("{}?.hidden === true", part("typing"));
    browser
        .wait_until("the typing indicator gone with the reply", &typing_hidden, WAIT)
        .await;
    status_becomes(&platform, &answer, "read").await;
    set_typing(&platform, &conversation_id, true).await;
    browser
        .wait_until("the typing indicator again", &typing_shown, WAIT)
        .await;
    set_typing(&platform, &conversation_id, false).await;
    browser
        .wait_until("the typing indicator stopped", &typing_hidden, WAIT)
        .await;

    // Markup is text, whichever side writes it.
    let script = "<script>window.__xss=1</script>";
    say(&browser, script).await;
    let image = "<img src=x onerror=\"window.__xss=2\"> <b>bold?</b>";
    let markup = reply(&platform, &contact_id, image).await;
    shown(&browser, "outbound", image).await;
    let no_markup = format!(
        "window.__xss === undefined && {ROOT}.querySelectorAll('[data-fd=thread] script, [data-fd=thread] img, \
         [data-fd=thread] b').length === 0"
    );
    assert_eq!(
        browser.eval(&no_markup).await,
        json!(true),
        "markup in messages ran or rendered"
    );
    let stored = the_session(&platform).await["messages"].clone();
    assert_eq!(stored[2]["text"], script);

    // Seen as it came, the reply is read (the widget says so again if the first word got lost).
    status_becomes(&platform, &markup, "read").await;

    let shot = artifact("webchat-widget.png");
    browser.screenshot(&shot).await;
    assert_png(&shot);

    // A reload shows the same thread, each message once, and the socket reconnects from its last message (the
    // panel stays closed: a reply now arrives live and counts as unread on the launcher).
    let before = thread(&browser).await;
    assert_eq!(before.len(), 4, "{before:?}");
    browser.reload().await;
    let same = format!(
        "JSON.stringify({}.map(m => [m.id, m.text])) === {}",
        thread_js(),
        json!(json!(before.iter().map(|m| [&m["id"], &m["text"]]).collect::<Vec<_>>()).to_string())
    );
    browser
        .wait_until("the whole thread after the reload", &same, WAIT)
        .await;
    let last_id = before[3]["id"].as_str().unwrap();
    let socket = format!(
        "window.__sockets.find(s => s.readyState === WebSocket.OPEN && s.url.includes('after={last_id}'))?.url"
    );
    browser
        .wait_until("the socket open again after the reload", &socket, WAIT)
        .await;
    assert_eq!(browser.eval(&panel_open()).await, json!(false));
    let later = reply(&platform, &contact_id, "Anything else I can help with?").await;
    assert_eq!(
        shown(&browser, "outbound", "Anything else I can help with?").await,
        later
    );
    // The badge has no data-fd of its own: it sits in the launcher.
    let badge = format!(
        "{ROOT}?.querySelector('.badge')?.hidden === false && {ROOT}.querySelector('.badge').textContent === '1'"
    );
    browser
        .wait_until("one unread reply on the launcher", &badge, WAIT)
        .await;
    let label = browser
        .eval(&format!("{}.getAttribute('aria-label')", part("launcher")))
        .await;
    assert_eq!(label, "Open chat (1 unread)");

    // The mouse opens the panel: the reply is read, the badge goes.
    browser.click(&part("launcher"), WAIT).await;
    browser.wait_until("the panel open by the mouse", &ready, WAIT).await;
    status_becomes(&platform, &later, "read").await;
    let no_badge = format!("{ROOT}?.querySelector('.badge')?.hidden === true");
    browser.wait_until("the badge gone", &no_badge, WAIT).await;

    // The connection drops: what the business says meanwhile comes with the reconnect, once.
    browser
        .eval("window.__sockets.find(s => s.readyState === WebSocket.OPEN).close()")
        .await;
    browser
        .wait_until(
            "the socket closed",
            "window.__sockets.every(s => s.readyState === WebSocket.CLOSED)",
            WAIT,
        )
        .await;
    let missed = reply(&platform, &contact_id, "Our store hours are 9 to 5.").await;
    assert_eq!(shown(&browser, "outbound", "Our store hours are 9 to 5.").await, missed);
    let reconnected = format!(
        "window.__sockets.filter(s => s.readyState === WebSocket.OPEN && s.url.includes('after={later}')).length \
         === 1"
    );
    browser
        .wait_until("a new socket from the last message", &reconnected, WAIT)
        .await;
    say(&browser, "Thanks, bye!").await;
    let all = thread(&browser).await;
    let ids: Vec<&str> = all.iter().map(|m| m["id"].as_str().unwrap()).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!((ids.len(), unique.len()), (7, 7), "each message shown once: {all:?}");
    let stored: Vec<Value> = the_session(&platform).await["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(stored, ids, "the widget shows the thread the business has, in order");

    // Escape closes the panel and gives the focus back to the launcher.
    browser.press(Key::Escape).await;
    let closed = format!("!({}) && {} === 'launcher'", panel_open(), focused());
    browser.wait_until("the panel closed by Escape", &closed, WAIT).await;

    // On a phone the open panel fills the screen and the launcher steps aside.
    browser.set_viewport(390, 844, 2.0, true).await;
    browser.press(Key::Enter).await;
    browser.wait_until("the panel open on a phone", &ready, WAIT).await;
    // (Once its opening animation is over.)
    let full = format!(
        "(() => {{ const r = {}.getBoundingClientRect(); const l = {}.getBoundingClientRect(); \
         return innerWidth === 390 && r.left === 0 && r.top === 0 && r.width === innerWidth \
         && r.height === innerHeight && l.width === 0; }})()",
        part("panel"),
        part("launcher")
    );
    browser
        .wait_until("the panel to fill the phone's screen", &full, WAIT)
        .await;
    let phone = artifact("webchat-widget-phone.png");
    browser.screenshot(&phone).await;
    assert_png(&phone);
    assert!(
        !browser.log().iter().any(|line| line.starts_with("uncaught")),
        "the page threw: {:?}",
        browser.log()
    );
}

/// Another site: `/?key=wk_...` is a page of its own origin with the widget of that key embedded from the Front
/// Desk server, as a business pastes it. Its origin (`http://127.0.0.1:PORT`) and the task serving it.
async fn shop_site(server: &Server) -> (String, tokio::task::JoinHandle<()>) {
    let script = server.url("/webchat/widget.js");
    let app = Router::new().route(
        "/",
        get(move |Query(query): Query<HashMap<String, String>>| async move {
            Html(format!(
                "<!doctype html><html lang=en><head><meta charset=utf-8><title>Shop</title></head><body>\
                 <h1>Shop</h1><script src=\"{script}\" data-key=\"{}\" async></script></body></html>",
                query.get("key").map_or("", String::as_str)
            ))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve the shop's page");
    });
    (format!("http://{addr}"), task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_site_chats_through_cors() {
    let db = Db::sqlite();
    let server = start_server(&db).await;
    let platform = Platform::new(&server).await;
    let (shop, site) = shop_site(&server).await;
    let allowed = Channel::connect(&platform, "shop", json!({"allowed_origins": shop, "title": "Shop"})).await;
    let elsewhere = Channel::connect(
        &platform,
        "elsewhere",
        json!({"allowed_origins": "https://elsewhere.example"}),
    )
    .await;

    // The shop's own page: preflighted requests with the token, and the socket, all cross-origin.
    let mut browser = Browser::launch().await;
    browser.set_probe(&probe(&allowed.widget_key));
    browser.add_init_script(COUNT_SOCKETS).await;
    browser.goto(&format!("{shop}/?key={}", allowed.widget_key)).await;
    browser.click(&part("launcher"), WAIT).await;
    let ready = format!("{} && {} === 'input'", panel_open(), focused());
    browser.wait_until("the panel open", &ready, WAIT).await;
    say(&browser, "Hello from the shop").await;
    let session = the_session(&platform).await;
    assert_eq!(
        session["chat_session"]["page_url"],
        format!("{shop}/?key={}", allowed.widget_key)
    );
    let contact_id = session["chat_session"]["contact_id"].as_str().unwrap();
    let answer = reply(&platform, contact_id, "Hello, shop visitor").await;
    assert_eq!(shown(&browser, "outbound", "Hello, shop visitor").await, answer);
    // A reload resumes the session with the stored token (a preflighted POST).
    browser.reload().await;
    let resumed = format!("{}.length === 2", thread_js());
    browser.wait_until("the thread after the reload", &resumed, WAIT).await;
    browser
        .wait_until(
            "the socket open again",
            "window.__sockets.some(s => s.readyState === WebSocket.OPEN)",
            WAIT,
        )
        .await;

    // A channel that does not allow the shop: the page gets no grant, the visitor is told, and nothing is
    // stored.
    let mut refused = Browser::launch().await;
    refused.set_probe(&probe(&elsewhere.widget_key));
    refused.goto(&format!("{shop}/?key={}", elsewhere.widget_key)).await;
    refused.click(&part("launcher"), WAIT).await;
    let told = format!("{}?.hidden === false && {0}.textContent", part("status"));
    let notice = refused
        .wait_until("the visitor told the chat cannot be used", &told, WAIT)
        .await;
    assert_eq!(notice, "Can't reach the chat right now. Please try again later.");
    assert!(
        refused
            .log()
            .iter()
            .any(|line| line.contains(&format!("add {shop} to the channel's allowed_origins"))),
        "the page's developer is told why: {:?}",
        refused.log()
    );
    let contacts = platform.ok("GET", "/v1/contacts", None).await["contacts"].clone();
    assert_eq!(contacts.as_array().map(Vec::len), Some(1), "{contacts}");
    site.abort();
}

/// The README's picture of the widget, docs/webchat-widget.png: the panel open on the demo page with a short
/// conversation, the business typing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "makes docs/webchat-widget.png; run by hand after changing the widget's look"]
async fn readme_screenshot() {
    let db = Db::sqlite();
    let server = start_server(&db).await;
    let platform = Platform::new(&server).await;
    let config = json!({
        "title": "Acme Outdoor",
        "greeting": "Hi there! Ask us anything about orders, sizes or shipping.",
        "color": "#0f766e",
    });
    let channel = Channel::connect(&platform, "site", config).await;
    let browser = open_demo(&server, &channel).await;
    // Wide enough that the page's text column ends left of the panel: the picture shows the widget alone.
    let (width, height) = (1600.0, 900.0);
    browser.set_viewport(1600, 900, 2.0, false).await;
    browser.click(&part("launcher"), WAIT).await;
    let ready = format!("{} && {} === 'input'", panel_open(), focused());
    browser.wait_until("the panel open", &ready, WAIT).await;

    say(&browser, "Hi! Do you ship to Canada?").await;
    let session = the_session(&platform).await;
    let contact_id = session["chat_session"]["contact_id"].as_str().unwrap().to_owned();
    let conversation_id = session["chat_session"]["conversation_id"].as_str().unwrap().to_owned();
    let answer = "We do! Delivery to Canada takes 3-5 business days, and orders over $75 ship free.";
    reply(&platform, &contact_id, answer).await;
    shown(&browser, "outbound", answer).await;
    say(&browser, "Great. And if the jacket doesn't fit?").await;
    set_typing(&platform, &conversation_id, true).await;
    let typing = format!("{}?.hidden === false", part("typing"));
    browser.wait_until("the typing indicator", &typing, WAIT).await;
    // No caret or focus ring in the picture.
    browser.eval("document.activeElement.blur()").await;
    let unfocused = format!(
        "{} === null && getComputedStyle({}).borderTopColor === 'rgb(226, 232, 240)'",
        focused(),
        part("input")
    );
    browser.wait_until("the text box at rest", &unfocused, WAIT).await;

    let panel = browser
        .eval(&format!(
            "(() => {{ const r = {}.getBoundingClientRect(); return [r.left, r.top]; }})()",
            part("panel")
        ))
        .await;
    let (left, top) = (panel[0].as_f64().unwrap() - 28.0, panel[1].as_f64().unwrap() - 28.0);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/webchat-widget.png");
    browser
        .screenshot_clip(&path, (left, top, width - left, height - top))
        .await;
    assert_png(&path);
}
