//! Standard Webhooks signing: secrets are `whsec_` + base64 of 24 random bytes, and each attempt carries
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` keyed with the decoded secret.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use rand::RngCore;

pub const PREFIX: &str = "whsec_";

/// A new signing secret.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

/// The `webhook-signature` header value for one attempt.
pub fn signature(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix(PREFIX).unwrap_or(secret))
        .unwrap_or_else(|_| secret.as_bytes().to_vec());
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (and its reference libraries' tests).
    #[test]
    fn specification_vector() {
        assert_eq!(
            signature(
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_are_24_random_bytes() {
        let secret = new_secret();
        let bytes = STANDARD.decode(secret.strip_prefix(PREFIX).unwrap()).unwrap();
        assert_eq!(bytes.len(), 24);
        assert_ne!(secret, new_secret());
    }
}
