//! `GET /v1/summaries/daily`: one day of an account, in a time zone. Every count reads the account's rows of
//! that day from an index (the messages' counts from the index alone, `messages_account_created`), never a
//! table scan, so the summary costs the same for an account with a million messages as with a hundred; three
//! statements run at a time. Sections are markdown in English; the tasks are the open ones, newest first.

use chrono::{DateTime, Utc};
use frontdesk_api::v1::{DailyStats, DailySummary, SummarySection};
use futures_util::{StreamExt, TryStreamExt};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait, Select, Statement,
    sea_query::{Expr, SimpleExpr},
};

use super::day::Day;
use crate::{
    access::AccountId,
    accounts::store::CHARGE_REASONS,
    error::{ApiError, ApiResult},
    store::entities::{appointments, broadcasts, contacts, conversations, credit_ledger, deals, messages, tasks},
    tasks::{FROM_HANDOFF, FROM_TOOL, service::task_message},
};

/// The most appointments, deals and broadcasts a section lists, waiting conversations "Needs attention"
/// lists, and open tasks the summary lists.
const LISTED: u64 = 20;
const WAITING_LISTED: u64 = 10;
const TASKS: u64 = 50;
/// Knowledge gaps of the day named under "Needs attention".
const TOP_GAPS: u64 = 3;
/// Statements of one summary that run at once.
const PARALLEL: usize = 3;

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

/// The rows of `E` for `account` created (or closed) in `[start, end)` by `at`.
fn in_day<E: EntityTrait>(account: E::Column, account_id: &AccountId, at: E::Column, day: &Day) -> Select<E> {
    E::find()
        .filter(account.eq(account_id))
        .filter(at.gte(day.start))
        .filter(at.lt(day.end))
}

/// The number of `select`'s rows.
async fn one_count<E: EntityTrait>(db: &DatabaseConnection, select: Select<E>) -> Result<i64, DbErr> {
    let row = db.query_one_raw(counted(select, db.get_database_backend())).await?;
    Ok(match row {
        Some(row) => row.try_get_by_index::<i64>(0)?,
        None => 0,
    })
}

/// `select`'s rows counted.
fn counted<E: EntityTrait>(select: Select<E>, backend: DbBackend) -> Statement {
    select.select_only().column_as(count(), "n").build(backend)
}

/// The statements of the day's counts, each one row of 64-bit integers (how many it has beside it), in
/// `DailyStats`' order: conversations started, closed; messages received, sent, failed, written by the AI;
/// new contacts; handoffs; appointments; deals; milli-credits charged.
pub fn statements(backend: DbBackend, account_id: &AccountId, day: &Day) -> Vec<(Statement, usize)> {
    use {appointments as a, contacts as ct, conversations as cv, credit_ledger as l, deals as d, messages as m};
    vec![
        (
            counted(
                in_day::<cv::Entity>(cv::Column::AccountId, account_id, cv::Column::CreatedAt, day),
                backend,
            ),
            1,
        ),
        (
            counted(
                in_day::<cv::Entity>(cv::Column::AccountId, account_id, cv::Column::ClosedAt, day),
                backend,
            ),
            1,
        ),
        (
            in_day::<m::Entity>(m::Column::AccountId, account_id, m::Column::CreatedAt, day)
                .select_only()
                .column_as(count_if("direction = 'inbound'"), "received")
                .column_as(
                    count_if("direction = 'outbound' AND status IN ('sent', 'delivered', 'read')"),
                    "sent",
                )
                .column_as(count_if("direction = 'outbound' AND status = 'failed'"), "failed")
                .column_as(count_if("direction = 'outbound' AND author = 'agent'"), "ai")
                .build(backend),
            4,
        ),
        (
            counted(
                in_day::<ct::Entity>(ct::Column::AccountId, account_id, ct::Column::CreatedAt, day),
                backend,
            ),
            1,
        ),
        (
            in_day::<tasks::Entity>(tasks::Column::AccountId, account_id, tasks::Column::CreatedAt, day)
                .select_only()
                .column_as(count_if(&format!("kind = '{FROM_HANDOFF}'")), "n")
                .build(backend),
            1,
        ),
        (
            counted(
                in_day::<a::Entity>(a::Column::AccountId, account_id, a::Column::CreatedAt, day),
                backend,
            ),
            1,
        ),
        (
            counted(
                in_day::<d::Entity>(d::Column::AccountId, account_id, d::Column::CreatedAt, day),
                backend,
            ),
            1,
        ),
        (
            in_day::<l::Entity>(l::Column::AccountId, account_id, l::Column::CreatedAt, day)
                .select_only()
                .column_as(
                    Expr::cust(format!(
                        "CAST(COALESCE(SUM(CASE WHEN delta_milli < 0 AND ({charges}) THEN -delta_milli ELSE 0 END), 0) \
                         AS BIGINT)",
                        charges = CHARGE_REASONS
                            .iter()
                            .map(|reason| format!("reason LIKE '{reason}%'"))
                            .collect::<Vec<_>>()
                            .join(" OR ")
                    )),
                    "charged",
                )
                .build(backend),
            1,
        ),
    ]
}

/// The day's stats, `PARALLEL` counts at a time.
pub async fn stats(db: &DatabaseConnection, account_id: &AccountId, day: &Day) -> ApiResult<DailyStats> {
    let runs =
        statements(db.get_database_backend(), account_id, day)
            .into_iter()
            .map(|(statement, columns)| async move {
                let row = db.query_one_raw(statement).await?;
                (0..columns)
                    .map(|i| match &row {
                        Some(row) => Ok(row.try_get_by_index::<Option<i64>>(i)?.unwrap_or(0)),
                        None => Ok(0),
                    })
                    .collect::<Result<Vec<i64>, DbErr>>()
            });
    let counts: Vec<i64> = futures_util::stream::iter(runs)
        .buffered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?
        .concat();
    let [
        started,
        closed,
        received,
        sent,
        failed,
        ai,
        new_contacts,
        handoffs,
        appointments,
        deals,
        charged,
    ] = counts[..]
    else {
        return Err(ApiError::internal(format!("the day's counts came back as {counts:?}")));
    };
    Ok(DailyStats {
        conversations_started: started,
        conversations_closed: closed,
        messages_received: received,
        messages_sent: sent,
        new_contacts,
        ai_replies: ai,
        handoffs,
        appointments_booked: appointments,
        deals_created: deals,
        messages_failed: failed,
        credits_used: charged as f64 / 1_000.0,
    })
}

/// The whole summary: stats, sections and open tasks.
pub async fn summary(
    db: &DatabaseConnection,
    account_id: &AccountId,
    day: &Day,
    now: DateTime<Utc>,
) -> ApiResult<DailySummary> {
    let stats = stats(db, account_id, day).await?;
    let open_tasks = tasks::Entity::find()
        .filter(tasks::Column::AccountId.eq(account_id))
        .filter(tasks::Column::Status.eq(tasks::TaskStatus::Open));
    let open_of_kind = |kind: &str| open_tasks.clone().filter(tasks::Column::Kind.eq(kind));
    let newest = |select: Select<tasks::Entity>, limit: u64| {
        select
            .order_by_desc(tasks::Column::CreatedAt)
            .order_by_desc(tasks::Column::Id)
            .limit(limit)
    };
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
    // Three connections at most, as for the counts: a summary must not take a small pool from the replies.
    let ((listed, waiting_listed), (waiting, overdue), (booked, created, gaps)) = tokio::try_join!(
        async {
            let listed = newest(open_tasks.clone(), TASKS).all(db).await?;
            let waiting = newest(open_of_kind(FROM_HANDOFF), WAITING_LISTED).all(db).await?;
            Ok::<_, DbErr>((listed, waiting))
        },
        async {
            let waiting = one_count(db, open_of_kind(FROM_HANDOFF)).await?;
            let overdue = one_count(db, open_of_kind(FROM_TOOL).filter(tasks::Column::Due.lt(now))).await?;
            Ok::<_, DbErr>((waiting, overdue))
        },
        async {
            let gaps = crate::replies::gaps::top_between(db, account_id, (day.start, day.end), TOP_GAPS).await?;
            Ok::<_, DbErr>((booked.all(db).await?, created.all(db).await?, gaps))
        },
    )?;
    let sent = broadcasts::Entity::find()
        .filter(broadcasts::Column::AccountId.eq(account_id))
        .filter(broadcasts::Column::StartedAt.gte(day.start))
        .filter(broadcasts::Column::StartedAt.lt(day.end))
        .order_by_asc(broadcasts::Column::StartedAt)
        .limit(LISTED)
        .all(db)
        .await?;
    let counts = crate::broadcasts::stats::of(db, &sent.iter().collect::<Vec<_>>()).await?;
    let sent: Vec<super::sections::Broadcast> = sent
        .into_iter()
        .map(|b| {
            let c = counts.get(&b.id).copied().unwrap_or_default();
            (b.name, c)
        })
        .collect();
    let sections = vec![
        section("Overview", super::sections::overview(&stats, &sent)),
        section(
            "Needs attention",
            super::sections::attention(&stats, &waiting_listed, (waiting, overdue), &gaps, &sent, day),
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
        tasks: listed.into_iter().map(task_message).collect(),
    })
}

fn section(title: &str, markdown: String) -> SummarySection {
    SummarySection {
        title: title.to_owned(),
        markdown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's plan of each count names the index it reads the day's rows from: never a table scan, and the
    /// messages from their index alone.
    #[tokio::test]
    async fn every_count_reads_the_days_rows_from_an_index() {
        let db = crate::store::connect("sqlite::memory:", 1, Default::default())
            .await
            .unwrap();
        crate::store::migrate(&db).await.unwrap();
        let now = "2026-11-27T00:00:00Z".parse().unwrap();
        let day = Day::parse("2026-11-20", "Asia/Kolkata", now).unwrap();
        let expected = [
            "INDEX conversations_account_created",
            "INDEX conversations_account_closed",
            "COVERING INDEX messages_account_created",
            "INDEX contacts_account_created",
            "INDEX tasks_account_created",
            "INDEX appointments_account_created",
            "INDEX deals_newest",
            "INDEX credit_ledger_account",
        ];
        let counts = statements(DbBackend::Sqlite, &AccountId::of_row("acct_1"), &day);
        assert_eq!(counts.len(), expected.len());
        for ((statement, _), index) in counts.into_iter().zip(expected) {
            let explain = Statement::from_sql_and_values(
                DbBackend::Sqlite,
                format!("EXPLAIN QUERY PLAN {}", statement.sql),
                statement.values.map(|v| v.0).unwrap_or_default(),
            );
            let plan: Vec<String> = db
                .query_all_raw(explain)
                .await
                .unwrap()
                .iter()
                .map(|row| row.try_get_by_index::<String>(3).unwrap())
                .collect();
            assert_eq!(plan.len(), 1, "{}: {plan:?}", statement.sql);
            assert!(
                plan[0].starts_with("SEARCH") && plan[0].contains(index),
                "{}: {plan:?}",
                statement.sql
            );
        }
    }
}
