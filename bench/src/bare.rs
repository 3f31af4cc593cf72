//! The physical limit: a bare axum server answering a fixed 60-byte JSON body, on the same runtime settings
//! as the service, so a scenario's ratio to it is the cost of everything the service adds. `GET /ws` is the
//! same for WebSockets: a socket with the service's buffer settings that echoes each text frame, what an idle
//! or a chatting socket costs with nothing of the service around it.

use axum::{
    Router,
    extract::ws::{Message, WebSocket, WebSocketUpgrade},
    response::Response,
    routing::get,
};

/// Exactly 60 bytes.
pub const BODY: &str = r#"{"status":"ok","version":"0.1.0","padding":"xxxxxxxxxxxxxx"}"#;

pub async fn serve(addr: &str) -> anyhow::Result<()> {
    let app = Router::new()
        .route(
            "/",
            get(|| async { ([(http::header::CONTENT_TYPE, "application/json")], BODY) }),
        )
        .route("/ws", get(echo));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    // Announced the way the service does, so the harness finds both alike.
    eprintln!(r#"{{"message":"http listening","addr":"{}"}}"#, listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
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
