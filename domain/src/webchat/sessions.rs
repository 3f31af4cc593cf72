//! Visitor sessions in the store: starting one (its contact, with a `webchat` identity whose id is the
//! session's, and its first conversation, opened with the agent routing picks for the page), resuming one,
//! knowing a visitor by token, and the visitor's thread: every message between the contact and the business
//! on the session's channel, in the order stored, across conversations.

use chrono::{DateTime, Duration, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QuerySelect,
};
use tonic::Code;

use super::{live::SessionKey, token};
use crate::error::Reason;
use crate::resource_id::{ChannelId, ContactId};
use crate::{
    access::AccountId,
    contacts::{
        Email, IdentityKind, NewIdentity,
        store::{self as contacts, CreateError, NewContact},
    },
    conversations::threads,
    error::{ApiError, ApiResult},
    routing::resolver::Inbound,
    store::entities::{channels, chat_sessions, conversations, messages},
};

/// The most messages a thread read answers.
pub const THREAD_LIMIT: u64 = 100;

/// A visitor known by token: their session and its channel.
#[derive(Clone, Debug)]
pub struct Visitor {
    pub session: chat_sessions::Model,
    pub channel: channels::Model,
}

/// What a visitor tells about themselves when a session starts.
#[derive(Clone, Debug, Default)]
pub struct NewVisitor {
    pub name: String,
    pub email: Option<Email>,
    pub page_url: String,
}

pub fn unauthenticated() -> ApiError {
    ApiError::new(
        Code::Unauthenticated,
        Reason::Unauthenticated,
        "the session token is missing, unknown, expired or revoked; start a new session",
    )
}

/// The connected web chat channel with this widget key.
pub async fn channel_by_key(db: &impl ConnectionTrait, widget_key: &str) -> ApiResult<channels::Model> {
    channels::Entity::find()
        .filter(channels::Column::WidgetKey.eq(widget_key))
        .filter(channels::Column::Kind.eq(channels::ChannelKind::Webchat))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("web chat channel"))
}

/// The visitor whose token this is, while it has not expired and its channel is connected; 401 otherwise.
pub async fn authenticate(db: &impl ConnectionTrait, token: &str, now: DateTime<Utc>) -> ApiResult<Visitor> {
    let hash = token::hash_of(token).ok_or_else(unauthenticated)?;
    let found = chat_sessions::Entity::find()
        .filter(chat_sessions::Column::TokenHash.eq(hash))
        .find_also_related(channels::Entity)
        .one(db)
        .await?;
    match found {
        Some((session, Some(channel))) if session.expires_at > now => Ok(Visitor { session, channel }),
        _ => Err(unauthenticated()),
    }
}

/// Starts a session on `channel`: the contact, the first conversation (`contact.created`,
/// `conversation.created`) and the session row, in one transaction. Returns the visitor and their token.
pub async fn start(
    db: &DatabaseConnection,
    channel: &channels::Model,
    new: NewVisitor,
    lifetime: Duration,
    now: DateTime<Utc>,
) -> ApiResult<(Visitor, String)> {
    let id = crate::ids::new_id(crate::ids::Kind::ChatSession);
    let (token, token_hash) = token::issue();
    let txn = crate::store::begin_write(db).await?;
    let identity = NewIdentity {
        kind: IdentityKind::Webchat,
        external_id: id.clone(),
        channel: channel.name.clone(),
    };
    // A visitor proves nothing by typing an e-mail address: it stays on the session, as a claim the business
    // sees, and never becomes the contact's, which sends addressed by e-mail would resolve to. The name
    // is only the contact's display name.
    let person = NewContact {
        name: new.name.clone(),
        identities: vec![identity],
        ..NewContact::default()
    };
    // The channel's row says whose the visitor is.
    let account_id = channel.account_id.clone();
    let contact = contacts::create(&txn, &account_id, person, now)
        .await
        .map_err(|err| match err {
            CreateError::Db(err) => ApiError::from(err),
            CreateError::Taken(clash) => ApiError::internal(clash),
        })?;
    let opening = Inbound {
        text: "",
        referral: &page_ref(&new.page_url),
        url: &new.page_url,
    };
    threads::open_or_start(&txn, &account_id, &contact.id, channel, opening, now).await?;
    let session = chat_sessions::Model {
        id,
        account_id: channel.account_id.clone(),
        channel_id: channel.id.clone(),
        contact_id: contact.id,
        visitor_name: new.name,
        visitor_email: new.email.map(|e| e.as_str().to_owned()).unwrap_or_default(),
        page_url: new.page_url,
        token_hash,
        expires_at: now + lifetime,
        started_at: now,
        last_seen_at: now,
        present_until: now,
    };
    chat_sessions::Entity::insert(session.clone().into_active_model())
        .exec_without_returning(&txn)
        .await?;
    txn.commit().await?;
    let visitor = Visitor {
        session,
        channel: channel.clone(),
    };
    Ok((visitor, token))
}

/// The `ref` query parameter of a page URL, which `ref` entry points match; "" when none.
pub fn page_ref(page_url: &str) -> String {
    url::Url::parse(page_url)
        .ok()
        .and_then(|url| {
            url.query_pairs()
                .find(|(name, _)| name == "ref")
                .map(|(_, v)| v.into_owned())
        })
        .unwrap_or_default()
}

/// Resumes the visitor's session: its token lives `lifetime` from now, and `page_url` (when given) is where
/// the visitor is now.
pub async fn resume(
    db: &DatabaseConnection,
    visitor: Visitor,
    page_url: String,
    lifetime: Duration,
    now: DateTime<Utc>,
) -> ApiResult<Visitor> {
    let mut session = visitor.session.clone().into_active_model();
    session.expires_at = sea_orm::Set(now + lifetime);
    session.last_seen_at = sea_orm::Set(now);
    if !page_url.is_empty() {
        session.page_url = sea_orm::Set(page_url);
    }
    let session = session.update(db).await?;
    Ok(Visitor {
        session,
        channel: visitor.channel,
    })
}

/// The conversation the visitor's thread is in now: the latest of the contact on the channel.
pub async fn current_conversation(
    db: &impl ConnectionTrait,
    session: &chat_sessions::Model,
) -> Result<Option<conversations::Model>, DbErr> {
    conversations::Entity::find()
        .filter(conversations::Column::AccountId.eq(&session.account_id))
        .filter(conversations::Column::ContactId.eq(&session.contact_id))
        .filter(conversations::Column::ChannelId.eq(&session.channel_id))
        .order_by_desc(conversations::Column::CreatedAt)
        .order_by_desc(conversations::Column::Id)
        .one(db)
        .await
}

fn thread_of(session: &chat_sessions::Model) -> sea_orm::Select<messages::Entity> {
    messages::Entity::find()
        .filter(messages::Column::AccountId.eq(&session.account_id))
        .filter(messages::Column::ContactId.eq(&session.contact_id))
        .filter(messages::Column::ChannelId.eq(&session.channel_id))
}

/// The latest `limit` messages of the thread, oldest first.
pub async fn latest(
    db: &impl ConnectionTrait,
    session: &chat_sessions::Model,
    limit: u64,
) -> Result<Vec<messages::Model>, DbErr> {
    let mut rows = thread_of(session)
        .order_by_desc(messages::Column::Seq)
        .limit(limit)
        .all(db)
        .await?;
    rows.reverse();
    Ok(rows)
}

/// Up to `limit` messages of the thread stored after the one whose `seq` this is, oldest first.
pub async fn after(
    db: &impl ConnectionTrait,
    session: &chat_sessions::Model,
    seq: i64,
    limit: u64,
) -> Result<Vec<messages::Model>, DbErr> {
    thread_of(session)
        .filter(messages::Column::Seq.gt(seq))
        .order_by_asc(messages::Column::Seq)
        .limit(limit)
        .all(db)
        .await
}

/// Messages of the thread up to `after` (and after the one whose `seq` is `from`) that were corrected,
/// removed or reacted to since `after` was stored: what a visitor who had `after` may have missed of the
/// messages it already had.
pub async fn revised_since(
    db: &impl ConnectionTrait,
    session: &chat_sessions::Model,
    after: &messages::Model,
    from: i64,
    limit: u64,
) -> Result<Vec<messages::Model>, DbErr> {
    thread_of(session)
        .filter(messages::Column::Seq.gt(from))
        .filter(messages::Column::Seq.lte(after.seq))
        .filter(messages::Column::RevisedAt.gte(after.created_at))
        .order_by_asc(messages::Column::Seq)
        .limit(limit)
        .all(db)
        .await
}

/// The thread's message with this id; 400 naming `field` when the thread has none.
pub async fn message_in_thread(
    db: &impl ConnectionTrait,
    session: &chat_sessions::Model,
    message_id: &str,
    field: &str,
) -> ApiResult<messages::Model> {
    thread_of(session)
        .filter(messages::Column::Id.eq(message_id))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::field(field, "is not a message of this session's thread"))
}

/// Where the session's pushes go.
pub fn key(session: &chat_sessions::Model) -> SessionKey {
    SessionKey::new(&session.account_id, &ChannelId::new(&session.channel_id), &session.id)
}

/// The push addresses of the sessions `select` picks.
async fn keys(
    db: &impl ConnectionTrait,
    select: sea_orm::Select<chat_sessions::Entity>,
) -> Result<Vec<SessionKey>, DbErr> {
    let rows: Vec<(String, String, String)> = select
        .select_only()
        .column(chat_sessions::Column::AccountId)
        .column(chat_sessions::Column::ChannelId)
        .column(chat_sessions::Column::Id)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .iter()
        .map(|(account, channel, id)| SessionKey::new(&AccountId::of_row(account), &ChannelId::new(channel), id))
        .collect())
}

/// The sessions of a contact of the account on a channel: whom a change to one of its messages is pushed to.
pub async fn of_contact(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact: &ContactId,
    channel: &ChannelId,
) -> Result<Vec<SessionKey>, DbErr> {
    let select = chat_sessions::Entity::find()
        .filter(chat_sessions::Column::AccountId.eq(account_id))
        .filter(chat_sessions::Column::ContactId.eq(contact))
        .filter(chat_sessions::Column::ChannelId.eq(channel));
    keys(db, select).await
}
