//! Platform access: API keys (stored hashed, verified from memory), how a request presents one, scopes,
//! per-account rate limits, and the guard that turns a request's credentials into a `Caller` before any platform handler runs.

pub mod api_key;
pub mod caller;
pub mod credentials;
pub mod guard;
pub mod key_store;
pub mod rate_limit;
pub mod scopes;
pub mod service;
pub mod stamps;
pub mod verified_keys;

pub use crate::tenant::AccountId;
