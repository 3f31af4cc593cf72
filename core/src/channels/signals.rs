//! Read receipts and the business's reactions go to the provider from a job (`provider_signal`), written in
//! the transaction that marked the conversation read or stored the reaction: a provider's hiccup is retried
//! and a crash loses none. The job's handler is messaging's, which knows the contact's address.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    access::AccountId,
    jobs::{JobArgs, NewJob},
    store::entities::messages,
};

pub const KIND: &str = "provider_signal";

/// Tries of one signal: a receipt that cannot get through within minutes is not worth more.
const MAX_ATTEMPTS: i32 = 5;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalJob {
    /// The message the signal is about: the contact's latest read one, or the one reacted to.
    pub message_id: String,
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    Read,
    /// `""` takes the reaction back.
    React {
        emoji: String,
    },
}

impl JobArgs for SignalJob {
    const KIND: &'static str = KIND;
}

/// Whether a channel type's provider takes signals: WhatsApp's mark-as-read and reactions, Messenger's and
/// Instagram's `mark_seen` and reactions (web chat's visitors see reactions through the live feed).
pub fn takes_signals(channel_kind: &str) -> bool {
    matches!(channel_kind, "whatsapp" | "messenger" | "instagram")
}

/// The job telling the provider `action` about `message`, in the lane of its channel (one channel's
/// provider holds only its lane's share of the workers, as its sends do).
pub fn job(message: &messages::Model, action: Action, now: DateTime<Utc>) -> NewJob {
    let args = SignalJob {
        message_id: message.id.clone(),
        action,
    };
    NewJob {
        lane: message.channel_id.clone(),
        run_at_ms: now.timestamp_millis(),
        max_attempts: MAX_ATTEMPTS,
        ..NewJob::new(&AccountId::of_row(&message.account_id), &args)
    }
}
