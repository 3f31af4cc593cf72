//! The deadline a gRPC caller sets (`grpc-timeout`), enforced on the core's routes: past it the call ends
//! with DEADLINE_EXCEEDED (reason `DEADLINE_EXCEEDED`; 504 over REST) and its work is dropped. tonic's network
//! server enforces the header too (answering CANCELLED), but the in-process edge calls the routes directly,
//! where nothing else would: a call waiting on a lock held elsewhere held its REST request forever.

use std::time::Duration;

use axum::{extract::Request, response::Response};
use http::HeaderValue;
use tonic::Code;

use crate::error::ApiError;
use crate::error::Reason;

const GRPC_TIMEOUT: &str = "grpc-timeout";

/// A step of the one middleware over the core's gRPC routes: `next` runs the rest of the call.
pub async fn enforce<Fut: Future<Output = Response>>(request: Request, next: impl FnOnce(Request) -> Fut) -> Response {
    let Some(timeout) = request.headers().get(GRPC_TIMEOUT).and_then(parse) else {
        return next(request).await;
    };
    match tokio::time::timeout(timeout, next(request)).await {
        Ok(response) => response,
        Err(_) => {
            let late = ApiError::new(
                Code::DeadlineExceeded,
                Reason::DeadlineExceeded,
                "the call did not finish before its deadline",
            );
            tonic::Status::from(late).into_http::<axum::body::Body>()
        }
    }
}

/// A `grpc-timeout` value: at most 8 digits, then the unit (`H`, `M`, `S`, `m`, `u` or `n`), as the gRPC
/// over HTTP/2 protocol writes it; `None` for anything else (the call then runs without a deadline here).
fn parse(value: &HeaderValue) -> Option<Duration> {
    let (&unit, digits) = value.as_bytes().split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;

    #[test]
    fn grpc_timeouts_parse() {
        let parse = |text: &'static str| super::parse(&HeaderValue::from_static(text));
        assert_eq!(parse("30S"), Some(Duration::from_secs(30)));
        assert_eq!(parse("29999m"), Some(Duration::from_millis(29_999)));
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "S", "30", "30s", "123456789S", "-1S", "1.5S", "3 S"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
