//! Visitor session tokens: `wst_` + 32 base62 (190 random bits), given to the visitor once and kept only as
//! a SHA-256 hash, so a copy of the database cannot speak for any visitor.

use sha2::{Digest, Sha256};

const PREFIX: &str = "wst_";
const RANDOM_CHARS: usize = 32;

/// A new token and its hash.
pub fn issue() -> (String, String) {
    let token = format!("{PREFIX}{}", crate::ids::base62(RANDOM_CHARS));
    let hash = hash(&token);
    (token, hash)
}

/// The hash a token is stored under, or `None` for text that is no token (never looked up).
pub fn hash_of(text: &str) -> Option<String> {
    let well_formed = text
        .strip_prefix(PREFIX)
        .is_some_and(|rest| rest.len() == RANDOM_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric()));
    well_formed.then(|| hash(text))
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_hash_back_and_garbage_is_no_token() {
        let (token, hash) = super::issue();
        assert_eq!(super::hash_of(&token).as_deref(), Some(hash.as_str()));
        assert_ne!(super::issue().0, token);
        for bad in [
            "",
            "wst_",
            "wst_short",
            &format!("{token}x"),
            "fdk_0123456789abcdefghijklmnopqrstuv",
        ] {
            assert_eq!(super::hash_of(bad), None, "{bad}");
        }
    }
}
