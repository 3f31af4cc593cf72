//! Payment providers create checkout orders. `local` makes them here (the embedded default); `razorpay` calls
//! the Razorpay Orders API. Signature verification is the same HMAC for both, keyed with the provider's secret.

mod local;
mod razorpay;

pub use local::LocalProvider;
pub use razorpay::RazorpayProvider;

/// What the provider is asked to create.
#[derive(Clone, Debug)]
pub struct OrderRequest {
    pub amount: i64,
    pub currency: &'static str,
    /// Our reference for the order, at most 40 characters.
    pub receipt: String,
    /// Free-form key/value notes shown in the provider's dashboard.
    pub notes: Vec<(&'static str, String)>,
}

/// Why a provider call failed; logged, never shown to the client.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("provider request failed: {0}")]
    Transport(String),
    #[error("provider answered {status}: {detail}")]
    Rejected { status: u16, detail: String },
    #[error("provider answer is not understood: {0}")]
    Malformed(String),
}

#[async_trait::async_trait]
pub trait PaymentProvider: Send + Sync + std::fmt::Debug {
    /// Short name stored with each order (`local`, `razorpay`).
    fn name(&self) -> &'static str;
    /// Public key id handed to the checkout SDK.
    fn key_id(&self) -> &str;
    /// HMAC key of checkout signatures.
    fn key_secret(&self) -> &[u8];
    /// Creates an order and returns its provider id.
    async fn create_order(&self, order: &OrderRequest) -> Result<String, ProviderError>;
}
