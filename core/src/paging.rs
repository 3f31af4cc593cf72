//! Newest-first keyset paging shared by every list: `?limit=` (1..200, default 50) and opaque cursors, the
//! (created_at, id) of the last row of a page, base64url encoded. Pages continue strictly after it, so rows
//! created meanwhile never shift a later page.

use std::fmt::Write;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder, QueryTrait,
    Select, Statement,
    sea_query::{Expr, ExprTrait},
};

use crate::error::FieldViolation;

const DEFAULT_LIMIT: i32 = 50;
const MAX_LIMIT: i32 = 200;

/// A list request's page, checked: how many rows, and after which cursor.
#[derive(Clone, Debug)]
pub struct Page {
    pub limit: u64,
    pub after: Option<Cursor>,
}

impl Page {
    /// The page `limit` and `cursor` ask for (cursors of rows whose ids start with `id_prefix`); a bad value
    /// adds its violation and leaves the default in its place.
    pub fn parse(limit: Option<i32>, cursor: &str, id_prefix: &str, violations: &mut Vec<FieldViolation>) -> Self {
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            violations.push(FieldViolation::new("limit", "must be between 1 and 200"));
        }
        let after = if cursor.is_empty() {
            None
        } else {
            let decoded = Cursor::decode(cursor, id_prefix);
            if decoded.is_none() {
                violations.push(FieldViolation::new("cursor", "is not a cursor this API gave out"));
            }
            decoded
        };
        Self {
            limit: limit.clamp(1, MAX_LIMIT) as u64,
            after,
        }
    }

    /// The page asked for, or the 400 naming `limit` and/or `cursor`.
    pub fn checked(limit: Option<i32>, cursor: &str, id_prefix: &str) -> crate::error::ApiResult<Self> {
        let mut violations = Vec::new();
        let page = Self::parse(limit, cursor, id_prefix, &mut violations);
        if violations.is_empty() {
            Ok(page)
        } else {
            Err(crate::error::ApiError::invalid(violations))
        }
    }

    /// Rows strictly after the cursor in newest-first order (all rows without one). A row-value comparison,
    /// so that an index ending in (created_at, id) bounds the scan; the same test written as an OR only
    /// filters it, and a deep page read every newer row first.
    fn condition(&self, created_at: impl ColumnTrait, id: impl ColumnTrait) -> Condition {
        match &self.after {
            None => Condition::all(),
            Some(cursor) => {
                Condition::all().add(Expr::tuple([created_at.into_expr(), id.into_expr()]).lt(Expr::tuple([
                    Expr::val(cursor.created_at),
                    Expr::val(cursor.id.as_str()),
                ])))
            }
        }
    }

    /// `select` newest first by (`created_at`, `id`), after the cursor, one row more than the page. The LIMIT
    /// is written into the SQL rather than bound: PostgreSQL plans a bound LIMIT for a tenth of the table,
    /// so a prepared statement's generic plan never wins and every call is planned again.
    pub fn statement<E: EntityTrait>(
        &self,
        select: Select<E>,
        created_at: E::Column,
        id: E::Column,
        backend: DbBackend,
    ) -> Statement {
        let mut statement = select
            .filter(self.condition(created_at, id))
            .order_by_desc(created_at)
            .order_by_desc(id)
            .build(backend);
        let _ = write!(statement.sql, " LIMIT {}", self.fetch()); // writing to a String cannot fail
        statement
    }

    /// Rows to read: one more than the page, to know whether another follows.
    fn fetch(&self) -> u64 {
        self.limit + 1
    }

    /// The page out of the rows read, and whether more follow.
    pub fn split<T>(&self, mut rows: Vec<T>) -> (Vec<T>, bool) {
        let more = rows.len() as u64 > self.limit;
        rows.truncate(self.limit as usize);
        (rows, more)
    }
}

/// One page of `select`, newest first by (`created_at`, `id`), and whether another follows.
pub async fn fetch<E: EntityTrait>(
    db: &impl ConnectionTrait,
    select: Select<E>,
    page: &Page,
    created_at: E::Column,
    id: E::Column,
) -> Result<(Vec<E::Model>, bool), DbErr> {
    let statement = page.statement(select, created_at, id, db.get_database_backend());
    let rows = E::find().from_raw_sql(statement).all(db).await?;
    Ok(page.split(rows))
}

/// The cursor of the page after one whose last row is `last` (created_at, id), when more follow.
pub fn next_cursor(more: bool, last: Option<(DateTime<Utc>, &str)>) -> Option<String> {
    let (created_at, id) = last.filter(|_| more)?;
    Some(
        Cursor {
            created_at,
            id: id.to_owned(),
        }
        .encode(),
    )
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub id: String,
}

impl Cursor {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.created_at.timestamp_micros(), self.id))
    }

    /// The cursor in `s`, when it is one this API gave out for rows whose ids start with `id_prefix`.
    pub fn decode(s: &str, id_prefix: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (micros, id) = text.split_once(':')?;
        let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        (id.starts_with(id_prefix) && id.len() <= 64).then(|| Self {
            created_at,
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let cursor = Cursor {
            created_at: DateTime::from_timestamp_micros(1_767_323_045_123_456).unwrap(),
            id: "deal_abc".into(),
        };
        assert_eq!(Cursor::decode(&cursor.encode(), "deal_"), Some(cursor));
        for garbage in [
            "",
            "!!!",
            "bm9wZQ",
            &URL_SAFE_NO_PAD.encode("x:deal_1"),
            &URL_SAFE_NO_PAD.encode("1:user_1"),
        ] {
            assert_eq!(Cursor::decode(garbage, "deal_"), None, "{garbage}");
        }
    }
}
