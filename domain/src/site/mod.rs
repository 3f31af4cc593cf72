//! The site API (`frontdesk.site.v0`): health check and subscription payments.

pub mod checkout;
pub mod health;
pub mod payments;
pub mod prices;
pub mod signature;

/// Version of the site API contract, reported by the health check.
pub const SITE_API_VERSION: &str = "0.1.0";
