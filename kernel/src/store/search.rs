//! The text matching the lists share: `q`, a case-insensitive substring of any of several columns, and
//! `tag`, membership of a JSON array column.

use sea_orm::{
    Condition, DbBackend,
    sea_query::{Expr, ExprTrait, Func, IntoColumnRef, LikeExpr},
};

/// Rows where any of `columns` contains `text`, ignoring case.
pub fn any_contains<C: IntoColumnRef>(columns: impl IntoIterator<Item = C>, text: &str) -> Condition {
    let needle = contains(&text.to_lowercase());
    columns.into_iter().fold(Condition::any(), |any, column| {
        any.add(Expr::expr(Func::lower(Expr::col(column))).like(needle.clone()))
    })
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

/// `%text%` with LIKE's wildcards in `text` escaped.
fn contains(text: &str) -> LikeExpr {
    let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    LikeExpr::new(format!("%{escaped}%")).escape('\\')
}
