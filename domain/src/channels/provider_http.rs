//! What every provider's HTTP answer has in common: an error answer as a send's outcome, and a call that got
//! no complete answer, which is always worth a retry.

use std::time::Duration;

use http::StatusCode;

use super::SendOutcome;

/// A provider's error answer as a send's outcome: when `final_`, rejected with the provider's own code (else
/// the HTTP status) and text; else worth a retry, the reason carrying both.
pub fn refused(
    status: StatusCode,
    code: Option<String>,
    text: Option<String>,
    retry_after: Option<Duration>,
    final_: bool,
) -> SendOutcome {
    if final_ {
        return SendOutcome::Rejected {
            code: code.unwrap_or_else(|| status.as_u16().to_string()),
            message: text.unwrap_or_else(|| status.canonical_reason().unwrap_or("rejected").to_owned()),
        };
    }
    let detail = [code, text].into_iter().flatten().collect::<Vec<_>>().join(" ");
    SendOutcome::Unavailable {
        reason: if detail.is_empty() {
            status.to_string()
        } else {
            format!("{status}: {detail}")
        },
        retry_after,
    }
}

/// A send that got no complete answer: timed out, refused, cut off. The reason names no URL (Meta's would
/// carry no secret, but a provider's URL may).
pub fn transport_failure(error: reqwest::Error) -> SendOutcome {
    let reason = if error.is_timeout() {
        "timed out".to_owned()
    } else {
        let error = error.without_url();
        let mut reason = error.to_string();
        let mut cause = std::error::Error::source(&error);
        while let Some(inner) = cause {
            reason.push_str(": ");
            reason.push_str(&inner.to_string());
            cause = inner.source();
        }
        reason
    };
    SendOutcome::Unavailable {
        reason,
        retry_after: None,
    }
}
