//! Random identifiers and secrets: base62 strings from rand's thread-local CSPRNG (ChaCha, seeded and
//! periodically reseeded from the operating system).

use rand::Rng;

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `len` characters drawn uniformly from `[0-9A-Za-z]`.
pub fn base62(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| BASE62[rng.random_range(0..BASE62.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn base62_has_the_asked_length_and_alphabet() {
        let id = super::base62(14);
        assert_eq!(id.len(), 14);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(id, super::base62(14));
    }
}
