//! The OpenAPI 3.1 document, generated from the same descriptors and bindings as the routes, so it cannot
//! drift from them: one operation per binding, parameters from the path template and (for body-less rules)
//! the query string, schemas from the messages in the surface's JSON naming, descriptions from the proto
//! comments and what the service enforces on each field (`frontdesk.v1.rules`), names a client generator
//! can use (`names`), the errors each operation answers (`responses`), and links from an answer to what
//! can be done next with the resource it carries (`links`).

mod links;
mod names;
mod options;
mod responses;
mod schemas;

use std::collections::{BTreeMap, HashMap, HashSet};

use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use crate::bindings::{Binding, BodyRule, resolve_field_path};
use names::SchemaNames;
use schemas::Schemas;

/// Version of the document's API description.
const API_VERSION: &str = "0.1.0";

/// The document; an error names an option that does not hold (an unknown reason, a status that is not the
/// reason's), so a bad annotation stops start-up.
pub fn document(pool: &DescriptorPool, bindings: &[Binding]) -> Result<Value, String> {
    let comments = Comments::new(pool);
    let names = SchemaNames::new(pool);
    let mut schemas = Schemas {
        comments: &comments,
        names: &names,
        done: BTreeMap::new(),
        responses: reachable(bindings.iter().map(|b| b.method.output())),
        requests: reachable(bindings.iter().map(Binding::input)),
    };
    let ids = operation_ids(bindings);
    let targets = links::targets(bindings.iter().zip(ids.iter().map(String::as_str)));
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut tags = BTreeMap::new();
    for (binding, id) in bindings.iter().zip(&ids) {
        let service = binding.method.parent_service();
        tags.insert(
            service.name().to_owned(),
            comments.of(service.parent_file().name(), service.path()),
        );
        let mut operation = operation(binding, id, &mut schemas, &comments)?;
        let links = links::links(binding, id, &targets);
        if !links.is_empty() {
            operation["responses"][binding.success_status.as_str()]["links"] = Value::Object(links);
        }
        paths
            .entry(binding.template.openapi_path())
            .or_default()
            .insert(binding.http_method.as_str().to_ascii_lowercase(), operation);
    }
    let mut all_schemas: Map<String, Value> = schemas.done.into_iter().collect();
    for (name, schema) in responses::error_schemas() {
        all_schemas.insert(name.to_owned(), schema);
    }
    Ok(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Front Desk API",
            "version": API_VERSION,
            "description": "Site API (health, subscription payments; lowerCamelCase JSON) and platform API v1 \
                (under /v1; snake_case JSON, API key required). Every error has the body \
                {\"success\": false, \"error\": {code, message, fields?, request_id}}.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": tags.into_iter().map(|(name, description)| {
            let mut tag = json!({"name": name});
            if let Some(description) = description {
                tag["description"] = json!(description);
            }
            tag
        }).collect::<Vec<_>>(),
        "paths": paths,
        "components": {
            "schemas": all_schemas,
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "An API key."},
                "bearer": {"type": "http", "scheme": "bearer", "description": "An API key as a bearer token."},
            },
        },
    }))
}

/// Each binding's operation id; a method's additional bindings (listed before its main one) name the
/// resource they are reached through.
fn operation_ids(bindings: &[Binding]) -> Vec<String> {
    let mut mains = HashSet::new();
    let mut ids: Vec<String> = bindings
        .iter()
        .rev()
        .map(|binding| {
            let additional = !mains.insert(binding.method.full_name().to_owned());
            names::operation_id(binding, additional)
        })
        .collect();
    ids.reverse();
    ids
}

fn operation(binding: &Binding, id: &str, schemas: &mut Schemas<'_>, comments: &Comments) -> Result<Value, String> {
    let method = &binding.method;
    let input = method.input();
    let mut parameters = Vec::new();
    let mut path_fields = HashSet::new();
    for variable in &binding.template.variables {
        if let Some(field) = resolve_field_path(&input, &variable.field_path) {
            path_fields.insert(field.full_name().to_owned());
            let mut parameter = json!({
                "name": variable.field_path.join("."),
                "in": "path",
                "required": true,
                "schema": schemas.field(&field, binding.naming),
            });
            if let Some(description) = field_description(comments, &field).as_str() {
                parameter["description"] = json!(description);
            }
            parameters.push(parameter);
        }
    }
    if matches!(binding.body, BodyRule::None | BodyRule::Field(_)) {
        let body_field = match &binding.body {
            BodyRule::Field(field) => Some(field.full_name().to_owned()),
            _ => None,
        };
        for field in input.fields() {
            if path_fields.contains(field.full_name()) || body_field.as_deref() == Some(field.full_name()) {
                continue;
            }
            let schema = schemas.field(&field, binding.naming);
            let mut parameter = json!({
                "name": binding.naming.field_name(&field),
                "in": "query",
                "required": options::rules(&field).required,
                "schema": schema,
            });
            if let Some(description) = field_description(comments, &field).as_str() {
                parameter["description"] = json!(description);
            }
            if field.is_list() {
                parameter["explode"] = json!(true);
            }
            parameters.push(parameter);
        }
    }
    let service = method.parent_service();
    let deprecated = service
        .service_descriptor_proto()
        .options
        .as_ref()
        .and_then(|o| o.deprecated)
        == Some(true)
        || method
            .method_descriptor_proto()
            .options
            .as_ref()
            .and_then(|o| o.deprecated)
            == Some(true);
    let own_errors = options::errors(method)?;
    let media_types = options::media_types(method);
    if method.output().full_name() == "google.api.HttpBody" && media_types.is_empty() {
        return Err(format!(
            "{}: a document answer names its frontdesk.v1.media_types",
            method.full_name()
        ));
    }
    let mut operation = json!({
        "operationId": id,
        "tags": [service.name()],
        "parameters": parameters,
        "responses": responses::responses(binding, schemas, &own_errors, deprecated, &media_types),
    });
    if binding.naming == crate::bindings::Naming::Snake {
        operation["security"] = json!([{"apiKey": []}, {"bearer": []}]);
    }
    if deprecated {
        operation["deprecated"] = json!(true);
    }
    if let Some(description) = comments.of(method.parent_file().name(), method.path()) {
        let summary = description
            .split(". ")
            .next()
            .unwrap_or(&description)
            .trim_end_matches('.')
            .to_owned();
        operation["summary"] = json!(summary);
        operation["description"] = json!(description);
    }
    let body_schema = match &binding.body {
        BodyRule::None => None,
        BodyRule::Whole => Some(schemas.message_ref(&input, binding.naming)),
        BodyRule::Field(field) => Some(schemas.field(field, binding.naming)),
    };
    if crate::multipart::is_upload(binding) {
        operation["requestBody"] = json!({
            "required": true,
            "content": {"multipart/form-data": {"schema": upload_schema(binding, schemas, comments)}},
        });
    } else if let Some(schema) = body_schema {
        operation["requestBody"] = json!({
            "required": matches!(binding.body, BodyRule::Whole) && input.fields().len() > 0,
            "content": {"application/json": {"schema": schema}},
        });
    }
    Ok(operation)
}

/// The parts of an upload: a file field is a binary part, every other field a text part.
fn upload_schema(binding: &Binding, schemas: &mut Schemas<'_>, comments: &Comments) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in binding.input().fields() {
        let mut schema = match field.kind() {
            Kind::Message(m) if m.full_name() == crate::multipart::FILE_PART => {
                json!({"type": "string", "contentMediaType": "application/octet-stream"})
            }
            _ => schemas.field(&field, binding.naming),
        };
        if let Some(description) = field_description(comments, &field).as_str() {
            schema = with_description(schema, description);
        }
        if options::rules(&field).required {
            required.push(json!(binding.naming.field_name(&field)));
        }
        properties.insert(binding.naming.field_name(&field).to_owned(), schema);
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// The messages and every message they contain.
fn reachable(messages: impl Iterator<Item = MessageDescriptor>) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut pending: Vec<MessageDescriptor> = messages.collect();
    while let Some(message) = pending.pop() {
        if seen.insert(message.full_name().to_owned()) {
            pending.extend(message.fields().filter_map(|f| match f.kind() {
                Kind::Message(m) => Some(m),
                _ => None,
            }));
        }
    }
    seen
}

fn field_description(comments: &Comments, field: &FieldDescriptor) -> Value {
    comments
        .of(field.parent_file().name(), field.path())
        .map_or(Value::Null, Value::String)
}

/// A `$ref` cannot carry siblings in every tool, so a described reference is wrapped in `allOf`.
fn with_description(schema: Value, description: &str) -> Value {
    if schema.get("$ref").is_some() {
        json!({"allOf": [schema], "description": description})
    } else {
        let mut schema = schema;
        schema["description"] = json!(description);
        schema
    }
}

/// Leading comments of every element of every file, by file name and source path.
struct Comments(HashMap<(String, Vec<i32>), String>);

impl Comments {
    fn new(pool: &DescriptorPool) -> Self {
        let mut map = HashMap::new();
        for file in pool.files() {
            let Some(info) = &file.file_descriptor_proto().source_code_info else {
                continue;
            };
            for location in &info.location {
                if let Some(text) = location.leading_comments.as_deref() {
                    let text = text
                        .lines()
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join(" ")
                        .trim()
                        .to_owned();
                    if !text.is_empty() {
                        map.insert((file.name().to_owned(), location.path.clone()), text);
                    }
                }
            }
        }
        Self(map)
    }

    fn of(&self, file: &str, path: &[i32]) -> Option<String> {
        self.0.get(&(file.to_owned(), path.to_vec())).cloned()
    }
}
