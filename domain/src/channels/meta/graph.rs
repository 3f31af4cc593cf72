//! Calls to the Graph API and the sorting of its answers. A success is a JSON object; a failure is Meta's
//! error object, `{"error": {"message", "type", "code", "error_subcode", "error_data": {"details"},
//! "is_transient", "fbtrace_id"}}`. Throttling (HTTP 429 or a rate-limit code), Meta's own trouble (5xx,
//! the "temporarily unavailable" codes, `is_transient`) and a call that got no answer are retried; any other
//! refusal fails the message with Meta's code and text.

use http::{StatusCode, header};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    channels::{
        SendOutcome,
        provider_http::{refused, transport_failure},
    },
    integrations::http::{BodyError, read_limited},
};

/// An answer larger than this is not Meta's.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Meta's codes for throttling and for its own passing trouble: worth a retry although the HTTP status is a
/// 4xx. 1 and 2: unknown or service error; 4, 17, 32, 341, 613: the app's, user's or page's call rate;
/// 80007 and 130429: the WhatsApp account's rate or throughput; 131000: something went wrong; 131016:
/// service unavailable; 131048 and 131056: spam and pair rate limits; 133004: server temporarily unavailable.
const RETRIED_CODES: &[i64] = &[
    1, 2, 4, 17, 32, 341, 613, 80007, 130429, 131000, 131016, 131048, 131056, 133004,
];

/// Where the Graph API is: `FRONTDESK_GRAPH_BASE_URL` and `FRONTDESK_GRAPH_API_VERSION`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphApi {
    pub base_url: String,
    pub version: String,
}

impl GraphApi {
    /// `{base}/{version}`: what every call's path follows.
    pub fn root(&self) -> String {
        format!("{}/{}", self.base_url.trim_end_matches('/'), self.version)
    }
}

/// One channel's client: the API root and the channel's access token.
pub struct Graph {
    http: reqwest::Client,
    root: String,
    token: String,
}

/// Shows where it calls, never the token.
impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Graph {
    pub fn new(api: &GraphApi, token: &str, http: reqwest::Client) -> Self {
        Self {
            http,
            root: api.root(),
            token: token.to_owned(),
        }
    }

    pub fn root(&self) -> &str {
        &self.root
    }

    /// `POST {root}/{path}` with `body`: the answer's JSON, or the outcome the failure means for a send.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, SendOutcome> {
        let response = self
            .http
            .post(format!("{}/{path}", self.root))
            .bearer_auth(&self.token)
            .header(header::ACCEPT, "application/json")
            .json(body)
            .send()
            .await
            .map_err(transport_failure)?;
        let status = response.status();
        let wait = crate::retry::retry_after(response.headers());
        let answer = match read_limited(response, MAX_ANSWER_BYTES).await {
            Ok(answer) => answer,
            Err(BodyError::Transport(error)) => return Err(transport_failure(error)),
            Err(BodyError::TooLarge) => {
                return Err(SendOutcome::Unavailable {
                    reason: format!("{status} with an answer over 1 MiB"),
                    retry_after: None,
                });
            }
        };
        if status.is_success() {
            return serde_json::from_slice(&answer).map_err(|_| SendOutcome::Unavailable {
                reason: format!("{status} without a JSON answer"),
                retry_after: None,
            });
        }
        Err(classify_failure(status, wait, &answer))
    }

    /// Sends a message's parts to `path` in turn, each answered with its id (read by `id_of`): the first
    /// part's id once all are taken, or the first failure. A retry after a failure sends every part again.
    pub async fn send_parts(&self, path: &str, parts: Vec<Value>, id_of: fn(&Value) -> Option<&str>) -> SendOutcome {
        let mut first = None;
        for part in parts {
            let answer = match self.post(path, &part).await {
                Ok(answer) => answer,
                Err(outcome) => return outcome,
            };
            match id_of(&answer).filter(|id| !id.is_empty()) {
                Some(id) => {
                    first.get_or_insert_with(|| id.to_owned());
                }
                None => {
                    return SendOutcome::Unavailable {
                        reason: "an answer without the message's id".to_owned(),
                        retry_after: None,
                    };
                }
            }
        }
        match first {
            Some(provider_message_id) => SendOutcome::Accepted { provider_message_id },
            None => SendOutcome::Rejected {
                code: "empty".to_owned(),
                message: "the message has neither text nor attachments".to_owned(),
            },
        }
    }

    /// Posts a signal (a read mark, a reaction): taken, or the failure's outcome.
    pub async fn signal(&self, path: &str, body: &Value) -> SendOutcome {
        match self.post(path, body).await {
            Ok(_) => SendOutcome::Accepted {
                provider_message_id: String::new(),
            },
            Err(outcome) => outcome,
        }
    }
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: GraphError,
}

#[derive(Deserialize)]
struct GraphError {
    #[serde(default)]
    message: String,
    code: Option<i64>,
    error_data: Option<ErrorData>,
    #[serde(default)]
    is_transient: bool,
}

#[derive(Deserialize)]
struct ErrorData {
    #[serde(default)]
    details: String,
}

/// Sorts a failed call: retried or final, with Meta's code and text.
pub fn classify_failure(status: StatusCode, retry_after: Option<std::time::Duration>, body: &[u8]) -> SendOutcome {
    let error = serde_json::from_slice::<ErrorAnswer>(body).ok().map(|a| a.error);
    let code = error.as_ref().and_then(|e| e.code);
    let text = error.as_ref().map(|e| {
        let details = e.error_data.as_ref().map(|d| d.details.as_str()).unwrap_or_default();
        match (e.message.is_empty(), details.is_empty()) {
            (false, false) => format!("{}: {details}", e.message),
            (false, true) => e.message.clone(),
            (true, _) => details.to_owned(),
        }
    });
    let text = text.filter(|t| !t.is_empty());
    let transient = error.as_ref().is_some_and(|e| e.is_transient) || code.is_some_and(|c| RETRIED_CODES.contains(&c));
    let final_ = status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS && !transient;
    refused(status, code.map(|c| c.to_string()), text, retry_after, final_)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn rejected(code: &str, message: &str) -> SendOutcome {
        SendOutcome::Rejected {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }

    fn unavailable(reason: &str, retry_after: Option<Duration>) -> SendOutcome {
        SendOutcome::Unavailable {
            reason: reason.to_owned(),
            retry_after,
        }
    }

    /// Error answers as Meta's documentation shows them.
    #[test]
    fn sorts_meta_s_errors() {
        let cases: [(u16, Option<Duration>, &str, SendOutcome); 8] = [
            (
                400,
                None,
                r#"{"error": {"message": "(#131047) Re-engagement message", "type": "OAuthException", "code": 131047, "error_data": {"messaging_product": "whatsapp", "details": "Message failed to send because more than 24 hours have passed since the customer last replied to this number."}, "fbtrace_id": "AbCdEf"}}"#,
                rejected(
                    "131047",
                    "(#131047) Re-engagement message: Message failed to send because more than 24 hours have passed since the customer last replied to this number.",
                ),
            ),
            (
                400,
                None,
                r#"{"error": {"message": "(#100) Invalid parameter", "type": "OAuthException", "code": 100, "fbtrace_id": "x"}}"#,
                rejected("100", "(#100) Invalid parameter"),
            ),
            (
                401,
                None,
                r#"{"error": {"message": "Error validating access token", "type": "OAuthException", "code": 190, "error_subcode": 463}}"#,
                rejected("190", "Error validating access token"),
            ),
            (
                400,
                Some(Duration::from_secs(2)),
                r#"{"error": {"message": "(#130429) Rate limit hit", "code": 130429}}"#,
                unavailable(
                    "400 Bad Request: 130429 (#130429) Rate limit hit",
                    Some(Duration::from_secs(2)),
                ),
            ),
            (
                400,
                None,
                r#"{"error": {"message": "An unexpected error has occurred.", "code": 2, "is_transient": true}}"#,
                unavailable("400 Bad Request: 2 An unexpected error has occurred.", None),
            ),
            (
                400,
                None,
                r#"{"error": {"message": "temporary", "code": 99999, "is_transient": true}}"#,
                unavailable("400 Bad Request: 99999 temporary", None),
            ),
            (
                503,
                None,
                "<html>down</html>",
                unavailable("503 Service Unavailable", None),
            ),
            (404, None, "", rejected("404", "Not Found")),
        ];
        for (status, wait, body, expected) in cases {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(classify_failure(status, wait, body.as_bytes()), expected, "{body}");
        }
        assert!(matches!(
            classify_failure(StatusCode::TOO_MANY_REQUESTS, None, br#"{"error": {"code": 100}}"#),
            SendOutcome::Unavailable { .. }
        ));
    }
}
