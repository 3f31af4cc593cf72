//! The physical limit: a bare axum server answering a fixed 60-byte JSON body, on the same runtime settings
//! as the service, so a scenario's ratio to it is the cost of everything the service adds.

use axum::{Router, routing::get};

/// Exactly 60 bytes.
pub const BODY: &str = r#"{"status":"ok","version":"0.1.0","padding":"xxxxxxxxxxxxxx"}"#;

pub async fn serve(addr: &str) -> anyhow::Result<()> {
    let app = Router::new().route(
        "/",
        get(|| async { ([(http::header::CONTENT_TYPE, "application/json")], BODY) }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    // Announced the way the service does, so the harness finds both alike.
    eprintln!(r#"{{"message":"http listening","addr":"{}"}}"#, listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_body_is_sixty_bytes() {
        assert_eq!(super::BODY.len(), 60);
    }
}
