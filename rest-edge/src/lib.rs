//! The REST edge: a generic transcoder from the published REST/JSON contract to the gRPC core. At start-up it
//! reads the descriptor set and builds one axum route per `google.api.http` rule; it knows nothing of any
//! particular resource. It also serves the OpenAPI document generated from the same descriptors.

mod bindings;
mod body;
mod client_addr;
mod error;
#[cfg(fuzzing)]
pub mod fuzzing;
mod http_series;
pub use frontdesk_api::json_out;
mod multipart;
mod openapi;
mod path_template;
mod raw_forward;
mod request;
pub use frontdesk_api::request_id;
mod response;
mod transport;
mod unary_frame;
mod webchat;
mod wire_json;

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Body,
    extract::{RawPathParams, Request, State, rejection::RawPathParamsRejection},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{MethodFilter, MethodRouter, get},
};
use bytes::Bytes;
use frontdesk_api::{FILE_DESCRIPTOR_SET, wire};
use http::{HeaderValue, StatusCode, header};
use prost_reflect::{DescriptorPool, DynamicMessage};
use tokio::net::TcpListener;

use bindings::Binding;
pub use bindings::Naming;
use body::{Bodies, Hold};
pub use client_addr::ClientAddr;
use error::ErrorResponse;
pub use error::HttpError;
use http_series::HttpSeries;
use request_id::RequestId;
pub use transport::Transport;
use wire_json::{PlanId, Plans};

/// The core's method that takes provider callbacks as they arrived.
const RECEIVE_HOOK: raw_forward::RawMethod = "/frontdesk.hooks.v1.ChannelHooks/Receive";

/// Largest accepted JSON request body; larger ones are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Renders the process's metrics in the Prometheus text format, for `GET /metrics`.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// Why the edge could not start.
#[derive(Debug, thiserror::Error)]
#[error("REST edge: {0}")]
pub struct StartError(String);

/// What the routes allow.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Each call to the core has this time limit (its gRPC deadline); past it the answer is 504
    /// `deadline_exceeded`.
    pub call_timeout: Duration,
    /// Largest file of an upload (`multipart/form-data`); a larger one is refused with 413 while it streams in.
    pub max_upload_bytes: usize,
    /// A request's body must have come whole within this long (408 past it).
    pub body_read_timeout: Duration,
    /// Bytes of request bodies held at once by this process (503 past it).
    pub body_memory_bytes: usize,
    /// The longest a web chat socket may take to take one frame before it is dropped.
    pub webchat_send_timeout: Duration,
}

/// Every route of the contract, the OpenAPI document, `/metrics` (when given a renderer), and JSON answers
/// for unknown routes and methods.
pub fn router(transport: Transport, metrics: Option<MetricsRender>, limits: Limits) -> Result<Router, StartError> {
    let Limits {
        call_timeout,
        max_upload_bytes,
        body_read_timeout,
        body_memory_bytes,
        webchat_send_timeout,
    } = limits;
    let bodies = Bodies::new(body_memory_bytes, body_read_timeout);
    let pool = DescriptorPool::decode(FILE_DESCRIPTOR_SET).map_err(|e| StartError(e.to_string()))?;
    let bindings = bindings::load(&pool).map_err(StartError)?;
    let openapi = Bytes::from(openapi::document(&pool, &bindings).map_err(StartError)?.to_string());
    let mut plans = Plans::default();
    let responses: Vec<PlanId> = bindings.iter().map(|b| plans.plan(&b.method.output())).collect();
    let plans = Arc::new(plans);

    let mut paths: BTreeMap<String, MethodRouter> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for (binding, response) in bindings.into_iter().zip(responses) {
        if !seen.insert((binding.http_method.clone(), binding.template.axum_path.clone())) {
            return Err(StartError(format!(
                "two rules for {} {}",
                binding.http_method, binding.template.template
            )));
        }
        let filter = MethodFilter::try_from(binding.http_method.clone()).map_err(|e| StartError(e.to_string()))?;
        let path = binding.template.axum_path.clone();
        let route = Arc::new(Route {
            raw_body: binding.method.output().full_name() == "google.api.HttpBody",
            max_upload_bytes: multipart::is_upload(&binding).then_some(max_upload_bytes),
            binding,
            response,
            plans: plans.clone(),
            call_timeout,
            bodies: bodies.clone(),
        });
        let transport = transport.clone();
        let handler = move |params: Result<RawPathParams, RawPathParamsRejection>, request: Request| {
            transcode(route.clone(), transport.clone(), params, request)
        };
        let routes = paths.remove(&path).unwrap_or_default();
        paths.insert(path, routes.on(filter, handler));
    }
    let mut router = Router::new();
    for (path, routes) in paths {
        router = router.route(&path, routes);
    }
    let hooks = raw_forward::Forward {
        transport: transport.clone(),
        method: RECEIVE_HOOK,
        call_timeout,
        bodies: bodies.clone(),
        max_body_bytes: MAX_BODY_BYTES,
    };
    let chat = webchat::Settings {
        call_timeout,
        send_timeout: webchat_send_timeout,
        bodies,
    };
    router = router
        .route(
            "/hooks/{*rest}",
            axum::routing::any(move |request: Request| hooks.clone().forward(request)),
        )
        .merge(webchat::routes(transport.clone(), chat));
    if let Some(render) = metrics {
        router = router.route(
            "/metrics",
            get(move || async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], render()) }),
        );
    }
    Ok(router
        .route(
            "/openapi.json",
            get(move || async move { ([(header::CONTENT_TYPE, "application/json")], openapi.clone()) }),
        )
        .fallback(|request: Request| async move { refusal(&request, StatusCode::NOT_FOUND, "not_found") })
        .method_not_allowed_fallback(|request: Request| async move {
            refusal(&request, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
        })
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(HttpSeries::default()),
            observe,
        )))
}

/// What a listener speaks.
#[derive(Clone, Copy, Debug)]
pub enum Protocol {
    /// The REST edge: HTTP/1.1 and HTTP/2, WebSocket upgrades.
    Http(ServeOptions),
    /// The core's gRPC port: HTTP/2 only. Served here rather than by tonic's server, whose own timer for
    /// the caller's `grpc-timeout` answers CANCELLED when it fires before the core's deadline step does.
    Grpc,
}

/// How the REST listener treats its connections.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// A client has this long to send a request's headers (an idle keep-alive connection as long to start
    /// its next request); past it the connection is closed, so a client that sends half a header cannot hold
    /// a connection forever.
    pub header_timeout: Duration,
    /// Proxies of one's own in front of the edge: the client's address is the one the outermost of them
    /// wrote into `X-Forwarded-For` (0: the connection's peer).
    pub trusted_proxy_hops: usize,
}

/// Serves `router` on `listener` (as `protocol` says) until `shutdown` resolves, then drains
/// in-flight requests. Every request carries its client's address (`client_addr::ClientAddr`).
pub async fn serve(
    router: Router,
    listener: TcpListener,
    protocol: Protocol,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::{
        rt::{TokioExecutor, TokioIo, TokioTimer},
        server::{conn::auto, graceful::GracefulShutdown},
        service::TowerToHyperService,
    };

    let addr = listener.local_addr()?;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http2().timer(TokioTimer::new());
    let (builder, hops) = match protocol {
        Protocol::Http(options) => {
            tracing::info!(%addr, "http listening");
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(options.header_timeout);
            (builder, options.trusted_proxy_hops)
        }
        Protocol::Grpc => {
            tracing::info!(%addr, "grpc listening");
            (builder.http2_only(), 0)
        }
    };
    let connections = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_failed(err).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Small answers and HTTP/2's control frames go out at once rather than waiting for an ACK.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "TCP_NODELAY not set");
        }
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut request: http::Request<hyper::body::Incoming>| {
                let client = client_addr::resolve(peer, request.headers(), hops);
                request.extensions_mut().insert(client);
                request
            },
        ));
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let connection = connections.watch(connection.into_owned());
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "http connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// A failed `accept`: a connection that went away before it was accepted is nothing; anything else (out of
/// file descriptors, say) is logged and waited out for a second rather than retried in a busy loop.
async fn accept_failed(err: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %err, "accepting an http connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// What one route needs per request: its binding, how to write its answer, and its time limit.
struct Route {
    binding: Binding,
    /// The answer is a `google.api.HttpBody`: its bytes are the response body, its `content_type` the header.
    raw_body: bool,
    /// The operation takes an upload (`multipart::is_upload`): files up to this size.
    max_upload_bytes: Option<usize>,
    response: PlanId,
    plans: Arc<Plans>,
    call_timeout: Duration,
    bodies: Bodies,
}

/// One REST call: HTTP request -> request message -> gRPC call -> JSON answer.
async fn transcode(
    route: Arc<Route>,
    transport: Transport,
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
) -> Response {
    let binding = &route.binding;
    let id = request_id_of(&request);
    let query = request.uri().query().map(str::to_owned);
    let forwarded = forwarded_metadata(request.headers());
    // A body that may be large is read only for a caller whose credentials pass: a stranger cannot make
    // the edge hold an upload.
    if binding.naming == Naming::Snake && !body::is_small(request.body()) {
        let lifted = request::lift_query(query.as_deref());
        let check = core_call(
            &route,
            DynamicMessage::new(binding.input()),
            &forwarded,
            &lifted,
            &id,
            wire::CREDENTIALS_ONLY,
        );
        match transport.unary(binding.grpc_path.clone(), check).await {
            Err(status) if is_preflight_pass(&status) => {}
            Err(status) => return refused(&status, &id),
            Ok(_) => {}
        }
    }
    // The body's bytes stay counted in the edge's budget until the answer is made.
    let hold = Hold::default();
    let parsed = async {
        let params: Vec<(String, String)> = params
            .map_err(|e| HttpError::invalid(format!("bad path parameter: {e}")))?
            .iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
        if let Some(max_file_bytes) = route.max_upload_bytes {
            let (headers, body) = (request.headers().clone(), request.into_body());
            let body = route.bodies.stream(body, &hold);
            return multipart::build(binding, &params, query.as_deref(), &headers, body, max_file_bytes).await;
        }
        let body = route
            .bodies
            .read(request.into_body(), MAX_BODY_BYTES, &hold)
            .await
            .map_err(|e| e.http())?;
        request::build(binding, &params, query.as_deref(), &body)
    }
    .await;
    let (message, lifted, preflight) = match parsed {
        Ok((message, lifted)) => (message, lifted, None),
        // On the platform surface the credentials are checked first: the core decides whether the
        // answer is its 401/403/429 or this 400/413 (with the rate-limit headers).
        Err(error) if binding.naming == Naming::Snake => (
            DynamicMessage::new(binding.input()),
            request::lift_query(query.as_deref()),
            Some(error),
        ),
        Err(error) => return error.into_response_with_id(&id),
    };
    let marker = preflight.as_ref().map_or("", |_| wire::PREFLIGHT);
    let call = core_call(&route, message, &forwarded, &lifted, &id, marker);
    let answer = transport.unary(binding.grpc_path.clone(), call).await;
    drop(hold);
    let result = match (answer, preflight) {
        (Ok(answer), None) if route.raw_body => response::http_body(answer),
        (Ok(answer), None) => response::success(
            &route.plans,
            route.response,
            binding.naming,
            binding.success_status,
            answer,
        ),
        (Err(status), Some(error)) if is_preflight_pass(&status) => {
            let mut response = error.into_response_with_id(&id);
            response::forward_headers(status.metadata(), response.headers_mut());
            Ok(response)
        }
        (Ok(_), Some(error)) => Err(error),
        (Err(status), _) => Ok(refused(&status, &id)),
    };
    result.unwrap_or_else(|error| error.into_response_with_id(&id))
}

/// The call to the core for `message`, carrying the caller's credentials (`forwarded` headers and `lifted`
/// query values), the request id, and `marker` (a metadata name set to `1`, none when "").
fn core_call(
    route: &Route,
    message: DynamicMessage,
    forwarded: &[(&'static str, tonic::metadata::MetadataValue<tonic::metadata::Ascii>)],
    lifted: &request::Lifted,
    id: &str,
    marker: &'static str,
) -> tonic::Request<DynamicMessage> {
    let mut call = tonic::Request::new(message);
    call.set_timeout(route.call_timeout);
    let metadata = call.metadata_mut();
    for (name, value) in forwarded {
        metadata.append(*name, value.clone());
    }
    let lifted_values = lifted
        .api_keys
        .iter()
        .map(|key| (wire::API_KEY_QUERY, key.as_str()))
        .chain(lifted.sub_account_id.iter().map(|id| (wire::SUB_ACCOUNT, id.as_str())))
        .chain([(wire::REQUEST_ID, id)])
        .chain((!marker.is_empty()).then_some((marker, "1")));
    for (name, value) in lifted_values {
        // A value a header cannot carry is dropped: the core then sees no key (401) or no sub-account.
        if let Ok(value) = value.parse() {
            metadata.append(name, value);
        }
    }
    call
}

/// The HTTP answer of a refused core call, with the headers it carries (rate limits, `WWW-Authenticate`).
fn refused(status: &tonic::Status, id: &str) -> Response {
    let mut response = HttpError::from_status(status).into_response_with_id(id);
    response::forward_headers(status.metadata(), response.headers_mut());
    response
}

fn is_preflight_pass(status: &tonic::Status) -> bool {
    use tonic_types::StatusExt;
    status
        .get_error_details()
        .error_info()
        .is_some_and(|info| info.reason == wire::PREFLIGHT_PASSED)
}

/// The credential headers, as metadata for the core.
fn forwarded_metadata(
    headers: &http::HeaderMap,
) -> Vec<(&'static str, tonic::metadata::MetadataValue<tonic::metadata::Ascii>)> {
    wire::FORWARDED_REQUEST_HEADERS
        .iter()
        .flat_map(|name| headers.get_all(*name).iter().map(move |value| (*name, value)))
        .filter_map(|(name, value)| {
            let text = value.to_str().ok()?;
            Some((name, text.parse().ok()?))
        })
        .collect()
}

fn refusal(request: &Request, status: StatusCode, code: &str) -> Response {
    let message = format!("no operation {} {}", request.method(), request.uri().path());
    HttpError::new(status, code, message).into_response_with_id(&request_id_of(request))
}

fn request_id_of(request: &Request) -> String {
    request
        .extensions()
        .get::<RequestId>()
        .map_or_else(request_id::generate, |id| id.0.clone())
}

/// Assigns the request id, echoes it as `X-Request-Id`, counts and times the request, and logs it.
async fn observe(series: State<Arc<HttpSeries>>, mut request: Request<Body>, next: Next) -> Response {
    let id = request_id::from_headers(request.headers());
    request.extensions_mut().insert(RequestId(id.clone()));
    let method = request.method().clone();
    let method_label = method_label(&method);
    let route = request.extensions().get::<axum::extract::MatchedPath>().cloned();
    let route = route.as_ref().map_or("unmatched", axum::extract::MatchedPath::as_str);
    let started = Instant::now();
    let mut response = next.run(request).await.into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(wire::REQUEST_ID, value);
    }
    let status = response.status().as_u16();
    let elapsed = started.elapsed().as_secs_f64();
    let elapsed_ms = elapsed * 1000.0;
    series.record(method_label, route, status, elapsed);
    if response.status().is_server_error() {
        tracing::warn!(request_id = %id, %method, route, status, elapsed_ms, "http request failed");
    } else {
        tracing::debug!(request_id = %id, %method, route, status, elapsed_ms, "http request");
    }
    response
}

/// The `method` label of a request: a standard method by name, any other `other`. Every label value is a
/// metric series, and a client needs no credentials to send `FOOBAR /x`, so a label taken from the request
/// as is would let anyone grow the registry without bound (routes are templates or `unmatched` for the
/// same reason; the status is one the edge chose).
fn method_label(method: &http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

#[cfg(test)]
mod transcode_tests;
