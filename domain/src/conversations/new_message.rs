//! Storing a new message: what its writer decides (direction, author, text, status, ...), every other field
//! at its starting value, and the conversation's latest activity (and, for a message from the contact, its
//! unread count) moved in the same transaction.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{
    ActiveEnum, ActiveValue::NotSet, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect,
    Statement, Value, sea_query::OnConflict,
};

use super::{render::StoredAttachment, threads};
use crate::resource_id::MessageId;
use crate::store::{
    entities::{
        conversations,
        messages::{self, Author, Direction, MessageStatus},
    },
    sql::one_of,
    to_json_text,
};

pub struct NewMessage<'a> {
    pub conversation: &'a conversations::Model,
    pub direction: Direction,
    pub author: Author,
    pub text: &'a str,
    pub attachments: &'a [StoredAttachment],
    /// `Received`, or `Queued` for a message to send.
    pub status: MessageStatus,
    pub provider_message_id: Option<&'a str>,
    pub reply_to: &'a str,
    pub broadcast_id: &'a str,
    /// A WhatsApp template as JSON, or `""`.
    pub template: &'a str,
}

/// The row of a new message, with a fresh id.
pub fn row(new: &NewMessage<'_>, now: DateTime<Utc>) -> messages::Model {
    let conversation = new.conversation;
    messages::Model {
        seq: 0,
        id: crate::ids::new_id(crate::ids::Kind::Message).into(),
        account_id: conversation.account_id.clone(),
        conversation_id: conversation.id.clone(),
        contact_id: conversation.contact_id.clone(),
        channel_id: conversation.channel_id.clone(),
        direction: new.direction,
        author: new.author,
        text: new.text.to_owned(),
        attachments: to_json_text(&new.attachments),
        status: new.status,
        error_code: None,
        error_message: None,
        provider_message_id: new.provider_message_id.map(str::to_owned),
        reactions: "[]".to_owned(),
        edited: false,
        edits: "[]".to_owned(),
        removed: false,
        reply_to: new.reply_to.to_owned(),
        broadcast_id: new.broadcast_id.to_owned(),
        created_at: now,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        revised_at: None,
        template: new.template.to_owned(),
    }
}

/// The row to insert: `seq` is the database's to number.
fn insertable(message: &messages::Model) -> messages::ActiveModel {
    let mut row = messages::ActiveModel::from(message.clone());
    row.seq = NotSet;
    row
}

/// Stores messages (rows from `row`) with one statement, in their order, and moves their conversations'
/// latest activity (and unread counts, for those from the contact) with another. Returns the ids stored: a
/// message whose provider id the channel holds already (a provider's retry racing the first delivery) is
/// not.
pub async fn store_all(
    db: &impl ConnectionTrait,
    messages: &[messages::Model],
    now: DateTime<Utc>,
) -> Result<HashSet<MessageId>, DbErr> {
    if messages.is_empty() {
        return Ok(HashSet::new());
    }
    let written = match db.get_database_backend() {
        DbBackend::Postgres => db.execute_raw(insert_statement(messages)).await?.rows_affected(),
        _ => {
            messages::Entity::insert_many(messages.iter().map(insertable))
                .on_conflict(OnConflict::new().do_nothing().to_owned())
                .exec_without_returning(db)
                .await?
        }
    };
    let ids = messages.iter().map(|m| m.id.clone());
    let stored: HashSet<MessageId> = if written == messages.len() as u64 {
        ids.collect()
    } else {
        messages::Entity::find()
            .select_only()
            .column(messages::Column::Id)
            .filter(one_of(
                db.get_database_backend(),
                (messages::Entity, messages::Column::Id),
                ids,
            ))
            .into_tuple::<MessageId>()
            .all(db)
            .await?
            .into_iter()
            .collect()
    };
    let stored_messages: Vec<&messages::Model> = messages.iter().filter(|m| stored.contains(&m.id)).collect();
    threads::touch(db, &touches(stored_messages), now).await?;
    Ok(stored)
}

/// The conversations that `messages` move: how many of them came from the contact (its unread count and
/// count of messages sent grow by that), and whether a person answered (a send through the API).
pub fn touches<'a>(messages: impl IntoIterator<Item = &'a messages::Model>) -> BTreeMap<&'a str, threads::Touch> {
    let mut touches: BTreeMap<&str, threads::Touch> = BTreeMap::new();
    for message in messages {
        let touch = touches.entry(message.conversation_id.as_str()).or_default();
        touch.inbound += i32::from(message.direction == Direction::Inbound);
        touch.answered |= message.direction == Direction::Outbound && message.author == Author::Api;
    }
    touches
}

/// PostgreSQL: the insert of `messages` (a message whose id or provider id is taken is skipped). The rows go
/// as one array per column, so the statement reads the same for any number of rows and its plan is reused (a
/// multi-row `VALUES` has one text per batch size). An absent text or time is sent as `''` and stored as NULL;
/// `WITH ORDINALITY` keeps the rows' order, which numbers their `seq`.
pub fn insert_statement(messages: &[messages::Model]) -> Statement {
    const SQL: &str = "INSERT INTO messages (id, account_id, conversation_id, contact_id, channel_id, direction, \
        author, text, attachments, status, error_code, error_message, provider_message_id, reactions, edited, \
        edits, removed, reply_to, broadcast_id, created_at, sent_at, delivered_at, read_at, revised_at, template) \
        SELECT id, account_id, conversation_id, contact_id, channel_id, direction, author, text, attachments, \
        status, NULLIF(error_code, ''), NULLIF(error_message, ''), NULLIF(provider_message_id, ''), reactions, \
        edited, edits, removed, reply_to, broadcast_id, created_at, NULLIF(sent_at, '')::timestamptz, \
        NULLIF(delivered_at, '')::timestamptz, NULLIF(read_at, '')::timestamptz, \
        NULLIF(revised_at, '')::timestamptz, template \
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], \
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::bool[], \
        $16::text[], $17::bool[], $18::text[], $19::text[], $20::timestamptz[], $21::text[], $22::text[], \
        $23::text[], $24::text[], $25::text[]) WITH ORDINALITY AS new(id, account_id, conversation_id, contact_id, \
        channel_id, direction, author, text, attachments, status, error_code, error_message, \
        provider_message_id, reactions, edited, edits, removed, reply_to, broadcast_id, created_at, sent_at, \
        delivered_at, read_at, revised_at, template, position) \
        ORDER BY position ON CONFLICT DO NOTHING";
    let texts = |field: fn(&messages::Model) -> &str| -> Value {
        messages
            .iter()
            .map(|m| field(m).to_owned())
            .collect::<Vec<String>>()
            .into()
    };
    let named =
        |field: fn(&messages::Model) -> String| -> Value { messages.iter().map(field).collect::<Vec<String>>().into() };
    let optional = |field: fn(&messages::Model) -> Option<&str>| -> Value {
        messages
            .iter()
            .map(|m| field(m).unwrap_or_default().to_owned())
            .collect::<Vec<String>>()
            .into()
    };
    let time = |field: fn(&messages::Model) -> Option<DateTime<Utc>>| -> Value {
        messages
            .iter()
            .map(|m| {
                field(m)
                    .map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true))
                    .unwrap_or_default()
            })
            .collect::<Vec<String>>()
            .into()
    };
    let flags =
        |field: fn(&messages::Model) -> bool| -> Value { messages.iter().map(field).collect::<Vec<bool>>().into() };
    let values = vec![
        texts(|m| &m.id),
        texts(|m| m.account_id.as_str()),
        texts(|m| &m.conversation_id),
        texts(|m| &m.contact_id),
        texts(|m| &m.channel_id),
        named(|m| m.direction.to_value()),
        named(|m| m.author.to_value()),
        texts(|m| &m.text),
        texts(|m| &m.attachments),
        named(|m| m.status.to_value()),
        optional(|m| m.error_code.as_deref()),
        optional(|m| m.error_message.as_deref()),
        optional(|m| m.provider_message_id.as_deref()),
        texts(|m| &m.reactions),
        flags(|m| m.edited),
        texts(|m| &m.edits),
        flags(|m| m.removed),
        texts(|m| &m.reply_to),
        texts(|m| &m.broadcast_id),
        messages
            .iter()
            .map(|m| m.created_at)
            .collect::<Vec<DateTime<Utc>>>()
            .into(),
        time(|m| m.sent_at),
        time(|m| m.delivered_at),
        time(|m| m.read_at),
        time(|m| m.revised_at),
        texts(|m| &m.template),
    ];
    Statement::from_sql_and_values(DbBackend::Postgres, SQL, values)
}
