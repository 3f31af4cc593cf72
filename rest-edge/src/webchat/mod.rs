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

use crate::{Transport, raw_forward};

const HANDLE: raw_forward::RawMethod = "/frontdesk.webchat.v1.WebChat/Handle";

pub fn routes(transport: Transport, call_timeout: Duration) -> Router {
    let socket = socket::Sockets::new(transport.clone(), call_timeout);
    Router::new()
        .route("/webchat/widget.js", get(assets::widget))
        .route("/webchat/demo", get(assets::demo))
        .route(
            "/webchat/v1/ws",
            get(move |upgrade, request| socket.clone().open(upgrade, request)),
        )
        .route(
            "/webchat/v1/{*rest}",
            any(move |request: Request| raw_forward::forward(transport.clone(), HANDLE, call_timeout, request)),
        )
}
