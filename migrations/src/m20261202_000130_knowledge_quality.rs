//! What an agent knows and does not. Evaluations of an agent: the cases a business gave (`cases`, JSON), the
//! results of those run so far (`results`, JSON, in case order: a run that dies resumes after the last one
//! stored), and how it ended. Knowledge gaps: the questions handed off for want of an answer
//! (`gap_questions`, one per conversation), each in the group of like questions it joined when it was asked
//! (`knowledge_gaps`: its most central question, the group's mean vector and terms, open, resolved or
//! dismissed).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(c("evaluations"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("account_id")))
                    .col(string(c("agent_id")))
                    // queued | running | completed | failed
                    .col(string(c("status")))
                    .col(text(c("cases")))
                    .col(text(c("results")))
                    .col(text(c("error")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .col(timestamp_with_time_zone_null(c("completed_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("knowledge_gaps"))
                    .col(string(c("id")).primary_key())
                    .col(string(c("account_id")))
                    .col(string(c("agent_id")))
                    .col(text(c("question")))
                    // The mean of its questions' vectors (f32 little-endian), and the representative's.
                    .col(blob_null(c("centroid")))
                    .col(blob_null(c("question_vector")))
                    .col(integer(c("members")))
                    // Its questions' subject terms, JSON: the group's words when there is no model.
                    .col(text(c("terms")))
                    // open | resolved | dismissed
                    .col(string(c("status")))
                    .col(string(c("faq_id")))
                    .col(timestamp_with_time_zone(c("created_at")))
                    .col(timestamp_with_time_zone(c("updated_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("knowledge_gaps_agent_status")
                    .table(c("knowledge_gaps"))
                    .col(c("agent_id"))
                    .col(c("status"))
                    .col(c("updated_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("gap_questions"))
                    .col(string(c("conversation_id")).primary_key())
                    .col(string(c("account_id")))
                    .col(string(c("agent_id")))
                    .col(string(c("gap_id")))
                    .col(text(c("question")))
                    .col(timestamp_with_time_zone(c("asked_at")))
                    .to_owned(),
            )
            .await?;
        for (name, columns) in [
            ("gap_questions_agent_asked", ["agent_id", "asked_at"]),
            ("gap_questions_gap_asked", ["gap_id", "asked_at"]),
        ] {
            let mut index = Index::create();
            index.name(name).table(c("gap_questions"));
            for column in columns {
                index.col(c(column));
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["gap_questions", "knowledge_gaps", "evaluations"] {
            manager.drop_table(Table::drop().table(c(table)).to_owned()).await?;
        }
        Ok(())
    }
}
