//! One page of an account's contacts whose name, phone or e-mail holds a fragment (`q`), newest first, at a
//! cost that follows the matches rather than the size of the account. Two reads, each with one good plan
//! whatever the fragment:
//! - the window: the newest `WINDOW` contacts after the cursor, filtered. A fragment that many contacts
//!   hold fills its page here, from one index range;
//! - the index: only when the window did not fill the page and older contacts remain, every match older
//!   than the window, found by the trigram index (`pg_trgm` on PostgreSQL, FTS5 on SQLite), then sorted.
//!   The window found few matches, so there are few to sort.
//!
//! One statement cannot serve both. Walked in time order, a rare fragment reads the whole account; driven
//! by the index, a common one reads every match before sorting (at 1,000,000 contacts: 0.6-0.9 s and
//! 0.2-0.3 s); and PostgreSQL keeps one generic plan for a prepared statement, whatever it is asked next.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Statement,
    sea_query::{Alias, Asterisk, CommonTableExpression, Condition, Expr, Order, Query, SelectStatement, WithClause},
};

use super::store::Filters;
use crate::{
    access::AccountId,
    paging::{Cursor, Page},
    store::{
        entities::contacts::{self, Column},
        search,
    },
};

/// Contacts the window reads after the cursor, newest first. A fragment held by more than one contact in
/// `WINDOW / (limit + 1)` fills its page from the window; rarer ones are found by the index.
const WINDOW: u64 = 5_000;

/// One page of the account's contacts matching `filters` (a non-empty `q`), and whether another follows.
pub async fn page(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    filters: &Filters,
    page: &Page,
) -> Result<(Vec<contacts::Model>, bool), DbErr> {
    let backend = db.get_database_backend();
    let mut rows = read(db, window(account_id, filters, page, backend)).await?;
    if rows.len() as u64 <= page.limit
        && let Some(end) = window_end(db, account_id, page).await?
    {
        rows.extend(read(db, older_than(account_id, filters, page, end, backend)).await?);
    }
    Ok(page.split(rows))
}

/// The contacts matching `filters`: the fragment (and the tag, if any). The fragment is looked for in the
/// name, phone and e-mail joined by newlines (which `q` cannot hold), PostgreSQL's trigram index expression.
fn matching(filters: &Filters, backend: DbBackend) -> Condition {
    let pattern = search::contains(&filters.q);
    let holds = match backend {
        DbBackend::Postgres => Expr::cust_with_values(
            "lower(name || E'\\n' || coalesce(phone, '') || E'\\n' || coalesce(email, '')) LIKE $1 ESCAPE '\\'",
            [pattern],
        ),
        _ => Expr::cust_with_values(
            "lower(name || char(10) || coalesce(phone, '') || char(10) || coalesce(email, '')) LIKE ? ESCAPE '\\'",
            [pattern],
        ),
    };
    let mut condition = Condition::all().add(holds);
    if !filters.tag.is_empty() {
        condition = condition.add(search::has_tag(backend, &filters.tag));
    }
    condition
}

/// The newest `WINDOW` contacts after the cursor, and of them the page's worth that match.
fn window(account_id: &AccountId, filters: &Filters, page: &Page, backend: DbBackend) -> Statement {
    let recent = contacts::Entity::find()
        .filter(Column::AccountId.eq(account_id))
        .filter(page.after_cursor(Column::CreatedAt, Column::Id))
        .order_by_desc(Column::CreatedAt)
        .order_by_desc(Column::Id)
        .limit(WINDOW)
        .into_query();
    // `matching` names columns without their table, as the subquery keeps them.
    let query = newest_first(page)
        .from_subquery(recent, Alias::new("recent"))
        .cond_where(matching(filters, backend))
        .to_owned();
    backend.build(&query)
}

/// The position of the window's oldest contact, when the account holds older ones.
async fn window_end(db: &impl ConnectionTrait, account_id: &AccountId, page: &Page) -> Result<Option<Cursor>, DbErr> {
    let end: Option<(chrono::DateTime<chrono::Utc>, String)> = contacts::Entity::find()
        .select_only()
        .columns([Column::CreatedAt, Column::Id])
        .filter(Column::AccountId.eq(account_id))
        .filter(page.after_cursor(Column::CreatedAt, Column::Id))
        .order_by_desc(Column::CreatedAt)
        .order_by_desc(Column::Id)
        .offset(WINDOW - 1)
        .into_tuple()
        .one(db)
        .await?;
    Ok(end.map(|(created_at, id)| Cursor { created_at, id }))
}

/// The page's worth of matches older than `end`, read from all of them: the matches are taken whole by the
/// trigram index (a materialized set, which no plan walks in time order), then sorted.
fn older_than(account_id: &AccountId, filters: &Filters, page: &Page, end: Cursor, backend: DbBackend) -> Statement {
    let past_window = Page {
        limit: page.limit,
        after: Some(end),
    };
    let mut matches = contacts::Entity::find()
        .filter(Column::AccountId.eq(account_id))
        .filter(past_window.after_cursor(Column::CreatedAt, Column::Id))
        .filter(matching(filters, backend));
    if backend == DbBackend::Sqlite {
        // PostgreSQL's planner reaches its trigram indexes from the LIKEs alone; SQLite's FTS5 table is asked.
        matches = matches.filter(Expr::cust_with_values(
            "\"contacts\".rowid IN (SELECT rowid FROM contacts_search WHERE contacts_search MATCH ?)",
            [search::fts5_substring(&filters.q)],
        ));
    }
    let set = CommonTableExpression::new()
        .query(matches.into_query())
        .table_name(Alias::new("matches"))
        .materialized(true)
        .to_owned();
    let query = newest_first(page)
        .from(Alias::new("matches"))
        .to_owned()
        .with(WithClause::new().cte(set).to_owned());
    backend.build(&query)
}

/// `SELECT *` newest first, one row more than the page.
fn newest_first(page: &Page) -> SelectStatement {
    Query::select()
        .column(Asterisk)
        .order_by(Column::CreatedAt, Order::Desc)
        .order_by(Column::Id, Order::Desc)
        .limit(page.limit + 1)
        .to_owned()
}

async fn read(db: &impl ConnectionTrait, statement: Statement) -> Result<Vec<contacts::Model>, DbErr> {
    contacts::Entity::find().from_raw_sql(statement).all(db).await
}
