//! SeaORM entities, one module per table.

pub mod accounts;
pub mod agent_faqs;
pub mod agent_kb_sources;
pub mod agents;
pub mod api_keys;
pub mod broadcasts;
pub mod campaigns;
pub mod channel_defaults;
pub mod channels;
pub mod credit_ledger;
pub mod custom_functions;
pub mod deals;
pub mod entry_points;
pub mod event_outbox;
pub mod kb_groups;
pub mod kb_sources;
pub mod mcp_servers;
pub mod orders;
pub mod pipelines;
pub mod settings;
pub mod stages;
pub mod subscribers;
pub mod webhook_attempts;
pub mod webhook_deliveries;
pub mod webhooks;
