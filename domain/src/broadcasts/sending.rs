//! Sending a broadcast, on the job engine, every job in the broadcast's group (so one group cancel stops
//! them all, and a send enqueued after it never runs).
//!
//! `broadcast_start`, keyed per broadcast and due at its `send_at` (a new `send_at` reschedules it), in the
//! bulk class (every account's interactive work and other accounts' turns go first):
//!
//! 1. moves the broadcast from `scheduled` to `sending`;
//! 2. expands the audience, one batch of recipients per transaction (its position is kept on the broadcast,
//!    so a crash resumes where the last batch committed);
//! 3. then writes the recipients' messages, one batch per transaction, a few statements for the whole batch
//!    as the API's accept writes its sends: opens each recipient's conversation with the broadcast's agent,
//!    writes the rendered opener as a queued message, keeps it on the recipient row (so a recipient's
//!    message is written once) and enqueues its send.
//!
//! Each run takes batches back to back for up to a second, then defers to the next run. The sends are the
//! send pipeline's own delivery jobs (bulk, on the channel's lane, paced per channel like any send): a
//! crash sends no one twice but for a send in flight at the crash.

use std::{collections::HashSet, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Statement, Value,
    sea_query::{Expr, ExprTrait},
};
use serde::{Deserialize, Serialize};

use super::{
    audience::{self, AudienceSpec, Cursor, Part},
    opener,
};
use crate::resource_id::ContactId;
use crate::{
    access::AccountId,
    channels::Template,
    clock::Clock,
    conversations::{
        new_message::{self, NewMessage},
        threads,
    },
    jobs::{Class, Handler, Job, JobArgs, NewJob, OnConflict, Outcome, Wake},
    messaging::deliver,
    routing::channels::connected,
    store::{
        entities::{
            broadcast_recipients,
            broadcasts::{self, BroadcastStatus},
            contacts, conversations, messages,
        },
        from_json_text,
        sql::one_of,
        to_json_text,
    },
};

pub const START: &str = "broadcast_start";
/// How long one run of a broadcast's job takes batches, back to back.
const TURN: Duration = Duration::from_secs(1);
/// How long a run that could not reach the database waits before its next try.
const DATABASE_RETRY: Duration = Duration::from_secs(5);

#[derive(Serialize, Deserialize)]
pub struct StartArgs {
    broadcast_id: String,
}

impl JobArgs for StartArgs {
    const KIND: &'static str = START;
    const CLASS: Class = Class::Bulk;
    const MAX_ATTEMPTS: i32 = 20;
}

/// The job that starts sending `broadcast` at its `send_at`, written with the broadcast; `None` for a
/// draft. Its key makes a later `send_at` move the one job rather than add another.
pub fn start_job(broadcast: &broadcasts::Model) -> Option<NewJob> {
    let send_at = broadcast.send_at?;
    let args = StartArgs {
        broadcast_id: broadcast.id.to_string(),
    };
    Some(NewJob {
        run_at_ms: send_at.timestamp_millis(),
        unique_key: Some(format!("{START}:{}", broadcast.id)),
        on_conflict: OnConflict::Reschedule,
        group: Some(broadcast.id.to_string()),
        ..NewJob::new(&broadcast.account_id, &args)
    })
}

/// Marks a broadcast that is still going `failed` with `why`.
async fn fail(db: &impl ConnectionTrait, id: &str, why: &str, now: DateTime<Utc>) -> Result<(), DbErr> {
    broadcasts::Entity::update_many()
        .col_expr(broadcasts::Column::Status, Expr::value(BroadcastStatus::Failed))
        .col_expr(broadcasts::Column::Error, Expr::value(why))
        .col_expr(broadcasts::Column::UpdatedAt, Expr::value(now))
        .filter(broadcasts::Column::Id.eq(id))
        .filter(broadcasts::Column::Status.is_in(BroadcastStatus::GOING))
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

/// Sends a broadcast from its `send_at`: starts it, expands its audience, writes its messages.
pub struct Start {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub wake: Wake,
    /// The tries each send gets.
    pub send_attempts: i32,
}

impl Start {
    /// One batch: `Finished` when every recipient's message is written (or the broadcast no longer goes
    /// out).
    async fn step(&self, account_id: &AccountId, id: &str) -> Result<Step, DbErr> {
        let now = self.clock.now();
        let Some(broadcast) = super::owned(&self.db, account_id, id).await? else {
            return Ok(Step::Finished);
        };
        match broadcast.status {
            BroadcastStatus::Scheduled => match broadcast.send_at {
                Some(send_at) if send_at > now => Ok(Step::Wait(send_at)),
                _ => {
                    broadcasts::Entity::update_many()
                        .col_expr(broadcasts::Column::Status, Expr::value(BroadcastStatus::Sending))
                        .col_expr(broadcasts::Column::StartedAt, Expr::value(now))
                        .col_expr(broadcasts::Column::UpdatedAt, Expr::value(now))
                        .filter(broadcasts::Column::Id.eq(id))
                        .filter(broadcasts::Column::Status.eq(BroadcastStatus::Scheduled))
                        .exec(&self.db)
                        .await?;
                    Ok(Step::More)
                }
            },
            BroadcastStatus::Sending if !broadcast.expanded => self.expand(account_id, &broadcast, now).await,
            BroadcastStatus::Sending => self.write(account_id, &broadcast, now).await,
            _ => Ok(Step::Finished),
        }
    }

    /// Adds the audience's next batch of recipients.
    async fn expand(
        &self,
        account_id: &AccountId,
        broadcast: &broadcasts::Model,
        now: DateTime<Utc>,
    ) -> Result<Step, DbErr> {
        let audience: AudienceSpec = from_json_text(&broadcast.audience);
        let cursor: Cursor = from_json_text(&broadcast.expansion);
        let txn = crate::store::begin_write(&self.db).await?;
        let step = audience::step(&txn, account_id, &audience, &cursor, now).await?;
        let added = add_recipients(&txn, broadcast, &step.contacts).await?;
        let moved = broadcasts::Entity::update_many()
            .col_expr(broadcasts::Column::Expansion, Expr::value(to_json_text(&step.next)))
            .col_expr(broadcasts::Column::Expanded, Expr::value(step.next.part == Part::Done))
            .col_expr(
                broadcasts::Column::Total,
                Expr::col(broadcasts::Column::Total).add(added as i64),
            )
            .filter(broadcasts::Column::Id.eq(&broadcast.id))
            .filter(broadcasts::Column::Status.eq(BroadcastStatus::Sending))
            .filter(broadcasts::Column::Expansion.eq(&broadcast.expansion))
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            // Cancelled (or failed) meanwhile, or another run wrote this batch (after this one's claim was
            // lost): nothing of it is written here, and the next step reads where the broadcast stands.
            txn.rollback().await?;
            return Ok(Step::More);
        }
        txn.commit().await?;
        Ok(Step::More)
    }

    /// Writes the messages of the next batch of recipients that have none, with their sends.
    async fn write(
        &self,
        account_id: &AccountId,
        broadcast: &broadcasts::Model,
        now: DateTime<Utc>,
    ) -> Result<Step, DbErr> {
        let txn = crate::store::begin_write(&self.db).await?;
        // A removed channel fails the broadcast in its progress job (`fail_stranded`).
        let api = |err: crate::error::ApiError| DbErr::Custom(err.to_string());
        let Some(channel) = connected(&txn, account_id, &broadcast.channel).await.map_err(api)? else {
            return Ok(Step::Finished);
        };
        let waiting = unwritten(&txn, &broadcast.id).await?;
        if waiting.is_empty() {
            return Ok(Step::Finished);
        }
        let last_batch = waiting.len() < audience::BATCH;
        let contacts = contacts::Entity::find()
            .filter(contacts::Column::AccountId.eq(account_id))
            .filter(one_of(
                txn.get_database_backend(),
                contacts::Column::Id,
                waiting.clone(),
            ))
            .all(&txn)
            .await?;
        let ids: Vec<ContactId> = contacts.iter().map(|c| c.id.clone()).collect();
        let found: HashSet<&ContactId> = ids.iter().collect();
        let erased: Vec<ContactId> = waiting.into_iter().filter(|id| !found.contains(id)).collect();
        if !erased.is_empty() {
            // Erased since the expansion: nothing goes to them, and their rows go with them.
            broadcast_recipients::Entity::delete_many()
                .filter(broadcast_recipients::Column::BroadcastId.eq(&broadcast.id))
                .filter(one_of(
                    txn.get_database_backend(),
                    broadcast_recipients::Column::ContactId,
                    erased,
                ))
                .exec(&txn)
                .await?;
        }
        let conversations = threads::open_or_start_all(&txn, account_id, &ids, &channel, broadcast, now).await?;
        let messages: Vec<messages::Model> = contacts
            .iter()
            .filter_map(|contact| {
                let conversation = conversations.get(&contact.id)?;
                Some(opener_message(broadcast, contact, conversation, now))
            })
            .collect();
        new_message::store_all(&txn, &messages, now).await?;
        if mark_written(&txn, &broadcast.id, &messages).await? < messages.len() as u64 {
            // Another run wrote some of them meanwhile (after this one's claim was lost).
            txn.rollback().await?;
            return Ok(Step::More);
        }
        let sends = messages
            .iter()
            .map(|message| NewJob {
                class: Class::Bulk,
                group: Some(broadcast.id.to_string()),
                ..deliver::job(message, &channel.id, self.send_attempts, now)
            })
            .collect();
        crate::jobs::enqueue_all(&txn, sends, now).await?;
        txn.commit().await?;
        if !messages.is_empty() {
            self.wake.notify();
        }
        Ok(if last_batch { Step::Finished } else { Step::More })
    }
}

enum Step {
    /// Not yet: `send_at` is later (it was moved).
    Wait(DateTime<Utc>),
    More,
    Finished,
}

/// Writes the recipients among `contacts` that the broadcast does not have yet; how many.
async fn add_recipients(
    txn: &DatabaseTransaction,
    broadcast: &broadcasts::Model,
    contacts: &[ContactId],
) -> Result<u64, DbErr> {
    if contacts.is_empty() {
        return Ok(0);
    }
    let backend = txn.get_database_backend();
    let rows = (0..contacts.len())
        .map(|n| format!("($1, ${}, $2)", n + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let mut values: Vec<Value> = vec![broadcast.id.clone().into(), broadcast.account_id.clone().into()];
    values.extend(contacts.iter().map(|c| Value::from(c.clone())));
    Ok(txn
        .execute_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "INSERT INTO broadcast_recipients (broadcast_id, contact_id, account_id) VALUES {rows} \
                 ON CONFLICT (broadcast_id, contact_id) DO NOTHING"
            ),
            values,
        ))
        .await?
        .rows_affected())
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
        let until = std::time::Instant::now() + TURN;
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

/// The next batch of the broadcast's recipients without a message yet (along their own index).
async fn unwritten(txn: &DatabaseTransaction, broadcast_id: &str) -> Result<Vec<ContactId>, DbErr> {
    broadcast_recipients::Entity::find()
        .select_only()
        .column(broadcast_recipients::Column::ContactId)
        .filter(broadcast_recipients::Column::BroadcastId.eq(broadcast_id))
        .filter(broadcast_recipients::Column::MessageId.eq(""))
        .order_by_asc(broadcast_recipients::Column::ContactId)
        .limit(audience::BATCH as u64)
        .into_tuple()
        .all(txn)
        .await
}

/// The broadcast's opener to `contact`, rendered, as a queued message in `conversation`.
fn opener_message(
    broadcast: &broadcasts::Model,
    contact: &contacts::Model,
    conversation: &conversations::Model,
    now: DateTime<Utc>,
) -> messages::Model {
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
    new_message::row(
        &NewMessage {
            conversation,
            direction: messages::Direction::Outbound,
            author: messages::Author::Api,
            text: &opener::render(&broadcast.opener, &values),
            attachments: &[],
            status: messages::MessageStatus::Queued,
            provider_message_id: None,
            reply_to: "",
            broadcast_id: &broadcast.id,
            template: &template,
        },
        now,
    )
}

/// Keeps each message on its recipient's row (and the conversation replies come into), where the row has
/// none yet; how many rows took one.
async fn mark_written(
    txn: &DatabaseTransaction,
    broadcast_id: &str,
    messages: &[messages::Model],
) -> Result<u64, DbErr> {
    if messages.is_empty() {
        return Ok(0);
    }
    let rows = (0..messages.len())
        .map(|n| format!("(${}, ${}, ${})", 3 * n + 2, 3 * n + 3, 3 * n + 4))
        .collect::<Vec<_>>()
        .join(", ");
    let mut values: Vec<Value> = vec![broadcast_id.into()];
    for m in messages {
        values.extend([
            m.contact_id.clone().into(),
            m.conversation_id.clone().into(),
            m.id.clone().into(),
        ]);
    }
    // `VALUES` names its columns `column1...` on both databases.
    let sql = format!(
        "UPDATE broadcast_recipients SET conversation_id = v.column2, message_id = v.column3 \
         FROM (VALUES {rows}) AS v WHERE broadcast_recipients.broadcast_id = $1 \
         AND broadcast_recipients.contact_id = v.column1 AND broadcast_recipients.message_id = ''"
    );
    Ok(txn
        .execute_raw(Statement::from_sql_and_values(txn.get_database_backend(), sql, values))
        .await?
        .rows_affected())
}

/// Fails each sending broadcast whose channel is no longer connected, saying so; how many. Its sends fail
/// on their own, as any send to a removed channel.
pub async fn fail_stranded(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<usize, DbErr> {
    let stranded = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT id, channel FROM broadcasts WHERE status = 'sending' AND NOT EXISTS (SELECT 1 FROM channels \
             WHERE channels.account_id = broadcasts.account_id AND channels.name = broadcasts.channel)",
        ))
        .await?
        .iter()
        .map(|row| Ok((row.try_get_by_index::<String>(0)?, row.try_get_by_index::<String>(1)?)))
        .collect::<Result<Vec<_>, DbErr>>()?;
    for (id, channel) in &stranded {
        fail(db, id, &channel_gone(channel), now).await?;
    }
    Ok(stranded.len())
}
