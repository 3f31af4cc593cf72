//! The embedded provider: order ids are made here (`order_` + 14 base62 characters), as Razorpay's look.

use super::{OrderRequest, PaymentProvider, ProviderError};

#[derive(Debug)]
pub struct LocalProvider {
    key_id: String,
    key_secret: String,
}

impl LocalProvider {
    pub fn new(key_id: String, key_secret: String) -> Self {
        Self { key_id, key_secret }
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
        Ok(format!("order_{}", crate::ids::base62(14)))
    }
}
