//! Finding or opening a contact's conversation on a channel. At most one is open per contact and channel (a
//! unique index over open ones); two requests opening it at once on any replica end with one conversation:
//! the loser's insert does nothing and it reads the winner's.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, Statement,
    sea_query::{CaseStatement, Expr, ExprTrait, OnConflict},
};

use super::{activity, render};
use crate::{
    access::AccountId,
    error::ApiResult,
    events::{self, EventType},
    resource_id::{AgentId, ContactId},
    routing::{entry_points, resolver::Inbound},
    store::{
        entities::{broadcasts, channels, conversations},
        sql::one_of,
    },
};

/// The open conversation of `contact_id` on `channel`, if any.
pub async fn open_on(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
    channel: &str,
) -> Result<Option<conversations::Model>, DbErr> {
    conversations::Entity::find()
        .filter(conversations::Column::AccountId.eq(account_id))
        .filter(conversations::Column::ContactId.eq(contact_id))
        .filter(conversations::Column::Channel.eq(channel))
        .filter(conversations::Column::Status.eq(conversations::ConversationStatus::Open))
        .one(db)
        .await
}

/// The contact's open conversation on `channel`, opening one (`conversation.created`, with the agent routing
/// picks from `inbound`: the first inbound text, a referral, a page URL, empty for an outbound start) when
/// there is none. Returns it and whether it is new.
pub async fn open_or_start(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
    channel: &channels::Model,
    inbound: Inbound<'_>,
    now: DateTime<Utc>,
) -> ApiResult<(conversations::Model, bool)> {
    if let Some(open) = open_on(db, account_id, contact_id, &channel.name).await? {
        return Ok((open, false));
    }
    let route = entry_points::route(db, account_id, &channel.name, &inbound).await?;
    let row = new_row(
        account_id,
        contact_id,
        channel,
        AgentId::new(route.agent_id().unwrap_or_default()),
        now,
    );
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

/// A conversation to open for `contact_id` on `channel`, answered by `agent`.
fn new_row(
    account_id: &AccountId,
    contact_id: &str,
    channel: &channels::Model,
    agent: AgentId,
    now: DateTime<Utc>,
) -> conversations::Model {
    conversations::Model {
        id: crate::ids::new_id(crate::ids::Kind::Conversation).into(),
        account_id: account_id.clone(),
        contact_id: contact_id.into(),
        channel: channel.name.clone(),
        channel_id: channel.id.clone(),
        channel_type: channel.kind,
        agent_id: agent.as_str().to_owned(),
        status: conversations::ConversationStatus::Open,
        handoff: false,
        handoff_reason: String::new(),
        unread_count: 0,
        last_message_at: now,
        activity_bucket: activity::bucket(now),
        broadcast_id: String::new(),
        created_at: now,
        closed_at: None,
        inbound_seq: 0,
        ai_answered_seq: 0,
        follow_up_seq: 0,
        follow_ups_sent: 0,
    }
}

/// The open conversations of `contact_ids` on `channel` (by contact id), opening one answered by
/// `broadcast`'s agent for each contact without (`conversation.created` each): `open_or_start` for a
/// broadcast's batch, with three statements whatever its size.
pub async fn open_or_start_all(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_ids: &[ContactId],
    channel: &channels::Model,
    broadcast: &broadcasts::Model,
    now: DateTime<Utc>,
) -> Result<HashMap<ContactId, conversations::Model>, DbErr> {
    let open_of = |contacts: Vec<ContactId>| {
        conversations::Entity::find()
            .filter(conversations::Column::AccountId.eq(account_id))
            .filter(conversations::Column::Channel.eq(&channel.name))
            .filter(conversations::Column::Status.eq(conversations::ConversationStatus::Open))
            .filter(one_of(
                db.get_database_backend(),
                (conversations::Entity, conversations::Column::ContactId),
                contacts,
            ))
            .all(db)
    };
    let mut open: HashMap<ContactId, conversations::Model> = open_of(contact_ids.to_vec())
        .await?
        .into_iter()
        .map(|c| (c.contact_id.clone(), c))
        .collect();
    let new: Vec<conversations::Model> = contact_ids
        .iter()
        .filter(|contact| !open.contains_key(*contact))
        .map(|contact| conversations::Model {
            broadcast_id: broadcast.id.to_string(),
            ..new_row(account_id, contact, channel, AgentId::new(&broadcast.agent_id), now)
        })
        .collect();
    if new.is_empty() {
        return Ok(open);
    }
    let inserted = conversations::Entity::insert_many(new.iter().cloned().map(conversations::ActiveModel::from))
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    let opened: Vec<conversations::Model> = if inserted == new.len() as u64 {
        new
    } else {
        // Some were opened meanwhile by another writer: theirs are read, and only ours announced.
        let ours: HashSet<&str> = new.iter().map(|c| c.id.as_str()).collect();
        let now_open = open_of(new.iter().map(|c| c.contact_id.clone()).collect()).await?;
        let (opened, theirs): (Vec<_>, Vec<_>) = now_open.into_iter().partition(|c| ours.contains(c.id.as_str()));
        open.extend(theirs.into_iter().map(|c| (c.contact_id.clone(), c)));
        opened
    };
    let events = opened
        .iter()
        .map(|c| {
            (
                c.account_id.clone(),
                EventType::ConversationCreated,
                render::conversation_data(c),
            )
        })
        .collect();
    events::record_all(db, events, now).await?;
    open.extend(opened.into_iter().map(|c| (c.contact_id.clone(), c)));
    Ok(open)
}

/// What new messages do to one conversation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touch {
    /// Messages from the contact: its unread count and its count of messages sent grow by this.
    pub inbound: i32,
    /// A person answered (a send through the API): every message the contact sent so far counts as answered,
    /// so no AI reply follows them.
    pub answered: bool,
}

/// Records new messages on conversations: the time as their latest activity (and its window, which changes
/// at most once per window, so on PostgreSQL most touches write no index entry), the contact's messages
/// added to the unread count and to the count of messages sent, and a person's answer, with one statement.
/// On PostgreSQL the rows are locked in id order, so two batches touching the same conversations wait for
/// each other instead of deadlocking, and the statement's text is the same for every batch (the ids and
/// counts are array parameters), so its plan is reused.
pub async fn touch(db: &impl ConnectionTrait, touches: &BTreeMap<&str, Touch>, at: DateTime<Utc>) -> Result<(), DbErr> {
    if touches.is_empty() {
        return Ok(());
    }
    if db.get_database_backend() == DbBackend::Postgres {
        db.execute_raw(touch_statement(touches, at)).await?;
        return Ok(());
    }
    // SQLite: one writer at a time, no row locks.
    let mut update = conversations::Entity::update_many()
        .col_expr(conversations::Column::LastMessageAt, Expr::value(at))
        .col_expr(conversations::Column::ActivityBucket, Expr::value(activity::bucket(at)))
        .filter(conversations::Column::Id.is_in(touches.keys().copied()));
    let added: Vec<(&str, i32)> = touches
        .iter()
        .filter(|(_, t)| t.inbound > 0)
        .map(|(id, t)| (*id, t.inbound))
        .collect();
    let answered: Vec<&str> = touches.iter().filter(|(_, t)| t.answered).map(|(id, _)| *id).collect();
    if !answered.is_empty() {
        // Set from the count before this statement's own additions are seen, plus them.
        let mut by_id = CaseStatement::new();
        for id in &answered {
            let inbound = touches[id].inbound;
            by_id = by_id.case(
                Expr::col(conversations::Column::Id).eq(*id),
                Expr::col(conversations::Column::InboundSeq).add(inbound),
            );
        }
        update = update.col_expr(
            conversations::Column::AiAnsweredSeq,
            by_id.finally(Expr::col(conversations::Column::AiAnsweredSeq)).into(),
        );
    }
    if !added.is_empty() {
        let mut by_id = CaseStatement::new();
        for (id, n) in added {
            by_id = by_id.case(Expr::col(conversations::Column::Id).eq(id), n);
        }
        let by_id = by_id.finally(0);
        update = update
            .col_expr(
                conversations::Column::UnreadCount,
                Expr::col(conversations::Column::UnreadCount).add(by_id.clone()),
            )
            .col_expr(
                conversations::Column::InboundSeq,
                Expr::col(conversations::Column::InboundSeq).add(by_id),
            );
    }
    update.exec(db).await?;
    Ok(())
}

/// PostgreSQL: `touch`'s statement.
pub fn touch_statement(touches: &BTreeMap<&str, Touch>, at: DateTime<Utc>) -> Statement {
    // The locking subquery runs once (`= ANY(ARRAY(...))`), in id order; the join adds each count. The
    // right-hand sides read the row as it was before this update.
    let sql = "UPDATE conversations SET last_message_at = $1, activity_bucket = $4, \
               unread_count = conversations.unread_count + touched.added, \
               inbound_seq = conversations.inbound_seq + touched.added, \
               ai_answered_seq = CASE WHEN touched.answered THEN conversations.inbound_seq + touched.added \
               ELSE conversations.ai_answered_seq END \
               FROM unnest($2::text[], $3::int4[], $5::bool[]) AS touched(id, added, answered) \
               WHERE conversations.id = touched.id \
               AND conversations.id = ANY(ARRAY(SELECT id FROM conversations WHERE id = ANY($2) \
               ORDER BY id FOR UPDATE))";
    let ids: Vec<String> = touches.keys().map(|id| (*id).to_owned()).collect();
    let added: Vec<i32> = touches.values().map(|t| t.inbound).collect();
    let answered: Vec<bool> = touches.values().map(|t| t.answered).collect();
    let values = vec![
        at.into(),
        ids.into(),
        added.into(),
        activity::bucket(at).into(),
        answered.into(),
    ];
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}
