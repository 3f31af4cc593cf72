//! Follow-ups: when an agent's `follow_ups` are enabled, a contact who has not answered the agent's reply within
//! `delay_minutes` gets the configured `message` (free), or without one a nudge the model writes (its price
//! held before the model is asked and charged at the agent's tier; the local provider says a fixed sentence of
//! the agent's language, free), up to
//! `max_count` times. The reply that answered the contact enqueues the conversation's follow-up job (its key is
//! the conversation's) and records the contact's message count it answered (`follow_up_seq`); any message
//! from the contact moves the count past it, which ends the follow-ups. Each follow-up is stored in one
//! transaction with its delivery, its charge, the count of those sent and the next one's job, and only while
//! the conversation is still the agent's and the contact has still not written.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, QueryFilter, QueryOrder,
    sea_query::Expr,
};
use serde::{Deserialize, Serialize};

use super::{phrases, provider_choice::Providers, reply};
use crate::{
    access::AccountId,
    accounts::holds,
    agents::fields::FollowUpSettings,
    clock::Clock,
    conversations::replies,
    error::{ApiResult, Reason},
    jobs::{self, Handler, Job, JobArgs, NewJob, OnConflict, Outcome, Wake},
    store::{
        self,
        entities::{agents, conversations, messages},
        from_json_text,
    },
};

pub const KIND: &str = "agent_follow_up";
const RETRY_AFTER: Duration = Duration::from_secs(5);

#[derive(Serialize, Deserialize)]
pub struct FollowUpArgs {
    pub conversation_id: String,
}

impl JobArgs for FollowUpArgs {
    const KIND: &'static str = KIND;
}

/// The agent's follow-up settings when they are on.
pub fn settings(agent: &agents::Model) -> Option<FollowUpSettings> {
    Some(from_json_text::<FollowUpSettings>(&agent.follow_ups)).filter(|s| s.enabled && s.max_count > 0)
}

/// The conversation's next follow-up, `settings.delay_minutes` after `now`.
pub fn job(conversation: &conversations::Model, settings: &FollowUpSettings, now: DateTime<Utc>) -> NewJob {
    let args = FollowUpArgs {
        conversation_id: conversation.id.to_string(),
    };
    NewJob {
        lane: replies::LANE.to_owned(),
        run_at_ms: now.timestamp_millis() + i64::from(settings.delay_minutes.max(1)) * 60_000,
        unique_key: Some(format!("follow_up:{}", conversation.id)),
        on_conflict: OnConflict::Reschedule,
        ..NewJob::new(&conversation.account_id, &args)
    }
}

/// In the transaction of an agent's reply: follow-ups start again from this reply.
pub async fn restart(
    txn: &DatabaseTransaction,
    conversation: &conversations::Model,
    agent: &agents::Model,
    answered_seq: i64,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    let Some(settings) = settings(agent) else {
        return Ok(());
    };
    conversations::Entity::update_many()
        .col_expr(conversations::Column::FollowUpSeq, Expr::value(answered_seq))
        .col_expr(conversations::Column::FollowUpsSent, Expr::value(0))
        .filter(conversations::Column::Id.eq(conversation.id.as_str()))
        .exec(txn)
        .await?;
    jobs::enqueue(txn, job(conversation, &settings, now), now).await?;
    Ok(())
}

pub struct FollowUp {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub providers: Arc<Providers>,
    pub wake: Wake,
    pub send_attempts: i32,
}

/// Whether the follow-up is still due: the conversation is the agent's, open, not handed off, the contact
/// has not written since the reply, and fewer than `max_count` went out.
fn due(conversation: &conversations::Model, settings: &FollowUpSettings) -> bool {
    replies::answers(conversation)
        && conversation.inbound_seq == conversation.follow_up_seq
        && conversation.follow_ups_sent < settings.max_count
}

/// Whether the conversation's latest message is the agent's: a person of the team who wrote since has the
/// thread, and follows up themselves.
async fn agent_spoke_last(db: &impl ConnectionTrait, conversation: &conversations::Model) -> ApiResult<bool> {
    let latest = messages::Entity::find()
        .filter(messages::Column::ConversationId.eq(conversation.id.as_str()))
        .order_by_desc(messages::Column::Seq)
        .one(db)
        .await?;
    Ok(latest.is_some_and(|m| m.author == messages::Author::Agent))
}

#[async_trait::async_trait]
impl Handler for FollowUp {
    async fn run(&self, job: &Job) -> Outcome {
        let payload: FollowUpArgs = match job.args() {
            Ok(payload) => payload,
            Err(unreadable) => return unreadable,
        };
        match self.follow_up(&job.account(), &payload.conversation_id).await {
            Ok(()) => Outcome::Done(None),
            Err(err) => Outcome::Retry {
                error: err.message,
                after: RETRY_AFTER,
            },
        }
    }
}

impl FollowUp {
    async fn follow_up(&self, account_id: &AccountId, conversation_id: &str) -> ApiResult<()> {
        let Some(conversation) = store::owned::<conversations::Entity>(
            &self.db,
            conversations::Column::AccountId,
            account_id,
            conversation_id,
        )
        .await?
        else {
            return Ok(());
        };
        let agent =
            store::owned::<agents::Entity>(&self.db, agents::Column::AccountId, account_id, &conversation.agent_id)
                .await?
                .filter(|agent| agent.status == agents::AgentStatus::Active);
        let Some((agent, settings)) = agent.and_then(|agent| settings(&agent).map(|s| (agent, s))) else {
            return Ok(());
        };
        if !due(&conversation, &settings) || !agent_spoke_last(&self.db, &conversation).await? {
            return Ok(());
        }
        // The configured message is free; a nudge the model writes is charged at the agent's tier, its price
        // held before the model is asked (no credits: no call, and the follow-ups end quietly).
        let (text, hold) = if !settings.message.trim().is_empty() {
            (settings.message.trim().to_owned(), None)
        } else {
            let chosen = self.providers.for_reply(account_id, &agent).await?;
            let cost = crate::agents::tier::reply_cost(agent.ai_tier, chosen.own_key);
            let hold = if chosen.provider.is_model() && cost > 0 {
                let key = hold_key(&conversation);
                if !self.hold(account_id, &key, cost).await? {
                    return Ok(());
                }
                Some((key, cost))
            } else {
                None
            };
            let history = reply::history(&self.db, &conversation).await?;
            let profile = reply::profile(&agent);
            match chosen.provider.nudge(&profile, &history).await {
                Some(text) => (text, hold),
                None => {
                    if let Some((key, _)) = &hold {
                        holds::release_or_log(&self.db, key).await;
                    }
                    (phrases::of(&agent.language).nudge.to_owned(), None)
                }
            }
        };
        let sent = self.store(&conversation, &agent, &settings, &text, hold.as_ref()).await;
        if let (Ok(false) | Err(_), Some((key, _))) = (&sent, &hold) {
            holds::release_or_log(&self.db, key).await;
        }
        sent.map(drop)
    }

    /// Holds a written nudge's price; `false` when the balance does not cover it.
    async fn hold(&self, account_id: &AccountId, key: &str, cost: i64) -> ApiResult<bool> {
        let hold = holds::Hold {
            account_id,
            key,
            amount_milli: cost,
            purpose: holds::Purpose::FollowUp,
            lasts: self.providers.hold_time(),
            at_once: None,
        };
        match holds::hold(&self.db, &hold, self.clock.now()).await {
            Ok(()) => Ok(true),
            Err(err) if err.reason == Reason::InsufficientCredits => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Stores the follow-up with its delivery, its charge (settling `hold`) and the next one's job, unless
    /// the conversation moved meanwhile; whether it was stored.
    async fn store(
        &self,
        conversation: &conversations::Model,
        agent: &agents::Model,
        settings: &FollowUpSettings,
        text: &str,
        hold: Option<&(String, i64)>,
    ) -> ApiResult<bool> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let Some(current) = reply::locked(&txn, conversation).await? else {
            return Ok(false);
        };
        // Nothing moved since the read: no message from the contact, no new reply restarting the count.
        let unchanged = due(&current, settings)
            && current.agent_id == agent.id
            && current.inbound_seq == conversation.inbound_seq
            && current.follow_up_seq == conversation.follow_up_seq
            && current.follow_ups_sent == conversation.follow_ups_sent;
        // A person who wrote while the nudge was being written has the thread.
        if !unchanged || !agent_spoke_last(&txn, &current).await? {
            return Ok(false);
        }
        if let Some((key, cost)) = hold
            && !reply::charge(&txn, &current, Some(key), *cost, &super::provider::Basis::FollowUp, now).await?
        {
            // The balance was spent meanwhile (the hold expired): the follow-ups end quietly.
            return Ok(false);
        }
        reply::send(&txn, &current, text, self.send_attempts, now).await?;
        let sent = current.follow_ups_sent + 1;
        conversations::Entity::update_many()
            .col_expr(conversations::Column::FollowUpsSent, Expr::value(sent))
            .filter(conversations::Column::Id.eq(current.id.as_str()))
            .exec(&txn)
            .await?;
        if sent < settings.max_count {
            jobs::enqueue(&txn, job(&current, settings, now), now).await?;
        }
        txn.commit().await?;
        self.wake.notify();
        metrics::counter!("frontdesk_ai_follow_ups_total").increment(1);
        Ok(true)
    }
}

/// The key of a follow-up's hold: the conversation, the reply it follows and how many went out since, so
/// a follow-up run again after a crash takes the same hold.
fn hold_key(conversation: &conversations::Model) -> String {
    format!(
        "follow_up:{}:{}:{}",
        conversation.id, conversation.follow_up_seq, conversation.follow_ups_sent
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follow_up_is_due_only_while_the_contact_is_silent_and_under_the_count() {
        let settings = FollowUpSettings {
            enabled: true,
            delay_minutes: 60,
            max_count: 2,
            message: String::new(),
        };
        let conversation = conversations::Model {
            agent_id: "agt_1".into(),
            inbound_seq: 3,
            follow_up_seq: 3,
            follow_ups_sent: 1,
            ..conversations::sample()
        };
        assert!(due(&conversation, &settings));
        let wrote = conversations::Model {
            inbound_seq: 4,
            ..conversation.clone()
        };
        assert!(!due(&wrote, &settings), "the contact wrote since");
        let enough = conversations::Model {
            follow_ups_sent: 2,
            ..conversation.clone()
        };
        assert!(!due(&enough, &settings), "max_count reached");
        let person = conversations::Model {
            handoff: true,
            ..conversation
        };
        assert!(!due(&person, &settings), "a person has it");
    }
}
