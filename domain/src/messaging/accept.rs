//! Accepting a send: the contact is found (or created), the channel chosen, the conversation found or opened,
//! the message stored as `queued` and its delivery job written, all atomically; then the call answers at
//! once.
//!
//! Sends are written in batches (group commit, `store::group_commit`): the sends that arrive while a writer
//! is busy share its next write, which loads what they need with one statement per table (`Facts`), decides
//! each send on its own, and writes all their idempotency keys with one statement and their messages,
//! conversation touches and delivery jobs with another (on PostgreSQL; three on SQLite). Only a batch that
//! must write before that (a contact or conversation to open, a key to hold) opens a transaction on
//! PostgreSQL (`Lazy`). A send that is refused (no channel, opted out, ...) is answered
//! with its error and writes nothing; a database error fails the batch, whose sends are then written one by
//! one, so one bad send cannot fail the others.
//!
//! Under an idempotency key a concurrent or later repeat answers the same message: a batch takes each key
//! once (repeats wait for the next round, which finds the first one's answer), and a key a concurrent writer
//! committed first keeps that writer's answer; the send that lost writes no message (a contact or
//! conversation it opened on the way stays, as a send that failed after opening it would leave it).

use std::{
    collections::{BTreeSet, HashSet},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, Statement};
use tonic::Code;

use super::{
    channel_choice::{self, Reach},
    deliver,
    facts::Facts,
    idempotency::{self, Answered},
    outgoing::{Outgoing, Recipient},
    recipient::{self, Resolved},
};
use crate::error::Reason;
use crate::resource_id::{ContactId, MessageId};
use crate::{
    access::AccountId,
    clock::Clock,
    conversations::{
        lookup,
        new_message::{self, NewMessage},
        threads,
    },
    error::{ApiError, ApiResult},
    jobs::{self, NewJob, Wake},
    routing::resolver::Inbound,
    store::{
        self,
        entities::{
            channels::ChannelKind,
            idempotency_keys,
            messages::{self, Author},
        },
        group_commit::{BatchWriter, Batching, GroupCommit, together_or_alone, unavailable_again},
        sql, to_json_text,
    },
};

/// Accepts sends; cheap to clone.
#[derive(Clone)]
pub struct Sender {
    commits: GroupCommit<AcceptWriter>,
}

impl Sender {
    /// Starts the writers. `send_attempts` is the tries a delivery gets: the first and one per wait of the
    /// retry schedule.
    pub fn start(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        wake: Wake,
        send_attempts: i32,
        batching: Batching,
    ) -> Self {
        let writer = AcceptWriter {
            db,
            clock,
            wake,
            send_attempts,
        };
        Self {
            commits: GroupCommit::start(writer, batching),
        }
    }

    /// Accepts `outgoing` for the account: the message's answer (`message_id`, `contact_id`).
    pub async fn accept(&self, account_id: &AccountId, outgoing: Outgoing, author: Author) -> ApiResult<Answered> {
        let send = PendingSend {
            account_id: account_id.clone(),
            outgoing,
            author,
            trace_parent: crate::telemetry::traceparent(),
        };
        self.commits.submit(send).await.unwrap_or_else(|| {
            Err(ApiError::new(
                Code::Unavailable,
                Reason::Unavailable,
                "the send could not be written; retry",
            ))
        })
    }
}

/// One send waiting for a batch.
pub struct PendingSend {
    account_id: AccountId,
    outgoing: Outgoing,
    author: Author,
    /// The trace its delivery continues: the caller's, not that of whoever leads the batch.
    trace_parent: Option<String>,
}

impl PendingSend {
    fn key(&self) -> Option<(&str, &str)> {
        let key = self.outgoing.idempotency_key.as_deref()?;
        Some((self.account_id.as_str(), key))
    }
}

/// How one send of a batch's transaction came out.
enum Written {
    Accepted(Answered),
    Refused(ApiError),
    /// A concurrent writer committed the send's idempotency key first.
    KeyTaken,
}

/// What a batch writes for one accepted send.
struct Plan {
    message: messages::Model,
    job: NewJob,
    key: Option<idempotency_keys::Model>,
    answered: Answered,
}

struct AcceptWriter {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    wake: Wake,
    send_attempts: i32,
}

#[async_trait::async_trait]
impl BatchWriter for AcceptWriter {
    type Item = PendingSend;
    type Answer = ApiResult<Answered>;

    const KIND: &'static str = "send";

    async fn write(&self, sends: Vec<PendingSend>) -> Vec<ApiResult<Answered>> {
        let now = self.clock.now();
        let mut answers: Vec<Option<ApiResult<Answered>>> = vec![None; sends.len()];
        let mut waiting: Vec<usize> = (0..sends.len()).collect();
        while !waiting.is_empty() {
            let (round, later) = one_per_key(&sends, waiting);
            self.round(&sends, &round, now, &mut answers).await;
            waiting = later;
        }
        self.wake.notify();
        answers
            .into_iter()
            .map(|answer| answer.unwrap_or_else(|| Err(ApiError::internal("a send of a batch was left unanswered"))))
            .collect()
    }

    fn unavailable(answer: &Self::Answer) -> Option<Self::Answer> {
        unavailable_again(answer)
    }
}

/// The sends of `waiting` that can share a round (each idempotency key once), and the rest.
fn one_per_key(sends: &[PendingSend], waiting: Vec<usize>) -> (Vec<usize>, Vec<usize>) {
    let mut seen = BTreeSet::new();
    waiting
        .into_iter()
        .partition(|&n| sends[n].key().is_none_or(|key| seen.insert(key)))
}

impl AcceptWriter {
    /// Answers the sends of `round`: repeats of a key from its live row, the others by writing them.
    async fn round(
        &self,
        sends: &[PendingSend],
        round: &[usize],
        now: DateTime<Utc>,
        answers: &mut [Option<ApiResult<Answered>>],
    ) {
        let keys: Vec<(&str, &str)> = round.iter().filter_map(|&n| sends[n].key()).collect();
        let live = match idempotency::live(&self.db, &keys, now).await {
            Ok(live) => live,
            Err(err) => {
                let err = ApiError::from(err);
                for &n in round {
                    answers[n] = Some(Err(err.clone()));
                }
                return;
            }
        };
        let mut fresh = Vec::with_capacity(round.len());
        for &n in round {
            let earlier = sends[n]
                .key()
                .and_then(|(account, key)| live.get(&(account.to_owned(), key.to_owned())));
            match earlier {
                Some(row) => answers[n] = Some(idempotency::answer(row, &sends[n].outgoing.fingerprint)),
                None => fresh.push(n),
            }
        }
        let batch: Vec<&PendingSend> = fresh.iter().map(|&n| &sends[n]).collect();
        let written = together_or_alone(&batch, |sends| self.transaction(sends, now)).await;
        for (n, written) in fresh.iter().zip(written) {
            answers[*n] = Some(match written {
                Ok(Written::Accepted(answered)) => Ok(answered),
                Ok(Written::Refused(err)) | Err(err) => Err(err),
                Ok(Written::KeyTaken) => self.answer_taken(&sends[*n], now).await,
            });
        }
    }

    /// The answer of a send whose key a concurrent writer committed first.
    async fn answer_taken(&self, send: &PendingSend, now: DateTime<Utc>) -> ApiResult<Answered> {
        let (_, key) = send
            .key()
            .ok_or_else(|| ApiError::internal("a send without a key lost its key"))?;
        idempotency::earlier(&self.db, &send.account_id, key, &send.outgoing.fingerprint, now)
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    Code::Aborted,
                    Reason::Aborted,
                    "a concurrent request holds this key; retry",
                )
            })
    }

    /// The batch's writes, atomically: an error is the batch's (the database's); a send's own refusal is in
    /// its `Written`.
    async fn transaction(&self, batch: &[&PendingSend], now: DateTime<Utc>) -> ApiResult<Vec<Written>> {
        let accounts: BTreeSet<&str> = batch.iter().map(|send| send.account_id.as_str()).collect();
        let named: BTreeSet<&str> = batch
            .iter()
            .filter_map(|send| match &send.outgoing.recipient {
                Recipient::Contact(id) => Some(id.as_str()),
                _ => None,
            })
            .collect();
        let mut txn = Lazy {
            db: &self.db,
            txn: None,
        };
        // SQLite: the batch reads under its write lock too, so nothing changes what it read before it writes.
        let mut facts = if self.db.get_database_backend() == DbBackend::Postgres {
            Facts::load(&self.db, &accounts, &named).await?
        } else {
            Facts::load(txn.begun().await?, &accounts, &named).await?
        };
        let mut written = Vec::with_capacity(batch.len());
        let mut plans = Vec::new();
        for (n, send) in batch.iter().enumerate() {
            match self.plan(&mut txn, send, &mut facts, now).await? {
                Ok(plan) => {
                    plans.push((n, plan));
                    written.push(None);
                }
                Err(refusal) => written.push(Some(Written::Refused(refusal))),
            }
        }
        let mut keys: Vec<idempotency_keys::Model> = plans.iter().filter_map(|(_, plan)| plan.key.clone()).collect();
        // In one order for every batch: two batches that wait on each other's keys then queue, not deadlock.
        keys.sort_by(|a, b| (&a.account_id, &a.key).cmp(&(&b.account_id, &b.key)));
        let kept = if keys.is_empty() {
            HashSet::new()
        } else {
            idempotency::remember_all(txn.begun().await?, &keys, now).await?
        };
        let (accepted, taken): (Vec<_>, Vec<_>) = plans.into_iter().partition(|(_, plan)| {
            plan.key
                .as_ref()
                .is_none_or(|key| kept.contains(&(key.account_id.to_string(), key.key.clone())))
        });
        let messages: Vec<messages::Model> = accepted.iter().map(|(_, plan)| plan.message.clone()).collect();
        let jobs: Vec<NewJob> = accepted.iter().map(|(_, plan)| plan.job.clone()).collect();
        txn.write(&messages, jobs, now).await?;
        for (n, _) in taken {
            written[n] = Some(Written::KeyTaken);
        }
        for (n, plan) in accepted {
            written[n] = Some(Written::Accepted(plan.answered));
        }
        Ok(written
            .into_iter()
            .map(|w| w.unwrap_or_else(|| Written::Refused(ApiError::internal("a planned send was not written"))))
            .collect())
    }

    /// Decides one send: `Err` for the batch's failure, `Ok(Err)` for the send's refusal.
    async fn plan(
        &self,
        txn: &mut Lazy<'_>,
        send: &PendingSend,
        facts: &mut Facts,
        now: DateTime<Utc>,
    ) -> ApiResult<ApiResult<Plan>> {
        let account_id = &send.account_id;
        let outgoing = &send.outgoing;
        let known = match &outgoing.recipient {
            Recipient::Contact(id) => facts.contact(account_id, id).cloned(),
            _ => None,
        };
        let contact = match known {
            Some(contact) => contact,
            None => match self.find_recipient(txn.begun().await?, send, now).await? {
                Ok(Resolved { contact, identities }) => {
                    facts.learn(txn.begun().await?, contact.clone(), identities).await?;
                    contact
                }
                Err(refusal) => return Ok(Err(refusal)),
            },
        };
        let reach = Reach {
            contact: &contact,
            identities: facts.identities(&contact.id),
        };
        let latest = facts.latest_channel(&contact.id);
        let channel =
            match channel_choice::choose(facts.channels(account_id), outgoing.channel.as_deref(), latest, &reach) {
                Ok(channel) => channel,
                Err(refusal) => return Ok(Err(refusal)),
            };
        if let Err(refusal) = outgoing.fits(channel.kind) {
            return Ok(Err(refusal));
        }
        if channel.kind == ChannelKind::Sms && contact.opted_out {
            return Ok(Err(ApiError::new(
                Code::InvalidArgument,
                Reason::OptedOut,
                "the contact opted out of sms (they sent STOP); a START from them opts back in",
            )));
        }
        if !outgoing.reply_to.is_empty() {
            let (replied, to) = (MessageId::new(&outgoing.reply_to), ContactId::new(&contact.id));
            // On the transaction's connection when there is one: the pool may hold no other.
            let belongs = match &txn.txn {
                Some(txn) => lookup::belongs_to(txn, account_id, &replied, &to).await?,
                None => lookup::belongs_to(&self.db, account_id, &replied, &to).await?,
            };
            if !belongs {
                return Ok(Err(ApiError::field("reply_to", "is not a message of this contact")));
            }
        }
        let conversation = match facts.open_conversation(&contact.id, &channel.name) {
            Some(open) => open.clone(),
            None => {
                let (conversation, _) = threads::open_or_start(
                    txn.begun().await?,
                    account_id,
                    &contact.id,
                    &channel,
                    Inbound::default(),
                    now,
                )
                .await?;
                facts.opened(conversation.clone());
                conversation
            }
        };
        let template = outgoing.template.as_ref().map(to_json_text).unwrap_or_default();
        let message = new_message::row(
            &NewMessage {
                conversation: &conversation,
                direction: messages::Direction::Outbound,
                author: send.author,
                text: &outgoing.text,
                attachments: &outgoing.attachments,
                status: messages::MessageStatus::Queued,
                provider_message_id: None,
                reply_to: &outgoing.reply_to,
                broadcast_id: "",
                template: &template,
            },
            now,
        );
        let answered = Answered {
            message_id: message.id.to_string(),
            contact_id: contact.id.to_string(),
        };
        let key = send.key().map(|(_, key)| idempotency_keys::Model {
            account_id: send.account_id.clone(),
            key: key.to_owned(),
            fingerprint: outgoing.fingerprint.clone(),
            message_id: answered.message_id.clone().into(),
            contact_id: answered.contact_id.clone().into(),
            created_at: now,
        });
        Ok(Ok(Plan {
            job: NewJob {
                trace_parent: send.trace_parent.clone(),
                ..deliver::job(&message, &channel.id, self.send_attempts, now)
            },
            message,
            key,
            answered,
        }))
    }

    /// The contact of a send that names none the batch loaded (by phone, e-mail or identity, found or
    /// created; or an id that is not the account's, which is 404), in a savepoint so that its refusal leaves
    /// the batch's transaction usable.
    async fn find_recipient(
        &self,
        txn: &DatabaseTransaction,
        send: &PendingSend,
        now: DateTime<Utc>,
    ) -> ApiResult<ApiResult<Resolved>> {
        let savepoint = store::savepoint(txn).await?;
        let outgoing = &send.outgoing;
        match recipient::resolve(&savepoint, &send.account_id, &outgoing.recipient, &outgoing.name, now).await {
            Ok(resolved) => {
                savepoint.commit().await?;
                Ok(Ok(resolved))
            }
            Err(refusal) => {
                savepoint.rollback().await?;
                Ok(Err(refusal))
            }
        }
    }
}

/// A batch's transaction. On PostgreSQL it begins only when a send needs to write before the batch's messages
/// are (a contact or conversation to open, an idempotency key to hold); a batch that needs none (every send to
/// a known contact's open conversation, the common case) writes with one statement and no transaction. Its
/// reads took no locks inside one either (READ COMMITTED), and the statement is atomic by itself: two round
/// trips fewer (`BEGIN`, `COMMIT`) on top of the two that one statement for three writes saves. SQLite runs
/// the whole batch in the transaction, under its write lock.
struct Lazy<'a> {
    db: &'a DatabaseConnection,
    txn: Option<DatabaseTransaction>,
}

impl Lazy<'_> {
    async fn begun(&mut self) -> Result<&DatabaseTransaction, DbErr> {
        let txn = match self.txn.take() {
            Some(txn) => txn,
            None => store::begin_write(self.db).await?,
        };
        Ok(self.txn.insert(txn))
    }

    /// Stores the messages with their conversation touches and delivery jobs, and commits.
    async fn write(mut self, messages: &[messages::Model], jobs: Vec<NewJob>, now: DateTime<Utc>) -> Result<(), DbErr> {
        if self.db.get_database_backend() == DbBackend::Postgres {
            if !messages.is_empty() {
                let writes = queued_writes(messages, jobs, now);
                match &self.txn {
                    Some(txn) => txn.execute_raw(writes).await?,
                    None => self.db.execute_raw(writes).await?,
                };
            }
        } else {
            let txn = self.begun().await?;
            new_message::store_all(txn, messages, now).await?;
            jobs::enqueue_all(txn, jobs, now).await?;
        }
        match self.txn {
            Some(txn) => txn.commit().await,
            None => Ok(()),
        }
    }
}

/// PostgreSQL: what a batch of accepted sends writes, as one statement (atomic by itself): the messages, their
/// conversations' touches and their delivery jobs. The bench's storage floor of a send runs it too.
pub fn queued_writes(messages: &[messages::Model], jobs: Vec<NewJob>, now: DateTime<Utc>) -> Statement {
    sql::together(vec![
        new_message::insert_statement(messages),
        threads::touch_statement(&new_message::touches(messages), now),
        jobs::insert_statement(jobs, now),
    ])
}
