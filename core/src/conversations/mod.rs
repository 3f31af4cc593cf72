//! Conversations and their messages: the rows, the outbound status machine, opening a contact's
//! conversation on a channel, storing what arrives, and closing idle conversations.

pub mod idle;
pub mod inbound;
pub mod lookup;
pub mod new_message;
pub mod receipts;
pub mod render;
pub mod status;
pub mod threads;
