//! What a channel with live visitors (web chat) hears of changes made on the business's side once they are
//! committed: a message corrected, removed or reacted to, someone typing, a channel disconnected, a contact's
//! sessions erased. Web chat implements it and `app` wires it in, so the rooms that make these changes
//! (contacts, conversations, messaging, routing) do not know web chat. A push that cannot be made is the
//! feed's to log and drop: the change itself is stored, and a visitor who missed it gets it on reconnecting.

use std::sync::Arc;

use crate::{
    store::entities::{conversations, messages},
    tenant::AccountId,
};

/// Why a message is shown to the visitor (again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new message.
    New,
    /// Corrected.
    Updated,
    Removed,
    /// Its reactions changed.
    Reaction,
    /// Its delivery status moved on.
    Status,
}

/// A visitor session that was erased with its contact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasedSession {
    pub channel_id: String,
    pub session_id: String,
}

#[async_trait::async_trait]
pub trait LiveFeed: Send + Sync {
    /// `message` changed; its contact's visitors on its channel see it.
    async fn message_changed(&self, message: &messages::Model, change: Change);
    /// Someone at the business started (`on`) or stopped typing in `conversation`.
    async fn typing(&self, conversation: &conversations::Model, on: bool);
    /// The channel was disconnected: its visitors' sockets close.
    async fn channel_disconnected(&self, channel_id: &str);
    /// The account's sessions were erased with their contact: their sockets close.
    async fn sessions_erased(&self, account_id: &AccountId, sessions: &[ErasedSession]);
}

pub type Feed = Arc<dyn LiveFeed>;
