//! Broadcast sending: each broadcast's recipients (`broadcast_recipients`, one row per contact, so no one
//! is sent to twice however the audience named them), where its expansion stands, its WhatsApp template
//! and failure reason, and its counters as columns.
//!
//! The counters are kept by the database from every write that moves a broadcast's message or marks a
//! reply, whatever code made it: a trigger appends a row of differences to `broadcast_stat_deltas` (an
//! insert, so concurrent receipts of one broadcast never wait for each other or lock broadcasts in
//! different orders), which a recurring job folds into the broadcast's columns. A message's change adds 1
//! to each count it now belongs to and -1 to each it left (`sent` = sent or beyond, `delivered` =
//! delivered or read, `settled` = no longer queued); a recipient's first inbound message after the opener
//! (any message into the conversation the broadcast used) counts once in `replied`.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

fn c(name: &str) -> Alias {
    Alias::new(name)
}

/// Counters of a broadcast, in `broadcasts` and in each delta row.
const COUNTS: [&str; 7] = ["total", "sent", "delivered", "read", "failed", "replied", "settled"];

/// `1` when `row`'s status is one of `statuses`, else `0`.
fn within(row: &str, statuses: &str) -> String {
    format!("(CASE WHEN {row}.status IN ({statuses}) THEN 1 ELSE 0 END)")
}

/// The delta a message's status change makes, as the VALUES of one insert.
fn status_delta() -> String {
    let moved = |statuses: &str| format!("{} - {}", within("NEW", statuses), within("OLD", statuses));
    format!(
        "INSERT INTO broadcast_stat_deltas (broadcast_id, total, sent, delivered, read, failed, replied, settled) \
         VALUES (NEW.broadcast_id, 0, {sent}, {delivered}, {read}, {failed}, 0, {settled});",
        sent = moved("'sent', 'delivered', 'read'"),
        delivered = moved("'delivered', 'read'"),
        read = moved("'read'"),
        failed = moved("'failed'"),
        settled = moved("'sent', 'delivered', 'read', 'failed'"),
    )
}

const REPLIED: &str = "UPDATE broadcast_recipients SET replied = TRUE WHERE conversation_id = NEW.conversation_id \
                       AND NOT replied;";
const REPLY_DELTA: &str = "INSERT INTO broadcast_stat_deltas (broadcast_id, total, sent, delivered, read, failed, \
                           replied, settled) VALUES (NEW.broadcast_id, 0, 0, 0, 0, 0, 1, 0);";

/// (name, table, event, condition, body) of each trigger.
fn triggers() -> [(&'static str, &'static str, &'static str, &'static str, String); 3] {
    [
        (
            "broadcast_message_moved",
            "messages",
            "AFTER UPDATE OF status",
            "NEW.broadcast_id <> '' AND NEW.status <> OLD.status",
            status_delta(),
        ),
        (
            "broadcast_reply_arrived",
            "messages",
            "AFTER INSERT",
            "NEW.direction = 'inbound'",
            REPLIED.to_owned(),
        ),
        (
            "broadcast_recipient_replied",
            "broadcast_recipients",
            "AFTER UPDATE OF replied",
            "NEW.replied AND NOT OLD.replied",
            REPLY_DELTA.to_owned(),
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut columns = vec![
            text(c("template")).default("").to_owned(),
            text(c("error")).default("").to_owned(),
            // Where the expansion of the audience stands (JSON), and whether it is done.
            text(c("expansion")).default("").to_owned(),
            boolean(c("expanded")).default(false).to_owned(),
            timestamp_with_time_zone_null(c("started_at")),
            timestamp_with_time_zone_null(c("completed_at")),
        ];
        for count in COUNTS {
            columns.push(big_integer(c(count)).default(0).to_owned());
        }
        // SQLite adds one column per statement.
        for column in columns {
            manager
                .alter_table(Table::alter().table(c("broadcasts")).add_column(column).to_owned())
                .await?;
        }
        manager
            .alter_table(Table::alter().table(c("broadcasts")).drop_column(c("stats")).to_owned())
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(c("broadcast_recipients"))
                    .col(string(c("broadcast_id")))
                    .col(string(c("contact_id")))
                    .col(string(c("account_id")))
                    .col(string(c("conversation_id")).default(""))
                    .col(string(c("message_id")).default(""))
                    .col(boolean(c("replied")).default(false))
                    .primary_key(Index::create().col(c("broadcast_id")).col(c("contact_id")))
                    .to_owned(),
            )
            .await?;
        let mut deltas = Table::create();
        deltas
            .table(c("broadcast_stat_deltas"))
            .col(big_pk_auto(c("id")))
            .col(string(c("broadcast_id")));
        for count in COUNTS {
            deltas.col(big_integer(c(count)));
        }
        manager.create_table(deltas.to_owned()).await?;
        let db = manager.get_connection();
        let backend = manager.get_database_backend();
        let mut statements = vec![
            "CREATE INDEX broadcast_recipients_conversation ON broadcast_recipients (conversation_id) \
             WHERE conversation_id <> ''"
                .to_owned(),
            "CREATE INDEX broadcast_stat_deltas_broadcast ON broadcast_stat_deltas (broadcast_id)".to_owned(),
            // The broadcasts whose completion the fold looks for.
            "CREATE INDEX broadcasts_sending ON broadcasts (id) WHERE status = 'sending'".to_owned(),
            // An account's broadcasts by when they started: the daily summary's.
            "CREATE INDEX broadcasts_account_started ON broadcasts (account_id, started_at)".to_owned(),
            // An account's contacts in id order: a tag's contacts are expanded in batches along it.
            "CREATE INDEX contacts_account_id ON contacts (account_id, id)".to_owned(),
        ];
        for (name, table, event, condition, body) in triggers() {
            if backend == DbBackend::Postgres {
                statements.push(format!(
                    "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NULL; END $$"
                ));
                statements.push(format!(
                    "CREATE TRIGGER {name} {event} ON {table} FOR EACH ROW WHEN ({condition}) \
                     EXECUTE FUNCTION {name}()"
                ));
            } else {
                statements.push(format!(
                    "CREATE TRIGGER {name} {event} ON {table} WHEN {condition} BEGIN {body} END"
                ));
            }
        }
        for sql in statements {
            db.execute_unprepared(&sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = manager.get_database_backend();
        for (name, table, ..) in triggers() {
            if backend == DbBackend::Postgres {
                db.execute_unprepared(&format!("DROP TRIGGER {name} ON {table}"))
                    .await?;
                db.execute_unprepared(&format!("DROP FUNCTION {name}()")).await?;
            } else {
                db.execute_unprepared(&format!("DROP TRIGGER {name}")).await?;
            }
        }
        for index in [
            "broadcasts_sending",
            "broadcasts_account_started",
            "contacts_account_id",
        ] {
            db.execute_unprepared(&format!("DROP INDEX {index}")).await?;
        }
        for table in ["broadcast_stat_deltas", "broadcast_recipients"] {
            manager.drop_table(Table::drop().table(c(table)).to_owned()).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(c("broadcasts"))
                    .add_column(text(c("stats")).default("{}").to_owned())
                    .to_owned(),
            )
            .await?;
        for column in [
            "template",
            "error",
            "expansion",
            "expanded",
            "started_at",
            "completed_at",
        ]
        .into_iter()
        .chain(COUNTS)
        {
            manager
                .alter_table(Table::alter().table(c("broadcasts")).drop_column(c(column)).to_owned())
                .await?;
        }
        Ok(())
    }
}
