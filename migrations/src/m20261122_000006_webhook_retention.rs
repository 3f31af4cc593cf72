//! Indexes for retention: settled deliveries by when they settled, deliveries by event (is an event still
//! referred to?), and dispatched events by age, then sequence (the order in which the scan for events
//! without deliveries resumes). Each bounds its scan to what is old enough to delete.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const INDEXES: [(&str, &str); 3] = [
    (
        "webhook_deliveries_settled",
        "ON webhook_deliveries (settled_at) WHERE status <> 'pending'",
    ),
    ("webhook_deliveries_event", "ON webhook_deliveries (event_id)"),
    (
        "event_outbox_dispatched_created",
        "ON event_outbox (created_at, seq) WHERE dispatched_at IS NOT NULL",
    ),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, definition) in INDEXES {
            db.execute_unprepared(&format!("CREATE INDEX {name} {definition}"))
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, _) in INDEXES {
            db.execute_unprepared(&format!("DROP INDEX {name}")).await?;
        }
        Ok(())
    }
}
