//! Provider status reports for outbound messages (sent, delivered, read, failed), applied through the
//! status machine under a row lock, so concurrent reports for one message apply one after the other. Each
//! state passed emits its event with the message as it stood then. A report for a message the provider
//! knows but we have not yet recorded as handed over (its callback outran our commit) is kept as a job and
//! applied once the message is there.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QuerySelect,
};

use super::{render, status::steps};
use crate::{
    channels::{InboundReaction, ProviderStatus, Sender, StatusUpdate, Watermark},
    events,
    store::entities::{
        channels, contact_identities,
        messages::{self, Direction, MessageStatus},
    },
};

/// What a report did.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// The message moved through these states.
    Moved(Vec<MessageStatus>),
    /// Late, repeated or not allowed: nothing changed.
    Unchanged,
    /// No message on the channel has this provider id (yet).
    Unknown,
}

/// A provider's report, for the message with its id on the channel.
pub async fn apply(
    db: &DatabaseConnection,
    channel_id: &str,
    update: &StatusUpdate,
    now: DateTime<Utc>,
) -> Result<Applied, DbErr> {
    let select = messages::Entity::find()
        .filter(messages::Column::ChannelId.eq(channel_id))
        .filter(messages::Column::ProviderMessageId.eq(&update.provider_message_id));
    report(db, select, &update.status, now).await
}

/// A report about a message by its own id, where this service is the provider (web chat). It may come
/// before the send's own outcome is written (the visitor read the message as soon as it was pushed): the
/// message then moves on from `queued`, and takes its own id as the provider's, as the send would have.
pub async fn apply_to_message(
    db: &DatabaseConnection,
    message_id: &str,
    status: &ProviderStatus,
    now: DateTime<Utc>,
) -> Result<Applied, DbErr> {
    let select = messages::Entity::find().filter(messages::Column::Id.eq(message_id));
    report(db, select, status, now).await
}

/// Applies `status` to the message `select` finds, under a row lock.
async fn report(
    db: &DatabaseConnection,
    mut select: sea_orm::Select<messages::Entity>,
    status: &ProviderStatus,
    now: DateTime<Utc>,
) -> Result<Applied, DbErr> {
    let txn = crate::store::begin_write(db).await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        select = select.lock_exclusive();
    }
    let Some(before) = select.one(&txn).await? else {
        return Ok(Applied::Unknown);
    };
    let current = before.status;
    let reported = match status {
        ProviderStatus::Sent => MessageStatus::Sent,
        ProviderStatus::Delivered => MessageStatus::Delivered,
        ProviderStatus::Read => MessageStatus::Read,
        ProviderStatus::Failed { .. } => MessageStatus::Failed,
    };
    if before.direction != Direction::Outbound {
        return Ok(Applied::Unchanged);
    }
    let passed = steps(current, reported);
    if passed.is_empty() {
        return Ok(Applied::Unchanged);
    }
    let mut message = before.clone();
    if message.provider_message_id.is_none() {
        message.provider_message_id = Some(message.id.to_string());
    }
    for step in &passed {
        message.status = *step;
        match step {
            MessageStatus::Sent => message.sent_at = message.sent_at.or(Some(now)),
            MessageStatus::Delivered => message.delivered_at = Some(now),
            MessageStatus::Read => message.read_at = Some(now),
            MessageStatus::Failed => {
                if let ProviderStatus::Failed { code, message: text } = status {
                    message.error_code = Some(code.clone());
                    message.error_message = Some(text.clone());
                }
            }
            MessageStatus::Received | MessageStatus::Queued => {}
        }
        if let Some(event) = super::status::event(*step) {
            let account_id = message.account_id.clone();
            events::record(&txn, &account_id, event, render::message_data(&message), now).await?;
        }
    }
    message.clone().into_active_model().reset_all().update(&txn).await?;
    txn.commit().await?;
    Ok(Applied::Moved(passed))
}

/// How long after Meta stamps a message our send call may come back with its id.
const WATERMARK_SLACK: chrono::TimeDelta = chrono::TimeDelta::seconds(1);

/// What one callback reports besides new messages.
pub struct Reports<'a> {
    pub statuses: &'a [StatusUpdate],
    pub watermarks: &'a [Watermark],
    pub reactions: &'a [InboundReaction],
}

/// Applies a callback's reports, each as it comes; a status report for a message not recorded yet is kept
/// as a job. Whether such jobs were written (the workers are to be woken).
pub async fn apply_reports(
    db: &DatabaseConnection,
    channel: &channels::Model,
    reports: &Reports<'_>,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let mut late = Vec::new();
    for update in reports.statuses {
        if apply(db, &channel.id, update, now).await? == Applied::Unknown {
            late.push(late_job(channel, update, now));
        }
    }
    for watermark in reports.watermarks {
        apply_watermark(db, channel, watermark, now).await?;
    }
    for reaction in reports.reactions {
        super::contact_reactions::apply(db, &channel.id, reaction, now).await?;
    }
    let waiting = !late.is_empty();
    crate::jobs::enqueue_all(db, late, now).await?;
    Ok(waiting)
}

/// A report by time: every message sent to the contact on the channel up to `up_to` reached the status.
/// Meta's watermark is the time it stamped the latest message delivered (or read), while our send call was
/// under way; we record `sent_at` when its answer comes back, a moment later. So a message counts as
/// covered when its answer came back within `WATERMARK_SLACK` of the watermark: a message still queued or
/// paced at that time (sent later) is not.
async fn apply_watermark(
    db: &DatabaseConnection,
    channel: &channels::Model,
    watermark: &Watermark,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let Sender::Identity { kind, external_id } = &watermark.recipient else {
        return Ok(());
    };
    let behind: &[MessageStatus] = match watermark.status {
        ProviderStatus::Delivered => &[MessageStatus::Sent],
        ProviderStatus::Read => &[MessageStatus::Sent, MessageStatus::Delivered],
        ProviderStatus::Sent | ProviderStatus::Failed { .. } => return Ok(()),
    };
    let contact_id: Option<String> = contact_identities::Entity::find()
        .select_only()
        .column(contact_identities::Column::ContactId)
        .filter(contact_identities::Column::AccountId.eq(&channel.account_id))
        .filter(contact_identities::Column::Kind.eq(*kind))
        .filter(contact_identities::Column::ExternalId.eq(external_id))
        .into_tuple()
        .one(db)
        .await?;
    let Some(contact_id) = contact_id else {
        return Ok(());
    };
    let covered: Vec<String> = messages::Entity::find()
        .select_only()
        .column(messages::Column::Id)
        .filter(messages::Column::ContactId.eq(contact_id))
        .filter(messages::Column::ChannelId.eq(&channel.id))
        .filter(messages::Column::Direction.eq(Direction::Outbound))
        .filter(messages::Column::Status.is_in(behind.iter().copied()))
        .filter(messages::Column::SentAt.lte(watermark.up_to + WATERMARK_SLACK))
        .into_tuple()
        .all(db)
        .await?;
    for message_id in covered {
        apply_to_message(db, &message_id, &watermark.status, now).await?;
    }
    Ok(())
}

/// A report for a message not recorded yet, kept as a job and applied once the message is there.
pub const LATE_KIND: &str = "apply_receipt";
/// Waits between looks for the message (its send's outcome commits within a lease at worst).
const LATE_WAITS: [std::time::Duration; 5] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(5),
    std::time::Duration::from_secs(15),
    std::time::Duration::from_secs(60),
];

#[derive(serde::Serialize, serde::Deserialize)]
pub struct LateReport {
    channel_id: String,
    provider_message_id: String,
    status: String,
    code: String,
    message: String,
}

impl crate::jobs::JobArgs for LateReport {
    const KIND: &'static str = LATE_KIND;
    const MAX_ATTEMPTS: i32 = LATE_WAITS.len() as i32 + 1;
}

impl LateReport {
    fn new(channel_id: &str, update: &StatusUpdate) -> Self {
        let (status, code, message) = match &update.status {
            ProviderStatus::Sent => ("sent", "", ""),
            ProviderStatus::Delivered => ("delivered", "", ""),
            ProviderStatus::Read => ("read", "", ""),
            ProviderStatus::Failed { code, message } => ("failed", code.as_str(), message.as_str()),
        };
        Self {
            channel_id: channel_id.to_owned(),
            provider_message_id: update.provider_message_id.clone(),
            status: status.to_owned(),
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }

    fn update(&self) -> Option<StatusUpdate> {
        let status = match self.status.as_str() {
            "sent" => ProviderStatus::Sent,
            "delivered" => ProviderStatus::Delivered,
            "read" => ProviderStatus::Read,
            "failed" => ProviderStatus::Failed {
                code: self.code.clone(),
                message: self.message.clone(),
            },
            _ => return None,
        };
        Some(StatusUpdate {
            provider_message_id: self.provider_message_id.clone(),
            status,
        })
    }
}

/// The job that applies `update`, which came through `channel`, later.
pub fn late_job(channel: &channels::Model, update: &StatusUpdate, now: DateTime<Utc>) -> crate::jobs::NewJob {
    crate::jobs::NewJob {
        run_at_ms: now.timestamp_millis() + 1_000,
        ..crate::jobs::NewJob::new(&channel.account_id, &LateReport::new(&channel.id, update))
    }
}

pub struct LateReceipts {
    pub db: DatabaseConnection,
    pub clock: std::sync::Arc<dyn crate::clock::Clock>,
}

#[async_trait::async_trait]
impl crate::jobs::Handler for LateReceipts {
    async fn run(&self, job: &crate::jobs::Job) -> crate::jobs::Outcome {
        use crate::jobs::Outcome;
        let report: LateReport = match job.args() {
            Ok(report) => report,
            Err(unreadable) => return unreadable,
        };
        let Some(update) = report.update() else {
            return Outcome::Fail {
                error: format!("unknown status `{}`", report.status),
                effect: None,
            };
        };
        let wait = LATE_WAITS[usize::try_from(job.attempt - 1).unwrap_or(0).min(LATE_WAITS.len() - 1)];
        match apply(&self.db, &report.channel_id, &update, self.clock.now()).await {
            // Not ours after all (a message sent from the provider's console, say): nothing to keep.
            Ok(Applied::Unknown) if job.is_last_attempt() => {
                tracing::info!(
                    channel = report.channel_id,
                    provider_message_id = report.provider_message_id,
                    "a status report matched no message; dropped"
                );
                Outcome::Done(None)
            }
            Ok(Applied::Unknown) => Outcome::Retry {
                error: "no message has this provider id yet".to_owned(),
                after: wait,
            },
            Ok(_) => Outcome::Done(None),
            Err(err) => Outcome::Retry {
                error: err.to_string(),
                after: wait,
            },
        }
    }
}
