//! Runs whose worker died are found through the index of claimed rows (`*_claimed`, which holds exactly
//! the rows running now), so the separate index of running rows by lease end goes: every claim and every
//! completion paid for its entry, and the look for expired leases runs at most once a second per process.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const RUNNING: [(&str, &str); 2] = [("jobs", "run_at_ms"), ("webhook_deliveries", "next_attempt_ms")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (table, _) in RUNNING {
            db.execute_unprepared(&format!("DROP INDEX {table}_running")).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (table, due) in RUNNING {
            db.execute_unprepared(&format!(
                "CREATE INDEX {table}_running ON {table} ({due}) WHERE status = 'pending' AND claim_token IS NOT NULL"
            ))
            .await?;
        }
        Ok(())
    }
}
