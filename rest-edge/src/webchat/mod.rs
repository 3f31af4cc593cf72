//! Web chat at the edge: the widget's script and demo page (static, served from the binary), the visitor
//! API (forwarded unread to the core's `WebChat.Handle`: sessions, tokens and CORS are the core's), and the
//! visitor's live socket, which the edge holds while a core feeds it (`socket`). The edge knows no more of
//! web chat than that: frames are JSON it passes on.

mod assets;
mod socket;

use std::time::Duration;

use axum::{
    Router,
    extract::Request,
    routing::{any, get},
};

use crate::{Transport, body::Bodies, raw_forward};

const HANDLE: raw_forward::RawMethod = "/frontdesk.webchat.v1.WebChat/Handle";
/// The largest visitor API body: a message of 4,000 characters is at most 16 KB of UTF-8.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// How the web chat routes treat their calls and sockets.
pub struct Settings {
    /// Each call to the core has this time limit.
    pub call_timeout: Duration,
    /// The longest a visitor's connection may take to take one frame.
    pub send_timeout: Duration,
    pub bodies: Bodies,
}

pub fn routes(transport: Transport, settings: Settings) -> Router {
    let socket = socket::Sockets::new(transport.clone(), settings.call_timeout, settings.send_timeout);
    let visitor_api = raw_forward::Forward {
        transport,
        method: HANDLE,
        call_timeout: settings.call_timeout,
        bodies: settings.bodies,
        max_body_bytes: MAX_BODY_BYTES,
    };
    Router::new()
        .route("/webchat/widget.js", get(assets::widget))
        .route("/webchat/demo", get(assets::demo))
        .route(
            "/webchat/v1/ws",
            get(move |upgrade, request| socket.clone().open(upgrade, request)),
        )
        .route(
            "/webchat/v1/{*rest}",
            any(move |request: Request| visitor_api.clone().forward(request)),
        )
}
