//! Closes conversations with no message for `FRONTDESK_CONVERSATION_IDLE_HOURS` (`conversation.closed`; the
//! contact's next message opens a new one), a batch at a time; the recurring housekeeping job
//! (`crate::sweeps`) calls it.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, Condition, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use super::{
    activity,
    state::{self, Change},
};
use crate::store::entities::conversations;

/// Closes up to `batch` conversations idle for `idle` at `now`; returns how many.
pub async fn close_idle(
    db: &DatabaseConnection,
    idle: chrono::Duration,
    now: DateTime<Utc>,
    batch: u64,
) -> Result<u64, DbErr> {
    let cutoff = now - idle;
    let txn = crate::store::begin_write(db).await?;
    let ids: Vec<String> = conversations::Entity::find()
        .select_only()
        .column(conversations::Column::Id)
        .filter(conversations::Column::Status.eq(conversations::ConversationStatus::Open))
        // The window bounds the index scan; the exact time decides within the cutoff's window.
        .filter(conversations::Column::ActivityBucket.lte(activity::bucket(cutoff)))
        .filter(conversations::Column::LastMessageAt.lt(cutoff))
        .order_by_asc(conversations::Column::ActivityBucket)
        .limit(batch)
        .into_tuple()
        .all(&txn)
        .await?;
    if ids.is_empty() {
        return Ok(0);
    }
    let which = Condition::all().add(conversations::Column::Id.is_in(ids));
    let closed = state::apply(&txn, which, Change::close(), now).await?;
    txn.commit().await?;
    Ok(closed.len() as u64)
}
