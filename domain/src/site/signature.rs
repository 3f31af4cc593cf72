//! Checkout signatures: lowercase hex of HMAC-SHA256(key_secret, `order_id + "|" + payment_id`), the formula
//! Razorpay's checkout and SDKs use. Verification compares MACs in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// What a checkout signature covers: an order and the payment made for it.
pub struct OrderPayment<'a> {
    pub order_id: &'a str,
    pub payment_id: &'a str,
}

fn mac(secret: &[u8], paid: &OrderPayment) -> HmacSha256 {
    // HMAC accepts keys of any length, so construction cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(paid.order_id.as_bytes());
    mac.update(b"|");
    mac.update(paid.payment_id.as_bytes());
    mac
}

/// The signature the checkout produces for this order and payment.
pub fn sign(secret: &[u8], paid: &OrderPayment) -> String {
    hex::encode(mac(secret, paid).finalize().into_bytes())
}

/// True when `signature` is the lowercase hex signature of this order and payment. Only lowercase is accepted,
/// as Razorpay's SDKs compare the hex strings themselves.
pub fn verify(secret: &[u8], paid: &OrderPayment, signature: &str) -> bool {
    let lowercase_hex = signature.len() == 64 && signature.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match hex::decode(signature) {
        Ok(bytes) if lowercase_hex => mac(secret, paid).verify_slice(&bytes).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paid<'a>(order_id: &'a str, payment_id: &'a str) -> OrderPayment<'a> {
        OrderPayment { order_id, payment_id }
    }

    #[test]
    fn known_vector() {
        // echo -n 'order_IEIaMR65cu6nz3|pay_IH4NVgf4Dreq1l' | openssl dgst -sha256 -hmac 'EnLs21M47BllR3X8PSFtjtbd'
        let sig = sign(
            b"EnLs21M47BllR3X8PSFtjtbd",
            &paid("order_IEIaMR65cu6nz3", "pay_IH4NVgf4Dreq1l"),
        );
        assert_eq!(sig, "0d4e745a1838664ad6c9c9902212a32d627d68e917290b0ad5f08ff4561bc50f");
        assert!(verify(
            b"EnLs21M47BllR3X8PSFtjtbd",
            &paid("order_IEIaMR65cu6nz3", "pay_IH4NVgf4Dreq1l"),
            &sig
        ));
    }

    #[test]
    fn tampering_is_detected() {
        let sig = sign(b"secret", &paid("order_1", "pay_1"));
        assert!(!verify(b"secret", &paid("order_1", "pay_2"), &sig));
        assert!(!verify(b"other", &paid("order_1", "pay_1"), &sig));
        assert!(!verify(b"secret", &paid("order_1", "pay_1"), &sig.to_uppercase()));
        assert!(!verify(b"secret", &paid("order_1", "pay_1"), &sig[..62]));
        assert!(!verify(b"secret", &paid("order_1", "pay_1"), "zz"));
        let mut flipped = sig.into_bytes();
        flipped[0] = if flipped[0] == b'0' { b'1' } else { b'0' };
        assert!(!verify(
            b"secret",
            &paid("order_1", "pay_1"),
            &String::from_utf8(flipped).unwrap()
        ));
    }
}
