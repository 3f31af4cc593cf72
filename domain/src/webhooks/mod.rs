//! Webhooks (section `webhooks`): subscriptions, and the engine that delivers outbox events to them with
//! Standard Webhooks signatures, retries and automatic disabling.

mod config;
pub mod dispatch;
pub mod secret;
pub mod service;
pub mod signing;
pub mod store;
pub mod subscription;

pub use config::WebhookConfig;
