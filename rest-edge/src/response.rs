//! The core's answer -> HTTP response: JSON in the surface's naming (see `wire_json`), the status from `x-http-code` when the core set one,
//! and the allow-listed response metadata copied to headers.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use frontdesk_api::wire;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use tonic::metadata::MetadataMap;

use crate::{
    bindings::Naming,
    error::HttpError,
    wire_json::{PlanId, Plans},
};

/// The core's encoded answer, written as JSON by plan `answer`, with status `status` unless the core set one.
pub fn success(
    plans: &Plans,
    answer: PlanId,
    naming: Naming,
    status: StatusCode,
    response: tonic::Response<Bytes>,
) -> Result<Response, HttpError> {
    let (metadata, encoded, _) = response.into_parts();
    // JSON of our messages runs two to three times the protobuf size (keys, defaults, quoting).
    let mut body = Vec::with_capacity(encoded.len() * 3 + 256);
    plans.write(answer, &encoded, naming, &mut body).map_err(|e| {
        tracing::error!(error = %e, "response is not representable as JSON");
        HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    })?;
    let status = metadata
        .get(wire::HTTP_CODE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(status);
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    forward_headers(&metadata, headers);
    Ok(response)
}

/// An answer of type `google.api.HttpBody`: its data as the body, under its content type.
pub fn http_body(response: tonic::Response<Bytes>) -> Result<Response, HttpError> {
    use prost::Message;
    let (metadata, encoded, _) = response.into_parts();
    let body = frontdesk_api::google::api::HttpBody::decode(encoded).map_err(|e| {
        tracing::error!(error = %e, "an HttpBody answer does not decode");
        HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    })?;
    let mut response = (StatusCode::OK, body.data).into_response();
    let headers = response.headers_mut();
    if let Ok(content_type) = HeaderValue::from_str(&body.content_type) {
        headers.insert(header::CONTENT_TYPE, content_type);
    }
    forward_headers(&metadata, headers);
    Ok(response)
}

/// Copies the response metadata the edge forwards (rate limits, deprecation, ...) to HTTP headers.
pub fn forward_headers(metadata: &MetadataMap, headers: &mut HeaderMap) {
    for name in wire::FORWARDED_HEADERS {
        if let Some(value) = metadata
            .get(*name)
            .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
        {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}
