//! Schema migrations. Each migration is written once with SeaQuery's schema builder and runs unchanged on
//! SQLite (the embedded default) and PostgreSQL; `frontdesk migrate` and the start of `serve`/`core` apply them.

pub use sea_orm_migration::prelude::*;

mod column;
mod m20261122_000001_site_payments;
mod m20261122_000002_accounts;
mod m20261122_000003_deals;
mod m20261122_000004_webhooks;
mod m20261122_000005_agents_routing;
mod m20261122_000006_webhook_retention;
mod m20261123_000007_webhook_claims;
mod m20261123_000008_conversations;
mod m20261123_000009_retrieval;
mod m20261123_000010_kb_imports;
mod m20261124_000020_webchat;
mod m20261124_000021_semantic;
mod m20261124_000031_kb_source_files;
mod m20261124_000040_partial_keys;
mod m20261125_000050_conversation_activity;
mod m20261127_000060_job_engine;
mod m20261127_000061_chat_session_expiry;
mod m20261127_000070_ai_replies;
mod m20261128_000080_models_and_tools;
mod m20261129_000090_meta_channels;
mod m20261130_000100_tasks;
mod m20261201_000110_summaries;
mod m20261202_000120_credit_holds;
mod m20261202_000130_knowledge_quality;
mod m20261203_000140_gap_questions_by_account;
mod m20261204_000150_job_crashes_and_group_cancels;
mod m20261205_000160_ready_queues;
mod m20261205_000170_outbox_by_account;
mod m20261206_000180_running_by_claim;
mod m20261207_000190_broadcast_sending;
mod m20261208_000200_unwritten_recipients;
mod m20261209_000210_large_accounts;
mod m20261210_000220_job_traces;
mod m20261211_000230_delivered_in_row;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_site_payments::Migration),
            Box::new(m20261122_000002_accounts::Migration),
            Box::new(m20261122_000003_deals::Migration),
            Box::new(m20261122_000004_webhooks::Migration),
            Box::new(m20261122_000005_agents_routing::Migration),
            Box::new(m20261122_000006_webhook_retention::Migration),
            Box::new(m20261123_000007_webhook_claims::Migration),
            Box::new(m20261123_000008_conversations::Migration),
            Box::new(m20261123_000009_retrieval::Migration),
            Box::new(m20261123_000010_kb_imports::Migration),
            Box::new(m20261124_000020_webchat::Migration),
            Box::new(m20261124_000021_semantic::Migration),
            Box::new(m20261124_000031_kb_source_files::Migration),
            Box::new(m20261124_000040_partial_keys::Migration),
            Box::new(m20261125_000050_conversation_activity::Migration),
            Box::new(m20261127_000060_job_engine::Migration),
            Box::new(m20261127_000061_chat_session_expiry::Migration),
            Box::new(m20261127_000070_ai_replies::Migration),
            Box::new(m20261128_000080_models_and_tools::Migration),
            Box::new(m20261129_000090_meta_channels::Migration),
            Box::new(m20261130_000100_tasks::Migration),
            Box::new(m20261201_000110_summaries::Migration),
            Box::new(m20261202_000120_credit_holds::Migration),
            Box::new(m20261202_000130_knowledge_quality::Migration),
            Box::new(m20261203_000140_gap_questions_by_account::Migration),
            Box::new(m20261204_000150_job_crashes_and_group_cancels::Migration),
            Box::new(m20261205_000160_ready_queues::Migration),
            Box::new(m20261205_000170_outbox_by_account::Migration),
            Box::new(m20261206_000180_running_by_claim::Migration),
            Box::new(m20261207_000190_broadcast_sending::Migration),
            Box::new(m20261208_000200_unwritten_recipients::Migration),
            Box::new(m20261209_000210_large_accounts::Migration),
            Box::new(m20261210_000220_job_traces::Migration),
            Box::new(m20261211_000230_delivered_in_row::Migration),
        ]
    }
}
