//! API keys: `fdk_` + 32 base62 characters. Only the SHA-256 of a key is stored; the key itself is shown
//! once (on issue and rotate) and masked everywhere else.

use sha2::{Digest, Sha256};

const PREFIX: &str = "fdk_";
const RANDOM_CHARS: usize = 32;
const KEY_LEN: usize = PREFIX.len() + RANDOM_CHARS;

/// A well-formed key, as presented or newly issued. Deliberately not `Debug`/`Display`: it must never be
/// formatted into a log line or error message.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn generate() -> Self {
        Self(format!("{PREFIX}{}", crate::ids::base62(RANDOM_CHARS)))
    }

    /// Accepts exactly `fdk_` followed by 32 ASCII letters and digits.
    pub fn parse(s: &str) -> Option<Self> {
        let well_formed = s.len() == KEY_LEN
            && s.starts_with(PREFIX)
            && s.as_bytes()[PREFIX.len()..].iter().all(u8::is_ascii_alphanumeric);
        well_formed.then(|| Self(s.to_owned()))
    }

    /// Lowercase hex SHA-256, the form stored and looked up.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }

    /// First 4 characters, `...`, last 4 characters.
    pub fn masked(&self) -> String {
        format!("{}...{}", &self.0[..4], &self.0[self.0.len() - 4..])
    }

    /// The full key, for the one answer that shows it.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_mask() {
        let key = ApiKey::generate();
        assert_eq!(key.reveal().len(), 36);
        assert!(ApiKey::parse(key.reveal()).is_some());
        let masked = key.masked();
        assert!(masked.starts_with("fdk_...") && masked.len() == 11);
        assert_eq!(key.hash().len(), 64);
        assert_ne!(key.hash(), ApiKey::generate().hash());
    }

    #[test]
    fn malformed_keys_are_refused() {
        let good = ApiKey::generate().reveal().to_owned();
        for bad in [
            String::new(),
            good[..35].to_owned(),
            format!("{good}x"),
            good.replacen("fdk_", "sk__", 1),
            format!("fdk_{}", " ".repeat(32)),
            format!("fdk_{}é", "a".repeat(30)),
            "x".repeat(10_000),
        ] {
            assert!(ApiKey::parse(&bad).is_none(), "{bad:?}");
        }
    }
}
