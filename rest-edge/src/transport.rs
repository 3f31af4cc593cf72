//! How the edge reaches the core: any gRPC service, either the core's routes in the same process (no socket)
//! or a tonic channel to a remote core. Calls carry dynamic messages, so the edge needs no generated types.

use std::convert::Infallible;
use std::{future::Future, marker::PhantomData, pin::Pin};

use bytes::{Buf, Bytes};
use frontdesk_api::wire;
use http::{Uri, uri::PathAndQuery};
use prost::Message;
use tonic::{
    Status,
    body::Body,
    codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
};
use tower::{BoxError, ServiceExt, util::BoxCloneSyncService};

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
    /// without decoding it). The future is boxed so that its `Send`-ness is proven here, once, rather than at
    /// every generic call site.
    pub fn unary<M: Message + Send + 'static>(
        &self,
        path: PathAndQuery,
        request: tonic::Request<M>,
    ) -> Pin<Box<dyn Future<Output = Result<tonic::Response<Bytes>, Status>> + Send + 'static>> {
        let mut grpc = tonic::client::Grpc::with_origin(self.service.clone(), self.origin.clone())
            .max_decoding_message_size(wire::MAX_MESSAGE_BYTES);
        Box::pin(async move {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(format!("core unavailable: {e}")))?;
            grpc.unary(request, path, DynamicCodec::<M>(PhantomData))
                .await
                .map_err(deadline_exceeded)
        })
    }
}

impl Transport {
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

/// A channel to a remote core ends a call at its deadline itself, as CANCELLED (tonic's choice) with
/// `TimeoutExpired` as the cause; the deadline passed, so it is DEADLINE_EXCEEDED (504) here as it is when
/// the core answers it.
fn deadline_exceeded(status: Status) -> Status {
    let mut cause = std::error::Error::source(&status);
    while let Some(error) = cause {
        if error.is::<tonic::TimeoutExpired>() {
            return Status::deadline_exceeded("the core did not answer before the deadline");
        }
        cause = error.source();
    }
    status
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
