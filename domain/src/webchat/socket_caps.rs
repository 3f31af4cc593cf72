//! Caps on the sockets this process feeds: per session (a visitor's tabs) and per client address group (a
//! network's visitors). Each open socket holds memory here and at the edge, so one token or one address
//! cannot open them without end: past a cap the handshake is refused (429) and the widget retries later.
//! Counted per process, like the sockets themselves.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use tonic::Code;

use crate::error::ApiError;
use crate::error::Reason;

#[derive(Clone)]
pub struct SocketCaps {
    per_session: u32,
    per_address: u32,
    open: Arc<Mutex<Open>>,
}

#[derive(Default)]
struct Open {
    by_session: HashMap<String, u32>,
    by_address: HashMap<String, u32>,
}

/// One open socket's place under the caps; dropping it is the socket closing.
pub struct Seat {
    open: Arc<Mutex<Open>>,
    session_id: String,
    address: String,
}

impl SocketCaps {
    pub fn new(per_session: u32, per_address: u32) -> Self {
        Self {
            per_session,
            per_address,
            open: Arc::default(),
        }
    }

    /// A seat for a socket of `session_id` from `address` (a group, `client::address_group`), or 429.
    pub fn admit(&self, session_id: &str, address: &str) -> Result<Seat, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let of_session = open.by_session.get(session_id).copied().unwrap_or(0);
        let of_address = open.by_address.get(address).copied().unwrap_or(0);
        let refusal = if of_session >= self.per_session {
            Some(format!("this session has {} sockets open already", self.per_session))
        } else if of_address >= self.per_address {
            Some(format!("this address has {} sockets open already", self.per_address))
        } else {
            None
        };
        if let Some(message) = refusal {
            metrics::counter!("frontdesk_webchat_sockets_refused_total").increment(1);
            return Err(ApiError::new(Code::ResourceExhausted, Reason::TooManySockets, message));
        }
        *open.by_session.entry(session_id.to_owned()).or_default() += 1;
        *open.by_address.entry(address.to_owned()).or_default() += 1;
        Ok(Seat {
            open: self.open.clone(),
            session_id: session_id.to_owned(),
            address: address.to_owned(),
        })
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let Open { by_session, by_address } = &mut *open;
        release(by_session, &self.session_id);
        release(by_address, &self.address);
    }
}

/// One fewer under `key`; a key with none left is forgotten, so the maps hold only what is open.
fn release(counts: &mut HashMap<String, u32>, key: &str) {
    if let Some(count) = counts.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_capped_per_session_and_per_address_while_open() {
        let caps = SocketCaps::new(2, 3);
        let a1 = caps.admit("cs_a", "203.0.113.7").unwrap();
        let _a2 = caps.admit("cs_a", "203.0.113.7").unwrap();
        let refused = caps.admit("cs_a", "198.51.100.1").err().map(|e| e.reason);
        assert_eq!(refused, Some(Reason::TooManySockets));
        let _b = caps.admit("cs_b", "203.0.113.7").unwrap();
        assert!(caps.admit("cs_c", "203.0.113.7").is_err(), "the address has three");
        assert!(caps.admit("cs_c", "198.51.100.1").is_ok());
        drop(a1);
        assert!(
            caps.admit("cs_a", "198.51.100.1").is_ok(),
            "a closed socket frees its seat"
        );
        let open = caps.open.lock().unwrap();
        assert!(!open.by_session.contains_key("cs_c"), "nothing open, nothing kept");
    }
}
