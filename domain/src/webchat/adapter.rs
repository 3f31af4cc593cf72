//! The web chat "provider" is this service itself: sending a message is pushing it to the visitor's open
//! sockets, on whichever replica holds them (`live`). A visitor with a socket open has it at once
//! (`Delivered`); one without gets it from the thread when they come back (`Accepted`: sent, and delivered
//! when they read it). The message's own id stands in for a provider's id.

use super::{
    frames::{self, Change},
    live::{Live, Push, SessionKey},
};
use crate::channels::{ChannelAdapter, Outbound, SendOutcome};
use crate::{resource_id::ChannelId, store::entities::messages};

pub struct WebChatAdapter {
    live: Live,
}

impl WebChatAdapter {
    pub fn new(live: Live) -> Self {
        Self { live }
    }
}

#[async_trait::async_trait]
impl ChannelAdapter for WebChatAdapter {
    /// `message.to` is the visitor's session. It is pushed under the message's own account and channel, so
    /// it reaches a session of theirs or nobody.
    async fn send(&self, message: &Outbound<'_>) -> SendOutcome {
        let (account, channel) = (
            message.message.account_id.clone(),
            ChannelId::new(&message.message.channel_id),
        );
        let session = SessionKey::new(&account, &channel, message.to);
        let mut shown = message.message.clone();
        shown.status = messages::MessageStatus::Sent;
        shown.provider_message_id = Some(shown.id.to_string());
        let frame = frames::message(Change::New, &shown, None);
        let provider_message_id = shown.id;
        match self.live.publish(&session, Push::Frame(frame)).await {
            Ok(0) => SendOutcome::Accepted {
                provider_message_id: provider_message_id.into(),
            },
            Ok(_) => SendOutcome::Delivered {
                provider_message_id: provider_message_id.into(),
            },
            // Without live updates the visitor still finds the message in the thread: it is sent, not lost
            // (and sockets that missed it are closed, so their widgets reconnect and replay it).
            Err(err) => {
                tracing::warn!(error = %err, "a web chat reply was stored but not pushed live");
                SendOutcome::Accepted {
                    provider_message_id: provider_message_id.into(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_visitor_with_a_socket_has_it_at_once_and_one_without_later() {
        let live = Live::in_process();
        let adapter = WebChatAdapter::new(live.clone());
        let stored = messages::sample(messages::Author::Api, "Hello <b>there</b>");
        let outbound = Outbound {
            message: &stored,
            to: "cs_1",
            text: &stored.text,
            attachments: &[],
            status_callback: "",
            template: None,
        };
        let away = adapter.send(&outbound).await;
        assert_eq!(
            away,
            SendOutcome::Accepted {
                provider_message_id: "msg_1".to_owned()
            }
        );
        let key = SessionKey::new(&stored.account_id, &ChannelId::new(&stored.channel_id), "cs_1");
        let mut socket = live.subscribe(&key, &stored.channel_id).await.unwrap();
        assert!(matches!(adapter.send(&outbound).await, SendOutcome::Delivered { .. }));
        let Some(Push::Frame(frame)) = socket.rx.recv().await else {
            panic!("no frame")
        };
        let frame: serde_json::Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(frame["type"], "message");
        assert_eq!(frame["message"]["text"], "Hello <b>there</b>");
        assert_eq!(frame["message"]["status"], "sent");
    }
}
