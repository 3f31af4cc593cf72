//! Deals and pipelines (section `deals`).

pub mod cursor;
pub mod fields;
pub mod pipelines;
pub mod service;
pub mod store;
