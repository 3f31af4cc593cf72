//! What every provider's HTTP answer has in common: a `Retry-After` in seconds, and a call that got no
//! complete answer, which is always worth a retry.

use std::time::Duration;

use http::{HeaderMap, StatusCode, header};

use super::SendOutcome;

/// The seconds of a `Retry-After` header; its HTTP-date form is used by neither Twilio nor Meta.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_retry_after_seconds() {
        let headers = |value: &str| HeaderMap::from_iter([(header::RETRY_AFTER, value.parse().unwrap())]);
        assert_eq!(retry_after(&headers(" 5 ")), Some(Duration::from_secs(5)));
        assert_eq!(retry_after(&headers("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }
}
