//! The text matching the lists share: `q`, a case-insensitive substring of any of several columns, and
//! `tag`, membership of a JSON array column. A `q` served by a trigram index (contacts) must hold a run of
//! `INDEXED_RUN` letters or digits: PostgreSQL's `pg_trgm` takes its trigrams from such runs, and a
//! fragment without one would make the index useless and the search a scan of the account.

use sea_orm::{
    Condition, DbBackend,
    sea_query::{Expr, ExprTrait, Func, IntoColumnRef, LikeExpr},
};

/// The shortest run of letters or digits a `q` searched by trigrams must hold.
pub const INDEXED_RUN: usize = 3;
/// The longest `q` accepted, in characters.
pub const MAX_FRAGMENT: usize = 200;

/// Whether `text` holds `INDEXED_RUN` letters or digits in a row, so a trigram index can find it.
pub fn has_indexed_run(text: &str) -> bool {
    let mut run = 0;
    text.chars().any(|c| {
        run = if c.is_alphanumeric() { run + 1 } else { 0 };
        run >= INDEXED_RUN
    })
}

/// The FTS5 query matching rows holding `text` as a substring of one column (a phrase, with the trigram
/// tokenizer), its double quotes escaped.
pub fn fts5_substring(text: &str) -> String {
    format!("\"{}\"", text.to_lowercase().replace('"', "\"\""))
}

/// Rows where any of `columns` contains `text`, ignoring case.
pub fn any_contains<C: IntoColumnRef>(columns: impl IntoIterator<Item = C>, text: &str) -> Condition {
    let needle = LikeExpr::new(contains(text)).escape('\\');
    columns.into_iter().fold(Condition::any(), |any, column| {
        any.add(Expr::expr(Func::lower(Expr::col(column))).like(needle.clone()))
    })
}

/// `%text%`, lowered, for a LIKE with `ESCAPE '\'`: LIKE's wildcards in `text` are escaped.
pub fn contains(text: &str) -> String {
    let escaped = text
        .to_lowercase()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// Rows whose `tags` column (a JSON array of strings) holds `tag`. The tag's JSON string is looked for,
/// case-sensitively on both databases (SQLite's LIKE would ignore ASCII case).
pub fn has_tag(backend: DbBackend, tag: &str) -> Expr {
    let quoted = serde_json::to_string(tag).unwrap_or_default();
    match backend {
        DbBackend::Postgres => Expr::cust_with_values("strpos(\"tags\", $1) > 0", [quoted]),
        _ => Expr::cust_with_values("instr(\"tags\", ?) > 0", [quoted]),
    }
}
