//! The guarded fetcher of knowledge imports. Every address a page's host resolves to is checked against the
//! private-address rule before the request, and the client's resolver hands the connection only addresses
//! that pass the rule, so a name that resolves differently at connection time (DNS rebinding) still cannot
//! reach a private address. Redirects are followed here, not by the client, so each hop is checked the same
//! way. A page has a time limit, a size limit (after decompression) and a redirect limit; a server serves at
//! most a few of this process's fetches at once, counted by the address its name resolves to, so the names
//! of a wildcard domain share one server's slots. A refusal never tells which address a name resolved to:
//! the answers of internal DNS are nobody's business.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use reqwest::{
    Url,
    header::{CONTENT_TYPE, LOCATION},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::integrations::http::{self, AddressRule, BodyError, read_limited};

/// The user agent of every request, and the one `robots.txt` rules are read for.
pub const BOT_NAME: &str = "FrontDeskBot";

#[derive(Clone, Copy, Debug)]
pub struct FetchLimits {
    /// For a whole page: connection, redirects and body.
    pub timeout: Duration,
    pub max_bytes: usize,
    pub max_redirects: usize,
    /// Fetches of one server (one resolved address) at once, in this process.
    pub per_host: usize,
}

/// A page as served: where it ended up after redirects, its content type and its (decompressed) body.
pub struct Fetched {
    pub url: Url,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// Why a page was not read: a stable reason and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageError {
    pub reason: &'static str,
    pub message: String,
}

impl PageError {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

pub struct Fetcher {
    client: reqwest::Client,
    rule: AddressRule,
    limits: FetchLimits,
    hosts: HostSlots,
}

impl Fetcher {
    pub fn new(rule: AddressRule, limits: FetchLimits) -> anyhow::Result<Self> {
        let user_agent = concat!("FrontDeskBot/", env!("CARGO_PKG_VERSION"));
        let builder = http::builder(user_agent, limits.timeout, limits.timeout)
            .gzip(true)
            .brotli(true);
        let client = http::restricted(builder, Some(rule.clone())).build()?;
        Ok(Self {
            client,
            rule,
            hosts: HostSlots::new(limits.per_host),
            limits,
        })
    }

    /// `url` with at most `max_bytes` of body (the page limit when smaller).
    pub async fn get(&self, url: &Url, max_bytes: usize) -> Result<Fetched, PageError> {
        let max_bytes = max_bytes.min(self.limits.max_bytes);
        let fetch = async {
            let server = self.check_addresses(url).await?;
            let _slot = self.hosts.acquire(server).await;
            self.follow(url.clone(), max_bytes).await
        };
        tokio::time::timeout(self.limits.timeout, fetch)
            .await
            .unwrap_or_else(|_| Err(timed_out(self.limits.timeout)))
    }

    async fn follow(&self, mut url: Url, max_bytes: usize) -> Result<Fetched, PageError> {
        for _ in 0..=self.limits.max_redirects {
            self.check_addresses(&url).await?;
            crate::jobs::guard::before_effect().await;
            let response = self
                .client
                .get(url.clone())
                .send()
                .await
                .map_err(|e| transport(&e, self.limits.timeout))?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .ok_or_else(|| PageError::new("http_error", format!("HTTP {status} without a Location")))?;
                url = next_hop(&url, location)?;
                continue;
            }
            if !status.is_success() {
                return Err(PageError::new("http_error", format!("HTTP {status}")));
            }
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body = read_capped(response, max_bytes, self.limits.timeout).await?;
            return Ok(Fetched {
                url,
                content_type,
                body,
            });
        }
        Err(PageError::new(
            "too_many_redirects",
            format!("more than {} redirects", self.limits.max_redirects),
        ))
    }

    /// Refuses `url` when its host is, or resolves to, an address the rule refuses (without telling which
    /// address); else the address that stands for its server (the lowest it resolves to).
    async fn check_addresses(&self, url: &Url) -> Result<IpAddr, PageError> {
        let addresses: Vec<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            Some(url::Host::Domain(name)) => tokio::net::lookup_host((name, 0))
                .await
                .map_err(|e| PageError::new("unreachable", format!("{name} does not resolve: {e}")))?
                .map(|a| a.ip())
                .collect(),
            None => return Err(PageError::new("unreachable", "the URL names no host")),
        };
        if addresses.iter().any(|ip| !(self.rule)(*ip)) {
            return Err(PageError::new(
                "private_address",
                format!(
                    "{} is refused: it is or resolves to a private, loopback or link-local address",
                    url.host_str().unwrap_or_default()
                ),
            ));
        }
        addresses
            .into_iter()
            .min()
            .ok_or_else(|| PageError::new("unreachable", "the name resolves to no address"))
    }
}

/// Where a redirect leads, if it is an http(s) URL without credentials.
fn next_hop(from: &Url, location: &str) -> Result<Url, PageError> {
    let next = from
        .join(location)
        .map_err(|_| PageError::new("http_error", format!("a redirect to an invalid URL: {location}")))?;
    if !matches!(next.scheme(), "http" | "https") || !next.username().is_empty() || next.password().is_some() {
        return Err(PageError::new(
            "http_error",
            format!("a redirect to a refused URL: {next}"),
        ));
    }
    Ok(next)
}

/// The body, or `too_large` as soon as it passes `max_bytes` (so a huge page is never held whole).
async fn read_capped(response: reqwest::Response, max_bytes: usize, timeout: Duration) -> Result<Vec<u8>, PageError> {
    read_limited(response, max_bytes).await.map_err(|err| match err {
        BodyError::TooLarge => PageError::new("too_large", format!("the page is larger than {max_bytes} bytes")),
        BodyError::Transport(e) => transport(&e, timeout),
    })
}

fn timed_out(timeout: Duration) -> PageError {
    PageError::new("timeout", format!("no complete answer within {} s", timeout.as_secs()))
}

fn transport(error: &reqwest::Error, timeout: Duration) -> PageError {
    if error.is_timeout() {
        return timed_out(timeout);
    }
    // The resolver's refusal comes back as a connection error; its message names the host.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    PageError::new("unreachable", message)
}

/// A few fetch slots per server (by address), so an import never hammers one site. A server's slots are
/// kept while a fetch holds or waits for one, and forgotten after, so the map holds only servers in use.
struct HostSlots {
    per_host: usize,
    servers: Arc<Mutex<HashMap<IpAddr, Arc<Semaphore>>>>,
}

/// A fetch's slot at its server; dropping it frees the slot, and the server's entry when no one else uses
/// it.
struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    server: IpAddr,
    slots: Arc<Semaphore>,
    servers: Arc<Mutex<HashMap<IpAddr, Arc<Semaphore>>>>,
}

impl HostSlots {
    fn new(per_host: usize) -> Self {
        Self {
            per_host: per_host.max(1),
            servers: Arc::default(),
        }
    }

    async fn acquire(&self, server: IpAddr) -> Slot {
        let slots = {
            let mut servers = self.servers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            servers
                .entry(server)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_host)))
                .clone()
        };
        let permit = slots.clone().acquire_owned().await.ok();
        Slot {
            permit,
            server,
            slots,
            servers: self.servers.clone(),
        }
    }

    #[cfg(test)]
    fn servers(&self) -> usize {
        self.servers.lock().map_or(0, |servers| servers.len())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut servers = self.servers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The map's handle and this one: nobody else holds or waits for a slot of this server. Handles are
        // taken under the map's lock, so none can appear meanwhile.
        if Arc::strong_count(&self.slots) == 2 {
            servers.remove(&self.server);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site on 127.0.0.1 whose `/go` redirects to `to`.
    async fn redirecting_site(to: &'static str) -> Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route(
            "/go",
            axum::routing::get(move || async move { axum::response::Redirect::temporary(to) }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Url::parse(&format!("http://{addr}/go")).unwrap()
    }

    /// A fetcher under `rule` with small limits, one slot per server and at most `max_redirects`.
    fn fetcher(rule: AddressRule, max_redirects: usize) -> Fetcher {
        let limits = FetchLimits {
            timeout: Duration::from_secs(5),
            max_bytes: 1024,
            max_redirects,
            per_host: 1,
        };
        Fetcher::new(rule, limits).unwrap()
    }

    #[tokio::test]
    async fn a_redirect_to_a_private_address_is_refused_by_name() {
        // The test's own address stands in for a public one: every other private address stays refused.
        let rule: AddressRule =
            Arc::new(|ip| ip == IpAddr::from([127, 0, 0, 1]) || crate::integrations::outbound::is_public(ip));
        let fetcher = fetcher(rule, 5);
        for (to, named) in [
            ("http://169.254.169.254/latest/meta-data", "169.254.169.254"),
            ("http://10.0.0.7:8080/admin", "10.0.0.7"),
            ("http://[::1]/", "::1"),
        ] {
            let url = redirecting_site(to).await;
            let Err(error) = fetcher.get(&url, 1024).await else {
                panic!("{to} was fetched");
            };
            assert_eq!(error.reason, "private_address", "{to}: {error:?}");
            assert!(error.message.contains(named), "{to}: {error:?}");
        }
        assert_eq!(fetcher.hosts.servers(), 0, "no fetch runs: no server is kept");
    }

    #[tokio::test]
    async fn a_refused_name_does_not_tell_what_it_resolves_to() {
        let fetcher = fetcher(Arc::new(crate::integrations::outbound::is_public), 0);
        let url = Url::parse("http://localhost:9/").unwrap();
        let Err(error) = fetcher.get(&url, 1024).await else {
            panic!("localhost was fetched");
        };
        assert_eq!(error.reason, "private_address", "{error:?}");
        for answer in ["127.0.0.1", "::1"] {
            assert!(!error.message.contains(answer), "{error:?}");
        }
    }

    #[tokio::test]
    async fn a_servers_slots_are_shared_by_its_names_and_forgotten_when_unused() {
        let slots = HostSlots::new(1);
        let server = IpAddr::from([127, 0, 0, 1]);
        let held = slots.acquire(server).await;
        let waiting = tokio::spawn({
            let slots = HostSlots {
                per_host: 1,
                servers: slots.servers.clone(),
            };
            async move { slots.acquire(server).await.permit.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "one slot per server, whatever name reached it");
        drop(held);
        assert!(waiting.await.unwrap());
        assert_eq!(slots.servers(), 0);
    }
}
