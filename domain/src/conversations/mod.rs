//! Conversations and their messages: the rows, the outbound status machine, opening a contact's
//! conversation on a channel, storing what arrives, and closing idle conversations.

pub mod activity;
pub mod contact_reactions;
mod history;
pub mod idle;
pub mod inbound;
mod list;
pub mod lookup;
pub mod new_message;
pub mod receipts;
pub mod render;
pub mod replies;
pub mod service;
pub mod state;
pub mod status;
pub mod threads;
mod transcript;
