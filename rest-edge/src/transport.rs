//! How the edge reaches the core: any gRPC service, either the core's routes in the same process (no socket)
//! or a tonic channel to a remote core. Calls carry dynamic messages, so the edge needs no generated types.

use std::convert::Infallible;
use std::{future::Future, marker::PhantomData, pin::Pin};

use bytes::{Buf, Bytes};
use http::{HeaderValue, Uri, header, uri::PathAndQuery};
use prost::Message;
use tonic::{
    Status,
    body::Body,
    codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
};
use tower::{BoxError, ServiceExt, util::BoxCloneSyncService};

use crate::unary_frame;

type GrpcService = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, TransportError>;

/// The answers of a server-streaming call, each still encoded.
pub type EncodedStream = tonic::Streaming<Bytes>;

/// A failure to reach the core. A concrete type rather than `BoxError`: rustc cannot prove the boxed call
/// future `Send` when the service's error is itself a boxed trait object.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct TransportError(BoxError);

/// A cheap-to-clone handle on the core.
#[derive(Clone)]
pub struct Transport {
    service: GrpcService,
    origin: Uri,
}

impl Transport {
    /// Calls `service` (the core's gRPC routes) directly, in this process.
    pub fn in_process<S>(service: S) -> Self
    where
        S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Self {
            service: BoxCloneSyncService::new(
                service.map_err(|never: Infallible| -> TransportError { match never {} }),
            ),
            origin: Uri::from_static("http://in-process"),
        }
    }

    /// Calls a core at `url` over HTTP/2, connecting on first use and reconnecting as needed.
    pub fn connect_lazy(url: &str) -> Result<Self, tonic::transport::Error> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())?;
        let origin = endpoint.uri().clone();
        let channel = endpoint.connect_lazy();
        Ok(Self {
            service: BoxCloneSyncService::new(channel.map_err(|e| TransportError(e.into()))),
            origin,
        })
    }

    /// One unary call of the method at `path`; the answer stays encoded (`wire_json` writes it as JSON
    /// without decoding it). The request goes out as one length-prefixed frame and the answer is read whole,
    /// with its trailers, as gRPC frames it: a unary call needs none of a stream's machinery. The future is
    /// boxed so that its `Send`-ness is proven here, once, rather than at every generic call site.
    pub fn unary<M: Message + Send + 'static>(
        &self,
        path: PathAndQuery,
        request: tonic::Request<M>,
    ) -> Pin<Box<dyn Future<Output = Result<tonic::Response<Bytes>, Status>> + Send + 'static>> {
        let service = self.service.clone();
        let uri = self.uri(path);
        Box::pin(async move {
            let (metadata, extensions, message) = request.into_parts();
            let mut call = http::Request::new(Body::new(http_body_util::Full::new(unary_frame::encode(&message))));
            *call.method_mut() = http::Method::POST;
            *call.uri_mut() = uri;
            *call.version_mut() = http::Version::HTTP_2;
            *call.extensions_mut() = extensions;
            let headers = call.headers_mut();
            *headers = metadata.into_headers();
            headers.insert(header::TE, HeaderValue::from_static("trailers"));
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            let ready = service
                .ready_oneshot()
                .await
                .map_err(|e| Status::unavailable(format!("core unavailable: {e}")))?;
            let answer = ready.oneshot(call).await.map_err(|e| Status::from_error(e.0));
            let answer = match answer {
                Ok(answer) => unary_frame::answer(answer).await,
                Err(status) => Err(status),
            };
            answer.map_err(deadline_exceeded)
        })
    }

    /// The origin's URI with `path`.
    fn uri(&self, path: PathAndQuery) -> Uri {
        let mut parts = self.origin.clone().into_parts();
        parts.path_and_query = Some(path);
        Uri::from_parts(parts).unwrap_or_else(|_| Uri::from_static("http://in-process/"))
    }

    /// One server-streaming call of the method at `path`: each answer stays encoded. The future resolves
    /// when the core has accepted or refused the call, before its first message.
    pub fn server_streaming<M: Message + Send + 'static>(
        &self,
        path: PathAndQuery,
        request: tonic::Request<M>,
    ) -> Pin<Box<dyn Future<Output = Result<tonic::Response<EncodedStream>, Status>> + Send + 'static>> {
        let mut grpc = tonic::client::Grpc::with_origin(self.service.clone(), self.origin.clone());
        Box::pin(async move {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(format!("core unavailable: {e}")))?;
            grpc.server_streaming(request, path, DynamicCodec::<M>(PhantomData))
                .await
        })
    }
}

/// A call that passed its deadline in tonic's own time limit, the channel's to a remote core or the remote
/// core's server, ends as CANCELLED (tonic's choice), which the core never answers for any other reason: the
/// deadline passed, so it is DEADLINE_EXCEEDED (504) here as it is when the core's own limit answers first.
fn deadline_exceeded(status: Status) -> Status {
    match status.code() {
        tonic::Code::Cancelled => Status::deadline_exceeded("the core did not answer before the deadline"),
        _ => status,
    }
}

/// Protobuf codec sending a message (one known only by descriptor, or a generated one) and receiving the
/// encoded answer as is.
struct DynamicCodec<M>(PhantomData<M>);

impl<M: Message + Send + 'static> Codec for DynamicCodec<M> {
    type Encode = M;
    type Decode = Bytes;
    type Encoder = DynamicEncoder<M>;
    type Decoder = EncodedDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        DynamicEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        EncodedDecoder
    }
}

struct DynamicEncoder<M>(PhantomData<M>);

impl<M: Message> Encoder for DynamicEncoder<M> {
    type Item = M;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        dst.reserve(item.encoded_len());
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding request: {e}")))
    }

    fn buffer_settings(&self) -> BufferSettings {
        frontdesk_api::codec::buffer_settings()
    }
}

struct EncodedDecoder;

impl Decoder for EncodedDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        frontdesk_api::codec::buffer_settings()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    /// A core that answers every call with `status` (trailers-only, as a gRPC server refuses).
    fn answering(status: Status) -> Transport {
        Transport::in_process(tower::service_fn(move |_: http::Request<Body>| {
            let status = status.clone();
            async move { Ok::<_, Infallible>(status.into_http::<Body>()) }
        }))
    }

    async fn call(transport: &Transport) -> Status {
        let request = tonic::Request::new(prost_types::Duration::default());
        transport
            .unary(PathAndQuery::from_static("/frontdesk.v1.Deals/GetDeal"), request)
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn a_call_cancelled_at_its_deadline_is_deadline_exceeded() {
        // What tonic's server answers when the caller's `grpc-timeout` ends first.
        let status = call(&answering(Status::cancelled("Timeout expired"))).await;
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    }

    #[tokio::test]
    async fn the_cores_refusals_reach_the_edge_with_their_metadata() {
        let mut refusal = Status::resource_exhausted("rate limit");
        refusal
            .metadata_mut()
            .insert("ratelimit", "\"default\";r=0;t=3".parse().unwrap());
        let status = call(&answering(refusal)).await;
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(status.message(), "rate limit");
        assert_eq!(status.metadata().get("ratelimit").unwrap(), "\"default\";r=0;t=3");
    }
}
