//! The hook's credentials, the same for every Meta product: the verify token that answers the console's
//! check of the URL (`GET ?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...`), and the app secret
//! that signs each `POST`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>`. Both are
//! compared in constant time.

use ring::hmac;

use crate::channels::{Inbound, ParseError, RawRequest, Reply, SignatureError};

pub struct HookKeys {
    signing_key: hmac::Key,
    verify_token: String,
}

impl HookKeys {
    pub fn new(app_secret: &str, verify_token: &str) -> Self {
        Self {
            signing_key: hmac::Key::new(hmac::HMAC_SHA256, app_secret.as_bytes()),
            verify_token: verify_token.to_owned(),
        }
    }

    /// The answer to the console's check: the challenge (200, text/plain) when the mode is `subscribe` and
    /// the token is the channel's; 403 for a wrong token or mode; 400 when the check lacks its challenge.
    /// `None` for any request but a `GET`.
    pub fn handshake(&self, request: &RawRequest) -> Option<Reply> {
        if request.method != "GET" {
            return None;
        }
        let query = request.public_url.split_once('?').map(|(_, q)| q).unwrap_or_default();
        let param = |name: &str| {
            url::form_urlencoded::parse(query.as_bytes())
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.into_owned())
        };
        let token_matches = param("hub.verify_token").is_some_and(|given| {
            // HMAC of both under one key, compared by ring in constant time: no early exit on the first
            // differing byte.
            let expected = hmac::sign(&self.signing_key, self.verify_token.as_bytes());
            hmac::verify(&self.signing_key, given.as_bytes(), expected.as_ref()).is_ok()
        });
        if param("hub.mode").as_deref() != Some("subscribe") || !token_matches {
            return Some(text(403, "the verify token or mode is wrong"));
        }
        Some(match param("hub.challenge") {
            Some(challenge) if challenge.len() <= 1_024 => text(200, &challenge),
            _ => text(400, "hub.challenge is missing"),
        })
    }

    /// Checks `X-Hub-Signature-256` against the raw body.
    pub fn verify(&self, request: &RawRequest) -> Result<(), SignatureError> {
        let header = request.header("x-hub-signature-256").ok_or(SignatureError::Missing)?;
        let given = header
            .trim()
            .strip_prefix("sha256=")
            .and_then(|hex_digest| hex::decode(hex_digest).ok())
            .ok_or(SignatureError::Mismatch)?;
        hmac::verify(&self.signing_key, &request.body, &given).map_err(|_| SignatureError::Mismatch)
    }
}

/// What every Meta hook answers once a callback is taken.
pub fn acknowledgement() -> Reply {
    text(200, "EVENT_RECEIVED")
}

/// Whose the entries of a payload were: one app's subscription may carry several pages' or numbers' events,
/// and a payload none of whose entries is this channel's is another channel's (404).
#[derive(Default)]
pub struct Addressed {
    ours: bool,
    other: Option<String>,
}

impl Addressed {
    pub fn ours(&mut self) {
        self.ours = true;
    }

    /// An entry of `whom` (`page 42`, `phone number id 42`) that this channel skips.
    pub fn other(&mut self, whom: String) {
        self.other = Some(whom);
    }

    /// What the payload brought this channel, or that it was all another's.
    pub fn verdict(self, inbound: Inbound) -> Result<Inbound, ParseError> {
        match self.other {
            Some(other) if !self.ours => Err(ParseError::OtherChannel(other)),
            _ => Ok(inbound),
        }
    }
}

fn text(status: u16, body: &str) -> Reply {
    Reply {
        status,
        content_type: "text/plain",
        body: body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, query: &str, signature: Option<&str>, body: &str) -> RawRequest {
        RawRequest {
            method: method.to_owned(),
            public_url: format!("https://frontdesk.example/hooks/meta/ch_1{query}"),
            path_suffix: String::new(),
            headers: signature
                .map(|s| ("x-hub-signature-256".to_owned(), s.to_owned()))
                .into_iter()
                .collect(),
            body: body.to_owned().into(),
        }
    }

    /// The vector of GitHub's webhook documentation, which signs the same way (HMAC-SHA256 of the raw body,
    /// `sha256=` and lower-case hex).
    #[test]
    fn verifies_a_known_signature() {
        let keys = HookKeys::new("It's a Secret to Everybody", "t");
        let signed = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(keys.verify(&request("POST", "", Some(signed), "Hello, World!")), Ok(()));
        assert_eq!(
            keys.verify(&request("POST", "", Some(signed), "Hello, World?")),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            keys.verify(&request("POST", "", Some("sha256=zz"), "Hello, World!")),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            keys.verify(&request("POST", "", Some(&signed[7..]), "Hello, World!")),
            Err(SignatureError::Mismatch),
            "the sha256= prefix is part of the header"
        );
        assert_eq!(
            keys.verify(&request("POST", "", None, "Hello, World!")),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn answers_the_console_s_check() {
        let keys = HookKeys::new("s", "my-token");
        let check = |query: &str| keys.handshake(&request("GET", query, None, "")).unwrap();
        let ok = check("?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=my-token");
        assert_eq!(
            (ok.status, ok.body.as_str(), ok.content_type),
            (200, "1158201444", "text/plain")
        );
        assert_eq!(
            check("?hub.mode=subscribe&hub.challenge=1&hub.verify_token=my-toke").status,
            403
        );
        assert_eq!(
            check("?hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=my-token").status,
            403
        );
        assert_eq!(check("?hub.challenge=1").status, 403);
        assert_eq!(check("").status, 403);
        assert_eq!(check("?hub.mode=subscribe&hub.verify_token=my-token").status, 400);
        assert!(keys.handshake(&request("POST", "", None, "")).is_none());
    }
}
