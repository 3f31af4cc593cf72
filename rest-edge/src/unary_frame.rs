//! A unary gRPC call on the wire: the request as one length-prefixed message, the answer read whole and
//! judged by its `grpc-status` (in the headers of a trailers-only answer, else in the trailers).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use frontdesk_api::wire;
use http_body_util::{BodyExt, Limited};
use prost::Message;
use tonic::{Code, Status, body::Body, metadata::MetadataMap};

/// The message's frame: no compression, its length, its bytes.
pub fn encode(message: &impl Message) -> Bytes {
    let length = message.encoded_len();
    let mut frame = BytesMut::with_capacity(PREFIX_BYTES + length);
    frame.put_u8(0);
    frame.put_u32(u32::try_from(length).unwrap_or(u32::MAX));
    // The buffer was sized for the message: encoding into it cannot run out of room.
    let _ = message.encode(&mut frame);
    frame.freeze()
}

/// The answer's message, still encoded, with the answer's headers and trailers as its metadata; a status
/// other than OK is the error, carrying the headers too (the rate-limit headers of a refusal).
pub async fn answer(answer: http::Response<Body>) -> Result<tonic::Response<Bytes>, Status> {
    let (parts, body) = answer.into_parts();
    if let Some(status) = Status::from_header_map(&parts.headers) {
        return Err(match status.code() {
            Code::Ok => Status::internal("the core's answer holds no message"),
            _ => status,
        });
    }
    if parts.status != http::StatusCode::OK {
        return Err(Status::unavailable(format!("the core answered HTTP {}", parts.status)));
    }
    let collected = Limited::new(body, PREFIX_BYTES + wire::MAX_MESSAGE_BYTES)
        .collect()
        .await
        .map_err(Status::from_error)?;
    let mut headers = parts.headers;
    if let Some(trailers) = collected.trailers() {
        headers.extend(trailers.clone());
    }
    match Status::from_header_map(&headers) {
        Some(status) if status.code() == Code::Ok => {}
        Some(status) => return Err(status),
        None => return Err(Status::internal("the core's answer ended without a grpc-status")),
    }
    let message = decode(collected.to_bytes())?;
    Ok(tonic::Response::from_parts(
        MetadataMap::from_headers(headers),
        message,
        parts.extensions,
    ))
}

/// Compression flag and length before each message.
const PREFIX_BYTES: usize = 5;

/// The one message of a unary answer's frames.
fn decode(mut frames: Bytes) -> Result<Bytes, Status> {
    if frames.len() < PREFIX_BYTES {
        return Err(Status::internal("the core's answer holds no message"));
    }
    let compressed = frames.get_u8();
    let length = frames.get_u32() as usize;
    if compressed != 0 {
        return Err(Status::internal(
            "the core's answer is compressed, which the edge never asks for",
        ));
    }
    if length != frames.len() {
        return Err(Status::internal("the core's answer is not one whole message"));
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_its_prefix_and_its_message() {
        let message = prost_types::Duration { seconds: 300, nanos: 0 };
        let frame = encode(&message);
        assert_eq!(&frame[..PREFIX_BYTES], &[0, 0, 0, 0, 3]);
        assert_eq!(decode(frame).unwrap(), message.encode_to_vec());
    }

    #[test]
    fn frames_that_are_not_one_whole_message_are_refused() {
        for frames in [
            &[0u8, 0, 0][..],
            &[0, 0, 0, 0, 2, 8],
            &[0, 0, 0, 0, 1, 8, 1],
            &[1, 0, 0, 0, 1, 8],
        ] {
            assert_eq!(
                decode(Bytes::copy_from_slice(frames)).unwrap_err().code(),
                Code::Internal
            );
        }
    }
}
