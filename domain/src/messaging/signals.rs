//! The `provider_signal` job (`channels::signals`): tells the provider that the business read the contact's
//! messages, or reacted to one. A provider that cannot be reached is tried again on the send schedule; a
//! refusal is logged and dropped (a receipt or reaction that does not get through fails no message).

use sea_orm::{ActiveEnum, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

use super::deliver::{address, retry};
use crate::{
    channels::{
        SendOutcome, Signal,
        registry::Adapters,
        signals::{Action, SignalJob},
    },
    conversations::render::StoredReaction,
    jobs::{Handler, Job, Outcome},
    retry::RetrySchedule,
    store::{
        entities::{channels, contacts, messages},
        from_json_text,
    },
};

pub struct Signals {
    pub db: DatabaseConnection,
    pub adapters: std::sync::Arc<Adapters>,
    pub schedule: RetrySchedule,
}

#[async_trait::async_trait]
impl Handler for Signals {
    async fn run(&self, job: &Job) -> Outcome {
        let args: SignalJob = match job.args() {
            Ok(args) => args,
            Err(unreadable) => return unreadable,
        };
        match self.signal(&args).await {
            Ok(None) => Outcome::Done(None),
            Ok(Some(SendOutcome::Rejected { code, message })) => {
                tracing::info!(
                    message_id = args.message_id,
                    code,
                    reason = message,
                    "the provider refused a signal"
                );
                Outcome::Done(None)
            }
            Ok(Some(SendOutcome::Unavailable { reason, retry_after })) => {
                retry(&self.schedule, job, reason, retry_after).into()
            }
            Ok(Some(SendOutcome::Accepted { .. } | SendOutcome::Delivered { .. })) => Outcome::Done(None),
            Err(err) => retry(&self.schedule, job, format!("database: {err}"), None).into(),
        }
    }
}

impl Signals {
    /// What the provider answered, or `None` when there is nothing to tell: the message, its provider id,
    /// the channel or the contact's address is gone, or the provider takes no such signal.
    async fn signal(&self, args: &SignalJob) -> Result<Option<SendOutcome>, sea_orm::DbErr> {
        let Some((message, Some(channel), Some(contact))) = messages::Entity::find()
            .filter(messages::Column::Id.eq(&args.message_id))
            .find_also_related(channels::Entity)
            .find_also_related(contacts::Entity)
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let Some(provider_message_id) = message.provider_message_id.as_deref() else {
            return Ok(None);
        };
        let Some(to) = address(&self.db, message.account_id.as_str(), &channel, &contact).await? else {
            return Ok(None);
        };
        let Ok(ready) = self.adapters.for_channel(&channel) else {
            return Ok(None);
        };
        let signal = match &args.action {
            Action::Read => Signal::Read {
                to: &to,
                provider_message_id,
            },
            Action::React => Signal::React {
                to: &to,
                provider_message_id,
                emoji: &business_reaction(&message),
            },
        };
        crate::jobs::guard::before_effect().await;
        Ok(ready.adapter.signal(&signal).await)
    }
}

/// The business's reaction on `message` now (`""`: none).
fn business_reaction(message: &messages::Model) -> String {
    let reactions: Vec<StoredReaction> = from_json_text(&message.reactions);
    reactions
        .into_iter()
        .find(|r| r.author == messages::Author::Api.to_value())
        .map(|r| r.emoji)
        .unwrap_or_default()
}
