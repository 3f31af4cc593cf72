//! The embedded provider: order ids are made here (`order_` + 14 base62 characters), as Razorpay's look.

use super::{OrderRequest, PaymentProvider, ProviderError};

pub struct LocalProvider {
    key_id: String,
    key_secret: String,
}

impl LocalProvider {
    pub fn new(key_id: String, key_secret: String) -> Self {
        Self { key_id, key_secret }
    }
}

/// Shows the key id, never the secret.
impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl PaymentProvider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    fn key_id(&self) -> &str {
        &self.key_id
    }

    fn key_secret(&self) -> &[u8] {
        self.key_secret.as_bytes()
    }

    async fn create_order(&self, _order: &OrderRequest) -> Result<String, ProviderError> {
        Ok(crate::ids::new_id(crate::ids::Kind::Order))
    }
}
