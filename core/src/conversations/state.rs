//! Changes of a conversation's state: closed, read, unread, handed off, resumed. Each is one conditional
//! update that touches only the conversations not yet in the new state and writes the change's event (and,
//! for a handoff or a resume, opens or closes the handoff's task) for each one it changed, so a repeated or
//! concurrent change does nothing (and announces nothing) twice. Closing by hand (the API) and closing when
//! idle (housekeeping) are the same change.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Value,
    sea_query::{Expr, SimpleExpr},
};

use super::render;
use crate::{
    access::AccountId,
    events::{self, EventType},
    store::entities::conversations::{self, Column},
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
    tasks: Tasks,
}

/// What a change does to the changed conversations' tasks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tasks {
    Untouched,
    /// A person is to answer each contact.
    OpenHandoff,
    /// The AI answers again: the handoff's task is done.
    CloseHandoff,
}

impl Change {
    /// `closed` (`conversation.closed`); the contact's next message opens a new conversation.
    pub fn close() -> Self {
        Self {
            due: Condition::all().add(Column::Status.eq("open")),
            set: vec![(Column::Status, "closed".into())],
            derived: Vec::new(),
            stamp: Some(Column::ClosedAt),
            event: Some(EventType::ConversationClosed),
            tasks: Tasks::Untouched,
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
            tasks: Tasks::Untouched,
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
            tasks: Tasks::Untouched,
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
            tasks: Tasks::OpenHandoff,
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
            tasks: Tasks::CloseHandoff,
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
    match change.tasks {
        Tasks::Untouched => {}
        Tasks::OpenHandoff => crate::tasks::open_for_handoffs(db, &changed, now).await?,
        Tasks::CloseHandoff => crate::tasks::close_for_resumed(db, &changed, now).await?,
    }
    if let Some(event) = change.event {
        for conversation in &changed {
            let data = render::conversation_data(conversation);
            events::record(db, &AccountId::of_row(&conversation.account_id), event, data, now).await?;
        }
    }
    Ok(changed)
}

/// The account's conversation with this id, as `apply` selects it.
pub fn one_of(account_id: &AccountId, conversation_id: &str) -> Condition {
    Condition::all()
        .add(Column::AccountId.eq(account_id))
        .add(Column::Id.eq(conversation_id))
}
