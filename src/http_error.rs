//! The HTTP error body of the API (`{"success": false, "error": {...}}`), produced once for every failure:
//! gRPC statuses from the core (reason from `ErrorInfo`, fields from `BadRequest`), the edge's own refusals
//! (bad JSON, no route, ...) and the core's answers to the routes the edge forwards unread.

use http::StatusCode;
use serde::Serialize;
use tonic::Code;
use tonic_types::StatusExt;

use crate::reason::Reason;

/// An error as the client will see it, minus the request id added when rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub fields: Vec<(String, String)>,
    /// Seconds after which a retry may pass (`Retry-After`): a refusal of the edge's own, or any 503.
    pub retry_after: Option<u32>,
}

impl HttpError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
            fields: Vec::new(),
            retry_after: None,
        }
    }

    /// 400 `invalid_argument` naming one field.
    pub fn invalid_field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        let (field, problem) = (field.into(), problem.into());
        Self {
            fields: vec![(field.clone(), problem.clone())],
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                format!("{field}: {problem}"),
            )
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    /// Maps a gRPC status as Google's HTTP mapping does, with the reason overrides of the contract.
    pub fn from_status(status: &tonic::Status) -> Self {
        let details = status.get_error_details();
        let reason = details.error_info().map(|info| info.reason.to_ascii_lowercase());
        // OUT_OF_RANGE without a reason is tonic's message size limit: an answer too large to send or to
        // read, which is no fault of the client's.
        let too_large = reason.is_none() && status.code() == Code::OutOfRange;
        let http = match reason.as_deref().and_then(reason_status) {
            Some(http) => http,
            None if too_large => StatusCode::INTERNAL_SERVER_ERROR,
            None => code_status(status.code()),
        };
        let code = match reason {
            Some(reason) => reason,
            None if too_large => "internal".to_owned(),
            None => default_reason(status.code()).to_owned(),
        };
        let message = if http.is_server_error() && details.error_info().is_none() {
            // Not an answer of ours (transport failure, panic, ...): keep internals out of the body.
            tracing::warn!(code = ?status.code(), message = status.message(), "core call failed");
            match status.code() {
                Code::Unavailable => "the service is temporarily unavailable".to_owned(),
                Code::DeadlineExceeded => "the service did not answer in time".to_owned(),
                _ => "internal error".to_owned(),
            }
        } else {
            status.message().to_owned()
        };
        let fields = details
            .bad_request()
            .map(|b| {
                b.field_violations
                    .iter()
                    .map(|v| (v.field.clone(), v.description.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            status: http,
            code,
            message,
            fields,
            // A 503 is a moment's unavailability (a database restart, a lock held elsewhere): the client retries.
            retry_after: (http == StatusCode::SERVICE_UNAVAILABLE).then_some(1),
        }
    }

    /// The JSON error body, tagged with the request id.
    pub fn body_with_id(&self, request_id: &str) -> Vec<u8> {
        let body = ErrorBody {
            success: false,
            error: ErrorPayload {
                code: &self.code,
                message: &self.message,
                fields: self
                    .fields
                    .iter()
                    .map(|(field, message)| FieldPayload { field, message })
                    .collect(),
                request_id,
            },
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// `{"success": false, "error": {...}}`, fields in the documented order.
#[derive(Serialize)]
struct ErrorBody<'a> {
    success: bool,
    error: ErrorPayload<'a>,
}

#[derive(Serialize)]
struct ErrorPayload<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fields: Vec<FieldPayload<'a>>,
    request_id: &'a str,
}

#[derive(Serialize)]
struct FieldPayload<'a> {
    field: &'a str,
    message: &'a str,
}

/// HTTP statuses that a reason overrides.
fn reason_status(reason: &str) -> Option<StatusCode> {
    Reason::parse(reason)
        .and_then(Reason::http_status)
        .and_then(|status| StatusCode::from_u16(status).ok())
}

fn code_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Cancelled | Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The reason used when the core attached no `ErrorInfo`.
fn default_reason(code: Code) -> &'static str {
    match code {
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => "invalid_argument",
        Code::Unauthenticated => "unauthenticated",
        Code::PermissionDenied => "insufficient_scope",
        Code::NotFound => "not_found",
        Code::AlreadyExists | Code::Aborted => "already_exists",
        Code::ResourceExhausted => "rate_limited",
        Code::Unimplemented => "unimplemented",
        Code::Unavailable => "unavailable",
        Code::DeadlineExceeded => "deadline_exceeded",
        _ => "internal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::ErrorDetails;

    fn status(code: Code, reason: &str) -> tonic::Status {
        let details = ErrorDetails::with_error_info(reason, "frontdesk", std::collections::HashMap::new());
        tonic::Status::with_error_details(code, "msg", details)
    }

    #[test]
    fn reasons_override_the_code_mapping() {
        let e = HttpError::from_status(&status(Code::FailedPrecondition, "INSUFFICIENT_CREDITS"));
        assert_eq!(
            (e.status, e.code.as_str()),
            (StatusCode::PAYMENT_REQUIRED, "insufficient_credits")
        );
        let e = HttpError::from_status(&status(Code::FailedPrecondition, "GONE"));
        assert_eq!(e.status, StatusCode::GONE);
        let e = HttpError::from_status(&status(Code::Internal, "PAYMENT_PROVIDER_ERROR"));
        assert_eq!(
            (e.status, e.message.as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, "msg")
        );
    }

    #[test]
    fn an_answer_over_the_size_limit_is_a_clean_500() {
        for message in [
            "Error, decoded message length too large: found 70000000 bytes, the limit is: 67108864 bytes",
            "Error, encoded message length too large: found 70000000 bytes, the limit is: 67108864 bytes",
        ] {
            let e = HttpError::from_status(&tonic::Status::out_of_range(message));
            assert_eq!(
                (e.status, e.code.as_str(), e.message.as_str()),
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
            );
        }
        let ours = HttpError::from_status(&status(Code::OutOfRange, "INVALID_ARGUMENT"));
        assert_eq!(
            ours.status,
            StatusCode::BAD_REQUEST,
            "an OUT_OF_RANGE of the core's stays a 400"
        );
    }

    #[test]
    fn codes_map_as_google_does() {
        for (code, http) in [
            (Code::InvalidArgument, 400),
            (Code::OutOfRange, 400),
            (Code::Unauthenticated, 401),
            (Code::PermissionDenied, 403),
            (Code::NotFound, 404),
            (Code::Aborted, 409),
            (Code::ResourceExhausted, 429),
            (Code::Unimplemented, 501),
            (Code::Unavailable, 503),
            (Code::DeadlineExceeded, 504),
            (Code::DataLoss, 500),
        ] {
            assert_eq!(
                HttpError::from_status(&status(code, "SOME_REASON")).status.as_u16(),
                http
            );
        }
    }

    #[test]
    fn foreign_server_errors_hide_their_message() {
        let e = HttpError::from_status(&tonic::Status::unavailable("tcp connect error 10.0.0.1:50051"));
        assert_eq!(e.code, "unavailable");
        assert!(!e.message.contains("10.0.0.1"));
    }
}
