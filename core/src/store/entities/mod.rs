//! SeaORM entities, one module per table.

pub mod accounts;
pub mod api_keys;
pub mod credit_ledger;
pub mod deals;
pub mod event_outbox;
pub mod orders;
pub mod pipelines;
pub mod settings;
pub mod stages;
pub mod subscribers;
pub mod webhook_attempts;
pub mod webhook_deliveries;
pub mod webhooks;
