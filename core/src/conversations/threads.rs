//! Finding or opening a contact's conversation on a channel. At most one is open per contact and channel (a
//! unique index over open ones); two requests opening it at once on any replica end with one conversation:
//! the loser's insert does nothing and it reads the winner's.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    sea_query::{Expr, ExprTrait, OnConflict},
};

use super::render;
use crate::{
    error::ApiResult,
    events::{self, EventType},
    routing::{entry_points, resolver::Inbound},
    store::entities::{channels, conversations},
};

/// The open conversation of `contact_id` on `channel`, if any.
pub async fn open_on(
    db: &impl ConnectionTrait,
    account_id: &str,
    contact_id: &str,
    channel: &str,
) -> Result<Option<conversations::Model>, DbErr> {
    conversations::Entity::find()
        .filter(conversations::Column::AccountId.eq(account_id))
        .filter(conversations::Column::ContactId.eq(contact_id))
        .filter(conversations::Column::Channel.eq(channel))
        .filter(conversations::Column::Status.eq("open"))
        .one(db)
        .await
}

/// The channel name of the contact's latest conversation.
pub async fn latest_channel(
    db: &impl ConnectionTrait,
    account_id: &str,
    contact_id: &str,
) -> Result<Option<String>, DbErr> {
    Ok(conversations::Entity::find()
        .filter(conversations::Column::AccountId.eq(account_id))
        .filter(conversations::Column::ContactId.eq(contact_id))
        .order_by_desc(conversations::Column::CreatedAt)
        .one(db)
        .await?
        .map(|c| c.channel))
}

/// What opening a conversation needs beyond the contact and channel.
pub struct Opening<'a> {
    /// What routing sees: the first inbound text, a referral, a page URL (empty for an outbound start).
    pub inbound: Inbound<'a>,
    pub broadcast_id: &'a str,
    /// An agent fixed by the caller (a broadcast's), instead of routing's choice.
    pub agent_id: Option<&'a str>,
}

/// The contact's open conversation on `channel`, opening one (`conversation.created`, with the agent routing
/// picks) when there is none. Returns it and whether it is new.
pub async fn open_or_start(
    db: &impl ConnectionTrait,
    account_id: &str,
    contact_id: &str,
    channel: &channels::Model,
    opening: Opening<'_>,
    now: DateTime<Utc>,
) -> ApiResult<(conversations::Model, bool)> {
    if let Some(open) = open_on(db, account_id, contact_id, &channel.name).await? {
        return Ok((open, false));
    }
    let agent_id = match opening.agent_id {
        Some(agent) => agent.to_owned(),
        None => entry_points::route(db, account_id, &channel.name, &opening.inbound)
            .await?
            .agent_id()
            .unwrap_or_default()
            .to_owned(),
    };
    let row = conversations::Model {
        id: format!("cv_{}", crate::ids::base62(16)),
        account_id: account_id.to_owned(),
        contact_id: contact_id.to_owned(),
        channel: channel.name.clone(),
        channel_id: channel.id.clone(),
        channel_type: channel.kind.clone(),
        agent_id,
        status: "open".to_owned(),
        handoff: false,
        handoff_reason: String::new(),
        unread_count: 0,
        last_message_at: now,
        broadcast_id: opening.broadcast_id.to_owned(),
        created_at: now,
        closed_at: None,
    };
    let inserted = conversations::Entity::insert(conversations::ActiveModel::from(row.clone()))
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    if inserted == 0 {
        // Another request opened it first.
        let open = open_on(db, account_id, contact_id, &channel.name)
            .await?
            .ok_or_else(|| crate::error::ApiError::internal("an open conversation vanished"))?;
        return Ok((open, false));
    }
    events::record(
        db,
        account_id,
        EventType::ConversationCreated,
        render::conversation_data(&row),
        now,
    )
    .await?;
    Ok((row, true))
}

/// Records a message on the conversation: its time as the latest activity, and one more unread message when
/// it came from the contact.
pub async fn touch(
    db: &impl ConnectionTrait,
    conversation_id: &str,
    at: DateTime<Utc>,
    inbound: bool,
) -> Result<(), DbErr> {
    let mut update = conversations::Entity::update_many()
        .col_expr(conversations::Column::LastMessageAt, Expr::value(at))
        .filter(conversations::Column::Id.eq(conversation_id));
    if inbound {
        update = update.col_expr(
            conversations::Column::UnreadCount,
            Expr::col(conversations::Column::UnreadCount).add(1),
        );
    }
    update.exec(db).await?;
    Ok(())
}
