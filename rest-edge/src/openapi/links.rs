//! OpenAPI `links`: from an answer that carries a resource (`{"deal": {"id": ...}}`, or the first of a list,
//! `{"deals": [{"id": ...}]}`) to every operation whose one path variable names that resource (`deal_id`),
//! so that a client generator or a stateful fuzzer can follow a create or a list to the read, update and
//! delete of what it returned.

use std::collections::BTreeMap;

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use crate::bindings::{Binding, Naming};

/// An operation reached by one path variable.
pub struct Target {
    pub operation_id: String,
    pub variable: String,
}

/// Targets by the name of their path variable.
pub fn targets<'a>(operations: impl Iterator<Item = (&'a Binding, &'a str)>) -> BTreeMap<String, Vec<Target>> {
    let mut targets: BTreeMap<String, Vec<Target>> = BTreeMap::new();
    for (binding, operation_id) in operations {
        if let [variable] = binding.template.variables.as_slice() {
            let variable = variable.field_path.join(".");
            targets.entry(variable.clone()).or_default().push(Target {
                operation_id: operation_id.to_owned(),
                variable,
            });
        }
    }
    targets
}

/// The links of one operation's success answer.
pub fn links(binding: &Binding, operation_id: &str, targets: &BTreeMap<String, Vec<Target>>) -> Map<String, Value> {
    let mut links = Map::new();
    for (pointer, names) in resources(&binding.method.output(), binding.naming) {
        for name in names {
            for target in targets.get(&format!("{name}_id")).into_iter().flatten() {
                if target.operation_id == operation_id {
                    continue;
                }
                links.insert(
                    super::names::pascal(&target.operation_id),
                    json!({
                        "operationId": target.operation_id,
                        "parameters": {target.variable.clone(): format!("$response.body#{pointer}")},
                    }),
                );
            }
        }
    }
    links
}

/// The JSON pointers of the ids an answer carries, each with the names its resource goes by: the message's
/// (`entry_point`) and the field's, made singular (`deals` -> `deal`).
fn resources(output: &MessageDescriptor, naming: Naming) -> Vec<(String, Vec<String>)> {
    output
        .fields()
        .filter_map(|field| {
            let Kind::Message(resource) = field.kind() else {
                return None;
            };
            let id = resource
                .get_field_by_name("id")
                .filter(|id| id.kind() == Kind::String)?;
            if field.is_map() {
                return None;
            }
            let at = naming.field_name(&field);
            let pointer = if field.is_list() {
                format!("/{at}/0/{}", naming.field_name(&id))
            } else {
                format!("/{at}/{}", naming.field_name(&id))
            };
            let field_name = field.name();
            let singular = if field.is_list() {
                field_name.strip_suffix('s').unwrap_or(field_name)
            } else {
                field_name
            };
            let mut names = vec![snake(resource.name())];
            if !names.iter().any(|n| n == singular) {
                names.push(singular.to_owned());
            }
            Some((pointer, names))
        })
        .collect()
}

/// `EntryPoint` -> `entry_point`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn message_names_become_variable_names() {
        assert_eq!(super::snake("EntryPoint"), "entry_point");
        assert_eq!(super::snake("Deal"), "deal");
    }
}
