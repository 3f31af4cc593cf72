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
