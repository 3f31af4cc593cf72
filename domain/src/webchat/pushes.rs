//! Web chat's side of the live feed (`channels::live_feed`): changes the business makes that a visitor sees
//! live, a correction, a removal or a reaction on a message of their thread, and a person typing, pushed to
//! every socket of the contact's sessions on the channel; and sockets closed when their channel is
//! disconnected or their sessions erased. A push that cannot be made is logged and dropped: the change
//! itself is stored, and a visitor who missed it gets it when their widget reconnects (replay of what was
//! revised).

use sea_orm::DatabaseConnection;

use super::{
    frames,
    live::{Live, Push, SessionKey, close},
    sessions,
};
use crate::resource_id::{ChannelId, ContactId};
use crate::{
    access::AccountId,
    channels::live_feed::{Change, ErasedSession, LiveFeed},
    store::entities::{channels::ChannelKind, conversations, messages},
};

#[derive(Clone)]
pub struct Pushes {
    db: DatabaseConnection,
    live: Live,
}

impl Pushes {
    pub fn new(db: DatabaseConnection, live: Live) -> Self {
        Self { db, live }
    }

    async fn to_sessions_of(&self, account_id: &AccountId, contact: &ContactId, channel: &ChannelId, push: Push) {
        let sessions = match sessions::of_contact(&self.db, account_id, contact, channel).await {
            Ok(sessions) => sessions,
            Err(err) => {
                tracing::warn!(error = %err, "a web chat push could not find its sessions");
                return;
            }
        };
        for session in sessions {
            if let Err(err) = self.live.publish(&session, push.clone()).await {
                tracing::warn!(error = %err, "a web chat change was not pushed live");
            }
        }
    }
}

#[async_trait::async_trait]
impl LiveFeed for Pushes {
    /// A business message still queued is not the visitor's yet: its delivery shows it as it is then.
    async fn message_changed(&self, message: &messages::Model, change: Change) {
        if message.direction == messages::Direction::Outbound && message.status == messages::MessageStatus::Queued {
            return;
        }
        let frame = frames::message(change, message, None);
        self.to_sessions_of(
            &message.account_id,
            &ContactId::new(&message.contact_id),
            &ChannelId::new(&message.channel_id),
            Push::Frame(frame),
        )
        .await;
    }

    async fn typing(&self, conversation: &conversations::Model, on: bool) {
        if conversation.channel_type == ChannelKind::Webchat {
            let frame = Push::Frame(frames::typing(on));
            let account = conversation.account_id.clone();
            let (contact, channel) = (
                ContactId::new(&conversation.contact_id),
                ChannelId::new(&conversation.channel_id),
            );
            self.to_sessions_of(&account, &contact, &channel, frame).await;
        }
    }

    /// Closes with 4401 on every replica.
    async fn channel_disconnected(&self, channel_id: &str) {
        if let Err(err) = self.live.revoke_channel(channel_id).await {
            tracing::warn!(error = %err, "the sockets of a disconnected web chat channel were not told");
        }
    }

    /// Closes with 4401.
    async fn sessions_erased(&self, account_id: &AccountId, sessions: &[ErasedSession]) {
        let push = Push::Close(close::REVOKED, "the session was erased".to_owned());
        for session in sessions {
            let key = SessionKey::new(account_id, &ChannelId::new(&session.channel_id), &session.session_id);
            if let Err(err) = self.live.publish(&key, push.clone()).await {
                tracing::warn!(error = %err, "the socket of an erased web chat session was not told");
            }
        }
    }
}
