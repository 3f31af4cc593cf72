//! What a large account's lists need to cost what they find rather than what the account holds.
//!
//! Contact search (`GET /v1/contacts?q=`) by index instead of a scan of the account's contacts: the
//! fragment is looked up in a trigram index of each contact's name, phone and e-mail, so its cost follows
//! the number of contacts it matches, not the size of the account.
//!
//! PostgreSQL: one `pg_trgm` GIN index on the name, phone and e-mail joined by newlines and lowered, the
//! expression the search's `LIKE` compares (one index scan per search: with three indexes, an e-mail's common
//! trigrams were read three times). SQLite: an FTS5 table with the trigram tokenizer over the same three
//! columns, its rows kept by triggers under the contact's rowid (external content, nothing copied).
//!
//! The conversations handed to a person (`GET /v1/conversations?handoff=true`), the queue a team works from,
//! by a partial index in activity order: few conversations are in it, and a scan of the account's activity
//! for them read every conversation between two handoffs.

use sea_orm_migration::{prelude::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

const POSTGRES_UP: &[&str] = &["CREATE INDEX contacts_search_trigrams ON contacts USING gin \
     ((lower(name || E'\\n' || coalesce(phone, '') || E'\\n' || coalesce(email, ''))) gin_trgm_ops)"];

const HANDOFFS: &str = "CREATE INDEX conversations_handoff ON conversations (account_id, activity_bucket) \
                        WHERE handoff";

const SQLITE_UP: &[&str] = &[
    "CREATE VIRTUAL TABLE contacts_search USING fts5(name, phone, email, content = 'contacts', \
     content_rowid = 'rowid', tokenize = 'trigram')",
    "CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN \
     INSERT INTO contacts_search (rowid, name, phone, email) VALUES (new.rowid, new.name, new.phone, new.email); \
     END",
    "CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN \
     INSERT INTO contacts_search (contacts_search, rowid, name, phone, email) \
     VALUES ('delete', old.rowid, old.name, old.phone, old.email); \
     END",
    "CREATE TRIGGER contacts_search_update AFTER UPDATE OF name, phone, email ON contacts BEGIN \
     INSERT INTO contacts_search (contacts_search, rowid, name, phone, email) \
     VALUES ('delete', old.rowid, old.name, old.phone, old.email); \
     INSERT INTO contacts_search (rowid, name, phone, email) VALUES (new.rowid, new.name, new.phone, new.email); \
     END",
    "INSERT INTO contacts_search (contacts_search) VALUES ('rebuild')",
];

const POSTGRES_DOWN: &[&str] = &[
    "DROP INDEX contacts_search_trigrams",
    "DROP INDEX conversations_handoff",
];

const SQLITE_DOWN: &[&str] = &[
    "DROP INDEX conversations_handoff",
    "DROP TRIGGER contacts_search_insert",
    "DROP TRIGGER contacts_search_delete",
    "DROP TRIGGER contacts_search_update",
    "DROP TABLE contacts_search",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let statements = match manager.get_database_backend() {
            DatabaseBackend::Postgres => {
                db.execute_unprepared("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                    .await
                    .map_err(|err| {
                        DbErr::Migration(format!(
                            "contact search needs PostgreSQL's pg_trgm extension (part of contrib): {err}; \
                             a superuser can run `CREATE EXTENSION pg_trgm` in this database once"
                        ))
                    })?;
                POSTGRES_UP
            }
            _ => SQLITE_UP,
        };
        for sql in statements.iter().chain([&HANDOFFS]) {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = match manager.get_database_backend() {
            DatabaseBackend::Postgres => POSTGRES_DOWN,
            _ => SQLITE_DOWN,
        };
        for sql in statements {
            manager.get_connection().execute_unprepared(sql).await?;
        }
        Ok(())
    }
}
