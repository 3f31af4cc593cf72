//! The protobuf codec of every generated service and client: tonic_prost's, except for a message that does
//! not decode (malformed, or nested deeper than prost's recursion limit of 100, which JSON in a
//! `google.protobuf.Struct` reaches at about 33 levels). tonic_prost calls that `INTERNAL`; here it is
//! `INVALID_ARGUMENT` with the reason `INVALID_ARGUMENT`, because on a server, where it matters, the message
//! that does not decode is the caller's request: a direct gRPC caller gets the same 400-class answer the REST
//! edge gives, not an internal error. (A client whose answer does not decode gets the same code; no answer
//! of ours fails to decode.)

use std::collections::HashMap;

use prost::Message;
use tonic::{
    Code, Status,
    codec::{BufferSettings, DecodeBuf, Decoder},
};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};
use tonic_types::{ErrorDetails, StatusExt};

use crate::wire;

/// `tonic_prost::ProstCodec` with undecodable messages refused as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct ProtoCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for ProtoCodec<T, U> {
    fn default() -> Self {
        Self(ProstCodec::default())
    }
}

impl<T, U> tonic::codec::Codec for ProtoCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProtoDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(buffer_settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProtoDecoder(ProstDecoder::new(buffer_settings()))
    }
}

/// Buffers start at `wire::CODEC_BUFFER_BYTES` instead of tonic's 8 KiB (and grow as a message needs).
pub fn buffer_settings() -> BufferSettings {
    BufferSettings::new(wire::CODEC_BUFFER_BYTES, wire::CODEC_YIELD_BYTES)
}

/// Decodes with prost; a failure is `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct ProtoDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for ProtoDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(src).map_err(|status| undecodable(&status))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

fn undecodable(status: &Status) -> Status {
    let details =
        ErrorDetails::with_error_info("INVALID_ARGUMENT", wire::ERROR_DOMAIN, HashMap::<String, String>::new());
    Status::with_error_details(
        Code::InvalidArgument,
        format!("the message could not be decoded ({})", status.message()),
        details,
    )
}
