//! A visitor's client address as per-address limits count it. One IPv4 address is one client; an IPv6
//! client is given a whole /64 (often far more), so its addresses count together: one address, or the mapped
//! IPv4 address of a dual-stack client, per group.

use std::net::{IpAddr, Ipv6Addr};

/// The group `peer` (an address as the edge wrote it) counts in; "" for none or one that does not read.
pub fn address_group(peer: &str) -> String {
    match peer.trim().parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.to_string(),
        Ok(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let prefix = u128::from(v6) & !((1_u128 << 64) - 1);
                format!("{}/64", Ipv6Addr::from(prefix))
            }
        },
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::address_group;

    #[test]
    fn ipv6_addresses_count_by_their_64() {
        assert_eq!(address_group("203.0.113.7"), "203.0.113.7");
        assert_eq!(address_group("2001:db8:1:2::1"), "2001:db8:1:2::/64");
        assert_eq!(
            address_group("2001:db8:1:2:ffff:ffff:ffff:ffff"),
            address_group("2001:db8:1:2::1")
        );
        assert_ne!(address_group("2001:db8:1:3::1"), address_group("2001:db8:1:2::1"));
        assert_eq!(address_group("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(address_group(""), "");
        assert_eq!(address_group("not an address"), "");
    }
}
