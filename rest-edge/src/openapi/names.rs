//! The names a client generator turns into classes and functions: a schema is named after its message
//! (`Deal`, `CreateDealRequest`) and an operation after its method (`createDeal`), as a person would write
//! them. Where two messages of different packages share a name, both take their package as a prefix
//! (`WebchatV1Message`), so every name is unique and does not depend on the order of anything.

use std::collections::HashMap;

use prost_reflect::{DescriptorPool, MessageDescriptor};

use crate::bindings::Binding;

/// The schema of the API's error body, named beside the messages' schemas.
pub const ERROR_SCHEMA_NAME: &str = "ErrorResponse";
/// The schemas of the error body's parts.
pub const ERROR_DETAIL_NAME: &str = "ErrorDetail";
pub const FIELD_VIOLATION_NAME: &str = "FieldViolation";
/// Names of schemas that are not messages'.
const RESERVED: [&str; 3] = [ERROR_SCHEMA_NAME, ERROR_DETAIL_NAME, FIELD_VIOLATION_NAME];

/// Schema names of every message of the pool.
pub struct SchemaNames(HashMap<String, String>);

impl SchemaNames {
    pub fn new(pool: &DescriptorPool) -> Self {
        let mut uses: HashMap<&str, usize> = HashMap::new();
        let messages: Vec<MessageDescriptor> = pool.all_messages().filter(|m| !m.is_map_entry()).collect();
        for message in &messages {
            *uses.entry(message.name()).or_default() += 1;
        }
        // The error body's names are taken: a message of such a name is qualified as if it collided.
        for name in RESERVED {
            *uses.entry(name).or_default() += 1;
        }
        let names = messages
            .iter()
            .map(|message| {
                let name = if uses[message.name()] > 1 {
                    qualified(message)
                } else {
                    message.name().to_owned()
                };
                (message.full_name().to_owned(), name)
            })
            .collect();
        Self(names)
    }

    /// Whether a message's schema has this name.
    pub fn is_taken(&self, name: &str) -> bool {
        RESERVED.contains(&name) || self.0.values().any(|taken| taken == name)
    }

    pub fn of(&self, message: &MessageDescriptor) -> String {
        self.0
            .get(message.full_name())
            .cloned()
            .unwrap_or_else(|| message.full_name().to_owned())
    }
}

/// `frontdesk.webchat.v1.Message` -> `WebchatV1Message`; a nested message keeps its parents' names.
fn qualified(message: &MessageDescriptor) -> String {
    let package = message.package_name();
    let package = package.strip_prefix("frontdesk.").unwrap_or(package);
    let mut name: String = package.split('.').map(pascal).collect();
    let nested = message
        .full_name()
        .strip_prefix(message.package_name())
        .unwrap_or_default();
    name.extend(nested.split('.').map(pascal));
    name
}

/// `kb_group` -> `KbGroup`; `getDeal` -> `GetDeal`.
pub fn pascal(part: &str) -> String {
    part.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        })
        .collect()
}

/// `ListDeals` -> `listDeals`. A method's additional binding adds what it is reached through: the route
/// `/v1/agents/{agent_id}/entry-points` of `ListEntryPoints` is `listEntryPointsOfAgent`.
pub fn operation_id(binding: &Binding, additional: bool) -> String {
    let method = binding.method.name();
    let mut id = lower_first(method);
    if additional && let Some(owner) = owner_of(&binding.template.openapi_path()) {
        id.push_str("Of");
        id.push_str(&pascal(&owner));
    }
    id
}

fn lower_first(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map_or_else(String::new, |first| first.to_lowercase().chain(chars).collect())
}

/// The resource that owns a route: the collection segment before its first variable, made singular
/// (`/v1/agents/{agent_id}/...` -> `agent`).
fn owner_of(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    let first_variable = segments.iter().position(|s| s.starts_with('{'))?;
    let collection = segments.get(first_variable.checked_sub(1)?)?;
    let singular = collection.strip_suffix('s').unwrap_or(collection);
    Some(singular.replace('-', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_pascal_and_ids_lower_camel() {
        assert_eq!(pascal("webchat"), "Webchat");
        assert_eq!(pascal("kb_group"), "KbGroup");
        assert_eq!(pascal("getDeal"), "GetDeal");
        assert_eq!(lower_first("ListDeals"), "listDeals");
        assert_eq!(owner_of("/v1/agents/{agent_id}/entry-points"), Some("agent".to_owned()));
        assert_eq!(owner_of("/v1/kb-sources/{source_id}"), Some("kb_source".to_owned()));
        assert_eq!(owner_of("/v1/deals"), None);
    }

    #[test]
    fn every_message_of_the_api_has_a_name_of_its_own() {
        let pool = DescriptorPool::decode(frontdesk_api::FILE_DESCRIPTOR_SET).unwrap();
        let names = SchemaNames::new(&pool);
        let mut seen = HashMap::new();
        for message in pool.all_messages().filter(|m| !m.is_map_entry()) {
            let name = names.of(&message);
            assert!(!RESERVED.contains(&name.as_str()), "{name}");
            if let Some(other) = seen.insert(name.clone(), message.full_name().to_owned()) {
                panic!("{name} names both {other} and {}", message.full_name());
            }
        }
        let deal = pool.get_message_by_name("frontdesk.v1.Deal").unwrap();
        assert_eq!(names.of(&deal), "Deal");
    }
}
