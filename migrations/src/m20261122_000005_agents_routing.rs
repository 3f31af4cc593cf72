//! Agents with their FAQs, knowledge attachments and tools; knowledge sources and groups; channels, entry
//! points and channel defaults; broadcasts; and the campaigns facade's record of what each campaign made.
//! Lists and nested settings are JSON text; provider credentials and tool headers are sealed (AES-256-GCM).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

/// `id` primary key, `account_id`, the given columns, then `created_at` (and `updated_at` when asked).
fn table(name: &str, columns: Vec<ColumnDef>, updated_at: bool) -> TableCreateStatement {
    let mut table = Table::create();
    table
        .table(c(name))
        .col(string(c("id")).primary_key())
        .col(string(c("account_id")));
    for mut column in columns {
        table.col(&mut column);
    }
    table.col(timestamp_with_time_zone(c("created_at")));
    if updated_at {
        table.col(timestamp_with_time_zone(c("updated_at")));
    }
    table.to_owned()
}

const TABLES: &[&str] = &[
    "campaigns",
    "broadcasts",
    "kb_groups",
    "channel_defaults",
    "entry_points",
    "channels",
    "mcp_servers",
    "custom_functions",
    "agent_kb_sources",
    "kb_sources",
    "agent_faqs",
    "agents",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let tables = [
            table(
                "agents",
                vec![
                    string(c("name")),
                    text(c("instructions")),
                    text(c("rules")),
                    text(c("goal")),
                    text(c("personality")),
                    string(c("language")),
                    string(c("ai_tier")),
                    string(c("anthropic_model")),
                    text(c("booking")),
                    text(c("follow_ups")),
                    string(c("status")),
                ],
                true,
            ),
            table(
                "agent_faqs",
                vec![
                    string(c("agent_id")),
                    text(c("question")),
                    text(c("answer")),
                    string_null(c("group_id")),
                ],
                true,
            ),
            table(
                "kb_sources",
                vec![
                    string(c("kind")),
                    string(c("status")),
                    integer(c("pages_total")),
                    integer(c("pages_done")),
                    integer(c("sections")),
                    integer(c("faqs_created")),
                    big_integer(c("credits_used_milli")),
                    text_null(c("error")),
                ],
                true,
            ),
            table(
                "agent_kb_sources",
                vec![string(c("agent_id")), string(c("source_id"))],
                false,
            ),
            table(
                "custom_functions",
                vec![
                    string(c("agent_id")),
                    string(c("name")),
                    text(c("description")),
                    text(c("url")),
                    string(c("method")),
                    text(c("headers")),
                    text(c("parameters")),
                ],
                false,
            ),
            table(
                "mcp_servers",
                vec![
                    string(c("agent_id")),
                    string(c("name")),
                    text(c("url")),
                    string(c("transport")),
                    text(c("headers")),
                    text(c("allowed_tools")),
                ],
                false,
            ),
            table(
                "channels",
                vec![
                    string(c("name")),
                    string(c("type")),
                    string(c("provider")),
                    text(c("config")),
                    text(c("configured_keys")),
                ],
                false,
            ),
            table(
                "entry_points",
                vec![
                    string(c("agent_id")),
                    string(c("channel")),
                    text(c("keywords")),
                    text(c("ref")),
                    text(c("url_prefix")),
                    integer(c("priority")),
                    boolean(c("enabled")),
                ],
                true,
            ),
            table(
                "channel_defaults",
                vec![string(c("channel")), string(c("agent_id"))],
                true,
            ),
            table(
                "kb_groups",
                vec![string(c("name")), text(c("description")), text(c("faqs"))],
                true,
            ),
            table(
                "broadcasts",
                vec![
                    string(c("name")),
                    string(c("agent_id")),
                    string(c("channel")),
                    text(c("audience")),
                    text(c("opener")),
                    timestamp_with_time_zone_null(c("send_at")),
                    string(c("status")),
                    text(c("stats")),
                ],
                true,
            ),
            table(
                "campaigns",
                vec![
                    string(c("type")),
                    string(c("agent_id")),
                    // Whether the facade made the agent for this campaign (then it reads as part of it).
                    boolean(c("owns_agent")),
                    string_null(c("broadcast_id")),
                ],
                false,
            ),
        ];
        for statement in tables {
            manager.create_table(statement).await?;
        }
        let db = manager.get_connection();
        for sql in [
            "CREATE INDEX agents_account_created ON agents (account_id, created_at, id)",
            "CREATE INDEX agent_faqs_agent_created ON agent_faqs (agent_id, created_at, id)",
            "CREATE INDEX kb_sources_account_created ON kb_sources (account_id, created_at, id)",
            "CREATE UNIQUE INDEX agent_kb_sources_pair ON agent_kb_sources (agent_id, source_id)",
            "CREATE UNIQUE INDEX custom_functions_agent_name ON custom_functions (agent_id, name)",
            "CREATE UNIQUE INDEX mcp_servers_agent_name ON mcp_servers (agent_id, name)",
            "CREATE UNIQUE INDEX channels_account_name ON channels (account_id, name)",
            "CREATE INDEX entry_points_account_channel ON entry_points (account_id, channel)",
            "CREATE INDEX entry_points_account_created ON entry_points (account_id, created_at, id)",
            "CREATE UNIQUE INDEX channel_defaults_account_channel ON channel_defaults (account_id, channel)",
            "CREATE INDEX kb_groups_account_created ON kb_groups (account_id, created_at, id)",
            "CREATE INDEX broadcasts_account_created ON broadcasts (account_id, created_at, id)",
            "CREATE INDEX campaigns_account ON campaigns (account_id, type)",
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
