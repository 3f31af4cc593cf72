//! The rule for URLs the service calls on a customer's behalf (webhook targets and knowledge imports):
//! http(s) only, no credentials in the URL, and no private, loopback or link-local destination
//! unless FRONTDESK_ALLOW_PRIVATE_URLS=true. Checked when a URL is stored and again at connection time by
//! the client's resolver, so a name that later resolves to a private address (DNS rebinding) is refused too.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::Arc,
    time::Duration,
};

use reqwest::Url;

use super::http;

/// How long a stored URL's host may take to resolve while it is checked.
const CHECK_RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug)]
pub struct OutboundPolicy {
    pub allow_private: bool,
}

impl OutboundPolicy {
    /// `raw` as a URL this service may call, or why not (a message for the caller's field).
    pub async fn check_target(&self, raw: &str) -> Result<Url, String> {
        let url = Url::parse(raw.trim()).map_err(|_| "must be an absolute http(s) URL".to_owned())?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must use http or https".to_owned());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not contain credentials".to_owned());
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err("must name a host".to_owned());
        };
        if self.allow_private {
            return Ok(url);
        }
        self.refuse_literal(&url)?;
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host == "localhost" || host.ends_with(".localhost") {
            return Err(PRIVATE_REFUSAL.to_owned());
        }
        // A name that does not resolve now is accepted (its deliveries fail and retry); one that resolves to
        // a private address is refused. The resolver below checks again on every connection.
        let port = url.port_or_known_default().unwrap_or(443);
        if let Ok(Ok(addrs)) = tokio::time::timeout(CHECK_RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await
            && addrs.into_iter().any(|a| !is_public(a.ip()))
        {
            return Err(PRIVATE_REFUSAL.to_owned());
        }
        Ok(url)
    }

    /// Refuses a URL whose host is a private IP literal (the client's resolver never sees literals).
    pub fn refuse_literal(&self, url: &Url) -> Result<(), String> {
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        match literal {
            Some(ip) if !self.allow_private && !is_public(ip) => Err(PRIVATE_REFUSAL.to_owned()),
            _ => Ok(()),
        }
    }

    /// A pooled client for calls to customers' URLs (`http::restricted`): unless private targets are
    /// allowed, it connects only to public addresses.
    pub fn client(&self, timeout: Duration) -> anyhow::Result<reqwest::Client> {
        let user_agent = concat!("frontdesk-webhooks/", env!("CARGO_PKG_VERSION"));
        let builder = http::builder(user_agent, timeout, timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(Duration::from_secs(60));
        let rule = (!self.allow_private).then(|| Arc::new(is_public) as http::AddressRule);
        Ok(http::restricted(builder, rule).build()?)
    }
}

const PRIVATE_REFUSAL: &str =
    "must not point at a private, loopback or link-local address (FRONTDESK_ALLOW_PRIVATE_URLS=true allows it)";

/// Whether `ip` is on the public internet: not loopback, private, carrier-grade NAT, link-local,
/// unspecified, broadcast, multicast, documentation or unique-local, also when wrapped in IPv6.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let first = segments[0];
    let octets = ip.octets();
    // IPv4 carried inside IPv6: NAT64 (64:ff9b::/96), 6to4 (2002::/16), `::ffff:0:a.b.c.d`.
    let embedded = match segments {
        [0x64, 0xff9b, 0, 0, 0, 0, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => {
            Some(Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]))
        }
        [0x2002, ..] => Some(Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5])),
        _ => None,
    };
    if embedded.is_some_and(|v4| !is_public_v4(v4)) {
        return false;
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        || ip.to_ipv4().is_some_and(|v4| !is_public_v4(v4) && first == 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "fec0::1",
            "192.0.0.8",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn targets_are_checked() {
        let strict = OutboundPolicy { allow_private: false };
        for bad in [
            "ftp://example.com/hook",
            "https://user:pw@example.com/hook",
            "not a url",
            "http://127.0.0.1:8080/hook",
            "http://[::1]/hook",
            "http://localhost/hook",
            "http://10.0.0.5/hook",
        ] {
            assert!(strict.check_target(bad).await.is_err(), "{bad}");
        }
        assert!(strict.check_target("https://93.184.215.14/hook").await.is_ok());
        let open = OutboundPolicy { allow_private: true };
        assert!(open.check_target("http://127.0.0.1:8080/hook").await.is_ok());
        assert!(open.check_target("https://user:pw@example.com/").await.is_err());
    }
}
