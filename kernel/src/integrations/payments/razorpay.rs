//! Razorpay Orders API client: `POST {base}/v1/orders` with HTTP Basic `key_id:key_secret` and
//! `{amount, currency, receipt, notes}`; the answer's `id` is the order id. Error answers carry
//! `{"error": {"code", "description"}}`.

use serde::Deserialize;
use serde_json::json;

use super::{OrderRequest, PaymentProvider, ProviderError};

pub struct RazorpayProvider {
    http: reqwest::Client,
    orders_url: String,
    key_id: String,
    key_secret: String,
}

impl RazorpayProvider {
    pub fn new(http: reqwest::Client, base_url: &str, key_id: String, key_secret: String) -> Self {
        Self {
            http,
            orders_url: format!("{}/v1/orders", base_url.trim_end_matches('/')),
            key_id,
            key_secret,
        }
    }
}

/// Shows where and as whom it calls, never the secret.
impl std::fmt::Debug for RazorpayProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RazorpayProvider")
            .field("orders_url", &self.orders_url)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct OrderAnswer {
    id: String,
    amount: i64,
    currency: String,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    description: String,
}

#[async_trait::async_trait]
impl PaymentProvider for RazorpayProvider {
    fn name(&self) -> &'static str {
        "razorpay"
    }

    fn key_id(&self) -> &str {
        &self.key_id
    }

    fn key_secret(&self) -> &[u8] {
        self.key_secret.as_bytes()
    }

    async fn create_order(&self, order: &OrderRequest) -> Result<String, ProviderError> {
        let notes: serde_json::Map<String, serde_json::Value> =
            order.notes.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
        let body = json!({
            "amount": order.amount,
            "currency": order.currency,
            "receipt": order.receipt,
            "notes": notes,
        });
        let response = self
            .http
            .post(&self.orders_url)
            .basic_auth(&self.key_id, Some(&self.key_secret))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        if !status.is_success() {
            let detail = serde_json::from_slice::<ErrorAnswer>(&bytes)
                .map(|e| format!("{}: {}", e.error.code, e.error.description))
                .unwrap_or_else(|_| "unrecognised error body".to_owned());
            return Err(ProviderError::Rejected {
                status: status.as_u16(),
                detail,
            });
        }
        let answer: OrderAnswer =
            serde_json::from_slice(&bytes).map_err(|e| ProviderError::Malformed(e.to_string()))?;
        if !answer.id.starts_with("order_") || answer.amount != order.amount || answer.currency != order.currency {
            return Err(ProviderError::Malformed(format!(
                "order {} for {} {} does not match the request",
                answer.id, answer.amount, answer.currency
            )));
        }
        Ok(answer.id)
    }
}
