//! One delivery attempt over HTTP: the Standard Webhooks body and headers, signed at send time, and the
//! outcome classified for the retry rules.

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};

use super::claimed::Claimed;
use crate::{integrations::outbound::OutboundPolicy, webhooks::signing};

/// Most of an answer's body read (and discarded) so its connection can be reused.
const MAX_DRAINED_BODY: usize = 64 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered { status: u16 },
    /// 410 Gone: the subscription is disabled at once.
    Gone,
    /// Another answer; retried.
    Rejected { status: u16, retry_after: Option<Duration> },
    /// No answer: timeout, connection failure or a refused target; retried.
    Failed { error: String, timeout: bool },
}

impl Outcome {
    /// The metric label of the outcome.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Delivered { .. } => "delivered",
            Self::Gone => "gone",
            Self::Rejected { .. } => "rejected",
            Self::Failed { timeout: true, .. } => "timeout",
            Self::Failed { .. } => "connection_error",
        }
    }

    /// The endpoint took the delivery.
    pub fn delivered(&self) -> bool {
        matches!(self, Self::Delivered { .. })
    }

    pub fn status_code(&self) -> Option<i32> {
        match self {
            Self::Delivered { status } | Self::Rejected { status, .. } => Some(i32::from(*status)),
            Self::Gone => Some(410),
            Self::Failed { .. } => None,
        }
    }

    pub fn error(&self) -> Option<String> {
        match self {
            Self::Delivered { .. } => None,
            Self::Gone => Some("the endpoint answered 410 Gone".to_owned()),
            Self::Rejected { status, .. } => Some(format!("the endpoint answered {status}")),
            Self::Failed { error, .. } => Some(error.clone()),
        }
    }
}

/// What one attempt did.
#[derive(Clone, Debug)]
pub struct AttemptResult {
    pub claimed: Claimed,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub duration: Duration,
    pub outcome: Outcome,
}

/// The body every subscriber receives: `{"type", "timestamp", "data"}`, `data` as stored in the outbox.
pub fn body(claimed: &Claimed) -> String {
    format!(
        r#"{{"type":{},"timestamp":"{}","data":{}}}"#,
        serde_json::Value::from(claimed.event_type.as_str()),
        claimed.event_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        claimed.payload
    )
}

/// Attempts the delivery at `started_at` (the service's clock; the attempt's end is that plus its duration).
pub async fn attempt(
    client: &reqwest::Client,
    policy: OutboundPolicy,
    claimed: Claimed,
    started_at: DateTime<Utc>,
) -> AttemptResult {
    let took = Instant::now();
    let outcome = send(client, policy, &claimed, started_at).await;
    let duration = took.elapsed();
    AttemptResult {
        claimed,
        started_at,
        finished_at: started_at + chrono::Duration::from_std(duration).unwrap_or_default(),
        duration,
        outcome,
    }
}

async fn send(client: &reqwest::Client, policy: OutboundPolicy, claimed: &Claimed, now: DateTime<Utc>) -> Outcome {
    let url = match reqwest::Url::parse(&claimed.url) {
        Ok(url) => url,
        Err(err) => return failed(format!("invalid URL: {err}"), false),
    };
    if let Err(refusal) = policy.refuse_literal(&url) {
        return failed(format!("target refused: {refusal}"), false);
    }
    let body = body(claimed);
    let timestamp = now.timestamp();
    let signature = signing::signature(&claimed.secret, &claimed.event_id, timestamp, body.as_bytes());
    let request = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &claimed.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body);
    let mut response = match request.send().await {
        Ok(response) => response,
        Err(err) => return failed(describe(&err), err.is_timeout()),
    };
    let status = response.status().as_u16();
    let retry_after = crate::retry::retry_after(response.headers());
    let mut drained = 0;
    while drained < MAX_DRAINED_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => drained += chunk.len(),
            _ => break,
        }
    }
    match status {
        200..=299 => Outcome::Delivered { status },
        410 => Outcome::Gone,
        _ => Outcome::Rejected { status, retry_after },
    }
}

fn failed(error: String, timeout: bool) -> Outcome {
    Outcome::Failed { error, timeout }
}

/// The innermost cause of a client error ("Connection refused", "operation timed out"), prefixed.
fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "timed out waiting for the endpoint".to_owned();
    }
    format!(
        "could not reach the endpoint: {}",
        crate::integrations::http::innermost_cause(err)
    )
}
