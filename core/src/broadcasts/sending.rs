//! Sending a broadcast, on the job engine, every job in the broadcast's group (so one group cancel stops
//! them all, and a send enqueued after it never runs):
//!
//! - `broadcast_start`, keyed per broadcast and due at its `send_at` (a new `send_at` reschedules it):
//!   moves the broadcast from `scheduled` to `sending` and expands the audience, one batch of recipients
//!   per run and transaction (its position is kept on the broadcast, so a crash resumes where the last
//!   batch committed), writing each new recipient with its send job.
//! - `broadcast_message`, one per recipient, in the bulk class (every account's interactive work and other
//!   accounts' turns go first), on the channel's lane: opens the recipient's conversation with the
//!   broadcast's agent, writes the rendered opener as a queued message (once: the recipient row keeps it)
//!   and hands it to the send pipeline's delivery, paced per channel like any send. A run that finds the
//!   message written by an earlier run only delivers it, so a crash sends no one twice but for a send in
//!   flight at the crash.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, EntityTrait,
    QueryFilter, Statement, Value,
    sea_query::{Expr, ExprTrait},
};
use serde::{Deserialize, Serialize};

use super::{
    audience::{self, AudienceSpec, Cursor, Part},
    opener,
};
use crate::{
    access::AccountId,
    channels::Template,
    clock::Clock,
    contacts::store as contact_store,
    conversations::{
        new_message::{self, NewMessage},
        threads::{self, Opening},
    },
    jobs::{Abandoned, Class, Handler, Job, JobArgs, NewJob, OnConflict, Outcome, Wake},
    messaging::deliver::{self, Deliver},
    routing::channels::connected,
    store::{
        entities::{broadcast_recipients, broadcasts},
        from_json_text, to_json_text,
    },
};

pub const START: &str = "broadcast_start";
pub const MESSAGE: &str = "broadcast_message";
/// How long one run of a broadcast's start expands its audience, batch after batch.
const EXPANSION_TURN: Duration = Duration::from_secs(1);
/// How long a run that could not reach the database waits before its next try.
const DATABASE_RETRY: Duration = Duration::from_secs(5);

#[derive(Serialize, Deserialize)]
struct StartArgs {
    broadcast_id: String,
}

impl JobArgs for StartArgs {
    const KIND: &'static str = START;
}

#[derive(Serialize, Deserialize)]
struct MessageArgs {
    broadcast_id: String,
    contact_id: String,
}

impl JobArgs for MessageArgs {
    const KIND: &'static str = MESSAGE;
}

/// The job that starts sending `broadcast` at its `send_at`, written with the broadcast; `None` for a
/// draft. Its key makes a later `send_at` move the one job rather than add another.
pub fn start_job(broadcast: &broadcasts::Model) -> Option<NewJob> {
    let send_at = broadcast.send_at?;
    let args = StartArgs {
        broadcast_id: broadcast.id.clone(),
    };
    Some(NewJob {
        run_at_ms: send_at.timestamp_millis(),
        max_attempts: 20,
        unique_key: Some(format!("{START}:{}", broadcast.id)),
        on_conflict: OnConflict::Reschedule,
        group: Some(broadcast.id.clone()),
        ..NewJob::new(&AccountId::of_row(&broadcast.account_id), &args)
    })
}

/// Marks a broadcast that is still going `failed` with `why`.
async fn fail(db: &impl ConnectionTrait, id: &str, why: &str, now: DateTime<Utc>) -> Result<(), DbErr> {
    broadcasts::Entity::update_many()
        .col_expr(broadcasts::Column::Status, Expr::value("failed"))
        .col_expr(broadcasts::Column::Error, Expr::value(why))
        .col_expr(broadcasts::Column::UpdatedAt, Expr::value(now))
        .filter(broadcasts::Column::Id.eq(id))
        .filter(broadcasts::Column::Status.is_in(["scheduled", "sending"]))
        .exec(db)
        .await?;
    Ok(())
}

fn channel_gone(name: &str) -> String {
    format!("the channel `{name}` was removed while the broadcast was going out")
}

fn database_retry(err: &impl std::fmt::Display) -> Outcome {
    Outcome::Retry {
        error: format!("database: {err}"),
        after: DATABASE_RETRY,
    }
}

/// Starts a broadcast when its `send_at` comes and expands its audience.
pub struct Start {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub wake: Wake,
    /// The tries each send gets.
    pub send_attempts: i32,
}

impl Start {
    /// One batch: `Finished` when the audience is expanded (or the broadcast no longer goes out).
    async fn step(&self, account_id: &AccountId, id: &str) -> Result<Step, DbErr> {
        let now = self.clock.now();
        let Some(broadcast) = super::owned(&self.db, account_id, id).await? else {
            return Ok(Step::Finished);
        };
        match broadcast.status.as_str() {
            "scheduled" => match broadcast.send_at {
                Some(send_at) if send_at > now => return Ok(Step::Wait(send_at)),
                _ => {
                    let started = broadcasts::Entity::update_many()
                        .col_expr(broadcasts::Column::Status, Expr::value("sending"))
                        .col_expr(broadcasts::Column::StartedAt, Expr::value(now))
                        .col_expr(broadcasts::Column::UpdatedAt, Expr::value(now))
                        .filter(broadcasts::Column::Id.eq(id))
                        .filter(broadcasts::Column::Status.eq("scheduled"))
                        .exec(&self.db)
                        .await?;
                    if started.rows_affected == 0 {
                        return Ok(Step::More);
                    }
                }
            },
            "sending" if !broadcast.expanded => {}
            _ => return Ok(Step::Finished),
        }
        let Some(channel) = connected(&self.db, account_id, &broadcast.channel)
            .await
            .map_err(|err| DbErr::Custom(err.to_string()))?
        else {
            fail(&self.db, id, &channel_gone(&broadcast.channel), now).await?;
            return Ok(Step::Finished);
        };
        let audience: AudienceSpec = from_json_text(&broadcast.audience);
        let cursor: Cursor = from_json_text(&broadcast.expansion);
        let txn = crate::store::begin_write(&self.db).await?;
        let step = audience::step(&txn, account_id, &audience, &cursor, now).await?;
        let added = add_recipients(&txn, &broadcast, &step.contacts).await?;
        let jobs: Vec<NewJob> = added
            .iter()
            .map(|contact_id| {
                let args = MessageArgs {
                    broadcast_id: broadcast.id.clone(),
                    contact_id: contact_id.clone(),
                };
                NewJob {
                    class: Class::Bulk,
                    lane: channel.id.clone(),
                    max_attempts: self.send_attempts,
                    group: Some(broadcast.id.clone()),
                    ..NewJob::new(account_id, &args)
                }
            })
            .collect();
        crate::jobs::enqueue_all(&txn, jobs, now).await?;
        let finished = step.next.part == Part::Done;
        let moved = broadcasts::Entity::update_many()
            .col_expr(broadcasts::Column::Expansion, Expr::value(to_json_text(&step.next)))
            .col_expr(broadcasts::Column::Expanded, Expr::value(finished))
            .col_expr(
                broadcasts::Column::Total,
                Expr::col(broadcasts::Column::Total).add(added.len() as i64),
            )
            .filter(broadcasts::Column::Id.eq(id))
            .filter(broadcasts::Column::Status.eq("sending"))
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            // Cancelled (or failed) meanwhile: nothing of this batch is written.
            txn.rollback().await?;
            return Ok(Step::Finished);
        }
        txn.commit().await?;
        if !added.is_empty() {
            self.wake.notify();
        }
        Ok(if finished { Step::Finished } else { Step::More })
    }
}

enum Step {
    /// Not yet: `send_at` is later (it was moved).
    Wait(DateTime<Utc>),
    More,
    Finished,
}

/// Writes the recipients among `contacts` that the broadcast does not have yet; those.
async fn add_recipients(
    txn: &DatabaseTransaction,
    broadcast: &broadcasts::Model,
    contacts: &[String],
) -> Result<Vec<String>, DbErr> {
    if contacts.is_empty() {
        return Ok(Vec::new());
    }
    let backend = txn.get_database_backend();
    let rows = (0..contacts.len())
        .map(|n| format!("($1, ${}, $2)", n + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let mut values: Vec<Value> = vec![broadcast.id.clone().into(), broadcast.account_id.clone().into()];
    values.extend(contacts.iter().map(|c| Value::from(c.clone())));
    let written = txn
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "INSERT INTO broadcast_recipients (broadcast_id, contact_id, account_id) VALUES {rows} \
                 ON CONFLICT (broadcast_id, contact_id) DO NOTHING RETURNING contact_id"
            ),
            values,
        ))
        .await?;
    written.iter().map(|row| row.try_get_by_index(0)).collect()
}

#[async_trait::async_trait]
impl Handler for Start {
    async fn run(&self, job: &Job) -> Outcome {
        let args: StartArgs = match job.args() {
            Ok(args) => args,
            Err(unreadable) => return unreadable,
        };
        // Batches back to back for a while, each its own transaction, then the job's turn ends (so a
        // claim's worth of time, not the whole audience, stands between other work and the slot).
        let until = std::time::Instant::now() + EXPANSION_TURN;
        let mut step = self.step(&job.account(), &args.broadcast_id).await;
        while matches!(step, Ok(Step::More)) && std::time::Instant::now() < until && !job.lease.winding_down() {
            step = self.step(&job.account(), &args.broadcast_id).await;
        }
        match step {
            Ok(Step::Finished) => Outcome::Done(None),
            Ok(Step::More) => Outcome::Defer {
                until_ms: self.clock.now().timestamp_millis(),
            },
            Ok(Step::Wait(send_at)) => Outcome::Defer {
                until_ms: send_at.timestamp_millis(),
            },
            Err(err) => database_retry(&err),
        }
    }
}

/// Sends a broadcast's opener to one recipient.
pub struct SendOne {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub deliver: Arc<Deliver>,
}

impl SendOne {
    /// The recipient's queued message: written now (with its conversation) unless an earlier run wrote it;
    /// `None` when there is nothing to send (the broadcast stopped, the contact was erased).
    async fn message(&self, account_id: &AccountId, args: &MessageArgs) -> Result<Option<String>, DbErr> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let Some(broadcast) = super::owned(&txn, account_id, &args.broadcast_id).await? else {
            return Ok(None);
        };
        let Some(recipient) =
            broadcast_recipients::Entity::find_by_id((args.broadcast_id.clone(), args.contact_id.clone()))
                .one(&txn)
                .await?
        else {
            return Ok(None);
        };
        let written = (!recipient.message_id.is_empty()).then(|| recipient.message_id.clone());
        let api = |err: crate::error::ApiError| DbErr::Custom(err.to_string());
        let Some(channel) = connected(&txn, account_id, &broadcast.channel).await.map_err(api)? else {
            // The broadcast stops; a message written already fails in the delivery, as any send whose
            // channel was removed.
            fail(&txn, &broadcast.id, &channel_gone(&broadcast.channel), now).await?;
            txn.commit().await?;
            return Ok(written);
        };
        // Written by an earlier run: only delivered (the delivery finds it sent, or cancelled, if it was).
        if written.is_some() {
            return Ok(written);
        }
        if broadcast.status != "sending" {
            return Ok(None);
        }
        let Some(contact) = contact_store::find(&txn, account_id, &args.contact_id).await? else {
            return Ok(None);
        };
        let opening = Opening {
            inbound: Default::default(),
            broadcast_id: &broadcast.id,
            agent_id: Some(&broadcast.agent_id),
        };
        let (conversation, _) = threads::open_or_start(&txn, account_id, &contact.id, &channel, opening, now)
            .await
            .map_err(api)?;
        let attributes = from_json_text(&contact.attributes);
        let values = opener::Values {
            name: &contact.name,
            attributes: &attributes,
        };
        let template = match broadcast.template.as_str() {
            "" => String::new(),
            stored => {
                let template: Template = from_json_text(stored);
                to_json_text(&Template {
                    parameters: template.parameters.iter().map(|p| opener::render(p, &values)).collect(),
                    ..template
                })
            }
        };
        let message = new_message::row(
            &NewMessage {
                conversation: &conversation,
                direction: "outbound",
                author: "api",
                text: &opener::render(&broadcast.opener, &values),
                attachments: &[],
                status: "queued",
                provider_message_id: None,
                reply_to: "",
                broadcast_id: &broadcast.id,
                template: &template,
            },
            now,
        );
        new_message::store_all(&txn, std::slice::from_ref(&message), now).await?;
        broadcast_recipients::ActiveModel {
            conversation_id: sea_orm::Set(conversation.id.clone()),
            message_id: sea_orm::Set(message.id.clone()),
            ..recipient.into()
        }
        .update(&txn)
        .await?;
        txn.commit().await?;
        Ok(Some(message.id))
    }
}

#[async_trait::async_trait]
impl Handler for SendOne {
    fn deadline(&self) -> Duration {
        self.deliver.deadline()
    }

    /// The messages of cancelled sends that were written but not sent fail with `cancelled`.
    async fn abandoned(
        &self,
        txn: &DatabaseTransaction,
        payloads: &[String],
        why: Abandoned,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let mut messages = Vec::new();
        for args in payloads
            .iter()
            .filter_map(|p| serde_json::from_str::<MessageArgs>(p).ok())
        {
            let recipient = broadcast_recipients::Entity::find_by_id((args.broadcast_id, args.contact_id))
                .one(txn)
                .await?;
            if let Some(recipient) = recipient.filter(|r| !r.message_id.is_empty()) {
                messages.push(recipient.message_id);
            }
        }
        deliver::fail_queued(txn, messages, why, now).await
    }

    async fn run(&self, job: &Job) -> Outcome {
        let args: MessageArgs = match job.args() {
            Ok(args) => args,
            Err(unreadable) => return unreadable,
        };
        match self.message(&job.account(), &args).await {
            Ok(Some(message_id)) => self.deliver.send(job, &message_id).await,
            Ok(None) => Outcome::Done(None),
            Err(err) => database_retry(&err),
        }
    }
}
