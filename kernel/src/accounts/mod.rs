//! Accounts: who calls the platform API, on which plan, with which features, credits and rate limit.
//! Operators manage them through the admin gRPC service.

pub mod credits;
pub mod holds;
pub mod store;

/// Requests per minute when the operator does not say.
pub const DEFAULT_RATE_LIMIT: u32 = 600;
