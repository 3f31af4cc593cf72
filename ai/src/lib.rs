//! The Front Desk AI layer: the agents' replies and follow-ups, the model providers and their wire, agents'
//! tools, knowledge gaps and evaluations, recaps and the daily summary, and the recurring housekeeping that
//! closes idle conversations.

// The rooms of the layers below that this layer's rooms use, named here once so that every room
// reaches them as `crate::ROOM`, as it reaches its own layer's.
use frontdesk_domain::{
    access, agents, broadcasts, campaigns, contacts, conversations, deals, knowledge, messaging, platform_calls, tasks,
};
use frontdesk_kernel::{
    accounts, clock, env_values, error, events, ids, integrations, jobs, paging, resource_id, retry, secrets, store,
    timestamps, validate,
};

#[cfg(fuzzing)]
pub mod fuzzing;
pub mod kb_groups;
pub mod replies;
pub mod summaries;
pub mod sweeps;
