//! The Front Desk domain: access (keys, the guard, rate limits), the resources of the published API (contacts,
//! deals, knowledge, tasks, webhooks, agents, routing), the conversation engine, channels and their providers,
//! sends and broadcasts, and web chat. No model is asked here: the AI layer above answers.

// The rooms of the layers below that this layer's rooms use, named here once so that every room
// reaches them as `crate::ROOM`, as it reaches its own layer's.
use frontdesk_kernel::{
    accounts, clock, env_values, error, events, forwarded_answers, ids, integrations, jobs, paging, plan, resource_id,
    retry, secrets, shutdown, store, telemetry, tenant, timestamps, validate,
};

pub mod access;
pub mod agents;
pub mod broadcasts;
pub mod campaigns;
pub mod channels;
pub mod contacts;
pub mod conversations;
pub mod credit_ledger;
pub mod deals;
pub mod knowledge;
pub mod messaging;
pub mod onboarding;
pub mod operator_api;
pub mod platform_calls;
pub mod provider_callbacks;
pub mod routing;
pub mod site;
pub mod tasks;
pub mod webchat;
pub mod webhooks;
