//! The AI reply job as the rooms below AI see it: a message from the contact, stored in a conversation that
//! an agent answers and that is not handed off to a person, enqueues the conversation's one reply job in the
//! same transaction. Its key is the conversation's, enqueued to reschedule: messages that come within the
//! debounce of each other push the job back and share one reply, and a message that arrives while the reply
//! is being written marks the job to run again after it (`crate::jobs::OnConflict::Reschedule`). The
//! handler (`crate::replies::reply`) answers what the conversation's counts say is unanswered.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    jobs::{JobArgs, NewJob, OnConflict},
    store::entities::conversations,
};

pub const KIND: &str = "agent_reply";
/// The lane of an account's replies: capped apart from its sends and imports.
pub const LANE: &str = "ai";

#[derive(Serialize, Deserialize)]
pub struct ReplyArgs {
    pub conversation_id: String,
}

impl JobArgs for ReplyArgs {
    const KIND: &'static str = KIND;
    /// Runs before the reply fails for good (a database that stays unreachable).
    const MAX_ATTEMPTS: i32 = 5;
}

/// When a reply follows a contact's message.
#[derive(Clone, Copy, Debug)]
pub struct ReplyPolicy {
    /// `FRONTDESK_REPLY_DEBOUNCE_MS`: how long the reply waits for more messages.
    pub debounce: Duration,
}

/// Whether a message from the contact in `conversation` is for the AI to answer.
pub fn answers(conversation: &conversations::Model) -> bool {
    !conversation.agent_id.is_empty()
        && !conversation.handoff
        && conversation.status == conversations::ConversationStatus::Open
}

/// The conversation's reply job, due a debounce after `now`.
pub fn job(conversation: &conversations::Model, policy: ReplyPolicy, now: DateTime<Utc>) -> NewJob {
    let debounce = i64::try_from(policy.debounce.as_millis()).unwrap_or(i64::MAX / 4);
    let args = ReplyArgs {
        conversation_id: conversation.id.to_string(),
    };
    NewJob {
        lane: LANE.to_owned(),
        run_at_ms: now.timestamp_millis() + debounce,
        unique_key: Some(format!("reply:{}", conversation.id)),
        on_conflict: OnConflict::Reschedule,
        ..NewJob::new(&conversation.account_id, &args)
    }
}
