//! SeaORM entities, one module per table.

pub mod accounts;
pub mod api_keys;
pub mod credit_ledger;
pub mod orders;
pub mod settings;
pub mod subscribers;
