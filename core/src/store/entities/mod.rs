//! SeaORM entities, one module per table.

pub mod orders;
pub mod settings;
pub mod subscribers;
