//! Answers of the routes the edge forwards unread (provider callbacks, the web chat visitor API), in the
//! platform's shapes: JSON documents, and failures as the REST API's error body with the status the REST
//! API would give the same error.

use frontdesk_api::http_error::HttpError;
use frontdesk_api::raw::v1::{Header, HttpResponse};

use crate::error::{ApiError, Reason};

/// `body` as JSON with `status`.
pub fn json(status: u16, body: &impl serde::Serialize) -> HttpResponse {
    HttpResponse {
        status: u32::from(status),
        content_type: "application/json".to_owned(),
        body: serde_json::to_vec(body).unwrap_or_default(),
        headers: Vec::new(),
    }
}

/// An answer without a body.
pub fn empty(status: u16) -> HttpResponse {
    HttpResponse {
        status: u32::from(status),
        ..HttpResponse::default()
    }
}

/// The error body of `error`, with its REST status, tagged with the request id.
pub fn refusal(error: ApiError, request_id: &str) -> HttpResponse {
    let http = HttpError::from_status(&tonic::Status::from(error));
    HttpResponse {
        status: u32::from(http.status.as_u16()),
        content_type: "application/json".to_owned(),
        body: http.body_with_id(request_id),
        headers: Vec::new(),
    }
}

/// An error body with a status and reason of the caller's choice.
pub fn error(status: u16, reason: Reason, message: &str, request_id: &str) -> HttpResponse {
    let status = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let http = HttpError::new(status, reason.as_str(), message);
    HttpResponse {
        status: u32::from(status.as_u16()),
        content_type: "application/json".to_owned(),
        body: http.body_with_id(request_id),
        headers: Vec::new(),
    }
}

/// Adds a response header.
pub fn with_header(mut response: HttpResponse, name: &str, value: impl Into<String>) -> HttpResponse {
    response.headers.push(Header {
        name: name.to_owned(),
        value: value.into(),
    });
    response
}
