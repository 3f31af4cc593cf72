//! The outbound HTTP client: rustls with the platform's trust store, connection pooling, a time limit per call.

use std::time::Duration;

/// Builds a pooled HTTPS-capable client whose every request gives up after `timeout`.
pub fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    // rustls is built with ring only; make it the process default before the first TLS config is made.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .user_agent(concat!("frontdesk/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// Why a body was not read whole.
pub enum BodyError {
    /// It passed the limit (nothing more was read).
    TooLarge,
    Transport(reqwest::Error),
}

/// The body, refused as soon as it passes `max_bytes`, so a huge answer is never held whole.
pub async fn read_limited(mut response: reqwest::Response, max_bytes: usize) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|len| len > max_bytes as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > max_bytes {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The innermost cause of an error ("Connection refused", a resolver's refusal of a private address).
pub fn innermost_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
