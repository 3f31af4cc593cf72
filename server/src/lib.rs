//! The Front Desk server: the gRPC services over the layers below, configuration, the wiring of one process,
//! and the operator's command line. Only this crate's binary (`main.rs`) uses the HTTP edge.

// The rooms of the layers below that this layer's rooms use, named here once so that every room
// reaches them as `crate::ROOM`, as it reaches its own layer's.
use frontdesk_ai::{ai, housekeeping, kb_groups, summaries};
use frontdesk_domain::{
    access, admin, agents, broadcasts, campaigns, channels, contacts, conversations, credits, deals, hooks, knowledge,
    messaging, onboarding, routing, site, tasks, webchat, webhooks,
};
use frontdesk_kernel::{accounts, clock, error, events, ids, integrations, jobs, knobs, plan, retry, secrets, store};

pub mod admin_cli;
pub mod app;
pub mod config;
pub mod grpc;
#[cfg(test)]
mod lints;
