//! The HTTP error body (`frontdesk_api::http_error`) as an axum response.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

pub use frontdesk_api::http_error::HttpError;

/// An error answered over HTTP.
pub trait ErrorResponse {
    /// The JSON response, tagged with the request id.
    fn into_response_with_id(self, request_id: &str) -> Response;
}

impl ErrorResponse for HttpError {
    fn into_response_with_id(self, request_id: &str) -> Response {
        let json = self.body_with_id(request_id);
        let mut response = (self.status, json).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
