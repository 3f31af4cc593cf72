//! Changes of a conversation's state: closed, read, unread, handed off, resumed. Each is one conditional
//! update that touches only the conversations not yet in the new state and writes the change's event (and,
//! for a handoff or a resume, opens or closes the handoff's task; for a read, tells the provider) for each
//! one it changed, so a repeated or concurrent change does nothing (and announces nothing) twice. Closing by
//! hand (the API) and closing when idle (housekeeping) are the same change.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, Value,
    sea_query::{Expr, SimpleExpr},
};

use super::render;
use crate::{
    access::AccountId,
    channels::signals,
    events::{self, EventType},
    store::entities::{
        conversations::{self, Column, ConversationStatus},
        messages,
    },
};

/// What a change sets, on which conversations it is due, and the event each changed one gets.
pub struct Change {
    /// The conversations not yet in the new state.
    due: Condition,
    set: Vec<(Column, Value)>,
    /// Columns set from the row itself.
    derived: Vec<(Column, SimpleExpr)>,
    /// A column that takes the time of the change.
    stamp: Option<Column>,
    event: Option<EventType>,
    effect: Effect,
}

/// What a change does beside the conversations' rows, for each conversation it changed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Effect {
    None,
    /// A person is to answer the contact: the handoff's task opens.
    OpenHandoffTask,
    /// The AI answers again: the handoff's task is done.
    CloseHandoffTask,
    /// The business read the contact's messages: the provider hears of it where it shows read receipts.
    TellProviderRead,
}

impl Change {
    /// `closed` (`conversation.closed`); the contact's next message opens a new conversation.
    pub fn close() -> Self {
        Self {
            due: Condition::all().add(Column::Status.eq(ConversationStatus::Open)),
            set: vec![(Column::Status, ConversationStatus::Closed.into())],
            derived: Vec::new(),
            stamp: Some(Column::ClosedAt),
            event: Some(EventType::ConversationClosed),
            effect: Effect::None,
        }
    }

    /// Every message read: no unread ones.
    pub fn read() -> Self {
        Self {
            due: Condition::all().add(Column::UnreadCount.ne(0)),
            set: vec![(Column::UnreadCount, 0.into())],
            derived: Vec::new(),
            stamp: None,
            event: None,
            effect: Effect::TellProviderRead,
        }
    }

    /// Unread again: at least one unread message (a count above one stays).
    pub fn unread() -> Self {
        Self {
            due: Condition::all().add(Column::UnreadCount.lt(1)),
            set: vec![(Column::UnreadCount, 1.into())],
            derived: Vec::new(),
            stamp: None,
            event: None,
            effect: Effect::None,
        }
    }

    /// A person must answer; the AI stays silent (`conversation.handoff`). A conversation already handed off
    /// keeps its first reason.
    pub fn hand_off(reason: &str) -> Self {
        Self {
            due: Condition::all().add(Column::Handoff.eq(false)),
            set: vec![(Column::Handoff, true.into()), (Column::HandoffReason, reason.into())],
            derived: Vec::new(),
            stamp: None,
            event: Some(EventType::ConversationHandoff),
            effect: Effect::OpenHandoffTask,
        }
    }

    /// The handoff ends: the AI answers again, from the contact's next message on (those sent meanwhile were
    /// a person's to answer).
    pub fn resume() -> Self {
        Self {
            due: Condition::all().add(Column::Handoff.eq(true)),
            set: vec![(Column::Handoff, false.into()), (Column::HandoffReason, "".into())],
            derived: vec![(Column::AiAnsweredSeq, Expr::col(Column::InboundSeq))],
            stamp: None,
            event: None,
            effect: Effect::CloseHandoffTask,
        }
    }
}

/// Applies `change` at `now` to the conversations `which` selects (pass a transaction: the events commit
/// with the change); returns those it changed, as they are now.
pub async fn apply(
    db: &impl ConnectionTrait,
    which: Condition,
    change: Change,
    now: DateTime<Utc>,
) -> Result<Vec<conversations::Model>, DbErr> {
    let mut update = conversations::Entity::update_many().filter(which).filter(change.due);
    for (column, value) in change.set {
        update = update.col_expr(column, Expr::value(value));
    }
    for (column, value) in change.derived {
        update = update.col_expr(column, value);
    }
    if let Some(column) = change.stamp {
        update = update.col_expr(column, Expr::value(now));
    }
    let changed = update.exec_with_returning(db).await?;
    match change.effect {
        Effect::None => {}
        Effect::OpenHandoffTask => crate::tasks::open_for_handoffs(db, &changed, now).await?,
        Effect::CloseHandoffTask => crate::tasks::close_for_resumed(db, &changed, now).await?,
        Effect::TellProviderRead => {
            for conversation in &changed {
                tell_read(db, conversation, now).await?;
            }
        }
    }
    if let Some(event) = change.event {
        for conversation in &changed {
            let data = render::conversation_data(conversation);
            events::record(db, &conversation.account_id, event, data, now).await?;
        }
    }
    Ok(changed)
}

/// A conversation just marked read: its provider hears that the business read up to the contact's latest
/// message, where it shows read receipts (`provider_signal`).
async fn tell_read(
    db: &impl ConnectionTrait,
    conversation: &conversations::Model,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if !signals::takes_signals(conversation.channel_type) {
        return Ok(());
    }
    let latest = messages::Entity::find()
        .filter(messages::Column::ConversationId.eq(&conversation.id))
        .filter(messages::Column::Direction.eq(messages::Direction::Inbound))
        .filter(messages::Column::ProviderMessageId.is_not_null())
        .order_by_desc(messages::Column::Seq)
        .one(db)
        .await?;
    if let Some(latest) = latest {
        crate::jobs::enqueue(db, signals::job(&latest, signals::Action::Read, now), now).await?;
    }
    Ok(())
}

/// The account's conversation with this id, as `apply` selects it.
pub fn one_of(account_id: &AccountId, conversation_id: &str) -> Condition {
    Condition::all()
        .add(Column::AccountId.eq(account_id))
        .add(Column::Id.eq(conversation_id))
}
