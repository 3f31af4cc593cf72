//! Semantic retrieval: a sentence-embedding vector per FAQ and model (`faq_vectors`), and a version
//! counter per knowledge owner (`knowledge_versions`: an agent's own FAQs, `a:<agent id>`, or a knowledge
//! source's, `s:<source id>`) that the database itself moves on every change of a FAQ or of its vector
//! (triggers), so that a process holding a scope's index in memory knows with one narrow read whether it
//! is still current, whichever replica or writer changed what. The lexical index tables of
//! m20261123_000009 are dropped: the index is now built in memory from the FAQs themselves.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

fn cascade(table: &str, column: &str, target: &str) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(c(table), c(column))
        .to(c(target), c("id"))
        .on_delete(ForeignKeyAction::Cascade)
        .to_owned()
}

/// (table, owner column, owner key prefix) of every table whose changes move an owner's version.
const OWNED: &[(&str, &str, &str)] = &[
    ("agent_faqs", "agent_id", "a:"),
    ("source_faqs", "source_id", "s:"),
    ("faq_vectors", "agent_id", "a:"),
    ("faq_vectors", "source_id", "s:"),
];

fn bump_sqlite(row: &str, column: &str, prefix: &str) -> String {
    format!(
        "INSERT INTO knowledge_versions (owner, version) SELECT '{prefix}' || {row}.{column}, 1 \
         WHERE {row}.{column} IS NOT NULL \
         ON CONFLICT (owner) DO UPDATE SET version = knowledge_versions.version + 1;"
    )
}

fn sqlite_triggers(table: &str, column: &str, prefix: &str) -> Vec<String> {
    let name = format!("{table}_{column}_version");
    vec![
        format!(
            "CREATE TRIGGER {name}_insert AFTER INSERT ON {table} BEGIN {} END",
            bump_sqlite("NEW", column, prefix)
        ),
        format!(
            "CREATE TRIGGER {name}_update AFTER UPDATE ON {table} BEGIN {} {} END",
            bump_sqlite("OLD", column, prefix),
            bump_sqlite("NEW", column, prefix)
        ),
        format!(
            "CREATE TRIGGER {name}_delete AFTER DELETE ON {table} BEGIN {} END",
            bump_sqlite("OLD", column, prefix)
        ),
    ]
}

fn postgres_triggers(table: &str, column: &str, prefix: &str) -> Vec<String> {
    let name = format!("{table}_{column}_version");
    let bump = |row: &str| {
        format!(
            "IF {row}.{column} IS NOT NULL THEN \
               INSERT INTO knowledge_versions (owner, version) VALUES ('{prefix}' || {row}.{column}, 1) \
               ON CONFLICT (owner) DO UPDATE SET version = knowledge_versions.version + 1; \
             END IF;"
        )
    };
    vec![
        format!(
            "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               IF TG_OP <> 'INSERT' THEN {} END IF; \
               IF TG_OP <> 'DELETE' THEN {} END IF; \
               RETURN NULL; END $$",
            bump("OLD"),
            bump("NEW")
        ),
        format!(
            "CREATE TRIGGER {name} AFTER INSERT OR UPDATE OR DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()"
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["faq_index_terms", "faq_index_docs"] {
            manager
                .drop_table(Table::drop().table(c(table)).if_exists().to_owned())
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(c("knowledge_versions"))
                    .col(string(c("owner")).primary_key())
                    .col(big_integer(c("version")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("faq_vectors"))
                    .col(string(c("faq_id")))
                    // The embedder that made it (the model folder's name).
                    .col(string(c("model")))
                    .col(string(c("account_id")))
                    .col(string_null(c("agent_id")))
                    .col(string_null(c("source_id")))
                    // The FAQ's `updated_at` when it was embedded: another value means the FAQ changed since.
                    .col(timestamp_with_time_zone(c("faq_updated_at")))
                    // Little-endian f32 components.
                    .col(blob(c("vector")))
                    .primary_key(Index::create().col(c("faq_id")).col(c("model")))
                    .foreign_key(&mut cascade("faq_vectors", "agent_id", "agents"))
                    .foreign_key(&mut cascade("faq_vectors", "source_id", "kb_sources"))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        let mut statements = vec![
            "CREATE INDEX faq_vectors_agent ON faq_vectors (agent_id, model)".to_owned(),
            "CREATE INDEX faq_vectors_source ON faq_vectors (source_id, model)".to_owned(),
        ];
        for (table, column, prefix) in OWNED {
            statements.extend(match manager.get_database_backend() {
                DatabaseBackend::Postgres => postgres_triggers(table, column, prefix),
                _ => sqlite_triggers(table, column, prefix),
            });
        }
        for sql in statements {
            db.execute_unprepared(&sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (table, column, _) in OWNED {
            let name = format!("{table}_{column}_version");
            let sql = match manager.get_database_backend() {
                DatabaseBackend::Postgres => {
                    format!("DROP TRIGGER IF EXISTS {name} ON {table}; DROP FUNCTION IF EXISTS {name}()")
                }
                _ => format!(
                    "DROP TRIGGER IF EXISTS {name}_insert; DROP TRIGGER IF EXISTS {name}_update; \
                     DROP TRIGGER IF EXISTS {name}_delete"
                ),
            };
            db.execute_unprepared(&sql).await?;
        }
        for table in ["faq_vectors", "knowledge_versions"] {
            manager.drop_table(Table::drop().table(c(table)).to_owned()).await?;
        }
        // The lexical index tables are not recreated: nothing reads them any more.
        Ok(())
    }
}
