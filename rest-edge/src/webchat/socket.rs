//! A visitor's live socket. The handshake becomes one `WebChat.Open` call, and only once the core has
//! accepted it (a bad token is 401, a foreign origin 403, as plain HTTP answers) is the connection upgraded;
//! from then on the core's frames go out as they come, and each frame the visitor sends goes to
//! `WebChat.Post`, in order. The edge itself answers the widget's `ping` frames, sends WebSocket pings every
//! `PING_EVERY`, and closes a socket that stayed silent for `SILENCE_LIMIT`. Every frame sent has a time
//! limit (`send_timeout`): a visitor that stops reading is dropped instead of stalling the socket's loop, so
//! its pings and silence check keep running. Frames over `MAX_FRAME` bytes,
//! binary frames and text that is not a JSON object close the socket with a code that says why
//! (docs/webchat.md); nothing a visitor sends can take the process down.

use std::{net::IpAddr, time::Duration};

use axum::{
    extract::{
        Request,
        ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    response::Response,
};
use bytes::Bytes;
use frontdesk_api::webchat::v1::{ClientFrame, OpenRequest, PostAnswer, ServerFrame};
use http::{StatusCode, header, uri::PathAndQuery};
use prost::Message as _;
use tokio::time::{Instant, MissedTickBehavior};
use tonic::{Code, Streaming};

use crate::{HttpError, Transport, client_addr::ClientAddr, error::ErrorResponse, request_id_of};

const CONNECT: &str = "/frontdesk.webchat.v1.WebChat/Open";
const POST: &str = "/frontdesk.webchat.v1.WebChat/Post";
/// The largest frame a visitor may send (docs/webchat.md).
const MAX_FRAME: usize = 64 * 1024;
const PING_EVERY: Duration = Duration::from_secs(25);
const SILENCE_LIMIT: Duration = Duration::from_secs(60);
/// Read buffer of an idle socket: visitor frames are small, and ten thousand idle sockets must stay cheap.
const READ_BUFFER: usize = 4 * 1024;

/// Close codes (RFC 6455 and the web chat's own, docs/webchat.md).
mod close {
    pub const GOING_AWAY: u16 = 1001;
    pub const UNSUPPORTED: u16 = 1003;
    pub const INVALID_PAYLOAD: u16 = 1007;
    pub const TOO_BIG: u16 = 1009;
    pub const SERVER_ERROR: u16 = 1011;
    pub const RESTART: u16 = 1012;
    pub const REVOKED: u16 = 4401;
}

#[derive(Clone)]
pub struct Sockets {
    transport: Transport,
    call_timeout: Duration,
    send_timeout: Duration,
}

impl Sockets {
    pub fn new(transport: Transport, call_timeout: Duration, send_timeout: Duration) -> Self {
        Self {
            transport,
            call_timeout,
            send_timeout,
        }
    }

    /// `GET /webchat/v1/ws?token=...&after=...`.
    pub async fn open(
        self,
        upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
        request: Request,
    ) -> Response {
        let id = request_id_of(&request);
        let Ok(upgrade) = upgrade else {
            return HttpError::new(
                StatusCode::UPGRADE_REQUIRED,
                "upgrade_required",
                "this route takes a WebSocket handshake",
            )
            .into_response_with_id(&id);
        };
        let (token, after) = credentials(&request);
        let origin = header_text(&request, header::ORIGIN.as_str());
        let host = header_text(&request, header::HOST.as_str());
        let peer = request.extensions().get::<ClientAddr>().map(|addr| addr.0);
        let mut call = tonic::Request::new(OpenRequest {
            token: token.clone(),
            after,
            origin,
            host,
            peer: peer.map(|ip| ip.to_string()).unwrap_or_default(),
        });
        if let Ok(value) = id.parse() {
            call.metadata_mut().insert(frontdesk_api::wire::REQUEST_ID, value);
        }
        let opened = tokio::time::timeout(
            self.call_timeout,
            self.transport
                .server_streaming(PathAndQuery::from_static(CONNECT), call),
        )
        .await
        .unwrap_or_else(|_| {
            Err(tonic::Status::deadline_exceeded(
                "the core did not open the socket in time",
            ))
        });
        let frames = match opened {
            Ok(frames) => frames.into_inner(),
            Err(status) => return HttpError::from_status(&status).into_response_with_id(&id),
        };
        upgrade
            .read_buffer_size(READ_BUFFER)
            .write_buffer_size(0)
            .max_message_size(MAX_FRAME)
            .max_frame_size(MAX_FRAME)
            .on_upgrade(move |socket| {
                let link = Link {
                    sockets: self,
                    token,
                    peer,
                };
                link.pump(socket, frames)
            })
    }
}

/// The token (query `token`, else `Authorization: Bearer`) and `after` of a handshake.
fn credentials(request: &Request) -> (String, String) {
    let mut token = String::new();
    let mut after = String::new();
    for (name, value) in form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "token" => token = value.into_owned(),
            "after" => after = value.into_owned(),
            _ => {}
        }
    }
    if token.is_empty()
        && let Some(bearer) = header_text(request, header::AUTHORIZATION.as_str()).strip_prefix("Bearer ")
    {
        token = bearer.trim().to_owned();
    }
    (token, after)
}

fn header_text(request: &Request, name: &str) -> String {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// One open socket's link to the core.
struct Link {
    sockets: Sockets,
    token: String,
    peer: Option<IpAddr>,
}

/// What to do with the socket after an event.
enum Next {
    Continue,
    Close(u16, String),
    /// The visitor is gone (closed, or the connection broke): nothing more to send.
    Gone,
}

impl Link {
    async fn pump(self, mut socket: WebSocket, mut frames: Streaming<Bytes>) {
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut heard = Instant::now();
        loop {
            let next = tokio::select! {
                frame = frames.message() => self.forward(&mut socket, frame).await,
                incoming = socket.recv() => {
                    heard = Instant::now();
                    self.receive(&mut socket, incoming).await
                }
                _ = ping.tick() => {
                    if heard.elapsed() > SILENCE_LIMIT {
                        Next::Close(close::GOING_AWAY, "no answer to pings".to_owned())
                    } else {
                        self.send(&mut socket, Message::Ping(Bytes::new())).await
                    }
                }
            };
            match next {
                Next::Continue => {}
                Next::Gone => return,
                Next::Close(code, reason) => {
                    let frame = CloseFrame {
                        code,
                        reason: reason.into(),
                    };
                    self.send(&mut socket, Message::Close(Some(frame))).await;
                    return;
                }
            }
        }
    }

    /// Sends one message, within the time limit: a visitor whose connection takes nothing more is gone.
    async fn send(&self, socket: &mut WebSocket, message: Message) -> Next {
        match tokio::time::timeout(self.sockets.send_timeout, socket.send(message)).await {
            Ok(Ok(())) => Next::Continue,
            Ok(Err(_)) => Next::Gone,
            Err(_) => {
                metrics::counter!("frontdesk_webchat_sends_timed_out_total").increment(1);
                Next::Gone
            }
        }
    }

    /// What the visitor sent.
    async fn receive(&self, socket: &mut WebSocket, incoming: Option<Result<Message, axum::Error>>) -> Next {
        let text = match incoming {
            None | Some(Ok(Message::Close(_))) => return Next::Gone,
            Some(Err(err)) => return refused_read(&err),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => return Next::Continue,
            Some(Ok(Message::Binary(_))) => {
                return Next::Close(close::UNSUPPORTED, "frames are JSON text, not binary".to_owned());
            }
            Some(Ok(Message::Text(text))) => text,
        };
        match is_ping(text.as_str()) {
            Err(reason) => Next::Close(close::INVALID_PAYLOAD, reason),
            Ok(true) => self.send(socket, Message::Text(r#"{"type":"pong"}"#.into())).await,
            Ok(false) => self.post(socket, Bytes::copy_from_slice(text.as_bytes())).await,
        }
    }

    /// Passes a visitor's frame to the core and sends back what it answers.
    async fn post(&self, socket: &mut WebSocket, json: Bytes) -> Next {
        let mut call = tonic::Request::new(ClientFrame {
            token: self.token.clone(),
            json: json.to_vec(),
            peer: self.peer.map(|ip| ip.to_string()).unwrap_or_default(),
        });
        call.set_timeout(self.sockets.call_timeout);
        let answer = match self
            .sockets
            .transport
            .unary(PathAndQuery::from_static(POST), call)
            .await
        {
            Ok(answer) => PostAnswer::decode(answer.into_inner()).ok(),
            Err(status) => return refused_post(&status),
        };
        let Some(answer) = answer else {
            return Next::Close(close::SERVER_ERROR, "internal error".to_owned());
        };
        for frame in answer.frames {
            let Ok(text) = String::from_utf8(frame) else { continue };
            if let Next::Gone = self.send(socket, Message::Text(text.into())).await {
                return Next::Gone;
            }
        }
        match u16::try_from(answer.close_code) {
            Ok(0) | Err(_) => Next::Continue,
            Ok(code) => Next::Close(code, answer.close_reason),
        }
    }

    /// Sends one frame the core pushed, or closes as it says.
    async fn forward(&self, socket: &mut WebSocket, frame: Result<Option<Bytes>, tonic::Status>) -> Next {
        let frame = match frame {
            Ok(Some(encoded)) => ServerFrame::decode(encoded).ok(),
            Ok(None) => return Next::Close(close::RESTART, "live updates ended; reconnect".to_owned()),
            Err(status) => {
                tracing::debug!(code = ?status.code(), "a web chat stream ended with an error");
                return Next::Close(close::RESTART, "live updates were interrupted; reconnect".to_owned());
            }
        };
        let Some(frame) = frame else {
            return Next::Close(close::SERVER_ERROR, "internal error".to_owned());
        };
        if frame.close_code != 0 {
            return Next::Close(
                u16::try_from(frame.close_code).unwrap_or(close::SERVER_ERROR),
                frame.close_reason,
            );
        }
        match String::from_utf8(frame.json) {
            Ok(text) => self.send(socket, Message::Text(text.into())).await,
            Err(_) => Next::Continue,
        }
    }
}

/// A frame that could not be read: over the size limit (1009), or a broken connection.
fn refused_read(err: &axum::Error) -> Next {
    use std::error::Error as _;
    let too_big = err
        .source()
        .and_then(|cause| cause.downcast_ref::<tungstenite::Error>())
        .is_some_and(|cause| matches!(cause, tungstenite::Error::Capacity(_)));
    if too_big {
        Next::Close(close::TOO_BIG, format!("frames are at most {MAX_FRAME} bytes"))
    } else {
        Next::Gone
    }
}

/// How a refused frame ends: a revoked session closes with 4401, a frame the core could not read with 1007.
fn refused_post(status: &tonic::Status) -> Next {
    match status.code() {
        Code::Unauthenticated | Code::NotFound => {
            Next::Close(close::REVOKED, "the session is no longer valid".to_owned())
        }
        Code::InvalidArgument => Next::Close(close::INVALID_PAYLOAD, status.message().to_owned()),
        _ => Next::Close(close::SERVER_ERROR, "internal error".to_owned()),
    }
}

/// Whether a frame is the widget's `ping`; an error naming why it is not a JSON object.
fn is_ping(text: &str) -> Result<bool, String> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(frame)) => {
            Ok(frame.get("type").and_then(serde_json::Value::as_str) == Some("ping"))
        }
        Ok(_) => Err("a frame is a JSON object".to_owned()),
        Err(err) => Err(format!("a frame is a JSON object: {err}")),
    }
}
