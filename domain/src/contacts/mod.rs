//! Contacts (section `contacts`): the customers an account talks to, each unique on the account by phone, by
//! e-mail and by each channel identity. The service answers `/v1/contacts`; the store is also how the
//! conversation engine finds or creates the contact of a message, inside its own transaction.

pub mod address;
pub mod fields;
pub mod identity;
pub mod message;
mod search;
pub mod service;
pub mod store;

pub use address::{E164Phone, Email};
pub use identity::{IdentityKind, NewIdentity};
pub use message::contact_message;
