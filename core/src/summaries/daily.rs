//! `GET /v1/summaries/daily`: one day of an account, in a time zone. Every count reads the account's rows of
//! that day from an index (the messages' counts from the index alone, `messages_account_created`), never a
//! table scan, so the summary costs the same for an account with a million messages as with a hundred; the
//! counts run side by side. Sections are markdown in English; the tasks are the open ones, newest first.

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{DailyStats, DailySummary, SummarySection};
use sea_orm::{
    ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select,
    sea_query::{Expr, SimpleExpr},
};

use super::day::Day;
use crate::{
    access::AccountId,
    error::{ApiError, ApiResult},
    store::entities::{appointments, contacts, conversations, credit_ledger, deals, messages, tasks},
    tasks::{FROM_HANDOFF, FROM_TOOL, service::task_message},
};

/// The most appointments, deals and waiting conversations a section lists, and open tasks the summary lists.
const LISTED: u64 = 20;
const TASKS: u64 = 50;

/// `COUNT(*)` as a 64-bit integer on both databases.
fn count() -> SimpleExpr {
    Expr::cust("CAST(COUNT(*) AS BIGINT)")
}

/// How many rows match `condition` (SQL over the selected table's columns).
fn count_if(condition: &str) -> SimpleExpr {
    Expr::cust(format!(
        "CAST(COALESCE(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END), 0) AS BIGINT)"
    ))
}

async fn one_count<E: EntityTrait>(db: &DatabaseConnection, select: Select<E>) -> Result<i64, DbErr> {
    Ok(select
        .select_only()
        .column_as(count(), "n")
        .into_tuple::<i64>()
        .one(db)
        .await?
        .unwrap_or(0))
}

/// The day's stats.
pub async fn stats(db: &DatabaseConnection, account_id: &AccountId, day: &Day) -> ApiResult<DailyStats> {
    let (start, end) = (day.start, day.end);
    let started = one_count(
        db,
        conversations::Entity::find()
            .filter(conversations::Column::AccountId.eq(account_id))
            .filter(conversations::Column::CreatedAt.gte(start))
            .filter(conversations::Column::CreatedAt.lt(end)),
    );
    let closed = one_count(
        db,
        conversations::Entity::find()
            .filter(conversations::Column::AccountId.eq(account_id))
            .filter(conversations::Column::ClosedAt.gte(start))
            .filter(conversations::Column::ClosedAt.lt(end)),
    );
    let messages = messages::Entity::find()
        .select_only()
        .column_as(count_if("direction = 'inbound'"), "received")
        .column_as(
            count_if("direction = 'outbound' AND status IN ('sent', 'delivered', 'read')"),
            "sent",
        )
        .column_as(count_if("direction = 'outbound' AND status = 'failed'"), "failed")
        .column_as(count_if("direction = 'outbound' AND author = 'agent'"), "ai")
        .filter(messages::Column::AccountId.eq(account_id))
        .filter(messages::Column::CreatedAt.gte(start))
        .filter(messages::Column::CreatedAt.lt(end))
        .into_tuple::<(i64, i64, i64, i64)>()
        .one(db);
    let new_contacts = one_count(
        db,
        contacts::Entity::find()
            .filter(contacts::Column::AccountId.eq(account_id))
            .filter(contacts::Column::CreatedAt.gte(start))
            .filter(contacts::Column::CreatedAt.lt(end)),
    );
    let handoffs = tasks::Entity::find()
        .select_only()
        .column_as(count_if(&format!("kind = '{FROM_HANDOFF}'")), "n")
        .filter(tasks::Column::AccountId.eq(account_id))
        .filter(tasks::Column::CreatedAt.gte(start))
        .filter(tasks::Column::CreatedAt.lt(end))
        .into_tuple::<i64>()
        .one(db);
    let appointments = one_count(
        db,
        appointments::Entity::find()
            .filter(appointments::Column::AccountId.eq(account_id))
            .filter(appointments::Column::CreatedAt.gte(start))
            .filter(appointments::Column::CreatedAt.lt(end)),
    );
    let deals = one_count(
        db,
        deals::Entity::find()
            .filter(deals::Column::AccountId.eq(account_id))
            .filter(deals::Column::CreatedAt.gte(start))
            .filter(deals::Column::CreatedAt.lt(end)),
    );
    let charged = credit_ledger::Entity::find()
        .select_only()
        .column_as(
            Expr::cust("CAST(COALESCE(SUM(CASE WHEN delta_milli < 0 THEN -delta_milli ELSE 0 END), 0) AS BIGINT)"),
            "charged",
        )
        .filter(credit_ledger::Column::AccountId.eq(account_id))
        .filter(credit_ledger::Column::CreatedAt.gte(start))
        .filter(credit_ledger::Column::CreatedAt.lt(end))
        .into_tuple::<i64>()
        .one(db);
    let (started, closed, messages, new_contacts, handoffs, appointments, deals, charged) = tokio::try_join!(
        started,
        closed,
        messages,
        new_contacts,
        handoffs,
        appointments,
        deals,
        charged
    )?;
    let (received, sent, failed, ai) = messages.unwrap_or_default();
    Ok(DailyStats {
        conversations_started: started,
        conversations_closed: closed,
        messages_received: received,
        messages_sent: sent,
        new_contacts,
        ai_replies: ai,
        handoffs: handoffs.unwrap_or(0),
        appointments_booked: appointments,
        deals_created: deals,
        messages_failed: failed,
        credits_used: charged.unwrap_or(0) as f64 / 1_000.0,
    })
}

/// The whole summary: stats, sections and open tasks.
pub async fn summary(
    db: &DatabaseConnection,
    account_id: &AccountId,
    day: &Day,
    now: DateTime<Utc>,
) -> ApiResult<DailySummary> {
    let open_tasks = tasks::Entity::find()
        .filter(tasks::Column::AccountId.eq(account_id))
        .filter(tasks::Column::Status.eq("open"))
        .order_by_desc(tasks::Column::CreatedAt)
        .order_by_desc(tasks::Column::Id)
        .limit(TASKS);
    let open_of_kind = |kind: &str| {
        tasks::Entity::find()
            .filter(tasks::Column::AccountId.eq(account_id))
            .filter(tasks::Column::Status.eq("open"))
            .filter(tasks::Column::Kind.eq(kind))
    };
    let waiting = one_count(db, open_of_kind(FROM_HANDOFF));
    let overdue = one_count(db, open_of_kind(FROM_TOOL).filter(tasks::Column::Due.lt(now)));
    let booked = appointments::Entity::find()
        .filter(appointments::Column::AccountId.eq(account_id))
        .filter(appointments::Column::CreatedAt.gte(day.start))
        .filter(appointments::Column::CreatedAt.lt(day.end))
        .order_by_asc(appointments::Column::CreatedAt)
        .limit(LISTED);
    let created = deals::Entity::find()
        .filter(deals::Column::AccountId.eq(account_id))
        .filter(deals::Column::CreatedAt.gte(day.start))
        .filter(deals::Column::CreatedAt.lt(day.end))
        .order_by_desc(deals::Column::CreatedAt)
        .order_by_desc(deals::Column::Id)
        .limit(LISTED);
    let (stats, open_tasks, waiting, overdue, booked, created) = tokio::try_join!(
        stats(db, account_id, day),
        async { Ok::<_, ApiError>(open_tasks.all(db).await?) },
        async { Ok::<_, ApiError>(waiting.await?) },
        async { Ok::<_, ApiError>(overdue.await?) },
        async { Ok::<_, ApiError>(booked.all(db).await?) },
        async { Ok::<_, ApiError>(created.all(db).await?) },
    )?;
    let sections = vec![
        section("Overview", super::sections::overview(&stats)),
        section(
            "Needs attention",
            super::sections::attention(&stats, &open_tasks, waiting, overdue, day),
        ),
        section(
            "Appointments",
            super::sections::appointments(&booked, stats.appointments_booked, day),
        ),
        section("Deals", super::sections::deals(&created, stats.deals_created)),
    ];
    Ok(DailySummary {
        date: day.date.to_string(),
        tz: day.tz.name().to_owned(),
        stats: Some(stats),
        sections,
        tasks: open_tasks.into_iter().map(task_message).collect(),
    })
}

fn section(title: &str, markdown: String) -> SummarySection {
    SummarySection {
        title: title.to_owned(),
        markdown,
    }
}
