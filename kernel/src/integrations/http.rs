//! The one way the service builds an outbound HTTP client: rustls with the platform's trust store, pooled
//! connections, a time limit per call and per connection, and its user agent; and, for URLs a customer
//! chose, the restrictions such a URL needs (no redirects followed by the client, no proxy from the
//! environment, and connections only to addresses a rule allows, checked when the name resolves).

use std::{
    net::{IpAddr, SocketAddr},
    sync::{Arc, LazyLock},
    time::Duration,
};

use reqwest::{
    ClientBuilder,
    dns::{Addrs, Name, Resolve, Resolving},
};

/// Which addresses a client may connect to.
pub type AddressRule = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// A client builder with what every outbound client has: its user agent, a time limit per call (`timeout`)
/// and per connection (`connect_timeout`). Callers add what their destinations need before `build`.
pub fn builder(user_agent: &str, timeout: Duration, connect_timeout: Duration) -> ClientBuilder {
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(connect_timeout)
        .user_agent(user_agent);
    match &*TLS {
        Some(tls) => builder.tls_backend_preconfigured(tls.clone()),
        // The trust store could not be read: reqwest reads it again at `build` and says why.
        None => builder,
    }
}

/// The TLS settings every outbound client shares: what reqwest would make for each (rustls on ring, TLS 1.2
/// and 1.3, the platform's trust store, ALPN for HTTP/2 and HTTP/1.1), made once per process, as reading and
/// parsing the trust store's few hundred certificates for each client made every start slower.
static TLS: LazyLock<Option<rustls::ClientConfig>> = LazyLock::new(|| {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Also the process default, for TLS configurations made elsewhere (the trace exporter's gRPC channel).
    let _ = rustls::crypto::CryptoProvider::install_default((*provider).clone());
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone()).ok()?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(config)
});

/// `builder` restricted for URLs a customer chose: the client follows no redirect (one could lead
/// anywhere; a caller that follows them checks each hop), reads no proxy from the environment, and, with a
/// `rule`, connects only to the addresses it allows. The rule is applied to what the name resolves to at
/// connection time, so a name that resolved elsewhere when it was checked (DNS rebinding) still cannot reach
/// a refused address.
pub fn restricted(builder: ClientBuilder, rule: Option<AddressRule>) -> ClientBuilder {
    let builder = builder.redirect(reqwest::redirect::Policy::none()).no_proxy();
    match rule {
        Some(rule) => builder.dns_resolver(Arc::new(CheckedResolver { rule })),
        None => builder,
    }
}

/// A client for the services the operator configured (channel providers, the server's model provider),
/// whose every request gives up after `timeout`.
pub fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    let user_agent = concat!("frontdesk/", env!("CARGO_PKG_VERSION"));
    Ok(builder(user_agent, timeout, timeout.min(Duration::from_secs(5))).build()?)
}

/// Resolves with the system resolver and keeps only the addresses the rule allows: the connection is made
/// to an address that was checked.
struct CheckedResolver {
    rule: AddressRule,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let rule = self.rule.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| rule(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} resolves to no allowed address").into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
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
