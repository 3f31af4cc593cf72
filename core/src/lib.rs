//! The Front Desk core: gRPC services, the domain rules behind them, persistence and integrations.

pub mod access;
pub mod accounts;
pub mod admin_cli;
pub mod app;
pub mod clock;
pub mod config;
pub mod deals;
pub mod error;
pub mod events;
pub mod grpc;
pub mod ids;
pub mod integrations;
pub mod paging;
pub mod plan;
pub mod shutdown;
pub mod site;
pub mod store;
pub mod telemetry;
pub mod timestamps;
pub mod webhooks;
