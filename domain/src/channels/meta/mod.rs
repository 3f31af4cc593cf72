//! Meta's channels on the Graph API: WhatsApp Cloud (`whatsapp`) and Messenger and Instagram (`messenger`).
//! Both send with the channel's access token as a Bearer to `{FRONTDESK_GRAPH_BASE_URL}/{version}/...`
//! (`graph`), and Meta calls the channel's hook the same way for both (`hook`): a `GET` that checks the URL
//! with the channel's verify token, then `POST`s signed with `X-Hub-Signature-256`, each a batch of entries
//! that may hold many messages, delivery reports and reactions.

mod graph;
mod hook;
pub mod messenger;
pub mod whatsapp;

#[cfg(test)]
mod test_graph;

pub use graph::GraphApi;
pub use messenger::MessengerAdapter;
pub use whatsapp::WhatsAppAdapter;

use super::ParseError;

/// What stands in for a message that carries no text: `[sticker]`, `[location]`, `[image]`.
fn placeholder(kind: &str) -> String {
    format!("[{kind}]")
}

/// A payload that is not the JSON Meta sends. The reason never quotes the body (serde's messages may).
fn unreadable(error: &serde_json::Error) -> ParseError {
    ParseError::InvalidField {
        field: "body".to_owned(),
        reason: if error.is_data() {
            "not a Meta webhook payload: a required field is missing or of the wrong type"
        } else {
            "not JSON"
        },
    }
}

/// The setting `key` of a channel's config, required and not empty.
fn required<'a>(
    config: &'a std::collections::BTreeMap<String, String>,
    key: &'static str,
) -> Result<&'a str, super::ConfigError> {
    config
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or(super::ConfigError::Missing(key))
}
