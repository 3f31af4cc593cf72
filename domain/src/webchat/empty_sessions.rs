//! Sessions in which nothing was ever written expire: every session start makes a contact and a
//! conversation, so without this anyone holding a widget key could fill the account's contacts for good. A
//! recurring job (once across replicas) deletes each session whose thread has no message and whose visitor
//! was last seen more than `FRONTDESK_WEBCHAT_EMPTY_SESSION_TTL` ago, and with it its contact when that
//! holds nothing else: no message on any channel, no deal, no other session, and never edited by the
//! business. A contact the business touched stays; only the session goes.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
    sea_query::{Expr, ExprTrait, Query},
};

use crate::{
    clock::Clock,
    contacts::store as contacts,
    jobs::{Handler, Job, Outcome, recurring::Recurring},
    store::entities::{chat_sessions, contacts as contact_rows, deals, messages},
};

/// Sessions looked at per run.
const BATCH: u64 = 100;
/// How often the job runs when it finds nothing more to do.
const INTERVAL: Duration = Duration::from_secs(300);

pub struct EmptySessions {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    ttl: chrono::Duration,
}

impl EmptySessions {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, ttl: Duration) -> anyhow::Result<Self> {
        Ok(Self {
            db,
            clock,
            ttl: chrono::Duration::from_std(ttl)?,
        })
    }

    /// Deletes up to `BATCH` expired empty sessions (and their empty contacts); how many.
    async fn sweep(&self, now: DateTime<Utc>) -> Result<u64, DbErr> {
        let written = Query::select()
            .expr(Expr::val(1))
            .from(messages::Entity)
            .and_where(
                Expr::col((messages::Entity, messages::Column::ContactId))
                    .equals((chat_sessions::Entity, chat_sessions::Column::ContactId)),
            )
            .and_where(
                Expr::col((messages::Entity, messages::Column::ChannelId))
                    .equals((chat_sessions::Entity, chat_sessions::Column::ChannelId)),
            )
            .to_owned();
        let expired = chat_sessions::Entity::find()
            .filter(chat_sessions::Column::LastSeenAt.lt(now - self.ttl))
            .filter(Expr::exists(written).not())
            .order_by_asc(chat_sessions::Column::LastSeenAt)
            .limit(BATCH)
            .all(&self.db)
            .await?;
        for session in &expired {
            let txn = crate::store::begin_write(&self.db).await?;
            if untouched(&txn, session).await? {
                // Its conversations, identities and this session go with it.
                contacts::erase(&txn, &session.account_id, &session.contact_id).await?;
            } else {
                chat_sessions::Entity::delete_by_id(session.id.clone())
                    .exec(&txn)
                    .await?;
            }
            txn.commit().await?;
        }
        Ok(expired.len() as u64)
    }
}

/// Whether the session's contact holds nothing but the session: no message on any channel, no deal, no
/// other session, and nothing the business gave it (it was never updated).
async fn untouched(db: &impl ConnectionTrait, session: &chat_sessions::Model) -> Result<bool, DbErr> {
    let account_id = session.account_id.clone();
    let Some(contact) = contacts::lock(db, &account_id, &session.contact_id).await? else {
        return Ok(false);
    };
    if contact.updated_at != contact.created_at || contact.phone.is_some() || contact.email.is_some() {
        return Ok(false);
    }
    let messages = messages::Entity::find()
        .filter(messages::Column::AccountId.eq(&account_id))
        .filter(messages::Column::ContactId.eq(&contact.id))
        .count(db)
        .await?;
    let deals = deals::Entity::find()
        .filter(deals::Column::AccountId.eq(&account_id))
        .filter(deals::Column::ContactId.eq(&contact.id))
        .count(db)
        .await?;
    let sessions = chat_sessions::Entity::find()
        .filter(chat_sessions::Column::ContactId.eq(&contact.id))
        .count(db)
        .await?;
    Ok(messages == 0 && deals == 0 && sessions == 1 && is_plain(&contact))
}

/// No tags and no attributes.
fn is_plain(contact: &contact_rows::Model) -> bool {
    let empty = |json: &str| matches!(json.trim(), "" | "[]" | "{}" | "null");
    empty(&contact.tags) && empty(&contact.attributes)
}

impl Recurring for EmptySessions {
    const KIND: &'static str = "webchat_empty_sessions";
}

#[async_trait::async_trait]
impl Handler for EmptySessions {
    async fn run(&self, _job: &Job) -> Outcome {
        let now = self.clock.now();
        let turn = self.sweep(now).await.map(|swept| swept == BATCH);
        crate::jobs::recurring::next_turn(now, turn, INTERVAL)
    }
}
