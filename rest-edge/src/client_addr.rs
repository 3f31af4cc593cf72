//! The address of the client behind a request: the connection's peer, or, behind `trusted_proxy_hops`
//! proxies of one's own, the address the outermost of them saw (the `hops`-th entry of `X-Forwarded-For`
//! from the right). Entries further left were written by the client itself and prove nothing, so they are
//! never used: a client cannot pick its own address to dodge a per-address limit.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;

/// A request extension: who sent the request, as far as this edge can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

pub fn resolve(peer: SocketAddr, headers: &HeaderMap, trusted_proxy_hops: usize) -> ClientAddr {
    if trusted_proxy_hops == 0 {
        return ClientAddr(peer.ip());
    }
    let forwarded: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    forwarded
        .len()
        .checked_sub(trusted_proxy_hops)
        .and_then(|at| forwarded[at].parse::<IpAddr>().ok())
        .map_or(ClientAddr(peer.ip()), ClientAddr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append("x-forwarded-for", value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_the_trusted_proxies_entries_count() {
        let peer: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let spoofed = headers(&["6.6.6.6, 203.0.113.7"]);
        assert_eq!(resolve(peer, &spoofed, 0).0.to_string(), "10.0.0.2");
        assert_eq!(resolve(peer, &spoofed, 1).0.to_string(), "203.0.113.7");
        // Two proxies: the outer one appended what it saw, the inner one its own peer.
        let two = headers(&["6.6.6.6, 203.0.113.7", "10.0.0.9"]);
        assert_eq!(resolve(peer, &two, 2).0.to_string(), "203.0.113.7");
        // Fewer entries than proxies, or garbage: the connection's peer.
        assert_eq!(resolve(peer, &headers(&[]), 1).0.to_string(), "10.0.0.2");
        assert_eq!(resolve(peer, &headers(&["not-an-ip"]), 1).0.to_string(), "10.0.0.2");
    }
}
