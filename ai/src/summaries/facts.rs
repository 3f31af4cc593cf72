//! What a recap says of a conversation: its messages, read in pages however long it is (`replies::recap::Digest`
//! keeps what a recap needs of them), and what came of it: appointments, the contact's deals made while it
//! went on, handoffs and the agent's open tasks.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::{
    error::ApiResult,
    replies::{
        recap::{Appointment, Deal, Digest, Facts, Handoff},
        reply::turn,
    },
    store::entities::{appointments, conversations, deals, messages, tasks},
    tasks::{FROM_HANDOFF, FROM_TOOL},
};

/// Messages read at a time.
const PAGE: u64 = 500;
/// The most appointments, deals, handoffs and tasks a recap lists (the latest).
const LISTED: u64 = 20;

pub async fn gather(db: &DatabaseConnection, conversation: &conversations::Model, language: &str) -> ApiResult<Facts> {
    let mut digest = Digest::default();
    let mut after = 0;
    loop {
        let page = messages::Entity::find()
            .filter(messages::Column::ConversationId.eq(conversation.id.as_str()))
            .filter(messages::Column::Seq.gt(after))
            .filter(messages::Column::Removed.eq(false))
            .order_by_asc(messages::Column::Seq)
            .limit(PAGE)
            .all(db)
            .await?;
        for message in &page {
            digest.push(turn(message));
        }
        match page.last() {
            Some(last) if page.len() as u64 == PAGE => after = last.seq,
            _ => break,
        }
    }
    let appointments = appointments::Entity::find()
        .filter(appointments::Column::AccountId.eq(conversation.account_id.as_str()))
        .filter(appointments::Column::ContactId.eq(conversation.contact_id.as_str()))
        .filter(appointments::Column::ConversationId.eq(conversation.id.as_str()))
        .order_by_desc(appointments::Column::StartTime)
        .limit(LISTED)
        .all(db)
        .await?;
    let mut deals = deals::Entity::find()
        .filter(deals::Column::ContactId.eq(conversation.contact_id.as_str()))
        .filter(deals::Column::AccountId.eq(conversation.account_id.as_str()))
        .filter(deals::Column::CreatedAt.gte(conversation.created_at));
    if let Some(closed_at) = conversation.closed_at {
        deals = deals.filter(deals::Column::CreatedAt.lte(closed_at));
    }
    let deals = deals
        .order_by_desc(deals::Column::CreatedAt)
        .limit(LISTED)
        .all(db)
        .await?;
    let tasks = tasks::Entity::find()
        .filter(tasks::Column::ConversationId.eq(conversation.id.as_str()))
        .filter(tasks::Column::AccountId.eq(conversation.account_id.as_str()))
        .order_by_desc(tasks::Column::CreatedAt)
        .limit(2 * LISTED)
        .all(db)
        .await?;
    Ok(Facts {
        language: language.to_owned(),
        channel: conversation.channel.clone(),
        closed: conversation.status == conversations::ConversationStatus::Closed,
        started_at: conversation.created_at,
        last_message_at: conversation.last_message_at,
        digest,
        appointments: appointments
            .into_iter()
            .rev()
            .map(|a| Appointment {
                start_time: a.start_time,
                name: a.name,
                notes: a.notes,
            })
            .collect(),
        deals: deals
            .into_iter()
            .rev()
            .map(|d| Deal {
                title: d.title,
                value: d.value,
                stage: d.stage,
                status: d.status,
            })
            .collect(),
        handoffs: tasks
            .iter()
            .rev()
            .filter(|t| t.kind == FROM_HANDOFF)
            .map(|t| Handoff {
                reason: t.reason.clone(),
                at: t.created_at,
                done: t.status == tasks::TaskStatus::Done,
            })
            .collect(),
        open_tasks: tasks
            .iter()
            .rev()
            .filter(|t| t.kind == FROM_TOOL && t.status == tasks::TaskStatus::Open)
            .map(|t| t.title.clone())
            .collect(),
        awaiting_answer: conversation.inbound_seq > conversation.ai_answered_seq,
    })
}
