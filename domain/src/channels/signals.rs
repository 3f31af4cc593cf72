//! Read receipts and the business's reactions go to the provider from a job (`provider_signal`), written in
//! the transaction that marked the conversation read or stored the reaction: a provider's hiccup is retried
//! and a crash loses none. The job's handler is messaging's, which knows the contact's address.
//!
//! Signals that set the same remote state never overtake each other: one pending job per message's
//! reaction and per conversation's read mark (a keyed job, rescheduled by a newer change, and run once
//! more if the change came while it ran), and a reaction's run sends the reaction the message has when it
//! runs, not the one it was enqueued for. A 👍 taken back at once leaves no 👍 on the customer's phone.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    jobs::{JobArgs, NewJob, OnConflict},
    store::entities::{channels::ChannelKind, messages},
};

pub const KIND: &str = "provider_signal";

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
    /// The business's reaction on the message as it stands when the job runs (none takes it back).
    React,
}

impl JobArgs for SignalJob {
    const KIND: &'static str = KIND;
    /// Tries of one signal: a receipt that cannot get through within minutes is not worth more.
    const MAX_ATTEMPTS: i32 = 5;
}

/// Whether a channel type's provider takes signals: WhatsApp's mark-as-read and reactions, Messenger's and
/// Instagram's `mark_seen` and reactions (web chat's visitors see reactions through the live feed).
pub fn takes_signals(channel_kind: ChannelKind) -> bool {
    matches!(
        channel_kind,
        ChannelKind::Whatsapp | ChannelKind::Messenger | ChannelKind::Instagram
    )
}

/// The job telling the provider `action` about `message`, in the lane of its channel (one channel's
/// provider holds only its lane's share of the workers, as its sends do), keyed by the remote state it
/// sets.
pub fn job(message: &messages::Model, action: Action, now: DateTime<Utc>) -> NewJob {
    let key = match action {
        Action::Read => format!("signal:read:{}", message.conversation_id),
        Action::React => format!("signal:react:{}", message.id),
    };
    let args = SignalJob {
        message_id: message.id.to_string(),
        action,
    };
    NewJob {
        lane: message.channel_id.to_string(),
        run_at_ms: now.timestamp_millis(),
        unique_key: Some(key),
        on_conflict: OnConflict::Reschedule,
        ..NewJob::new(&message.account_id, &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reaction_job_written_with_its_emoji_still_reads() {
        let older = r#"{"message_id": "msg_1", "action": {"type": "react", "emoji": "👍"}}"#;
        let job: SignalJob = serde_json::from_str(older).unwrap();
        assert_eq!(job.action, Action::React);
    }
}
