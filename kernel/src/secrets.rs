//! Sealing of stored secrets (channel provider credentials, tool headers) with AES-256-GCM under the key of
//! `FRONTDESK_SECRET_KEY`. A sealed value is `v1.` + base64(12-byte random nonce || ciphertext || tag); the
//! row it belongs to is bound in as associated data, so a sealed value copied to another row does not open.

use std::path::PathBuf;

use anyhow::Context;
use base64::{Engine, engine::general_purpose::STANDARD};
use ring::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    rand::{SecureRandom, SystemRandom},
};

const VERSION: &str = "v1.";
const KEY_LEN: usize = 32;

#[derive(Clone)]
pub struct Sealer {
    key: std::sync::Arc<LessSafeKey>,
    random: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

/// A sealed value that does not open: wrong key, tampered or bound to another row.
#[derive(Debug, thiserror::Error)]
#[error("a stored secret could not be decrypted (was FRONTDESK_SECRET_KEY changed?)")]
pub struct Unsealable;

impl Sealer {
    /// From base64 of 32 bytes.
    pub fn from_base64(text: &str) -> anyhow::Result<Self> {
        let bytes = STANDARD
            .decode(text.trim())
            .context("FRONTDESK_SECRET_KEY must be base64 of 32 random bytes (openssl rand -base64 32)")?;
        anyhow::ensure!(
            bytes.len() == KEY_LEN,
            "FRONTDESK_SECRET_KEY must be base64 of 32 bytes, not {}",
            bytes.len()
        );
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| anyhow::anyhow!("unusable secret key"))?;
        Ok(Self {
            key: std::sync::Arc::new(LessSafeKey::new(key)),
            random: SystemRandom::new(),
        })
    }

    /// A new random key, base64.
    pub fn generate_key() -> anyhow::Result<String> {
        let mut bytes = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| anyhow::anyhow!("no system randomness"))?;
        Ok(STANDARD.encode(bytes))
    }

    /// Encrypts `plaintext` bound to `context` (e.g. the row id).
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        // The system RNG does not fail on supported platforms; a failure here would be a broken machine.
        self.random.fill(&mut nonce).expect("system randomness");
        let mut data = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data,
            )
            .expect("AES-GCM sealing of an in-memory buffer");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        format!("{VERSION}{}", STANDARD.encode(out))
    }

    pub fn open(&self, context: &str, sealed: &str) -> Result<Vec<u8>, Unsealable> {
        let bytes = sealed
            .strip_prefix(VERSION)
            .and_then(|b| STANDARD.decode(b).ok())
            .filter(|b| b.len() >= NONCE_LEN)
            .ok_or(Unsealable)?;
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unsealable)?;
        let mut data = data.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut data)
            .map_err(|_| Unsealable)?;
        Ok(plain.to_vec())
    }
}

/// The sealer of this deployment: `FRONTDESK_SECRET_KEY` when set; else, on SQLite, a key generated once and
/// kept beside the database file (`<file>.key`, mode 0600) or, for an in-memory database, one for the
/// process's life. PostgreSQL deployments must set the key: replicas have no shared file.
pub fn sealer(configured: Option<&str>, database_url: &str) -> anyhow::Result<Sealer> {
    if let Some(key) = configured.filter(|k| !k.trim().is_empty()) {
        return Sealer::from_base64(key);
    }
    let Some(rest) = database_url.strip_prefix("sqlite:") else {
        anyhow::bail!("FRONTDESK_SECRET_KEY is required with PostgreSQL (base64 of 32 bytes: openssl rand -base64 32)");
    };
    let path = rest.trim_start_matches("//");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path.contains(":memory:") {
        return Sealer::from_base64(&Sealer::generate_key()?);
    }
    let key_path = PathBuf::from(format!("{path}.key"));
    let key = match std::fs::read_to_string(&key_path) {
        Ok(key) => key,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = Sealer::generate_key()?;
            write_private(&key_path, &key).with_context(|| format!("writing {}", key_path.display()))?;
            tracing::info!(path = %key_path.display(), "generated the secret key for stored credentials");
            key
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", key_path.display())),
    };
    Sealer::from_base64(&key).with_context(|| format!("key file {}", key_path.display()))
}

fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(contents.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_opens_and_refuses_other_rows_and_keys() {
        let sealer = Sealer::from_base64(&Sealer::generate_key().unwrap()).unwrap();
        let sealed = sealer.seal("chn_1", b"token-123");
        assert!(!sealed.contains("token-123"));
        assert_ne!(sealed, sealer.seal("chn_1", b"token-123"), "nonces differ");
        assert_eq!(sealer.open("chn_1", &sealed).unwrap(), b"token-123");
        assert!(sealer.open("chn_2", &sealed).is_err());
        let other = Sealer::from_base64(&Sealer::generate_key().unwrap()).unwrap();
        assert!(other.open("chn_1", &sealed).is_err());
        assert!(sealer.open("chn_1", "v1.garbage").is_err());
    }

    #[test]
    fn key_file_beside_sqlite_is_made_once() {
        let dir = std::env::temp_dir().join(format!("fd-secrets-{}", crate::ids::base62(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.join("x.db").display());
        let first = sealer(None, &url).unwrap();
        let sealed = first.seal("a", b"b");
        let second = sealer(None, &url).unwrap();
        assert_eq!(second.open("a", &sealed).unwrap(), b"b");
        assert!(sealer(None, "postgres://localhost/x").is_err());
        assert!(sealer(Some("c2hvcnQ="), &url).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
