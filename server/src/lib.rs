//! The Front Desk server: the gRPC services over the layers below, configuration, the wiring of one process,
//! and the operator's command line. Only this crate's binary (`main.rs`) uses the HTTP edge.

// The rooms of the layers below that this layer's rooms use, named here once so that every room
// reaches them as `crate::ROOM`, as it reaches its own layer's.
use frontdesk_ai::{kb_groups, replies, summaries, sweeps};
use frontdesk_domain::{
    access, agents, broadcasts, campaigns, channels, contacts, conversations, credit_ledger, deals, knowledge,
    messaging, onboarding, operator_api, provider_callbacks, routing, site, tasks, webchat, webhooks,
};
use frontdesk_kernel::{
    accounts, clock, env_values, error, events, ids, integrations, jobs, plan, retry, secrets, store,
};

pub mod app;
pub mod config;
pub mod grpc;
#[cfg(test)]
mod lints;
pub mod operator_cli;
