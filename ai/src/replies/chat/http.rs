//! One JSON POST to a chat model and what its answer means: the body in the protocol's shape, or a
//! `ChatError` that says whether another try may help. Error texts carry the provider's message, never
//! the request's headers (they hold the key).

use http::{HeaderMap, StatusCode, header};
use serde::{Serialize, de::DeserializeOwned};

use super::ChatError;
use crate::integrations::http::{BodyError, read_limited};

/// The most of a provider's error text kept in a message.
const ERROR_CHARS: usize = 300;
/// The largest answer read: a chat answer is a few KiB; an account's own endpoint could send anything.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

pub async fn post<T: DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &impl Serialize,
) -> Result<T, ChatError> {
    let body = serde_json::to_vec(body).map_err(|err| ChatError::Permanent(format!("unwritable request: {err}")))?;
    let response = client
        .post(url)
        .headers(headers)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|err| ChatError::Transient {
            message: unreachable(&err),
            retry_after: None,
        })?;
    let status = response.status();
    let retry_after = crate::retry::retry_after(response.headers());
    let bytes = read_limited(response, MAX_ANSWER_BYTES)
        .await
        .map_err(|err| match err {
            BodyError::TooLarge => ChatError::Permanent(format!(
                "the answer is larger than {} MiB",
                MAX_ANSWER_BYTES / 1024 / 1024
            )),
            BodyError::Transport(err) => ChatError::Transient {
                message: unreachable(&err),
                retry_after: None,
            },
        })?;
    if status.is_success() {
        return serde_json::from_slice(&bytes)
            .map_err(|err| ChatError::Permanent(format!("the answer is not the protocol's: {err}")));
    }
    let message = format!("{}: {}", status.as_u16(), error_text(&bytes));
    if transient(status) {
        Err(ChatError::Transient { message, retry_after })
    } else {
        Err(ChatError::Permanent(message))
    }
}

/// 408, 409 (OpenAI's "try again"), 429, 5xx and Anthropic's 529 "overloaded".
fn transient(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error() || status.as_u16() == 529
}

/// `{"error": {"message": ...}}` (both protocols), else the body's start.
fn error_text(body: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str().or_else(|| v["error"].as_str()))
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let text = text.trim();
    if text.chars().count() > ERROR_CHARS {
        format!("{}...", text.chars().take(ERROR_CHARS).collect::<String>())
    } else {
        text.to_owned()
    }
}

fn unreachable(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        "the provider did not answer in time".to_owned()
    } else if err.is_connect() {
        "no connection to the provider".to_owned()
    } else {
        // The URL (never the headers) is the most a reqwest error shows.
        format!("the provider's answer broke off: {err}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_the_providers_message() {
        assert_eq!(
            error_text(br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#),
            "invalid x-api-key"
        );
        assert_eq!(error_text(b"upstream down"), "upstream down");
        assert_eq!(error_text(&[b'x'; 1000]).len(), ERROR_CHARS + 3);
        assert!(transient(StatusCode::TOO_MANY_REQUESTS));
        assert!(transient(StatusCode::from_u16(529).unwrap()));
        assert!(transient(StatusCode::BAD_GATEWAY));
        assert!(!transient(StatusCode::UNAUTHORIZED));
        assert!(!transient(StatusCode::BAD_REQUEST));
    }
}
