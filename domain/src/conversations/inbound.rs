//! Storing messages that arrived from contacts: the contact (created from the sender's phone or channel id
//! when new), sms opt-out keywords, the open conversation (opened with the agent routing picks from the
//! first text and referral), the message (once per provider message id: a provider's retry stores nothing
//! new), the conversation's unread count and latest activity, and `message.received`, in one transaction.
//!
//! Arrivals are written in batches like sends (group commit, `store::group_commit`): the provider ids
//! stored before, the senders' contacts by phone and their open conversations are each read with one
//! statement for the batch, and the messages, touches and events written with one statement each; a new
//! contact or conversation is made one at a time. A database error fails the batch, whose arrivals are then
//! written one by one.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, QueryFilter, QuerySelect};

use super::{
    new_message::{self, NewMessage},
    render::{self, StoredAttachment},
    replies::{self, ReplyPolicy},
    threads,
};
use crate::error::Reason;
use crate::resource_id::{ContactId, MessageId};
use crate::{
    access::AccountId,
    channels::{InboundMessage, Sender},
    clock::Clock,
    contacts::{
        E164Phone, IdentityKind, NewIdentity,
        store::{self as contacts, NewContact},
    },
    error::{ApiError, ApiResult},
    events::{self, EventType},
    jobs::{self, Wake},
    routing::resolver::Inbound,
    store::{
        self,
        entities::{channels, contact_identities, contacts as contact_rows, conversations, messages},
        group_commit::{BatchWriter, Batching, GroupCommit, together_or_alone, unavailable_again},
    },
};

/// Keywords that opt a contact out of sms, and back in (carriers' standard set; matched on the whole text).
const STOP_WORDS: &[&str] = &["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"];
const START_WORDS: &[&str] = &["START", "UNSTOP", "YES"];

/// A message that arrived on a channel.
pub struct Arrival {
    pub channel: channels::Model,
    pub message: InboundMessage,
    /// The trace the arrival's reply continues (`telemetry::traceparent` where it arrived): the batch it is
    /// written in may be led by another caller's task.
    pub trace_parent: Option<String>,
}

/// The stored message, or `None` when the provider's message id was stored before (a retry).
type Stored = ApiResult<Option<messages::Model>>;

/// Stores arrivals; cheap to clone.
#[derive(Clone)]
pub struct Arrivals {
    commits: GroupCommit<ArrivalWriter>,
}

impl Arrivals {
    /// `committed` is signalled after each batch that stored a message (and so its `message.received`);
    /// `wake` after each that enqueued replies.
    pub fn start(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        batching: Batching,
        committed: events::Committed,
        replies: ReplyPolicy,
        wake: Wake,
    ) -> Self {
        let writer = ArrivalWriter {
            db,
            clock,
            committed,
            replies,
            wake,
        };
        Self {
            commits: GroupCommit::start(writer, batching),
        }
    }

    pub async fn receive(&self, arrival: Arrival) -> Stored {
        Ok(self.receive_all(vec![arrival]).await?.pop().flatten())
    }

    /// Stores one callback's arrivals together: all of them or, on an error, none (the provider's retry
    /// then stores them). Each answer is the stored message, or `None` for one stored before.
    pub async fn receive_all(&self, arrivals: Vec<Arrival>) -> ApiResult<Vec<Option<messages::Model>>> {
        if arrivals.is_empty() {
            return Ok(Vec::new());
        }
        self.commits.submit(arrivals).await.unwrap_or_else(|| {
            Err(ApiError::new(
                tonic::Code::Unavailable,
                Reason::Unavailable,
                "the message could not be stored; the provider retries",
            ))
        })
    }
}

struct ArrivalWriter {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    committed: events::Committed,
    replies: ReplyPolicy,
    wake: Wake,
}

#[async_trait::async_trait]
impl BatchWriter for ArrivalWriter {
    /// One callback's arrivals: stored together, in one transaction.
    type Item = Vec<Arrival>;
    type Answer = ApiResult<Vec<Option<messages::Model>>>;

    const KIND: &'static str = "inbound";

    async fn write(&self, deliveries: Vec<Vec<Arrival>>) -> Vec<Self::Answer> {
        let now = self.clock.now();
        let answers: Vec<Self::Answer> = together_or_alone(&deliveries, |group: &[Vec<Arrival>]| async move {
            let batch: Vec<&Arrival> = group.iter().flatten().collect();
            let mut stored = self.transaction(&batch, now).await?.into_iter();
            Ok(group
                .iter()
                .map(|delivery| {
                    delivery
                        .iter()
                        .map(|_| {
                            stored
                                .next()
                                .unwrap_or_else(|| Err(ApiError::internal("an arrival was left unanswered")))
                        })
                        .collect::<ApiResult<Vec<_>>>()
                })
                .collect())
        })
        .await
        .into_iter()
        .map(|answer| answer.and_then(|own| own))
        .collect();
        let any_stored = answers
            .iter()
            .any(|answer| answer.as_ref().is_ok_and(|stored| stored.iter().any(Option::is_some)));
        if any_stored {
            self.committed.signal();
        }
        answers
    }

    fn unavailable(answer: &Self::Answer) -> Option<Self::Answer> {
        unavailable_again(answer)
    }
}

/// What the batch knows of the senders and their conversations.
#[derive(Default)]
struct Known {
    /// By account and phone.
    by_phone: HashMap<(AccountId, String), contact_rows::Model>,
    /// By account, identity kind and external id.
    by_identity: HashMap<(AccountId, &'static str, String), contact_rows::Model>,
    /// By contact and channel name.
    open: HashMap<(ContactId, String), conversations::Model>,
}

impl Known {
    /// The sender's contact, when the batch read it.
    fn contact(&self, account_id: &AccountId, sender: &Sender) -> Option<&contact_rows::Model> {
        match sender {
            Sender::Phone(phone) => {
                let phone = E164Phone::parse(phone)?;
                self.by_phone.get(&(account_id.clone(), phone.as_str().to_owned()))
            }
            Sender::Identity { kind, external_id } => self
                .by_identity
                .get(&(account_id.clone(), *kind, external_id.clone()))
                // A WhatsApp sender may be a contact known by phone before it wrote on WhatsApp.
                .or_else(|| {
                    let phone = whatsapp_phone(kind, external_id)?;
                    self.by_phone.get(&(account_id.clone(), phone.as_str().to_owned()))
                }),
        }
    }

    /// Remembers the sender's contact for the rest of the batch.
    fn remember(&mut self, account_id: &AccountId, sender: &Sender, contact: &contact_rows::Model) {
        match sender {
            Sender::Phone(_) => {
                if let Some(phone) = &contact.phone {
                    self.by_phone
                        .insert((account_id.clone(), phone.clone()), contact.clone());
                }
            }
            Sender::Identity { kind, external_id } => {
                let key = (account_id.clone(), *kind, external_id.clone());
                self.by_identity.insert(key, contact.clone());
            }
        }
    }
}

impl ArrivalWriter {
    /// One transaction for the batch: an error is the batch's; an arrival's own refusal (a sender that is
    /// no phone number) is its answer.
    async fn transaction(&self, batch: &[&Arrival], now: DateTime<Utc>) -> ApiResult<Vec<Stored>> {
        let txn = store::begin_write(&self.db).await?;
        let before = stored_before(&txn, batch).await?;
        let mut known = known(&txn, batch).await?;
        let mut seen = HashSet::new();
        let mut answers: Vec<Option<Stored>> = Vec::with_capacity(batch.len());
        let mut rows: Vec<(usize, messages::Model)> = Vec::new();
        // Conversations an agent answers, and the arrival's trace, by the message that arrived in them.
        let mut to_answer: HashMap<MessageId, (conversations::Model, Option<String>)> = HashMap::new();
        for (n, arrival) in batch.iter().enumerate() {
            let sid = without_nul(&arrival.message.provider_message_id);
            let first = seen.insert((arrival.channel.id.to_string(), sid.clone()));
            if !first || before.contains(&(arrival.channel.id.to_string(), sid.clone())) {
                answers.push(Some(Ok(None)));
                continue;
            }
            match self.message_row(&txn, arrival, &sid, &mut known, now).await? {
                Ok((row, conversation)) => {
                    if arrival.message.answerable && replies::answers(&conversation) {
                        to_answer.insert(row.id.clone(), (conversation, arrival.trace_parent.clone()));
                    }
                    rows.push((n, row));
                    answers.push(None);
                }
                Err(refusal) => answers.push(Some(Err(refusal))),
            }
        }
        let messages: Vec<messages::Model> = rows.iter().map(|(_, row)| row.clone()).collect();
        let stored = new_message::store_all(&txn, &messages, now).await?;
        let received = messages
            .iter()
            .filter(|m| stored.contains(&m.id))
            .map(|m| {
                (
                    m.account_id.clone(),
                    EventType::MessageReceived,
                    render::message_data(m),
                )
            })
            .collect();
        events::record_all(&txn, received, now).await?;
        let reply_jobs: Vec<jobs::NewJob> = to_answer
            .iter()
            .filter(|(message_id, _)| stored.contains(*message_id))
            .map(|(_, (conversation, trace_parent))| jobs::NewJob {
                trace_parent: trace_parent.clone(),
                ..replies::job(conversation, self.replies, now)
            })
            .collect();
        let replying = !reply_jobs.is_empty();
        jobs::enqueue_all(&txn, reply_jobs, now).await?;
        txn.commit().await?;
        if replying {
            self.wake.notify();
        }
        for (n, row) in rows {
            // Not stored: the same provider message arrived twice at once, and another writer stored it.
            answers[n] = Some(Ok(stored.contains(&row.id).then_some(row)));
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(ApiError::internal("an arrival was left unanswered"))))
            .collect())
    }

    /// The message row of one arrival, after finding or creating its contact (and applying an opt-out
    /// keyword) and finding or opening its conversation, with that conversation; `Ok(Err)` for the
    /// arrival's refusal.
    async fn message_row(
        &self,
        txn: &DatabaseTransaction,
        arrival: &Arrival,
        sid: &str,
        known: &mut Known,
        now: DateTime<Utc>,
    ) -> ApiResult<ApiResult<(messages::Model, conversations::Model)>> {
        let (channel, inbound) = (&arrival.channel, &arrival.message);
        // The channel's row says whose the arrival is.
        let account_id = &channel.account_id;
        let new = match new_contact(channel, inbound) {
            Ok(new) => new,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let contact = match known.contact(account_id, &inbound.sender) {
            Some(contact) => contact.clone(),
            None => {
                let (contact, _) = contacts::find_or_create(txn, account_id, new, now).await?;
                known.remember(account_id, &inbound.sender, &contact);
                contact
            }
        };
        if channel.kind == channels::ChannelKind::Sms {
            let word = inbound.text.trim().to_uppercase();
            let opt_out = if STOP_WORDS.contains(&word.as_str()) {
                Some(true)
            } else if START_WORDS.contains(&word.as_str()) {
                Some(false)
            } else {
                None
            };
            if let Some(opted_out) = opt_out.filter(|wanted| *wanted != contact.opted_out) {
                let changed = contacts::set_opted_out(txn, account_id, &contact.id, opted_out, now).await?;
                if let (Some(changed), Some(phone)) = (changed, &contact.phone) {
                    known.by_phone.insert((account_id.clone(), phone.clone()), changed);
                }
            }
        }
        let open_key = (contact.id.clone(), channel.name.clone());
        let conversation = match known.open.get(&open_key) {
            Some(open) => open.clone(),
            None => {
                let opening = Inbound {
                    text: &inbound.text,
                    referral: &inbound.referral,
                    url: &inbound.page_url,
                };
                let (open, _) = threads::open_or_start(txn, account_id, &contact.id, channel, opening, now).await?;
                known.open.insert(open_key, open.clone());
                open
            }
        };
        // No database stores U+0000 in text (PostgreSQL refuses it): a provider's text never fails the store.
        let attachments: Vec<StoredAttachment> = inbound
            .attachments
            .iter()
            .map(|a| StoredAttachment {
                url: without_nul(&a.url),
                content_type: without_nul(&a.content_type),
                filename: without_nul(&a.filename),
            })
            .collect();
        let text = without_nul(&inbound.text);
        let new = NewMessage {
            conversation: &conversation,
            direction: messages::Direction::Inbound,
            author: messages::Author::Contact,
            text: &text,
            attachments: &attachments,
            status: messages::MessageStatus::Received,
            provider_message_id: Some(sid),
            reply_to: "",
            broadcast_id: "",
            template: "",
        };
        let row = new_message::row(&new, now);
        Ok(Ok((row, conversation)))
    }
}

/// The contact an arrival's sender would be, were it new.
fn new_contact(channel: &channels::Model, inbound: &InboundMessage) -> ApiResult<NewContact> {
    let name = without_nul(&inbound.sender_name);
    Ok(match &inbound.sender {
        Sender::Phone(phone) => NewContact {
            name,
            phone: Some(E164Phone::parse(phone).ok_or_else(|| ApiError::field("From", "is not an E.164 number"))?),
            ..NewContact::default()
        },
        Sender::Identity { kind, external_id } => NewContact {
            name,
            phone: whatsapp_phone(kind, external_id),
            identities: vec![NewIdentity {
                kind: IdentityKind::parse(kind)
                    .ok_or_else(|| ApiError::internal("an adapter named an unknown identity kind"))?,
                external_id: external_id.clone(),
                channel: channel.name.clone(),
            }],
            ..NewContact::default()
        },
    })
}

/// A WhatsApp sender's phone: `+` and the wa_id (WhatsApp ids are phone numbers).
fn whatsapp_phone(kind: &str, external_id: &str) -> Option<E164Phone> {
    (kind == "whatsapp")
        .then(|| E164Phone::parse(&format!("+{external_id}")))
        .flatten()
}

/// The `(channel id, provider message id)` pairs of the batch that are stored already.
async fn stored_before(txn: &DatabaseTransaction, batch: &[&Arrival]) -> ApiResult<HashSet<(String, String)>> {
    let channels: HashSet<&str> = batch.iter().map(|a| a.channel.id.as_str()).collect();
    let sids: Vec<String> = batch
        .iter()
        .map(|a| without_nul(&a.message.provider_message_id))
        .collect();
    let rows: Vec<(String, Option<String>)> = messages::Entity::find()
        .select_only()
        .column(messages::Column::ChannelId)
        .column(messages::Column::ProviderMessageId)
        .filter(messages::Column::ChannelId.is_in(channels))
        .filter(messages::Column::ProviderMessageId.is_in(sids))
        .into_tuple()
        .all(txn)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(channel, sid)| Some((channel, sid?)))
        .collect())
}

/// The senders' contacts known by phone or by identity, and their open conversations: one statement each.
async fn known(txn: &DatabaseTransaction, batch: &[&Arrival]) -> ApiResult<Known> {
    let mut known = Known::default();
    let accounts: HashSet<&str> = batch.iter().map(|a| a.channel.account_id.as_str()).collect();
    let phones: HashSet<String> = batch
        .iter()
        .filter_map(|a| match &a.message.sender {
            Sender::Phone(phone) => E164Phone::parse(phone),
            Sender::Identity { kind, external_id } => whatsapp_phone(kind, external_id),
        })
        .map(|p| p.as_str().to_owned())
        .collect();
    let external_ids: HashSet<&str> = batch
        .iter()
        .filter_map(|a| match &a.message.sender {
            Sender::Identity { external_id, .. } => Some(external_id.as_str()),
            Sender::Phone(_) => None,
        })
        .collect();
    let mut found = Vec::new();
    if !phones.is_empty() {
        found = contact_rows::Entity::find()
            .filter(contact_rows::Column::AccountId.is_in(accounts.iter().copied()))
            .filter(contact_rows::Column::Phone.is_in(phones))
            .all(txn)
            .await?;
        for contact in &found {
            if let Some(phone) = contact.phone.clone() {
                known
                    .by_phone
                    .insert((contact.account_id.clone(), phone), contact.clone());
            }
        }
    }
    if !external_ids.is_empty() {
        let held = contact_identities::Entity::find()
            .filter(contact_identities::Column::AccountId.is_in(accounts.iter().copied()))
            .filter(contact_identities::Column::ExternalId.is_in(external_ids))
            .find_also_related(contact_rows::Entity)
            .all(txn)
            .await?;
        for (identity, contact) in held {
            let (Some(contact), Some(kind)) = (contact, IdentityKind::parse(&identity.kind)) else {
                continue;
            };
            let key = (identity.account_id, kind.as_str(), identity.external_id);
            known.by_identity.insert(key, contact.clone());
            found.push(contact);
        }
    }
    let ids: HashSet<ContactId> = found.iter().map(|c| c.id.clone()).collect();
    if ids.is_empty() {
        return Ok(known);
    }
    for open in conversations::Entity::find()
        .filter(conversations::Column::ContactId.is_in(ids))
        .filter(conversations::Column::Status.eq(conversations::ConversationStatus::Open))
        .all(txn)
        .await?
    {
        known.open.insert((open.contact_id.clone(), open.channel.clone()), open);
    }
    Ok(known)
}

fn without_nul(text: &str) -> String {
    text.replace('\0', "")
}
