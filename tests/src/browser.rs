//! A real browser for black-box tests: headless Chromium (Debian's `chromium`, or `FRONTDESK_TEST_CHROMIUM`)
//! driven over the Chrome DevTools Protocol. One page per browser: navigate, evaluate JavaScript, wait until an
//! expression holds, type and press keys, click, size the viewport, take screenshots. The browser runs in a
//! fresh profile and is killed when dropped.

use std::{
    collections::{HashMap, VecDeque},
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::{Engine, engine::general_purpose::STANDARD};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::{
    sync::{broadcast, mpsc, oneshot},
    task::JoinHandle,
    time::Instant,
};
use tokio_tungstenite::tungstenite::{Message, protocol::WebSocketConfig};

/// How long one protocol command may take on a loaded machine.
const COMMAND_WAIT: Duration = Duration::from_secs(30);
/// How long Chromium may take to start, and a page to load.
const START_WAIT: Duration = Duration::from_secs(60);
const LOAD_WAIT: Duration = Duration::from_secs(30);
/// How often `wait_until` asks the page again.
const POLL: Duration = Duration::from_millis(100);
/// How many console lines, exceptions and browser log entries are kept for failure messages.
const LOG_LINES: usize = 60;

/// The Chromium executable: `FRONTDESK_TEST_CHROMIUM`, else Debian's.
pub fn chromium_path() -> PathBuf {
    std::env::var_os("FRONTDESK_TEST_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

/// `name` in the workspace's target directory (found from the test binary's path, target/debug/deps/<bin>),
/// where tests keep artifacts such as screenshots.
pub fn artifact(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the test binary sits in target/<profile>/deps");
    target.join(name)
}

/// A key `press` can send.
#[derive(Clone, Copy, Debug)]
pub enum Key {
    Enter,
    Escape,
    Tab,
}

impl Key {
    /// (key, code, Windows key code, the text the key types).
    fn spec(self) -> (&'static str, u32, Option<&'static str>) {
        match self {
            Self::Enter => ("Enter", 13, Some("\r")),
            Self::Escape => ("Escape", 27, None),
            Self::Tab => ("Tab", 9, None),
        }
    }
}

/// Headless Chromium with one page.
pub struct Browser {
    child: Child,
    dir: PathBuf,
    cdp: Cdp,
    /// The page's flattened session id.
    session: String,
    /// An expression whose value failure messages show (the page's state as the test sees it).
    probe: Option<String>,
}

impl Browser {
    /// Starts Chromium in a fresh profile and opens a blank page.
    pub async fn launch() -> Self {
        let path = chromium_path();
        let dir = std::env::temp_dir().join(format!(
            "frontdesk-chromium-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let profile = dir.join("profile");
        std::fs::create_dir_all(&profile).expect("browser profile dir");
        let log = std::fs::File::create(dir.join("chromium.log")).expect("browser log file");
        let child = Command::new(&path)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--disable-extensions",
                "--hide-scrollbars",
                "--mute-audio",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start {}: {err}. Install Debian's chromium (scripts/test-prereqs) or point \
                     FRONTDESK_TEST_CHROMIUM at a Chromium or Chrome executable",
                    path.display()
                )
            });
        // From here on the browser is killed (and its profile removed) however the launch ends.
        let mut starting = Starting {
            child: Some(child),
            dir: dir.clone(),
        };
        let endpoint = starting.endpoint(&profile).await;
        let cdp = Cdp::connect(&endpoint)
            .await
            .unwrap_or_else(|err| panic!("{err}\n{}", starting.log()));
        let target = cdp
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        let attached = cdp
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        let session = attached["sessionId"].as_str().expect("sessionId").to_owned();
        let browser = Self {
            child: starting.child.take().expect("child"),
            dir,
            cdp,
            session,
            probe: None,
        };
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.command(domain, json!({})).await;
        }
        browser
    }

    /// Sets the expression whose value every failure message shows, e.g. a summary of the widget's state.
    pub fn set_probe(&mut self, js: &str) {
        self.probe = Some(js.to_owned());
    }

    /// A command to the page; panics with the browser's error.
    pub async fn command(&self, method: &str, params: Value) -> Value {
        match self.cdp.call(Some(&self.session), method, params).await {
            Ok(result) => result,
            Err(err) => panic!("{err}{}", self.state().await),
        }
    }

    /// Runs `js` before any script of every document the page loads from now on.
    pub async fn add_init_script(&self, js: &str) {
        self.command("Page.addScriptToEvaluateOnNewDocument", json!({"source": js}))
            .await;
    }

    /// Opens `url` and waits for its load event.
    pub async fn goto(&self, url: &str) {
        let events = self.cdp.events.subscribe();
        let answer = self.command("Page.navigate", json!({"url": url})).await;
        if let Some(error) = answer["errorText"].as_str() {
            panic!("navigating to {url} failed: {error}{}", self.state().await);
        }
        self.loaded(events, url).await;
    }

    /// Reloads the page and waits for its load event.
    pub async fn reload(&self) {
        let events = self.cdp.events.subscribe();
        self.command("Page.reload", json!({})).await;
        self.loaded(events, "the reload").await;
    }

    async fn loaded(&self, mut events: broadcast::Receiver<Value>, what: &str) {
        let deadline = Instant::now() + LOAD_WAIT;
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(event)) => {
                    if event["method"] == "Page.loadEventFired" && event["sessionId"] == self.session.as_str() {
                        return;
                    }
                }
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) => {
                    panic!("the browser went away while loading {what}\n{}", self.log_tail())
                }
                Err(_) => panic!("{what} did not load within {LOAD_WAIT:?}{}", self.state().await),
            }
        }
    }

    /// The value of `js` (an expression; promises are awaited), as JSON (`Null` for `undefined`), or the
    /// exception it threw.
    pub async fn try_eval(&self, js: &str) -> Result<Value, String> {
        let params = json!({"expression": js, "returnByValue": true, "awaitPromise": true});
        let answer = self.cdp.call(Some(&self.session), "Runtime.evaluate", params).await?;
        if let Some(details) = answer.get("exceptionDetails") {
            let exception = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("an exception");
            return Err(format!("{js}\nthrew {exception}"));
        }
        Ok(answer["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    /// The value of `js`; panics, showing the page's state, when it throws.
    pub async fn eval(&self, js: &str) -> Value {
        match self.try_eval(js).await {
            Ok(value) => value,
            Err(err) => panic!("{err}{}", self.state().await),
        }
    }

    /// Asks `js` every 100 ms until its value is truthy, and returns that value; after `wait`, panics saying
    /// what was awaited (`what`), the last answer, the page's state and its recent console and log.
    pub async fn wait_until(&self, what: &str, js: &str, wait: Duration) -> Value {
        let deadline = Instant::now() + wait;
        loop {
            let last = self.try_eval(js).await;
            if let Ok(value) = &last
                && truthy(value)
            {
                return value.clone();
            }
            if Instant::now() >= deadline {
                let last = match last {
                    Ok(value) => format!("it was {value}"),
                    Err(err) => format!("it threw: {err}"),
                };
                panic!(
                    "waited {wait:?} for {what}, and it never held: {js}\n{last}{}",
                    self.state().await
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Types `text` into the focused element, as an input method commits it (`input` events fire).
    pub async fn insert_text(&self, text: &str) {
        self.command("Input.insertText", json!({"text": text})).await;
    }

    /// Presses and releases `key` on the focused element.
    pub async fn press(&self, key: Key) {
        let (name, code, text) = key.spec();
        let mut down = json!({
            "type": if text.is_some() { "keyDown" } else { "rawKeyDown" },
            "key": name, "code": name,
            "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code,
        });
        if let Some(text) = text {
            down["text"] = json!(text);
            down["unmodifiedText"] = json!(text);
        }
        self.command("Input.dispatchKeyEvent", down).await;
        let up = json!({
            "type": "keyUp", "key": name, "code": name,
            "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code,
        });
        self.command("Input.dispatchKeyEvent", up).await;
    }

    /// Clicks the middle of `element` (a JS expression, which may reach into a shadow root) with the mouse, as
    /// a person would: the click lands on whatever is drawn there. Waits up to `wait` for it to be visible.
    pub async fn click(&self, element: &str, wait: Duration) {
        let js = format!(
            "(() => {{ const e = {element}; if (!e) return null; e.scrollIntoView({{block: 'nearest'}}); \
             const r = e.getBoundingClientRect(); \
             return r.width && r.height ? {{x: r.left + r.width / 2, y: r.top + r.height / 2}} : null; }})()"
        );
        let at = self.wait_until(&format!("{element} to be visible"), &js, wait).await;
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            let mut event = json!({"type": kind, "x": at["x"], "y": at["y"]});
            if kind != "mouseMoved" {
                event["button"] = json!("left");
                event["clickCount"] = json!(1);
            }
            self.command("Input.dispatchMouseEvent", event).await;
        }
    }

    /// Sizes the viewport to `width` x `height` CSS pixels at `scale` device pixels each; `mobile` emulates a
    /// phone (its viewport meta tag is honoured).
    pub async fn set_viewport(&self, width: u32, height: u32, scale: f64, mobile: bool) {
        let metrics = json!({"width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile});
        self.command("Emulation.setDeviceMetricsOverride", metrics).await;
    }

    /// A PNG of the viewport, written to `path` (its directory is created).
    pub async fn screenshot(&self, path: &Path) {
        self.screenshot_with(path, json!({})).await;
    }

    /// A PNG of the rectangle `x, y, width, height` (CSS pixels) of the page, written to `path`.
    pub async fn screenshot_clip(&self, path: &Path, clip: (f64, f64, f64, f64)) {
        let (x, y, width, height) = clip;
        let clip = json!({"x": x, "y": y, "width": width, "height": height, "scale": 1});
        self.screenshot_with(path, json!({"clip": clip})).await;
    }

    async fn screenshot_with(&self, path: &Path, mut params: Value) {
        params["format"] = json!("png");
        let shot = self.command("Page.captureScreenshot", params).await;
        let png = STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("screenshot is base64");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("create {}: {err}", dir.display()));
        }
        std::fs::write(path, png).unwrap_or_else(|err| panic!("write {}: {err}", path.display()));
    }

    /// The page's console messages, uncaught exceptions and browser log entries so far (the latest 60).
    pub fn log(&self) -> Vec<String> {
        self.cdp.log.lock().unwrap().iter().cloned().collect()
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        if log.is_empty() {
            return "the page logged nothing".to_owned();
        }
        format!("the page's log:\n  {}", log.join("\n  "))
    }

    /// The page's address and probe, and its log: the tail of every failure message.
    async fn state(&self) -> String {
        let mut state = String::from("\n");
        match self
            .cdp
            .call(Some(&self.session), "Runtime.evaluate", url_params())
            .await
        {
            Ok(answer) => {
                let _ = writeln!(state, "page: {}", answer["result"]["value"]);
            }
            Err(err) => {
                let _ = writeln!(state, "the page does not answer: {err}");
            }
        }
        if let Some(probe) = &self.probe {
            let _ = match self.try_eval(probe).await {
                Ok(value) => writeln!(state, "state: {value}"),
                Err(err) => writeln!(state, "state: {err}"),
            };
        }
        state + &self.log_tail()
    }
}

fn url_params() -> Value {
    json!({"expression": "location.href + ' (' + document.readyState + ')'", "returnByValue": true})
}

/// JavaScript's truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.cdp.task.abort();
        stop(&mut self.child, &self.dir);
    }
}

/// Kills Chromium (its helper processes exit with it) and removes its profile.
fn stop(child: &mut Child, dir: &Path) {
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}

/// A browser that has not answered yet: killed if the launch fails.
struct Starting {
    child: Option<Child>,
    dir: PathBuf,
}

impl Starting {
    /// The browser's DevTools WebSocket URL, from the `DevToolsActivePort` file it writes into its profile
    /// (its port on the first line, its path on the second).
    async fn endpoint(&mut self, profile: &Path) -> String {
        let file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + START_WAIT;
        loop {
            if let Ok(text) = std::fs::read_to_string(&file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next())
                    && port.trim().parse::<u16>().is_ok()
                    && path.starts_with('/')
                {
                    return format!("ws://127.0.0.1:{}{}", port.trim(), path.trim());
                }
            }
            let child = self.child.as_mut().expect("child");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("chromium exited at start ({status})\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "chromium wrote no {} within {START_WAIT:?}\n{}",
                file.display(),
                self.log()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Chromium's own output so far.
    fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("chromium.log")).unwrap_or_default();
        format!("chromium's output:\n{text}")
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            stop(child, &self.dir);
        }
    }
}

type Reply = oneshot::Sender<Result<Value, Value>>;

/// A DevTools connection: commands answered by id, events broadcast, and a log of what the page said.
struct Cdp {
    commands: mpsc::UnboundedSender<(Value, Reply)>,
    events: broadcast::Sender<Value>,
    log: Arc<Mutex<VecDeque<String>>>,
    task: JoinHandle<()>,
}

impl Cdp {
    async fn connect(endpoint: &str) -> Result<Self, String> {
        // Screenshots come as one large message.
        let config = WebSocketConfig::default()
            .max_message_size(Some(256 << 20))
            .max_frame_size(Some(256 << 20));
        let (socket, _) = tokio_tungstenite::connect_async_with_config(endpoint, Some(config), false)
            .await
            .map_err(|err| format!("cannot reach chromium's DevTools at {endpoint}: {err}"))?;
        let (commands, mut queue) = mpsc::unbounded_channel::<(Value, Reply)>();
        let (events, _) = broadcast::channel(1024);
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let (sender, page_log) = (events.clone(), log.clone());
        let task = tokio::spawn(async move {
            let (mut write, mut read) = socket.split();
            let mut waiting: HashMap<u64, Reply> = HashMap::new();
            let mut next_id = 0_u64;
            loop {
                tokio::select! {
                    command = queue.recv() => {
                        let Some((mut message, reply)) = command else { break };
                        next_id += 1;
                        message["id"] = json!(next_id);
                        if write.send(Message::Text(message.to_string().into())).await.is_err() {
                            break;
                        }
                        waiting.insert(next_id, reply);
                    }
                    incoming = read.next() => {
                        let text = match incoming {
                            Some(Ok(Message::Text(text))) => text,
                            Some(Ok(_)) => continue,
                            Some(Err(_)) | None => break,
                        };
                        let Ok(message) = serde_json::from_str::<Value>(&text) else { continue };
                        if let Some(id) = message["id"].as_u64() {
                            if let Some(reply) = waiting.remove(&id) {
                                let answer = match message.get("error") {
                                    Some(error) => Err(error.clone()),
                                    None => Ok(message["result"].clone()),
                                };
                                let _ = reply.send(answer);
                            }
                        } else {
                            record(&page_log, &message);
                            let _ = sender.send(message);
                        }
                    }
                }
            }
        });
        Ok(Self {
            commands,
            events,
            log,
            task,
        })
    }

    /// `method` with `params`, to the page `session` (or the browser); its result or a message saying why not.
    async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value, String> {
        let mut message = json!({"method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (reply, answer) = oneshot::channel();
        self.commands
            .send((message, reply))
            .map_err(|_| format!("{method}: the browser connection is closed"))?;
        match tokio::time::timeout(COMMAND_WAIT, answer).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(format!("{method} failed: {error}")),
            Ok(Err(_)) => Err(format!("{method}: the browser connection closed")),
            Err(_) => Err(format!("{method}: no answer within {COMMAND_WAIT:?}")),
        }
    }
}

/// Keeps what the page says (console, uncaught exceptions, the browser's log: failed requests, CORS and
/// CSP refusals) for failure messages.
fn record(log: &Mutex<VecDeque<String>>, event: &Value) {
    let params = &event["params"];
    let line = match event["method"].as_str().unwrap_or_default() {
        "Runtime.consoleAPICalled" => {
            let args: Vec<String> = params["args"]
                .as_array()
                .map(|args| {
                    args.iter()
                        .map(|a| match &a["value"] {
                            Value::String(s) => s.clone(),
                            Value::Null => a["description"].as_str().unwrap_or("undefined").to_owned(),
                            other => other.to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "console.{}: {}",
                params["type"].as_str().unwrap_or("log"),
                args.join(" ")
            )
        }
        "Runtime.exceptionThrown" => {
            let details = &params["exceptionDetails"];
            let text = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("an exception");
            format!("uncaught: {text}")
        }
        "Log.entryAdded" => {
            let entry = &params["entry"];
            format!(
                "{} {}: {} {}",
                entry["source"].as_str().unwrap_or_default(),
                entry["level"].as_str().unwrap_or_default(),
                entry["text"].as_str().unwrap_or_default(),
                entry["url"].as_str().unwrap_or_default()
            )
        }
        _ => return,
    };
    let mut log = log.lock().unwrap();
    if log.len() == LOG_LINES {
        log.pop_front();
    }
    log.push_back(line);
}
