//! Deal rows, always scoped by account: lookups, dense positions within a stage, and the filtered,
//! cursor-paged list. Every change first takes the account's lock (`accounts::store::lock`).

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder, QueryResult,
    Statement,
    sea_query::{Expr, ExprTrait},
};

use crate::access::AccountId;
use crate::paging::Page;
use crate::resource_id::PipelineId;
use crate::store::{
    self, column,
    entities::{deals, stages},
    search,
};

/// The stage with this id on the account.
pub async fn stage(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    stage_id: &str,
) -> Result<Option<stages::Model>, DbErr> {
    stages::Entity::find_by_id((account_id.clone(), stage_id.to_owned()))
        .one(db)
        .await
}

/// The first stage of the account's main pipeline (`default`): where a deal goes when no stage is named.
pub async fn first_stage(db: &impl ConnectionTrait, account_id: &AccountId) -> Result<Option<stages::Model>, DbErr> {
    stages::Entity::find()
        .filter(stages::Column::AccountId.eq(account_id.as_str()))
        .filter(stages::Column::PipelineId.eq("default"))
        .order_by_asc(stages::Column::Position)
        .one(db)
        .await
}

/// The deal with this id on the account (another account's deal is as absent as a missing one).
pub async fn deal(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    deal_id: &str,
) -> Result<Option<deals::Model>, DbErr> {
    store::owned::<deals::Entity>(db, deals::Column::AccountId, account_id, deal_id).await
}

/// The position after the stage's last deal: how many deals it holds, as positions are dense. Read as the
/// last position, walking the `(account_id, stage, position)` index backwards to its first entry (written
/// as an ordered read so that no plan counts the stage's rows instead; a count read them all, under the
/// account's lock, so creating deals slowed as they grew).
pub async fn stage_size(db: &impl ConnectionTrait, account_id: &AccountId, stage_id: &str) -> Result<i32, DbErr> {
    let last = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT position FROM deals WHERE account_id = $1 AND stage = $2 ORDER BY position DESC LIMIT 1",
            [account_id.into(), stage_id.into()],
        ))
        .await?;
    match last {
        Some(row) => Ok(row.try_get_by_index::<i32>(0)?.saturating_add(1)),
        None => Ok(0),
    }
}

/// Shifts the positions at or after `from` in a stage by `delta` (+1 opens a gap, -1 closes one).
pub async fn shift(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    stage_id: &str,
    from: i32,
    delta: i32,
) -> Result<(), DbErr> {
    deals::Entity::update_many()
        .col_expr(deals::Column::Position, Expr::col(deals::Column::Position).add(delta))
        .filter(deals::Column::AccountId.eq(account_id))
        .filter(deals::Column::Stage.eq(stage_id))
        .filter(deals::Column::Position.gte(from))
        .exec(db)
        .await?;
    Ok(())
}

/// Every list filter; empty strings and `None` do not filter.
#[derive(Default)]
pub struct Filters {
    pub stage: String,
    pub pipeline_id: String,
    pub status: String,
    pub priority: String,
    pub source: String,
    pub contact_id: String,
    pub assigned_to: String,
    pub tag: String,
    pub q: String,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
}

/// One page, newest first, and whether another follows.
pub async fn list(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    filters: &Filters,
    page: &Page,
) -> Result<(Vec<deals::Model>, bool), DbErr> {
    let statement = list_statement(db.get_database_backend(), account_id.as_str(), filters, page);
    // Decoded by column index: SeaORM's by-name decoding formats every column name of every row.
    let rows = db
        .query_all_raw(statement)
        .await?
        .iter()
        .map(deal_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(page.split(rows))
}

/// The statement `list` sends (public so that the benchmark can show its plan; the account is a string
/// because the benchmark, outside the crate, cannot make an `AccountId`).
pub fn list_statement(backend: DbBackend, account_id: &str, filters: &Filters, page: &Page) -> Statement {
    let mut condition = Condition::all().add(deals::Column::AccountId.eq(account_id));
    for (column, value) in [
        (deals::Column::Stage, &filters.stage),
        (deals::Column::PipelineId, &filters.pipeline_id),
        (deals::Column::Status, &filters.status),
        (deals::Column::Priority, &filters.priority),
        (deals::Column::Source, &filters.source),
        (deals::Column::ContactId, &filters.contact_id),
        (deals::Column::AssignedTo, &filters.assigned_to),
    ] {
        if !value.is_empty() {
            condition = condition.add(column.eq(value.as_str()));
        }
    }
    if !filters.tag.is_empty() {
        condition = condition.add(search::has_tag(backend, &filters.tag));
    }
    if !filters.q.is_empty() {
        let columns = [deals::Column::Title, deals::Column::Company, deals::Column::Description];
        condition = condition.add(search::any_contains(columns, &filters.q));
    }
    if let Some(after) = filters.created_after {
        condition = condition.add(deals::Column::CreatedAt.gt(after));
    }
    if let Some(before) = filters.created_before {
        condition = condition.add(deals::Column::CreatedAt.lt(before));
    }
    page.statement(
        deals::Entity::find().filter(condition),
        deals::Column::CreatedAt,
        deals::Column::Id,
        backend,
    )
}

/// A `deals` row selected with every column in declaration order (what `Entity::find()` selects).
fn deal_from_row(row: &QueryResult) -> Result<deals::Model, DbErr> {
    Ok(deals::Model {
        id: column(row, 0)?,
        account_id: AccountId::of_row(column::<String>(row, 1)?),
        title: column(row, 2)?,
        description: column(row, 3)?,
        company: column(row, 4)?,
        stage: column(row, 5)?,
        pipeline_id: column::<Option<String>>(row, 6)?.map(PipelineId::new),
        value: column(row, 7)?,
        probability: column(row, 8)?,
        priority: column(row, 9)?,
        status: column(row, 10)?,
        source: column(row, 11)?,
        position: column(row, 12)?,
        contact_id: column(row, 13)?,
        assigned_to: column(row, 14)?,
        tags: column(row, 15)?,
        close_date: column(row, 16)?,
        created_at: column(row, 17)?,
        updated_at: column(row, 18)?,
        stage_entered_at: column(row, 19)?,
    })
}
