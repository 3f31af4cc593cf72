//! The team's tasks: what an agent asked a person to do (`create_task`), and a reply a person owes a contact
//! whose conversation was handed off. A handoff opens its task in the same transaction, and the
//! conversation's resume closes it; a person marks any task done (or open again) through the API (`service`).

pub mod service;

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, sea_query::Expr};

use crate::store::entities::{conversations, tasks};

/// What made a task.
pub const FROM_TOOL: &str = "tool";
pub const FROM_HANDOFF: &str = "handoff";

/// A new open task's row.
pub struct NewTask<'a> {
    pub title: String,
    pub due: Option<DateTime<Utc>>,
    pub kind: &'static str,
    /// A handoff's reason.
    pub reason: String,
    pub conversation: &'a conversations::Model,
}

pub fn row(new: NewTask<'_>, now: DateTime<Utc>) -> tasks::Model {
    tasks::Model {
        id: crate::ids::new_id(crate::ids::Kind::Task),
        account_id: new.conversation.account_id.clone(),
        title: new.title,
        due: new.due,
        status: tasks::TaskStatus::Open,
        kind: new.kind.to_owned(),
        reason: new.reason,
        contact_id: new.conversation.contact_id.clone(),
        conversation_id: new.conversation.id.clone(),
        agent_id: new.conversation.agent_id.clone(),
        created_at: now,
        updated_at: now,
    }
}

/// The tasks of conversations just handed off: a person is to answer each contact.
pub async fn open_for_handoffs(
    db: &impl ConnectionTrait,
    handed_off: &[conversations::Model],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if handed_off.is_empty() {
        return Ok(());
    }
    let rows = handed_off.iter().map(|conversation| {
        let reason = conversation.handoff_reason.trim();
        let title = if reason.is_empty() {
            format!("Answer the contact on {}", conversation.channel)
        } else {
            format!("Answer the contact on {} ({reason})", conversation.channel)
        };
        let new = NewTask {
            title,
            due: None,
            kind: FROM_HANDOFF,
            reason: reason.to_owned(),
            conversation,
        };
        tasks::ActiveModel::from(row(new, now))
    });
    tasks::Entity::insert_many(rows).exec_without_returning(db).await?;
    Ok(())
}

/// The open handoff tasks of conversations the AI answers again are done.
pub async fn close_for_resumed(
    db: &impl ConnectionTrait,
    resumed: &[conversations::Model],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if resumed.is_empty() {
        return Ok(());
    }
    tasks::Entity::update_many()
        .col_expr(tasks::Column::Status, Expr::value(tasks::TaskStatus::Done))
        .col_expr(tasks::Column::UpdatedAt, Expr::value(now))
        .filter(tasks::Column::ConversationId.is_in(resumed.iter().map(|c| c.id.as_str())))
        .filter(tasks::Column::Kind.eq(FROM_HANDOFF))
        .filter(tasks::Column::Status.eq(tasks::TaskStatus::Open))
        .exec(db)
        .await?;
    Ok(())
}
