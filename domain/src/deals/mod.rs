//! Deals and pipelines (section `deals`).

pub mod fields;
pub mod pipelines;
pub mod service;
pub mod store;
