//! The physical limit: a bare axum server answering a fixed 60-byte JSON body, on the same runtime settings
//! as the service, so a scenario's ratio to it is the cost of everything the service adds. `GET /ws` is the
//! same for WebSockets: a socket with the service's buffer settings that echoes each text frame, what an idle
//! or a chatting socket costs with nothing of the service around it. Given Redis, `GET /limited` answers the
//! same body after the service's own rate-limit call (one script round trip, an access stamp checked, usage
//! counted): the most any authenticated call that makes that round trip can do here.

use std::sync::Arc;

use axum::{
    Router,
    extract::ws::{Message, WebSocket, WebSocketUpgrade},
    response::{IntoResponse, Response},
    routing::get,
};
use frontdesk_domain::access::rate_limit::RedisWindows;
use http::StatusCode;

/// Exactly 60 bytes.
pub const BODY: &str = r#"{"status":"ok","version":"0.1.0","padding":"xxxxxxxxxxxxxx"}"#;

/// The account the limited route counts its requests under, apart from any account the bench creates.
const LIMITED_ACCOUNT: &str = "acct_bench_bare_limit";

pub async fn serve(addr: &str, redis: Option<&str>) -> anyhow::Result<()> {
    let mut app = Router::new()
        .route(
            "/",
            get(|| async { ([(http::header::CONTENT_TYPE, "application/json")], BODY) }),
        )
        .route("/ws", get(echo));
    if let Some(url) = redis {
        let windows = Arc::new(RedisWindows::new(url)?);
        // Made once, as the service's cache holds a key's stamp: the route adds nothing per request.
        let stamp: Arc<[(String, String)]> =
            Arc::new([(format!("frontdesk:bench:stamp:{LIMITED_ACCOUNT}"), String::new())]);
        app = app.route("/limited", get(move || limited(windows.clone(), stamp.clone())));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    // Announced the way the service does, so the harness finds both alike.
    eprintln!(r#"{{"message":"http listening","addr":"{}"}}"#, listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

/// The body once the rate-limit script has counted the request, as the service's call does; 503 if Redis
/// did not answer.
async fn limited(windows: Arc<RedisWindows>, stamp: Arc<[(String, String)]>) -> Response {
    match windows
        .check(
            LIMITED_ACCOUNT,
            1_000_000_000,
            std::time::Duration::from_secs(60),
            &stamp,
        )
        .await
    {
        Ok(Some(_)) => ([(http::header::CONTENT_TYPE, "application/json")], BODY).into_response(),
        Ok(None) | Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// A socket configured as the service's edge configures visitors' sockets, echoing text frames.
async fn echo(upgrade: WebSocketUpgrade) -> Response {
    upgrade
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_message_size(64 * 1024)
        .on_upgrade(|mut socket: WebSocket| async move {
            while let Some(Ok(message)) = socket.recv().await {
                if let Message::Text(text) = message
                    && socket.send(Message::Text(text)).await.is_err()
                {
                    return;
                }
            }
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_body_is_sixty_bytes() {
        assert_eq!(super::BODY.len(), 60);
    }
}
