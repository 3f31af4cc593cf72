//! A local OTLP trace receiver, as a collector would be: protobuf over HTTP (`POST /v1/traces`) or gRPC
//! (`TraceService/Export`), keeping every span the service exports.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, routing::post};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use prost::Message;

/// One exported span; ids in lowercase hex, the parent's empty for a root.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub name: String,
    pub duration: Duration,
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<ReceivedSpan>>>);

impl Spans {
    fn keep(&self, request: ExportTraceServiceRequest) {
        let spans = request
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .map(|span| ReceivedSpan {
                trace_id: hex::encode(span.trace_id),
                span_id: hex::encode(span.span_id),
                parent_span_id: hex::encode(span.parent_span_id),
                name: span.name,
                duration: Duration::from_nanos(span.end_time_unix_nano.saturating_sub(span.start_time_unix_nano)),
            });
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend(spans);
    }
}

#[tonic::async_trait]
impl TraceService for Spans {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn export_http(State(spans): State<Spans>, body: Bytes) -> axum::http::StatusCode {
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            spans.keep(request);
            axum::http::StatusCode::OK
        }
        Err(_) => axum::http::StatusCode::BAD_REQUEST,
    }
}

pub struct OtlpReceiver {
    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    pub endpoint: String,
    /// What `OTEL_EXPORTER_OTLP_PROTOCOL` is set to: `http/protobuf` or `grpc`.
    pub protocol: &'static str,
    spans: Spans,
}

impl OtlpReceiver {
    /// A receiver of `protocol` (`http/protobuf` or `grpc`) on a loopback port.
    pub async fn start(protocol: &'static str) -> Self {
        let spans = Spans::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        match protocol {
            "grpc" => {
                let service = TraceServiceServer::new(spans.clone());
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                tokio::spawn(
                    tonic::transport::Server::builder()
                        .add_service(service)
                        .serve_with_incoming(incoming),
                );
            }
            _ => {
                let app = Router::new()
                    .route("/v1/traces", post(export_http))
                    .with_state(spans.clone());
                tokio::spawn(async move { axum::serve(listener, app).await });
            }
        }
        Self {
            endpoint,
            protocol,
            spans,
        }
    }

    /// The environment that points a server at this receiver, exporting batches every 100 ms.
    pub fn env(&self) -> [(&str, &str); 3] {
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", self.protocol),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ]
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The spans once `done` holds of them (panics after `within`).
    pub async fn wait_for(&self, within: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                started.elapsed() < within,
                "the spans wanted did not arrive within {within:?}: {:#?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
