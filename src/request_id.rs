//! Request ids: a well-formed incoming `X-Request-Id` is kept, anything else is replaced by `req_` + 20
//! base62 characters. The same id travels to the core as `x-request-id` metadata and back in every answer.

use crate::wire;
use http::HeaderMap;
use rand::Rng;

/// The id of one request, stored in the request's extensions by the edge.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// 1 to 128 characters of letters, digits and `._:-`.
pub fn is_well_formed(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

pub fn generate() -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    let suffix: String = (0..20)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("req_{suffix}")
}

/// The incoming id when well formed, else a new one.
pub fn from_headers(headers: &HeaderMap) -> String {
    headers
        .get(wire::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| is_well_formed(id))
        .map_or_else(generate, str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_only_when_well_formed() {
        let mut headers = HeaderMap::new();
        headers.insert("x-request-id", "abc-123.x:y_z".parse().unwrap());
        assert_eq!(from_headers(&headers), "abc-123.x:y_z");
        headers.insert("x-request-id", "has space".parse().unwrap());
        assert!(from_headers(&headers).starts_with("req_"));
        headers.insert("x-request-id", "a".repeat(129).parse().unwrap());
        assert_eq!(from_headers(&headers).len(), 24);
        assert!(is_well_formed(&generate()));
    }
}
