//! Outside services, each behind a small trait so tests reach them through their real wire protocol against a
//! local server, with the base URL configurable.

pub mod http;
pub mod outbound;
pub mod payments;
