//! Sending: a send request becomes a checked `Outgoing`, is accepted in one transaction (contact, channel,
//! conversation, `queued` message, delivery job, idempotency key) and answered at once; the
//! `deliver_message` job then hands it to the provider, paced per channel. Read receipts and reactions
//! reach the provider through the `provider_signal` job (`signals`).

pub mod accept;
mod channel_choice;
pub mod deliver;
mod edits;
mod emoji;
mod facts;
pub mod idempotency;
pub mod outgoing;
mod recipient;
pub mod service;
pub mod signals;
