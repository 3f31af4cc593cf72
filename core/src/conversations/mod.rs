//! Conversations and their messages: the rows, the outbound status machine, opening a contact's
//! conversation on a channel, storing what arrives, and closing idle conversations.

pub mod render;
pub mod status;
pub mod threads;
