//! Newest-first keyset paging shared by every list: `?limit=` (1..200, default 50) and opaque cursors, the
//! (created_at, id) of the last row of a page, base64url encoded. A list may page by another time column in
//! place of `created_at` (conversations: `last_message_at`); its cursors then carry that time. Pages continue strictly after it, so rows
//! created meanwhile never shift a later page. A page also ends before its encoded items pass
//! `PAGE_BYTES`, so that 200 large rows never make an answer too large to send or to read.

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
/// Encoded size of a page's items that no further item may take it past (a page's first item is always
/// kept). Under the 4 MiB that gRPC clients read by default, envelope included, so a page fits any client,
/// and far under `wire::MAX_MESSAGE_BYTES`, the largest answer the core sends and the edge reads.
pub const PAGE_BYTES: usize = 4_000_000;

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
    pub fn after_cursor(&self, created_at: impl ColumnTrait, id: impl ColumnTrait) -> Condition {
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
            .filter(self.after_cursor(created_at, id))
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

/// A page's answer: its `rows` (newest first, as read; `more`: rows follow them) rendered in order while the
/// encoded items stay within `PAGE_BYTES`, and the cursor after the last one rendered when rows remain, cut
/// off here or not read. `position` is a row's (created_at, id), the order the rows were read in.
pub fn render<R, T: prost::Message>(
    rows: impl IntoIterator<Item = R>,
    more: bool,
    position: impl Fn(&R) -> (DateTime<Utc>, &str),
    mut render: impl FnMut(R) -> T,
) -> (Vec<T>, Option<String>) {
    let rows = rows.into_iter();
    let mut items = Vec::with_capacity(rows.size_hint().0);
    let mut bytes = 0;
    let mut cut = false;
    // The position of the last item kept, and of the row being rendered (buffers reused row to row).
    let (mut last, mut current) = (Cursor::default(), Cursor::default());
    for row in rows {
        let (created_at, id) = position(&row);
        current.created_at = created_at;
        id.clone_into(&mut current.id);
        let item = render(row);
        // A repeated message field: one byte of tag, the length, the message.
        let len = item.encoded_len();
        let len = 1 + prost::encoding::encoded_len_varint(len as u64) + len;
        if !items.is_empty() && bytes + len > PAGE_BYTES {
            cut = true;
            break;
        }
        bytes += len;
        items.push(item);
        std::mem::swap(&mut last, &mut current);
    }
    let next = ((more || cut) && !items.is_empty()).then(|| last.encode());
    (items, next)
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

    /// Rows of `size` bytes each, the newest first.
    fn rows(sizes: &[usize]) -> Vec<(DateTime<Utc>, String, usize)> {
        sizes
            .iter()
            .enumerate()
            .map(|(n, size)| {
                let at = DateTime::from_timestamp(1_800_000_000 - n as i64, 0).unwrap();
                (at, format!("deal_{n}"), *size)
            })
            .collect()
    }

    fn page(rows: Vec<(DateTime<Utc>, String, usize)>, more: bool) -> (Vec<String>, Option<Cursor>) {
        let (items, next) = render(rows, more, |r| (r.0, r.1.as_str()), |r| "x".repeat(r.2));
        (
            items.iter().map(|s| s.len().to_string()).collect(),
            next.map(|c| Cursor::decode(&c, "deal_").unwrap()),
        )
    }

    #[test]
    fn pages_end_before_their_items_pass_the_byte_budget() {
        let mb = 1_000_000;
        // Four items of 1 MB fit 4,000,000 bytes with their framing only three at a time.
        let (items, next) = page(rows(&[mb, mb, mb, mb, mb]), false);
        assert_eq!(items.len(), 3);
        assert_eq!(
            next.map(|c| c.id),
            Some("deal_2".to_owned()),
            "the next page starts after the last kept"
        );
        // An item larger than the budget still makes a page of its own.
        let (items, next) = page(rows(&[5 * mb, 10]), false);
        assert_eq!((items.len(), next.map(|c| c.id)), (1, Some("deal_0".to_owned())));
        // Small items: the page as read, with a cursor only when more rows follow.
        assert_eq!(page(rows(&[10, 10]), false), (vec!["10".into(), "10".into()], None));
        let (_, next) = page(rows(&[10, 10]), true);
        assert_eq!(next.map(|c| c.id), Some("deal_1".to_owned()));
        assert_eq!(page(rows(&[]), true), (vec![], None));
    }

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
