//! The socket's frames (docs/webchat.md): what the server sends, each a JSON object with a `type`, carrying
//! messages as the platform API shows them; and what a visitor may send.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

pub use crate::channels::live_feed::Change;
use crate::{conversations::render, store::entities::messages};

/// The frame type that shows a message for this change.
fn frame_type(change: Change) -> &'static str {
    match change {
        Change::New => "message",
        Change::Updated => "message_updated",
        Change::Removed => "message_removed",
        Change::Reaction => "reaction",
        Change::Status => "status",
    }
}

/// A frame carrying `message`; a new message the visitor sent carries its `client_message_id` too.
pub fn message(change: Change, message: &messages::Model, client_message_id: Option<&str>) -> Bytes {
    let mut frame = json!({"type": frame_type(change), "message": render::message_data(message)});
    if let Some(id) = client_message_id {
        frame["client_message_id"] = id.into();
    }
    Bytes::from(frame.to_string())
}

/// Someone at the business is typing (`on`), or stopped.
pub fn typing(on: bool) -> Bytes {
    Bytes::from(json!({"type": "typing", "on": on}).to_string())
}

/// A frame of the visitor's was refused; the socket stays open. A refused message names its
/// `client_message_id`, so the widget knows which one to offer again.
pub fn error(code: &str, message: &str, retry_after: Option<u32>, client_message_id: Option<&str>) -> Bytes {
    let mut frame = json!({"type": "error", "code": code, "message": message});
    if let Some(seconds) = retry_after {
        frame["retry_after"] = seconds.into();
    }
    if let Some(id) = client_message_id.filter(|id| !id.is_empty()) {
        frame["client_message_id"] = id.into();
    }
    Bytes::from(frame.to_string())
}

/// A frame a visitor sent. Fields other than these are ignored, so an older server takes a newer widget's
/// frames.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    Message {
        text: String,
        #[serde(default)]
        client_message_id: String,
    },
    Typing,
    Seen {
        message_id: String,
    },
    Ping,
}

/// How a visitor's frame reads: a JSON object that is not one of `ClientFrame` is refused with an error
/// frame (the socket stays open); text that is no JSON object at all is the caller's to refuse harder.
pub enum Read {
    Frame(ClientFrame),
    Unknown(String),
    NotAnObject(String),
}

pub fn read(json: &[u8]) -> Read {
    let value: serde_json::Value = match serde_json::from_slice(json) {
        Ok(value @ serde_json::Value::Object(_)) => value,
        Ok(_) => return Read::NotAnObject("a frame is a JSON object".to_owned()),
        Err(err) => return Read::NotAnObject(format!("a frame is a JSON object: {err}")),
    };
    match serde_json::from_value::<ClientFrame>(value) {
        Ok(frame) => Read::Frame(frame),
        Err(err) => Read::Unknown(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visitor_frames_read() {
        assert!(matches!(
            read(br#"{"type":"message","text":"hi","client_message_id":"c1","extra":1}"#),
            Read::Frame(ClientFrame::Message { text, client_message_id }) if text == "hi" && client_message_id == "c1"
        ));
        assert!(matches!(
            read(br#"{"type":"typing"}"#),
            Read::Frame(ClientFrame::Typing)
        ));
        assert!(matches!(read(br#"{"type":"dance"}"#), Read::Unknown(_)));
        assert!(matches!(read(br#"{"type":"seen"}"#), Read::Unknown(_)));
        assert!(matches!(read(b"[1,2]"), Read::NotAnObject(_)));
        assert!(matches!(read(b"hello"), Read::NotAnObject(_)));
    }

    #[test]
    fn error_frames_say_when_to_retry() {
        let frame: serde_json::Value =
            serde_json::from_slice(&error("rate_limited", "slow down", Some(7), Some("c-1"))).unwrap();
        assert_eq!(frame["retry_after"], 7);
        assert_eq!(frame["type"], "error");
        assert_eq!(frame["client_message_id"], "c-1");
    }
}
