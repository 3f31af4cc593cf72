//! Web chat as a visitor's browser speaks it: the visitor API over HTTP and the live socket over a real
//! WebSocket client, plus the channel set-up the business makes.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{self, Message, client::IntoClientRequest, protocol::frame::coding::CloseCode},
};

use crate::{Answer, Db, Server, call_with, platform::Platform, redis_server};

/// How long a test waits for a frame that must come.
pub const FRAME_WAIT: Duration = Duration::from_secs(10);
/// How long a test waits for what the service does in the background (a delivery, a webhook).
pub const WAIT: Duration = Duration::from_secs(20);

/// The service on `db` (with Redis beside PostgreSQL, as in production), quick jobs and webhooks, loopback
/// webhook receivers allowed, and `extra` on top.
pub async fn start(db: &Db, extra: &[(&str, &str)]) -> Server {
    let redis = redis_server::shared_url();
    let mut env: Vec<(&str, &str)> = vec![
        // Every test's visitors come from 127.0.0.1 and, on PostgreSQL, share one Redis: the new-session
        // budget per address is the flood tests' to spend.
        ("FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE", "100000"),
        ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
        ("FRONTDESK_JOB_POLL_INTERVAL", "20ms"),
        ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "20ms"),
    ];
    if db.is_postgres() {
        env.push(("REDIS_URL", &redis));
    }
    env.extend_from_slice(extra);
    Server::start(db, &env).await
}

/// `POST /v1/contacts/{id}/send-message` to the visitor's contact: the new message's id.
pub async fn reply(platform: &Platform<'_>, visitor: &Visitor, text: &str) -> String {
    let path = format!("/v1/contacts/{}/send-message", visitor.contact_id);
    let answer = platform.send("POST", &path, Some(json!({"text": text}))).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    answer.body["message_id"].as_str().unwrap().to_owned()
}

/// The message as the platform API shows it, once `done` holds (or panics after `WAIT`).
pub async fn message_when(platform: &Platform<'_>, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let message = platform.ok("GET", &format!("/v1/messages/{id}"), None).await["message"].clone();
        if done(&message) {
            return message;
        }
        assert!(tokio::time::Instant::now() < deadline, "message {id} stayed {message}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A connected web chat channel.
#[derive(Clone, Debug)]
pub struct Channel {
    pub id: String,
    pub name: String,
    pub widget_key: String,
}

impl Channel {
    /// Connects web chat channel `name` with `config`.
    pub async fn connect(platform: &Platform<'_>, name: &str, config: Value) -> Self {
        let body = json!({"name": name, "type": "webchat", "config": config});
        let channel = platform.ok("POST", "/v1/channels", Some(body)).await["channel"].clone();
        Self {
            id: channel["id"].as_str().expect("id").to_owned(),
            name: name.to_owned(),
            widget_key: channel["widget_key"].as_str().expect("widget_key").to_owned(),
        }
    }
}

/// `method path` of the visitor API, with `headers`.
pub async fn call(server: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: Option<Value>) -> Answer {
    let body = body.map(|b| b.to_string());
    call_with(method, &server.url(path), headers, body.as_deref()).await
}

/// A visitor with a session.
#[derive(Clone, Debug)]
pub struct Visitor {
    pub session_id: String,
    pub token: String,
    pub contact_id: String,
    pub conversation_id: String,
    /// The answer that started the session.
    pub started: Value,
}

/// `GET /webchat/v1/messages?after=` with `token` as the bearer, whatever it answers.
pub async fn list_messages(server: &Server, token: &str, after: &str) -> Answer {
    let bearer = format!("Bearer {token}");
    let path = format!("/webchat/v1/messages?after={after}");
    call(server, "GET", &path, &[("authorization", &bearer)], None).await
}

impl Visitor {
    /// Starts a session on `channel` (no page origin), with `fields` merged into the request.
    pub async fn start(server: &Server, channel: &Channel, fields: Value) -> Self {
        let mut body = json!({"widget_key": channel.widget_key});
        if let (Some(body), Some(fields)) = (body.as_object_mut(), fields.as_object()) {
            body.extend(fields.clone());
        }
        Self::started(call(server, "POST", "/webchat/v1/sessions", &[], Some(body)).await)
    }

    /// The visitor of a session-start answer (which must be 201).
    pub fn started(answer: Answer) -> Self {
        assert_eq!(answer.status, 201, "start a session: {}", answer.body);
        let text = |key: &str| answer.body[key].as_str().expect(key).to_owned();
        Self {
            session_id: text("session_id"),
            token: text("token"),
            contact_id: text("contact_id"),
            conversation_id: text("conversation_id"),
            started: answer.body.clone(),
        }
    }

    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// `POST /webchat/v1/messages`.
    pub async fn post(&self, server: &Server, text: &str, client_message_id: &str) -> Answer {
        let body = json!({"text": text, "client_message_id": client_message_id});
        let bearer = self.bearer();
        call(
            server,
            "POST",
            "/webchat/v1/messages",
            &[("authorization", &bearer)],
            Some(body),
        )
        .await
    }

    /// `GET /webchat/v1/messages?after=`: the message ids.
    pub async fn thread(&self, server: &Server, after: &str) -> Vec<Value> {
        let answer = list_messages(server, &self.token, after).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.body["messages"].as_array().expect("messages").clone()
    }

    /// Opens the live socket (`after`: replay from there), from a page of `origin` ("" for none).
    pub async fn socket(&self, server: &Server, after: &str, origin: &str) -> Socket {
        Socket::open(server, &self.token, after, origin)
            .await
            .unwrap_or_else(|status| panic!("the socket was refused: {status}"))
    }
}

/// A visitor's live socket.
pub struct Socket {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// How a socket ended.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed {
    pub code: u16,
    pub reason: String,
}

impl Socket {
    /// The handshake; `Err` with the HTTP status when the server refused it.
    pub async fn open(server: &Server, token: &str, after: &str, origin: &str) -> Result<Self, u16> {
        let ws = server.http.replacen("http://", "ws://", 1);
        let url = format!("{ws}/webchat/v1/ws?token={token}&after={after}");
        let mut request = url.into_client_request().expect("ws request");
        if !origin.is_empty() {
            request.headers_mut().insert("origin", origin.parse().expect("origin"));
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((stream, _)) => Ok(Self { stream }),
            Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
            Err(err) => panic!("websocket handshake failed: {err}"),
        }
    }

    /// The handshake from a client whose connection takes at most about `receive_buffer` bytes before its
    /// program reads them (a visitor that stops reading fills it at once).
    pub async fn open_small(server: &Server, token: &str, after: &str, receive_buffer: u32) -> Self {
        let addr: std::net::SocketAddr = server.http.trim_start_matches("http://").parse().expect("edge address");
        let socket = tokio::net::TcpSocket::new_v4().expect("tcp socket");
        socket.set_recv_buffer_size(receive_buffer).expect("receive buffer");
        let stream = socket.connect(addr).await.expect("connect");
        let ws = server.http.replacen("http://", "ws://", 1);
        let request = format!("{ws}/webchat/v1/ws?token={token}&after={after}")
            .into_client_request()
            .expect("ws request");
        let (stream, _) = tokio_tungstenite::client_async(request, MaybeTlsStream::Plain(stream))
            .await
            .expect("websocket handshake");
        Self { stream }
    }

    /// Sends a text frame.
    pub async fn send_text(&mut self, text: &str) {
        self.stream.send(Message::Text(text.into())).await.expect("send frame");
    }

    pub async fn send(&mut self, frame: Value) {
        self.send_text(&frame.to_string()).await;
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.stream
            .send(Message::Binary(bytes.into()))
            .await
            .expect("send frame");
    }

    /// The next JSON frame (pings skipped); panics on a close or after `FRAME_WAIT`.
    pub async fn frame(&mut self) -> Value {
        match self.next(FRAME_WAIT).await {
            Some(Ok(frame)) => frame,
            Some(Err(closed)) => panic!("the socket closed: {closed:?}"),
            None => panic!("no frame within {FRAME_WAIT:?}"),
        }
    }

    /// Frames until one of `frame_type` comes; that one.
    pub async fn frame_of(&mut self, frame_type: &str) -> Value {
        loop {
            let frame = self.frame().await;
            if frame["type"] == frame_type {
                return frame;
            }
        }
    }

    /// Whatever comes within `wait`: a frame, the close, or nothing.
    pub async fn next(&mut self, wait: Duration) -> Option<Result<Value, Closed>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = tokio::time::timeout_at(deadline, self.stream.next()).await.ok()?;
            match message {
                Some(Ok(Message::Text(text))) => {
                    return Some(Ok(serde_json::from_str(&text).expect("a frame is JSON")));
                }
                Some(Ok(Message::Close(frame))) => {
                    return Some(Err(frame.map_or(
                        Closed {
                            code: CloseCode::Status.into(),
                            reason: String::new(),
                        },
                        |f| Closed {
                            code: f.code.into(),
                            reason: f.reason.to_string(),
                        },
                    )));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => {
                    return Some(Err(Closed {
                        code: CloseCode::Abnormal.into(),
                        reason: "the connection broke".to_owned(),
                    }));
                }
            }
        }
    }

    /// The close the server sends; panics if a frame or nothing comes instead.
    pub async fn closed(&mut self) -> Closed {
        loop {
            match self.next(FRAME_WAIT).await {
                Some(Err(closed)) => return closed,
                Some(Ok(_)) => {}
                None => panic!("the socket stayed open"),
            }
        }
    }

    /// Closes from the visitor's side.
    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }
}
