//! The API key a request presents, from any of the four accepted places: `x-api-key`, the REST `apiKey`
//! query parameter (forwarded by the edge as `x-api-key-query`), `authorization: Bearer <key>` and
//! `authorization: Basic base64(<key>:)`. Two different keys in one request are refused.

use base64::Engine;
use frontdesk_api::wire;
use http::HeaderMap;
use tonic::Code;

use super::api_key::ApiKey;
use crate::error::ApiError;
use crate::error::Reason;

/// The one key of the request, or why there is none.
pub fn presented_key(headers: &HeaderMap) -> Result<ApiKey, ApiError> {
    let mut presented: Vec<String> = Vec::new();
    for name in [wire::API_KEY, wire::API_KEY_QUERY] {
        for value in headers.get_all(name) {
            presented.push(text(value)?.to_owned());
        }
    }
    for value in headers.get_all(http::header::AUTHORIZATION) {
        presented.push(from_authorization(text(value)?)?);
    }
    let Some(first) = presented.first() else {
        return Err(unauthenticated(
            "no API key: send it as X-API-Key, Authorization: Bearer, or apiKey",
        ));
    };
    if presented.iter().any(|p| p != first) {
        return Err(ApiError::new(
            Code::InvalidArgument,
            Reason::InvalidArgument,
            "two different API keys in one request",
        ));
    }
    if first.is_empty() {
        return Err(unauthenticated("the API key is empty"));
    }
    ApiKey::parse(first)
        .ok_or_else(|| unauthenticated("the API key is malformed (expected fdk_ + 32 letters or digits)"))
}

/// 401 `unauthenticated`; the message never contains the presented key.
pub fn unauthenticated(message: &str) -> ApiError {
    ApiError::new(Code::Unauthenticated, Reason::Unauthenticated, message)
}

fn text(value: &http::HeaderValue) -> Result<&str, ApiError> {
    value
        .to_str()
        .map(str::trim)
        .map_err(|_| unauthenticated("the API key is malformed (expected fdk_ + 32 letters or digits)"))
}

fn from_authorization(value: &str) -> Result<String, ApiError> {
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(rest.to_owned());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| unauthenticated("Authorization: Basic credentials are not valid base64"))?;
        // The key is the user name; the password is empty.
        let user = decoded.split_once(':').map_or(decoded.as_str(), |(user, _)| user);
        return Ok(user.to_owned());
    }
    Err(unauthenticated("unsupported Authorization scheme: use Bearer or Basic"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn all_four_presentations() {
        let key = ApiKey::generate();
        let k = key.reveal();
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{k}:"))
        );
        for pairs in [
            vec![("x-api-key", k.to_owned())],
            vec![("x-api-key-query", k.to_owned())],
            vec![("authorization", format!("Bearer {k}"))],
            vec![("authorization", basic.clone())],
            vec![("x-api-key", k.to_owned()), ("authorization", basic)],
        ] {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
            assert!(presented_key(&headers(&pairs)).ok() == Some(key.clone()), "{pairs:?}");
        }
    }

    #[test]
    fn refusals() {
        let a = ApiKey::generate();
        let b = ApiKey::generate();
        let two = headers(&[("x-api-key", a.reveal()), ("x-api-key-query", b.reveal())]);
        assert_eq!(presented_key(&two).err().unwrap().code, Code::InvalidArgument);
        for pairs in [
            vec![],
            vec![("x-api-key", "")],
            vec![("x-api-key", "fdk_ with spaces")],
            vec![("authorization", "Basic !!!not-base64")],
            vec![("authorization", "Digest abc")],
        ] {
            let err = presented_key(&headers(&pairs)).err().unwrap();
            assert_eq!(err.code, Code::Unauthenticated, "{pairs:?}");
        }
        let long = "k".repeat(10_240);
        assert_eq!(
            presented_key(&headers(&[("x-api-key", &long)])).err().unwrap().code,
            Code::Unauthenticated
        );
    }
}
