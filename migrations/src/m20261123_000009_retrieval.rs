//! Knowledge for retrieval: the FAQs imported from knowledge sources (`source_faqs`), and the lexical index
//! over every FAQ an agent answers from (`faq_index_docs`, one row per FAQ and analysis language, and
//! `faq_index_terms`, one row per distinct term of it). Deleting a source deletes its FAQs and their index
//! rows; deleting an agent deletes its index rows (foreign keys with ON DELETE CASCADE, which SQLite
//! enforces on every connection sqlx opens).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

/// A foreign key from `table.column` to `target.id` that deletes the row with its target.
fn cascade(table: &str, column: &str, target: &str) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(c(table), c(column))
        .to(c(target), c("id"))
        .on_delete(ForeignKeyAction::Cascade)
        .to_owned()
}

/// The owner columns every index row carries: the agent of an agent FAQ, or the source of a source FAQ.
fn owner_columns(table: &mut TableCreateStatement) {
    table.col(string_null(c("agent_id"))).col(string_null(c("source_id")));
}

const TABLES: &[&str] = &["faq_index_terms", "faq_index_docs", "source_faqs"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(c("source_faqs"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("account_id")))
                    .col(string(c("source_id")))
                    // Order within the source (the order of its sections).
                    .col(integer(c("position")))
                    .col(text(c("question")))
                    .col(text(c("answer")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .col(timestamp_with_time_zone(c("updated_at")))
                    .foreign_key(&mut cascade("source_faqs", "source_id", "kb_sources"))
                    .to_owned(),
            )
            .await?;

        let mut docs = Table::create();
        docs.table(c("faq_index_docs"))
            .col(string(c("faq_id")))
            .col(string(c("language")))
            .col(string(c("account_id")));
        owner_columns(&mut docs);
        docs.col(timestamp_with_time_zone(c("faq_updated_at")))
            .col(integer(c("question_len")))
            .col(integer(c("answer_len")))
            .primary_key(Index::create().col(c("faq_id")).col(c("language")))
            .foreign_key(&mut cascade("faq_index_docs", "agent_id", "agents"))
            .foreign_key(&mut cascade("faq_index_docs", "source_id", "kb_sources"));
        manager.create_table(docs).await?;

        let mut terms = Table::create();
        terms
            .table(c("faq_index_terms"))
            .col(string(c("faq_id")))
            .col(string(c("language")))
            .col(string(c("term")));
        // The owner is repeated on each term row so that a search filters postings without a join; the rows
        // go with their document row.
        owner_columns(&mut terms);
        terms
            .col(integer(c("question_tf")))
            .col(integer(c("answer_tf")))
            .col(integer(c("question_len")))
            .col(integer(c("answer_len")))
            .primary_key(Index::create().col(c("faq_id")).col(c("language")).col(c("term")))
            .foreign_key(
                ForeignKey::create()
                    .from(c("faq_index_terms"), (c("faq_id"), c("language")))
                    .to(c("faq_index_docs"), (c("faq_id"), c("language")))
                    .on_delete(ForeignKeyAction::Cascade),
            );
        manager.create_table(terms).await?;

        let db = manager.get_connection();
        for sql in [
            "CREATE INDEX source_faqs_source_position ON source_faqs (source_id, position, id)",
            "CREATE INDEX faq_index_docs_agent ON faq_index_docs (agent_id, language)",
            "CREATE INDEX faq_index_docs_source ON faq_index_docs (source_id, language)",
            "CREATE INDEX faq_index_terms_agent ON faq_index_terms (language, term, agent_id)",
            "CREATE INDEX faq_index_terms_source ON faq_index_terms (language, term, source_id)",
        ] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for name in TABLES {
            manager.drop_table(Table::drop().table(c(name)).to_owned()).await?;
        }
        Ok(())
    }
}
