//! The `deliver_message` job: hands a queued outbound message to its channel's provider, paced per channel,
//! and records what the provider said together with the job's completion: `sent` with the provider's id, a
//! failure with the provider's own code (4xx other than 429), or a retry with back-off (429, 5xx, timeout,
//! no connection) until the schedule is used up and the message fails with `provider_unavailable`.

use std::{any::Any, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement, Value,
    sea_query::{CaseStatement, Expr, ExprTrait},
};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::channels::pacing::{MAX_WAIT, Pacer, Slot};
use crate::{
    channels::{Outbound, SendOutcome, Template, registry::Adapters},
    clock::Clock,
    conversations::{
        render::{self, StoredAttachment},
        status,
    },
    events,
    jobs::{Abandoned, Effect, Handler, Job, JobArgs, NewJob, Outcome},
    retry::RetrySchedule,
    routing::channels::webhook_url,
    store::{
        entities::{
            channels::{self, ChannelKind},
            chat_sessions, contact_identities, contacts,
            messages::{self, Direction, MessageStatus},
        },
        from_json_text,
    },
};

pub const KIND: &str = "deliver_message";

/// WhatsApp's customer-service window: free-form messages only this long after the contact's last one.
const WINDOW_HOURS: i64 = 24;

#[derive(Serialize, Deserialize)]
pub struct DeliverArgs {
    message_id: String,
}

impl JobArgs for DeliverArgs {
    const KIND: &'static str = KIND;
}

/// The job that delivers `message` (for its account) on the channel `channel_id` (its lane, so one channel's
/// provider holds only its lane's share of the workers).
pub fn job(message: &messages::Model, channel_id: &str, max_attempts: i32, now: DateTime<Utc>) -> NewJob {
    let args = DeliverArgs {
        message_id: message.id.to_string(),
    };
    NewJob {
        lane: channel_id.to_owned(),
        run_at_ms: now.timestamp_millis(),
        max_attempts,
        ..NewJob::new(&message.account_id, &args)
    }
}

pub struct Deliver {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    adapters: Arc<Adapters>,
    pacer: Pacer,
    schedule: RetrySchedule,
    /// `{FRONTDESK_PUBLIC_URL}` without a trailing `/`.
    public_url: String,
    /// The longest a run may take: the provider's time limit, the pacing wait and the database's reads.
    deadline: Duration,
}

impl Deliver {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        adapters: Arc<Adapters>,
        pacer: Pacer,
        schedule: RetrySchedule,
        public_url: &str,
        provider_timeout: Duration,
    ) -> Self {
        Self {
            db,
            clock,
            adapters,
            pacer,
            schedule,
            public_url: public_url.trim_end_matches('/').to_owned(),
            deadline: provider_timeout + MAX_WAIT + Duration::from_secs(20),
        }
    }

    /// What the send needs: the message (still queued), its channel and the contact's address on it, read
    /// with one statement (and one more for a social channel's identity).
    async fn load(&self, message_id: &str) -> Result<Loaded, DbErr> {
        let Some((message, channel, contact)) = messages::Entity::find()
            .filter(messages::Column::Id.eq(message_id))
            .find_also_related(channels::Entity)
            .find_also_related(contacts::Entity)
            .one(&self.db)
            .await?
        else {
            return Ok(Loaded::Gone);
        };
        if message.status != MessageStatus::Queued {
            return Ok(Loaded::Gone);
        }
        let Some(channel) = channel else {
            return Ok(Loaded::Cancelled(
                message.id.into(),
                "cancelled",
                "the channel was disconnected",
            ));
        };
        let Some(contact) = contact else {
            return Ok(Loaded::Gone);
        };
        let address = address(&self.db, message.account_id.as_str(), &channel, &contact).await?;
        if channel.kind == ChannelKind::Sms && contact.opted_out {
            return Ok(Loaded::Cancelled(
                message.id.into(),
                "cancelled",
                "the contact opted out of sms",
            ));
        }
        if channel.kind == ChannelKind::Whatsapp && message.template.is_empty() && !self.window_open(&message).await? {
            return Ok(Loaded::Cancelled(
                message.id.into(),
                "outside_window",
                "the contact last wrote on WhatsApp more than 24 hours ago: only a template may be sent",
            ));
        }
        Ok(match address {
            Some(address) => Loaded::Ready(Box::new(Sendable {
                message,
                channel,
                address,
            })),
            None => Loaded::Cancelled(
                message.id.into(),
                "cancelled",
                "the contact has no address on this channel",
            ),
        })
    }
}

impl Deliver {
    /// Whether the contact wrote on the message's channel within WhatsApp's customer-service window (24 hours
    /// before now), when a free-form message may be sent: the contact's latest message there, by the index
    /// of a contact's thread.
    async fn window_open(&self, message: &messages::Model) -> Result<bool, DbErr> {
        let latest: Option<DateTime<Utc>> = messages::Entity::find()
            .select_only()
            .column(messages::Column::CreatedAt)
            .filter(messages::Column::ContactId.eq(&message.contact_id))
            .filter(messages::Column::ChannelId.eq(&message.channel_id))
            .filter(messages::Column::Direction.eq(Direction::Inbound))
            .order_by_desc(messages::Column::Seq)
            .into_tuple()
            .one(&self.db)
            .await?;
        Ok(latest.is_some_and(|at| self.clock.now() - at < chrono::Duration::hours(WINDOW_HOURS)))
    }

    /// The message ready to send, or the outcome of a run that has nothing to send.
    async fn sendable(&self, job: &Job, message_id: &str) -> Result<Sendable, Outcome> {
        match self.load(message_id).await {
            Ok(Loaded::Ready(ready)) => Ok(*ready),
            Ok(Loaded::Gone) => Err(Outcome::Done(None)),
            Ok(Loaded::Cancelled(message_id, code, why)) => {
                Err(fail(why.to_owned(), Some(failed(&message_id, code, why))))
            }
            Err(err) => Err(retry(&self.schedule, job, format!("database: {err}"), None).into()),
        }
    }
}

/// The contact's address on the channel: a phone for sms and WhatsApp, the web chat session for a
/// visitor, else the contact's id on the platform (Messenger's PSID, Instagram's IGSID).
pub(super) async fn address(
    db: &DatabaseConnection,
    account_id: &str,
    channel: &channels::Model,
    contact: &contacts::Model,
) -> Result<Option<String>, DbErr> {
    Ok(match channel.kind {
        ChannelKind::Sms | ChannelKind::Whatsapp => contact.phone.clone(),
        // A visitor is reached through a session of this very account, channel and contact, never
        // through an id a caller could have written into an identity.
        ChannelKind::Webchat => {
            chat_sessions::Entity::find()
                .select_only()
                .column(chat_sessions::Column::Id)
                .filter(chat_sessions::Column::AccountId.eq(account_id))
                .filter(chat_sessions::Column::ChannelId.eq(&channel.id))
                .filter(chat_sessions::Column::ContactId.eq(&contact.id))
                .order_by_desc(chat_sessions::Column::StartedAt)
                .into_tuple()
                .one(db)
                .await?
        }
        kind => contact_identities::Entity::find()
            .filter(contact_identities::Column::ContactId.eq(&contact.id))
            .filter(contact_identities::Column::Kind.eq(kind))
            .one(db)
            .await?
            .map(|identity| identity.external_id),
    })
}

enum Loaded {
    /// Erased, or no longer queued (sent by an earlier run whose job completion was lost, removed).
    Gone,
    /// The message (by id) cannot go out: the code it fails with, and why.
    Cancelled(String, &'static str, &'static str),
    Ready(Box<Sendable>),
}

/// A queued message, the channel it goes out on, and the contact's address there.
struct Sendable {
    message: messages::Model,
    channel: channels::Model,
    address: String,
}

#[async_trait::async_trait]
impl Handler for Deliver {
    fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Cancelled sends fail with `cancelled` (`message.failed`), unless they already went out.
    async fn abandoned(
        &self,
        txn: &DatabaseTransaction,
        payloads: &[String],
        why: Abandoned,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let ids: Vec<String> = payloads
            .iter()
            .filter_map(|p| serde_json::from_str::<DeliverArgs>(p).ok())
            .map(|p| p.message_id)
            .collect();
        fail_queued(txn, ids, why, now).await
    }

    async fn run(&self, job: &Job) -> Outcome {
        let payload: DeliverArgs = match job.args() {
            Ok(payload) => payload,
            Err(unreadable) => return unreadable,
        };
        self.send(job, &payload.message_id).await
    }
}

/// The queued messages of `ids` fail, because their sends ended without running (`message.failed`).
pub async fn fail_queued(
    txn: &DatabaseTransaction,
    ids: Vec<String>,
    why: Abandoned,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if ids.is_empty() {
        return Ok(());
    }
    let changed = messages::Entity::update_many()
        .col_expr(messages::Column::Status, Expr::value(MessageStatus::Failed))
        .col_expr(messages::Column::ErrorCode, Expr::value(why.code()))
        .col_expr(
            messages::Column::ErrorMessage,
            Expr::value(match why {
                Abandoned::Cancelled => "the send was cancelled",
                Abandoned::Crashed => "every try of the send ended with its worker's crash",
            }),
        )
        .filter(crate::store::sql::one_of(
            txn.get_database_backend(),
            messages::Column::Id,
            ids,
        ))
        .filter(messages::Column::Status.eq(MessageStatus::Queued))
        .exec_with_returning(txn)
        .await?;
    record_all(txn, &changed, MessageStatus::Failed, now).await
}

impl Deliver {
    /// Hands the queued message `message_id` to its provider, as the run of `job`.
    pub async fn send(&self, job: &Job, message_id: &str) -> Outcome {
        let Sendable {
            message,
            channel,
            address,
        } = match self.sendable(job, message_id).await {
            Ok(sendable) => sendable,
            Err(outcome) => return outcome,
        };
        let ready = match self.adapters.for_channel(&channel) {
            Ok(ready) => ready,
            Err(err) => {
                let why = err.to_string();
                return fail(why.clone(), Some(failed(&message.id, "cancelled", &why)));
            }
        };
        let slot = self.pacer.slot(&channel.id, ready.per_second).await;
        let waited = matches!(slot, Slot::At(at) if at > tokio::time::Instant::now());
        match slot {
            Slot::At(at) if waited => tokio::time::sleep_until(at).await,
            Slot::At(_) => {}
            Slot::Later(wait) => {
                let until_ms = self.clock.now().timestamp_millis() + i64::try_from(wait.as_millis()).unwrap_or(0);
                return Outcome::Paced { until_ms };
            }
        }
        // The wait for the slot may have seen the message removed or corrected, or its contact opt out.
        let (message, address) = if waited {
            match self.sendable(job, &message.id).await {
                Ok(fresh) => (fresh.message, fresh.address),
                Err(outcome) => return outcome,
            }
        } else {
            (message, address)
        };
        let attachments: Vec<StoredAttachment> = from_json_text(&message.attachments);
        let attachments: Vec<crate::channels::Attachment> = attachments
            .into_iter()
            .map(|a| crate::channels::Attachment {
                url: a.url,
                content_type: a.content_type,
                filename: a.filename,
            })
            .collect();
        let status_callback = format!("{}/status", webhook_url(&self.public_url, &channel));
        let template: Option<Template> = match message.template.as_str() {
            "" => None,
            stored => match serde_json::from_str(stored) {
                Ok(template) => Some(template),
                // Never the template's stand-in text in its place: that would go out as free-form text.
                Err(_) => {
                    let why = "the stored template cannot be read";
                    return fail(why.to_owned(), Some(failed(&message.id, "invalid_template", why)));
                }
            },
        };
        let outbound = Outbound {
            message: &message,
            to: &address,
            text: &message.text,
            attachments: &attachments,
            status_callback: &status_callback,
            template: template.as_ref(),
        };
        // A worker paused past its lease, whose job was cancelled or is shutting down sends nothing.
        crate::jobs::guard::before_effect().await;
        let span = frontdesk_kernel::trace_span!(
            "deliver",
            otel.name = %format_args!("deliver {}", sea_orm::ActiveEnum::to_value(&channel.provider)),
            otel.kind = "client",
            message_id = %message.id
        );
        match ready.adapter.send(&outbound).instrument(span).await {
            SendOutcome::Accepted { provider_message_id } => Outcome::Done(Some(Box::new(MarkSent {
                message_id: message.id.into(),
                provider_message_id,
                delivered: false,
            }))),
            SendOutcome::Delivered { provider_message_id } => Outcome::Done(Some(Box::new(MarkSent {
                message_id: message.id.into(),
                provider_message_id,
                delivered: true,
            }))),
            SendOutcome::Rejected { code, message: text } => fail(
                format!("provider refused: {code} {text}"),
                Some(failed(&message.id, &code, &text)),
            ),
            SendOutcome::Unavailable { reason, retry_after } => {
                retry(&self.schedule, job, reason, retry_after).or_fail_with(&message.id)
            }
        }
    }
}

fn fail(error: String, effect: Option<Box<dyn Effect>>) -> Outcome {
    Outcome::Fail { error, effect }
}

fn failed(message_id: &str, code: &str, text: &str) -> Box<dyn Effect> {
    Box::new(MarkFailed {
        message_id: message_id.to_owned(),
        code: code.to_owned(),
        text: text.to_owned(),
    })
}

/// A retry after the schedule's wait for this try; past the schedule, a failure.
pub(super) fn retry(
    schedule: &RetrySchedule,
    job: &Job,
    error: String,
    retry_after: Option<std::time::Duration>,
) -> Retry {
    match schedule.wait_after(job.attempt, retry_after) {
        Some(after) if !job.is_last_attempt() => Retry::Again(Outcome::Retry { error, after }),
        _ => Retry::UsedUp(error),
    }
}

pub(super) enum Retry {
    Again(Outcome),
    UsedUp(String),
}

impl Retry {
    /// Used-up retries fail the message with `provider_unavailable`.
    fn or_fail_with(self, message_id: &str) -> Outcome {
        match self {
            Self::Again(outcome) => outcome,
            Self::UsedUp(error) => {
                let effect = failed(message_id, "provider_unavailable", &error);
                fail(error, Some(effect))
            }
        }
    }
}

impl From<Retry> for Outcome {
    /// Used-up retries of work that has no message to fail (the database was unreachable) fail the job alone.
    fn from(retry: Retry) -> Self {
        match retry {
            Retry::Again(outcome) => outcome,
            Retry::UsedUp(error) => fail(error, None),
        }
    }
}

/// The provider took the message: `sent`, with its id (`message.sent`); or `delivered` already, when the
/// provider handed it over at once (`message.sent` then `message.delivered`).
struct MarkSent {
    message_id: String,
    provider_message_id: String,
    delivered: bool,
}

#[async_trait::async_trait]
impl Effect for MarkSent {
    /// One statement per outcome (sent, delivered) sets the batch's messages with each its own provider id,
    /// one more writes their events: a delivery's outcome costs a share of a few statements, not two.
    async fn write_all(
        &self,
        alike: &[&dyn Effect],
        txn: &DatabaseTransaction,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let all: Vec<&MarkSent> = alike.iter().filter_map(|e| e.as_any().downcast_ref()).collect();
        for delivered in [false, true] {
            let group: Vec<&MarkSent> = all.iter().copied().filter(|one| one.delivered == delivered).collect();
            if !group.is_empty() {
                mark_sent(txn, &group, delivered, now).await?;
            }
        }
        Ok(())
    }

    async fn write(&self, txn: &DatabaseTransaction, now: DateTime<Utc>) -> Result<(), DbErr> {
        self.write_all(&[self], txn, now).await
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Moves the queued messages of `sent` on to `sent` (or `delivered`) and writes their events.
async fn mark_sent(
    txn: &DatabaseTransaction,
    sent: &[&MarkSent],
    delivered: bool,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let reached = if delivered {
        MessageStatus::Delivered
    } else {
        MessageStatus::Sent
    };
    let changed = if txn.get_database_backend() == DbBackend::Postgres {
        // The ids and provider ids as two arrays: one statement text for any number of messages.
        const SQL: &str = "UPDATE messages SET status = $1, provider_message_id = sent.provider_id, \
            sent_at = $2, delivered_at = CASE WHEN $3 THEN $2 ELSE messages.delivered_at END \
            FROM unnest($4::text[], $5::text[]) AS sent(id, provider_id) \
            WHERE messages.id = sent.id AND messages.status = 'queued' RETURNING messages.*";
        let ids: Vec<String> = sent.iter().map(|one| one.message_id.clone()).collect();
        let provider_ids: Vec<String> = sent.iter().map(|one| one.provider_message_id.clone()).collect();
        let values: Vec<Value> = vec![
            reached.into(),
            now.into(),
            delivered.into(),
            ids.into(),
            provider_ids.into(),
        ];
        messages::Entity::find()
            .from_raw_sql(Statement::from_sql_and_values(DbBackend::Postgres, SQL, values))
            .all(txn)
            .await?
    } else {
        let mut provider_ids = CaseStatement::new();
        for one in sent {
            provider_ids = provider_ids.case(
                Expr::col(messages::Column::Id).eq(one.message_id.as_str()),
                one.provider_message_id.as_str(),
            );
        }
        let mut update = messages::Entity::update_many()
            .col_expr(messages::Column::Status, Expr::value(reached))
            .col_expr(
                messages::Column::ProviderMessageId,
                provider_ids
                    .finally(Expr::col(messages::Column::ProviderMessageId))
                    .into(),
            )
            .col_expr(messages::Column::SentAt, Expr::value(now));
        if delivered {
            update = update.col_expr(messages::Column::DeliveredAt, Expr::value(now));
        }
        update
            .filter(messages::Column::Id.is_in(sent.iter().map(|one| one.message_id.as_str())))
            .filter(messages::Column::Status.eq(MessageStatus::Queued))
            .exec_with_returning(txn)
            .await?
    };
    if delivered {
        // Each state passed has its event, with the message as it stood then.
        let as_sent: Vec<messages::Model> = changed
            .iter()
            .map(|m| messages::Model {
                status: MessageStatus::Sent,
                delivered_at: None,
                ..m.clone()
            })
            .collect();
        record_all(txn, &as_sent, MessageStatus::Sent, now).await?;
    }
    record_all(txn, &changed, reached, now).await
}

/// The message failed for good, before it was delivered (`message.failed`).
struct MarkFailed {
    message_id: String,
    code: String,
    text: String,
}

#[async_trait::async_trait]
impl Effect for MarkFailed {
    async fn write(&self, txn: &DatabaseTransaction, now: DateTime<Utc>) -> Result<(), DbErr> {
        let changed = messages::Entity::update_many()
            .col_expr(messages::Column::Status, Expr::value(MessageStatus::Failed))
            .col_expr(messages::Column::ErrorCode, Expr::value(&self.code))
            .col_expr(messages::Column::ErrorMessage, Expr::value(&self.text))
            .filter(messages::Column::Id.eq(&self.message_id))
            .filter(messages::Column::Status.is_in([MessageStatus::Queued, MessageStatus::Sent]))
            .exec_with_returning(txn)
            .await?;
        record_all(txn, &changed, MessageStatus::Failed, now).await
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Writes the event of `message` reaching `status`.
pub async fn record(
    db: &impl ConnectionTrait,
    message: &messages::Model,
    status: MessageStatus,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    record_all(db, std::slice::from_ref(message), status, now).await
}

/// Writes the events of `messages` reaching `status`, with one statement.
async fn record_all(
    db: &impl ConnectionTrait,
    messages: &[messages::Model],
    status: MessageStatus,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if let Some(event) = status::event(status) {
        let reached = messages
            .iter()
            .map(|m| (m.account_id.clone(), event, render::message_data(m)))
            .collect();
        events::record_all(db, reached, now).await?;
    }
    Ok(())
}
