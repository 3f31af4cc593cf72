//! One span per gRPC call, carrying the request id (taken from `x-request-id` when well formed, else made
//! here) and echoed back in the response metadata; calls that fail on the server side are logged. When traces
//! are exported the span is named for the method and continues the caller's `traceparent`, if any.

use std::time::Instant;

use axum::{extract::Request, response::Response};
use frontdesk_api::request_id;
use frontdesk_api::wire;
use frontdesk_kernel::telemetry;
use http::HeaderValue;
use tracing::Instrument;

/// A step of the one middleware over the core's gRPC routes: `next` runs the rest of the call.
pub async fn trace_call<Fut: Future<Output = Response>>(
    request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response {
    let id = request_id::from_headers(request.headers());
    let method = request.uri().path();
    // The span's fields for a trace are written only when traces are exported: logging pays nothing for them.
    let span = if telemetry::exporting_traces() {
        let span = tracing::info_span!(
            "grpc",
            otel.name = %method,
            otel.kind = "server",
            %method,
            request_id = %id,
            trace_id = tracing::field::Empty,
        );
        let traceparent = request.headers().get(wire::TRACEPARENT).and_then(|v| v.to_str().ok());
        telemetry::continue_trace(&span, traceparent);
        span
    } else {
        tracing::info_span!("grpc", %method, request_id = %id)
    };
    let started = Instant::now();
    let mut response = next(request).instrument(span.clone()).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(wire::REQUEST_ID, value);
    }
    // Failures are answered trailers-only, so their status is in the headers; success leaves it to trailers.
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from_i32)
        .unwrap_or(tonic::Code::Ok);
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    span.in_scope(|| match code {
        tonic::Code::Internal | tonic::Code::Unknown | tonic::Code::DataLoss => {
            tracing::error!(?code, elapsed_ms, "grpc call failed")
        }
        _ => tracing::debug!(?code, elapsed_ms, "grpc call"),
    });
    response
}
