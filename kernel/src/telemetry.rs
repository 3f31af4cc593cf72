//! Logging and traces. One subscriber for the process: its log filtered by `RUST_LOG` (default `info`),
//! human-readable or one JSON object per line (`FRONTDESK_LOG_FORMAT=json`); and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, every span exported over OTLP (`OTEL_EXPORTER_OTLP_PROTOCOL`:
//! `http/protobuf`, the default, or `grpc`), batched on the runtime. Without the endpoint the bridge is not
//! installed and the spans of traces (`root_span`, `traceparent`) are not made, so traces cost nothing.
//!
//! A trace crosses the job boundary as a W3C `traceparent`: a job enqueued inside a trace stores it
//! (`traceparent`), and its run continues that trace (`continue_trace`). Every root span carries the trace's
//! id as its `trace_id` field, so each log line inside it names the trace.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicBool, Ordering},
};

use clap::ValueEnum;
use opentelemetry::{
    propagation::TextMapPropagator,
    trace::{TraceContextExt, TracerProvider as _},
};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::{
    Resource,
    propagation::TraceContextPropagator,
    runtime::Tokio,
    trace::{SdkTracerProvider, span_processor_with_async_runtime::BatchSpanProcessor},
};
use tracing::Level;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::{
    EnvFilter, Layer, filter::Targets, fmt, layer::SubscriberExt, registry::LookupSpan, util::SubscriberInitExt,
};

/// Whether spans are exported (set once, by `init`).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// The exporter's user agent over HTTP, and its time limit per export.
const EXPORTER_AGENT: &str = "frontdesk-traces";
const EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The service's name in its spans, unless `OTEL_SERVICE_NAME` says otherwise.
const SERVICE_NAME: &str = "frontdesk";

/// The exporter of spans, when there is one: `shutdown` sends what is still batched.
pub struct Traces(Option<SdkTracerProvider>);

impl Traces {
    pub fn shutdown(self) {
        if let Some(provider) = self.0
            && let Err(err) = provider.shutdown()
        {
            tracing::warn!(error = %err, "the last spans could not be exported");
        }
    }
}

/// Installs the process's subscriber (on a tokio runtime when traces are exported). An endpoint with a
/// protocol other than `http/protobuf` or `grpc` is an error.
pub fn init(format: LogFormat) -> anyhow::Result<Traces> {
    let provider = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(endpoint) if !endpoint.trim().is_empty() => Some(exporting(endpoint.trim())?),
        _ => None,
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // A second initialisation (tests embedding the core) keeps the first subscriber.
    let installed = match &provider {
        // The service's own spans are traced whatever the log's filter lets through: each layer filters
        // for itself.
        Some(provider) => {
            let traces = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer(SERVICE_NAME))
                .with_filter(Targets::new().with_target("frontdesk", Level::INFO));
            tracing_subscriber::registry()
                .with(log(format).with_filter(filter))
                .with(traces)
                .try_init()
        }
        // One filter for the whole process: what it refuses is never made, as before traces existed.
        None => tracing_subscriber::registry().with(filter).with(log(format)).try_init(),
    }
    .is_ok();
    EXPORTING.store(installed && provider.is_some(), Ordering::Relaxed);
    Ok(Traces(provider))
}

/// The log's lines on standard error, in `format`.
fn log<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let log = fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Json => log
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
        LogFormat::Text => log.boxed(),
    }
}

/// The tracer provider batching spans to `endpoint` over the configured protocol.
fn exporting(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
    let exporter = match protocol.trim() {
        "" | "http/protobuf" => {
            let client = crate::integrations::http::builder(EXPORTER_AGENT, EXPORT_TIMEOUT, EXPORT_TIMEOUT).build()?;
            SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
                .build()?
        }
        "grpc" => SpanExporter::builder().with_tonic().with_endpoint(endpoint).build()?,
        other => anyhow::bail!("OTEL_EXPORTER_OTLP_PROTOCOL {other:?}: this service exports http/protobuf or grpc"),
    };
    let name = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| SERVICE_NAME.to_owned());
    Ok(SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter, Tokio).build())
        .with_resource(Resource::builder().with_service_name(name).build())
        .build())
}

/// Whether spans are exported: when not, no span of a trace need be made.
pub fn exporting_traces() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// An info span for a trace (its arguments as `tracing::info_span!`'s) when spans are exported; else none,
/// made at no cost.
#[macro_export]
macro_rules! trace_span {
    ($($span:tt)*) => {
        if $crate::telemetry::exporting_traces() {
            ::tracing::info_span!($($span)*)
        } else {
            ::tracing::Span::none()
        }
    };
}

/// Makes `span` (which declares a `trace_id` field) a root of work: the child of `traceparent` when one is
/// given (a caller's W3C header, or the one a job was enqueued with), and named by its trace's id in every
/// log line inside it. Nothing happens when spans are not exported.
pub fn continue_trace(span: &tracing::Span, traceparent: Option<&str>) {
    if !exporting_traces() {
        return;
    }
    if let Some(traceparent) = traceparent {
        let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
        let parent = TraceContextPropagator::new().extract(&carrier);
        if parent.span().span_context().is_valid() {
            let _ = span.set_parent(parent);
        }
    }
    let trace_id = span.context().span().span_context().trace_id();
    span.record("trace_id", tracing::field::display(trace_id));
}

/// The current span's trace as a W3C `traceparent`, for work that continues it elsewhere (a job); `None`
/// when spans are not exported or no trace is current.
pub fn traceparent() -> Option<String> {
    if !exporting_traces() {
        return None;
    }
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// Logging output format.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
