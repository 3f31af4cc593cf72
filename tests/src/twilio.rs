//! Twilio both ways. `FakeTwilio` is a local server speaking Twilio's Messages API
//! (`POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, HTTP Basic `AccountSid:AuthToken`, its Message
//! resource and JSON error bodies) that answers from a script and records what it was sent. The free functions
//! play Twilio calling our hooks: its callback forms and its `X-Twilio-Signature`, computed here independently
//! of the core's verifier so that each checks the other.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

pub const ACCOUNT_SID: &str = "AC0123456789abcdef0123456789abcdef";
pub const AUTH_TOKEN: &str = "fd0test0auth0token0000000000000a";
/// Twilio's magic test number that always sends.
pub const FROM_NUMBER: &str = "+15005550006";

/// One create-message request as it arrived (recorded on arrival, so a request left hanging is here too).
#[derive(Clone, Debug)]
pub struct SentMessage {
    /// The account sid in the request path.
    pub account_sid: String,
    /// The form's fields; a repeated name (`MediaUrl`) keeps every value in order.
    pub form: HashMap<String, Vec<String>>,
    pub received_at: chrono::DateTime<chrono::Utc>,
    /// Whether the Basic credentials and the path's account sid were this account's.
    pub authorized: bool,
    /// The status answered; `None` for a request left hanging.
    pub answered: Option<u16>,
    /// The message sid answered when the message was created.
    pub sid: Option<String>,
    /// Its place in arrival order (`FakeTwilio::ended_at`).
    pub seq: usize,
}

impl SentMessage {
    /// The first value of field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields(name).first().map(String::as_str)
    }

    /// Every value of field `name`.
    pub fn fields(&self, name: &str) -> &[String] {
        self.form.get(name).map(Vec::as_slice).unwrap_or_default()
    }

    pub fn to(&self) -> &str {
        self.field("To").unwrap_or_default()
    }

    pub fn body(&self) -> &str {
        self.field("Body").unwrap_or_default()
    }
}

/// How the fake answers one request.
#[derive(Clone, Debug)]
enum Answer {
    /// The Message resource with this (2xx) status.
    Created(u16),
    /// Twilio's error body.
    Error {
        status: u16,
        code: u32,
        message: String,
        retry_after: Option<u64>,
    },
    /// Any status with this body, as is.
    Raw { status: u16, body: String },
    /// Never answers.
    Hang,
}

impl Answer {
    /// A 2xx is a created message; any other status Twilio's error for it (`20000 + status`, as 20429 and 20500).
    fn status(status: u16) -> Self {
        if (200..300).contains(&status) {
            return Self::Created(status);
        }
        Self::Error {
            status,
            code: 20_000 + u32::from(status),
            message: StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Error")
                .to_owned(),
            retry_after: None,
        }
    }
}

struct Script {
    /// Answers for the next requests with a given `Body`, in order, before anything else.
    by_body: HashMap<String, VecDeque<Answer>>,
    /// Answers for the next requests, in order, each with its own wait; then `default`.
    next: VecDeque<(Answer, Duration)>,
    default: Answer,
    /// How long `default` answers wait: this, or a time drawn evenly between the two.
    default_delay: (Duration, Duration),
}

impl Script {
    fn default_wait(&self) -> Duration {
        let (least, most) = self.default_delay;
        if most <= least {
            return least;
        }
        least + (most - least).mul_f64(rand::random::<f64>())
    }
}

struct Shared {
    account_sid: String,
    /// The `Authorization` header value of this account's credentials.
    authorization: String,
    script: Mutex<Script>,
    sent: Mutex<Vec<SentMessage>>,
    /// Requests that reached the handler, answered or not.
    arrived: AtomicUsize,
    /// Messages answered with a sid.
    created: AtomicUsize,
    /// When each request's handling ended (answered, or its connection closed while it waited), by `seq`.
    ended: Mutex<HashMap<usize, chrono::DateTime<chrono::Utc>>>,
    /// Closed: requests wait (recorded on arrival) until it opens, then are answered as scripted.
    gate: tokio::sync::watch::Sender<bool>,
}

#[derive(Clone)]
pub struct FakeTwilio {
    /// `http://127.0.0.1:PORT`, Twilio's API root.
    pub base_url: String,
    pub account_sid: String,
    pub auth_token: String,
    shared: Arc<Shared>,
}

impl FakeTwilio {
    /// Listens on an ephemeral port as account `ACCOUNT_SID` with `AUTH_TOKEN`, creating every message.
    pub async fn start() -> Self {
        Self::start_as(ACCOUNT_SID, AUTH_TOKEN).await
    }

    pub async fn start_as(account_sid: &str, auth_token: &str) -> Self {
        let shared = Arc::new(Shared {
            account_sid: account_sid.to_owned(),
            authorization: format!("Basic {}", STANDARD.encode(format!("{account_sid}:{auth_token}"))),
            script: Mutex::new(Script {
                by_body: HashMap::new(),
                next: VecDeque::new(),
                default: Answer::Created(201),
                default_delay: (Duration::ZERO, Duration::ZERO),
            }),
            sent: Mutex::new(Vec::new()),
            arrived: AtomicUsize::new(0),
            created: AtomicUsize::new(0),
            ended: Mutex::new(HashMap::new()),
            gate: tokio::sync::watch::Sender::new(true),
        });
        let app = Router::new()
            .route("/2010-04-01/Accounts/{sid}/Messages.json", post(create_message))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base_url,
            account_sid: account_sid.to_owned(),
            auth_token: auth_token.to_owned(),
            shared,
        }
    }

    /// A Twilio channel's config for this account, sending from `FROM_NUMBER`.
    pub fn channel_config(&self) -> Value {
        json!({"account_sid": self.account_sid, "auth_token": self.auth_token, "from_number": FROM_NUMBER})
    }

    fn push(&self, answer: Answer, delay: Duration) {
        self.shared.script.lock().unwrap().next.push_back((answer, delay));
    }

    /// Answers every request with `status` from now on (a 2xx creates the message), dropping queued answers.
    pub fn answer(&self, status: u16) {
        self.answer_after(Duration::ZERO, status);
    }

    /// Answers every request with `status` after `delay` from now on, dropping queued answers.
    pub fn answer_after(&self, delay: Duration, status: u16) {
        self.answer_between(delay, delay, status);
    }

    /// Answers every request with `status` after a wait drawn evenly from `least..most` for each request
    /// (jittered, so answers do not come in waves), dropping queued answers.
    pub fn answer_between(&self, least: Duration, most: Duration, status: u16) {
        let mut script = self.shared.script.lock().unwrap();
        script.next.clear();
        script.default = Answer::status(status);
        script.default_delay = (least, most);
    }

    /// Answers the next requests whose `Body` is `body` with `statuses` in order, at once, whatever else is
    /// scripted; then as the others.
    pub fn then_for_body(&self, body: &str, statuses: &[u16]) {
        let mut script = self.shared.script.lock().unwrap();
        let queue = script.by_body.entry(body.to_owned()).or_default();
        queue.extend(statuses.iter().map(|status| Answer::status(*status)));
    }

    /// Holds every request from now on (each is recorded on arrival) until `open`: a provider that takes
    /// nothing for a while, so a backlog builds up behind it.
    pub fn close(&self) {
        self.shared.gate.send_replace(false);
    }

    /// Answers the held requests, and those after them, as scripted.
    pub fn open(&self) {
        self.shared.gate.send_replace(true);
    }

    /// When the handling of request `seq` ended: it was answered, or the client closed its connection while
    /// it waited; `None` while it is still waiting.
    pub fn ended_at(&self, seq: usize) -> Option<chrono::DateTime<chrono::Utc>> {
        self.shared.ended.lock().unwrap().get(&seq).copied()
    }

    /// Answers the next requests with `statuses` in order (a 2xx creates the message, anything else is
    /// Twilio's error for that status), then as before.
    pub fn then(&self, statuses: &[u16]) {
        for status in statuses {
            self.push(Answer::status(*status), Duration::ZERO);
        }
    }

    /// Answers the next request with Twilio's error `code`, as `then_error(400, 21211, "Invalid 'To' Phone
    /// Number")`.
    pub fn then_error(&self, status: u16, code: u32, message: &str) {
        let answer = Answer::Error {
            status,
            code,
            message: message.to_owned(),
            retry_after: None,
        };
        self.push(answer, Duration::ZERO);
    }

    /// Answers the next request 429 (Twilio's 20429) with `Retry-After: seconds`.
    pub fn then_throttled(&self, seconds: u64) {
        let answer = Answer::Error {
            status: 429,
            code: 20429,
            message: "Too Many Requests".to_owned(),
            retry_after: Some(seconds),
        };
        self.push(answer, Duration::ZERO);
    }

    /// Answers the next request with `status` and `body` as is (say, 200 with HTML).
    pub fn then_raw(&self, status: u16, body: &str) {
        let answer = Answer::Raw {
            status,
            body: body.to_owned(),
        };
        self.push(answer, Duration::ZERO);
    }

    /// Never answers the next request.
    pub fn then_hang(&self) {
        self.push(Answer::Hang, Duration::ZERO);
    }

    /// Answers the next request as `then(&[status])` would, after `delay`.
    pub fn then_after(&self, delay: Duration, status: u16) {
        self.push(Answer::status(status), delay);
    }

    /// Requests that reached the endpoint so far, answered or not.
    pub fn arrived(&self) -> usize {
        self.shared.arrived.load(Ordering::SeqCst)
    }

    /// Requests received once no more have come for 200 ms: after a sender was killed, the requests it had
    /// already written still reach the fake (the socket's buffer is read after the kill), and count.
    pub async fn arrived_when_settled(&self) -> usize {
        let mut seen = self.arrived();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = self.arrived();
            if now == seen {
                return now;
            }
            seen = now;
        }
    }

    /// Messages created (answered with a sid) so far.
    pub fn created(&self) -> usize {
        self.shared.created.load(Ordering::SeqCst)
    }

    /// Every request so far, in arrival order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.shared.sent.lock().unwrap().clone()
    }

    /// The requests for which `matches` holds.
    pub fn sent_where(&self, matches: impl Fn(&SentMessage) -> bool) -> Vec<SentMessage> {
        self.shared
            .sent
            .lock()
            .unwrap()
            .iter()
            .filter(|m| matches(m))
            .cloned()
            .collect()
    }

    /// The requests sending to `to`.
    /// Waits (30 s at most) until `count` messages to `to` were sent; them.
    pub async fn wait_for_sent(&self, to: &str, count: usize) -> Vec<SentMessage> {
        let started = std::time::Instant::now();
        loop {
            let sent = self.sent_to(to);
            if sent.len() >= count {
                return sent;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} of {count} messages to {to}: {sent:?}",
                sent.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn sent_to(&self, to: &str) -> Vec<SentMessage> {
        self.sent_where(|m| m.to() == to)
    }

    /// The requests whose `Body` is `body`.
    pub fn sent_with_body(&self, body: &str) -> Vec<SentMessage> {
        self.sent_where(|m| m.body() == body)
    }

    /// Waits until at least `count` requests have arrived (or panics after `within`); returns all so far.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<SentMessage> {
        self.wait_until_count(&self.shared.arrived, "requests", count, within)
            .await
    }

    /// Waits until at least `count` messages have been created (or panics after `within`); returns all requests.
    pub async fn wait_for_created(&self, count: usize, within: Duration) -> Vec<SentMessage> {
        self.wait_until_count(&self.shared.created, "created messages", count, within)
            .await
    }

    /// Polls a counter, never the history, so waiting stays cheap however much has been sent.
    async fn wait_until_count(
        &self,
        counter: &AtomicUsize,
        what: &str,
        count: usize,
        within: Duration,
    ) -> Vec<SentMessage> {
        let started = Instant::now();
        loop {
            let so_far = counter.load(Ordering::SeqCst);
            if so_far >= count {
                return self.sent();
            }
            assert!(
                started.elapsed() < within,
                "fake twilio: {so_far} {what} of {count} within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A new message sid: `SM` and 32 hex digits.
pub fn new_message_sid() -> String {
    format!("SM{:032x}", rand::random::<u128>())
}

/// Twilio's checks of a create request that need no account state, with its error codes.
fn invalid(form: &HashMap<String, Vec<String>>) -> Option<Answer> {
    let given = |name: &str| {
        form.get(name)
            .is_some_and(|values| values.iter().any(|v| !v.is_empty()))
    };
    let (code, message) = if !given("To") {
        (21604, "A 'To' phone number is required.")
    } else if !given("From") && !given("MessagingServiceSid") {
        (21603, "A 'From' phone number is required.")
    } else if !given("Body") && !given("MediaUrl") {
        (21619, "A text message body or media urls must be specified.")
    } else {
        return None;
    };
    Some(Answer::Error {
        status: 400,
        code,
        message: message.to_owned(),
        retry_after: None,
    })
}

async fn create_message(
    State(shared): State<Arc<Shared>>,
    Path(account_sid): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seq = shared.arrived.fetch_add(1, Ordering::SeqCst);
    // Dropped with the handler's future: when the answer went out, or the client gave up waiting.
    let _ended = Ended {
        shared: shared.clone(),
        seq,
    };
    let authorized = account_sid == shared.account_sid
        && headers
            .get(header::AUTHORIZATION)
            .is_some_and(|v| v.as_bytes() == shared.authorization.as_bytes());
    let mut form: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in form_urlencoded::parse(&body) {
        form.entry(name.into_owned()).or_default().push(value.into_owned());
    }
    let (answer, delay) = if !authorized {
        let answer = Answer::Error {
            status: 401,
            code: 20003,
            message: "Authenticate".to_owned(),
            retry_after: None,
        };
        (answer, Duration::ZERO)
    } else if let Some(problem) = invalid(&form) {
        (problem, Duration::ZERO)
    } else {
        let mut script = shared.script.lock().unwrap();
        let for_body = form
            .get("Body")
            .and_then(|bodies| bodies.first())
            .and_then(|body| script.by_body.get_mut(body))
            .and_then(VecDeque::pop_front);
        match for_body {
            Some(answer) => (answer, Duration::ZERO),
            None => script
                .next
                .pop_front()
                .unwrap_or_else(|| (script.default.clone(), script.default_wait())),
        }
    };
    let (answered, sid) = match &answer {
        Answer::Created(status) => (Some(*status), Some(new_message_sid())),
        Answer::Error { status, .. } | Answer::Raw { status, .. } => (Some(*status), None),
        Answer::Hang => (None, None),
    };
    let resource = sid.as_deref().map(|sid| message_resource(&account_sid, sid, &form));
    shared.sent.lock().unwrap().push(SentMessage {
        account_sid,
        form,
        received_at: chrono::Utc::now(),
        authorized,
        answered,
        sid,
        seq,
    });
    let _ = shared.gate.subscribe().wait_for(|open| *open).await;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let status_code = |status: u16| StatusCode::from_u16(status).expect("scripted status");
    match answer {
        Answer::Created(status) => {
            shared.created.fetch_add(1, Ordering::SeqCst);
            (status_code(status), axum::Json(resource)).into_response()
        }
        Answer::Error {
            status,
            code,
            message,
            retry_after,
        } => {
            let body = json!({"code": code, "message": message,
                "more_info": format!("https://www.twilio.com/docs/errors/{code}"), "status": status});
            let mut response = (status_code(status), axum::Json(body)).into_response();
            if let Some(seconds) = retry_after {
                response.headers_mut().insert(header::RETRY_AFTER, seconds.into());
            }
            response
        }
        Answer::Raw { status, body } => (status_code(status), body).into_response(),
        Answer::Hang => std::future::pending().await,
    }
}

/// Records when a request's handling ended, whichever way.
struct Ended {
    shared: Arc<Shared>,
    seq: usize,
}

impl Drop for Ended {
    fn drop(&mut self) {
        if let Ok(mut ended) = self.shared.ended.lock() {
            ended.insert(self.seq, chrono::Utc::now());
        }
    }
}

/// The Message resource Twilio answers a create with.
fn message_resource(account_sid: &str, sid: &str, form: &HashMap<String, Vec<String>>) -> Value {
    let field = |name: &str| form.get(name).and_then(|v| v.first()).cloned();
    let now = chrono::Utc::now().to_rfc2822();
    let uri = format!("/2010-04-01/Accounts/{account_sid}/Messages/{sid}");
    let service = field("MessagingServiceSid");
    json!({
        "account_sid": account_sid, "api_version": "2010-04-01", "body": field("Body").unwrap_or_default(),
        "date_created": now, "date_sent": null, "date_updated": now, "direction": "outbound-api",
        "error_code": null, "error_message": null, "from": field("From"), "messaging_service_sid": service,
        "num_media": form.get("MediaUrl").map_or(0, Vec::len).to_string(), "num_segments": "1", "price": null,
        "price_unit": "USD", "sid": sid,
        // A message sent through a Messaging Service starts `accepted`, one from a number `queued`.
        "status": if service.is_some() { "accepted" } else { "queued" },
        "subresource_uris": {"media": format!("{uri}/Media.json")}, "to": field("To"), "uri": format!("{uri}.json"),
    })
}

/// `X-Twilio-Signature` for a request to `url` with form `params`: base64 HMAC-SHA1, keyed with the auth token,
/// of the URL followed by each name and value, sorted by name and then value.
pub fn signature<N: AsRef<str>, V: AsRef<str>>(auth_token: &str, url: &str, params: &[(N, V)]) -> String {
    let mut pairs: Vec<(&str, &str)> = params.iter().map(|(n, v)| (n.as_ref(), v.as_ref())).collect();
    pairs.sort();
    let signed = pairs.into_iter().fold(url.to_owned(), |text, (n, v)| text + n + v);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, auth_token.as_bytes());
    STANDARD.encode(ring::hmac::sign(&key, signed.as_bytes()))
}

/// What our hook answered a provider.
#[derive(Debug)]
pub struct HookAnswer {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl HookAnswer {
    /// Sends `request` to a hook and reads its answer.
    pub async fn of(request: reqwest::RequestBuilder) -> Self {
        let response = request.send().await.expect("hook request sent");
        Self {
            status: response.status().as_u16(),
            content_type: response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
            body: response.text().await.expect("hook answer"),
        }
    }
}

/// Plays Twilio calling `url`: POSTs form `params` signed with `auth_token` for `public_url`, the address Twilio
/// was given (the service's public URL with the hook's path).
pub async fn post_signed<N: AsRef<str>, V: AsRef<str>>(
    url: &str,
    public_url: &str,
    auth_token: &str,
    params: &[(N, V)],
) -> HookAnswer {
    post_form(url, Some(&signature(auth_token, public_url, params)), params).await
}

/// POSTs form `params` to `url` with `signature` as `X-Twilio-Signature` (no header when `None`).
pub async fn post_form<N: AsRef<str>, V: AsRef<str>>(
    url: &str,
    signature: Option<&str>,
    params: &[(N, V)],
) -> HookAnswer {
    // The serializer is not `Send`: it is gone before the request is awaited, so callers can spawn this.
    let body = {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (name, value) in params {
            form.append_pair(name.as_ref(), value.as_ref());
        }
        form.finish()
    };
    let mut request = crate::http_client()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some(signature) = signature {
        request = request.header("x-twilio-signature", signature);
    }
    HookAnswer::of(request).await
}

/// The form Twilio posts to a number's messaging webhook for an inbound SMS; each `media` pair (URL, content
/// type) makes it an MMS.
pub fn inbound_message(
    message_sid: &str,
    from: &str,
    to: &str,
    body: &str,
    media: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut form: Vec<(String, String)> = [
        ("ToCountry", "US"),
        ("ToState", "CA"),
        ("SmsMessageSid", message_sid),
        ("ToCity", "SAN FRANCISCO"),
        ("FromZip", "94105"),
        ("SmsSid", message_sid),
        ("FromState", "CA"),
        ("SmsStatus", "received"),
        ("FromCity", "SAN FRANCISCO"),
        ("Body", body),
        ("FromCountry", "US"),
        ("To", to),
        ("ToZip", "94105"),
        ("NumSegments", "1"),
        ("MessageSid", message_sid),
        ("AccountSid", ACCOUNT_SID),
        ("From", from),
        ("ApiVersion", "2010-04-01"),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v.to_owned()))
    .collect();
    form.push(("NumMedia".to_owned(), media.len().to_string()));
    for (i, (url, content_type)) in media.iter().enumerate() {
        form.push((format!("MediaContentType{i}"), (*content_type).to_owned()));
        form.push((format!("MediaUrl{i}"), (*url).to_owned()));
    }
    form
}

/// The form Twilio posts to a message's StatusCallback when its status becomes `status` (`sent`, `delivered`,
/// `undelivered` with an `error_code`, ...).
pub fn status_callback(message_sid: &str, status: &str, error_code: Option<&str>) -> Vec<(String, String)> {
    let mut form: Vec<(String, String)> = [
        ("SmsSid", message_sid),
        ("SmsStatus", status),
        ("MessageStatus", status),
        ("To", "+14155550100"),
        ("MessageSid", message_sid),
        ("AccountSid", ACCOUNT_SID),
        ("From", FROM_NUMBER),
        ("ApiVersion", "2010-04-01"),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v.to_owned()))
    .collect();
    if let Some(code) = error_code {
        form.push(("ErrorCode".to_owned(), code.to_owned()));
    }
    form
}

#[cfg(test)]
mod tests {
    use super::*;

    /// twilio-python's own test vector (tests/unit/test_request_validator.py), the example of Twilio's
    /// webhook-security documentation.
    #[test]
    fn signature_matches_twilios_vector() {
        let params = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Digits", "1234"),
            ("From", "+14158675309"),
            ("To", "+18005551212"),
            ("Caller", "+14158675309"),
        ];
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        assert_eq!(signature("12345", url, &params), "RSOYDt4T1cUTdK1PDd93/VVr8B8=");
        let repeated = [
            ("Sid", "CA123"),
            ("SidAccount", "AC123"),
            ("Digits", "5678"),
            ("Digits", "1234"),
        ];
        assert_eq!(signature("12345", url, &repeated), "IK+Dwps556ElfBT0I3Rgjkr1wJU=");
    }

    fn client() -> reqwest::Client {
        crate::http_client()
    }

    async fn create(fake: &FakeTwilio, auth: (&str, &str), form: &[(&str, &str)]) -> (u16, Value) {
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.extend_pairs(form);
        let response = client()
            .post(format!(
                "{}/2010-04-01/Accounts/{}/Messages.json",
                fake.base_url, auth.0
            ))
            .basic_auth(auth.0, Some(auth.1))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.finish())
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    #[tokio::test]
    async fn creates_checks_and_follows_its_script() {
        let fake = FakeTwilio::start().await;
        let auth = (ACCOUNT_SID, AUTH_TOKEN);
        let message = [
            ("To", "+14155550100"),
            ("From", FROM_NUMBER),
            ("Body", "hi"),
            ("MediaUrl", "a"),
            ("MediaUrl", "b"),
        ];

        let (status, created) = create(&fake, auth, &message).await;
        assert_eq!(status, 201);
        let sid = created["sid"].as_str().unwrap();
        assert!(sid.starts_with("SM") && sid.len() == 34, "{sid}");
        assert_eq!(
            (created["status"].as_str(), created["num_media"].as_str()),
            (Some("queued"), Some("2"))
        );

        let (status, error) = create(&fake, (ACCOUNT_SID, "wrong"), &message).await;
        assert_eq!((status, error["code"].as_u64()), (401, Some(20003)));
        let (status, error) = create(&fake, auth, &[("From", FROM_NUMBER), ("Body", "hi")]).await;
        assert_eq!((status, error["code"].as_u64()), (400, Some(21604)));

        fake.then(&[500]);
        fake.then_error(400, 21211, "Invalid 'To' Phone Number");
        fake.then_raw(200, "<html>");
        assert_eq!(create(&fake, auth, &message).await.0, 500);
        let (status, error) = create(&fake, auth, &message).await;
        assert_eq!((status, error["code"].as_u64()), (400, Some(21211)));
        assert_eq!(create(&fake, auth, &message).await, (200, Value::Null));
        let (status, second) = create(&fake, auth, &message).await;
        assert_eq!(status, 201);
        assert_ne!(second["sid"], created["sid"]);

        let sent = fake.wait_for(7, Duration::from_secs(1)).await;
        assert_eq!((fake.arrived(), fake.created()), (7, 2));
        assert_eq!(sent[0].fields("MediaUrl"), ["a", "b"]);
        assert_eq!(sent[0].sid.as_deref(), Some(sid));
        assert!(!sent[1].authorized && sent[1].sid.is_none());
        assert_eq!(fake.sent_to("+14155550100").len(), 6);
        assert_eq!(fake.sent_with_body("hi").len(), 7);
    }

    #[tokio::test]
    async fn throttles_and_hangs_when_told() {
        let fake = FakeTwilio::start().await;
        fake.then_throttled(3);
        fake.then_hang();
        let message = [("To", "+14155550100"), ("From", FROM_NUMBER), ("Body", "hi")];
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&message)
            .finish();
        let post = || {
            client()
                .post(format!(
                    "{}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json",
                    fake.base_url
                ))
                .basic_auth(ACCOUNT_SID, Some(AUTH_TOKEN))
                .body(body.clone())
                .timeout(Duration::from_millis(300))
                .send()
        };
        let throttled = post().await.unwrap();
        assert_eq!(throttled.status(), 429);
        assert_eq!(throttled.headers()["retry-after"], "3");
        assert!(post().await.unwrap_err().is_timeout());
        assert_eq!(fake.sent()[1].answered, None);
    }
}
