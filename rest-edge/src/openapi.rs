//! The OpenAPI 3.1 document, generated from the same descriptors and bindings as the routes, so it cannot
//! drift from them: one operation per binding, parameters from the path template and (for body-less rules)
//! the query string, schemas from the messages in the surface's JSON naming, descriptions from the proto
//! comments, and the error responses of the API.

use std::collections::{BTreeMap, HashMap, HashSet};

use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use crate::bindings::{Binding, BodyRule, Naming, resolve_field_path};

/// Version of the document's API description.
const API_VERSION: &str = "0.1.0";
const ERROR_SCHEMA: &str = "#/components/schemas/Error";

pub fn document(pool: &DescriptorPool, bindings: &[Binding]) -> Value {
    let comments = Comments::new(pool);
    let mut schemas = Schemas {
        comments: &comments,
        done: BTreeMap::new(),
        responses: response_messages(bindings),
    };
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut tags = BTreeMap::new();
    let mut operation_ids: HashMap<String, usize> = HashMap::new();
    for binding in bindings {
        let service = binding.method.parent_service();
        tags.insert(
            service.name().to_owned(),
            comments.of(service.parent_file().name(), service.path()),
        );
        let mut operation = operation(binding, &mut schemas, &comments);
        // An additional binding of a method gets an operation id of its own (`..._2`): ids must be unique.
        let id = operation["operationId"].as_str().unwrap_or_default().to_owned();
        let uses = operation_ids.entry(id.clone()).or_insert(0);
        *uses += 1;
        if *uses > 1 {
            operation["operationId"] = json!(format!("{id}_{uses}"));
        }
        paths
            .entry(binding.template.openapi_path())
            .or_default()
            .insert(binding.http_method.as_str().to_ascii_lowercase(), operation);
    }
    let mut all_schemas: Map<String, Value> = schemas.done.into_iter().collect();
    all_schemas.insert("Error".to_owned(), error_schema());
    json!({
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
        "components": {"schemas": all_schemas},
    })
}

fn operation(binding: &Binding, schemas: &mut Schemas<'_>, comments: &Comments) -> Value {
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
            let mut schema = schemas.field(&field, binding.naming);
            if field.is_list() {
                schema = json!({"type": "array", "items": schema["items"].clone()});
            }
            let mut parameter = json!({
                "name": binding.naming.field_name(&field),
                "in": "query",
                "required": false,
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
    let mut operation = json!({
        "operationId": format!("{}_{}", method.parent_service().name(), method.name()),
        "tags": [method.parent_service().name()],
        "parameters": parameters,
        "responses": responses(binding, schemas),
    });
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
    operation
}

/// The parts of an upload: a file field is a binary part, every other field a text part.
fn upload_schema(binding: &Binding, schemas: &mut Schemas<'_>, comments: &Comments) -> Value {
    let mut properties = Map::new();
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
        properties.insert(binding.naming.field_name(&field).to_owned(), schema);
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn responses(binding: &Binding, schemas: &mut Schemas<'_>) -> Value {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": ERROR_SCHEMA}}},
        })
    };
    let mut responses = Map::new();
    let output = binding.method.output();
    let success = if output.full_name() == "google.api.HttpBody" {
        json!({
            "description": "Success: the document itself, in the content type the operation names.",
            "content": {"*/*": {"schema": {"type": "string"}}},
        })
    } else {
        json!({
            "description": if binding.success_status == http::StatusCode::ACCEPTED { "Accepted." } else { "Success." },
            "content": {"application/json": {"schema": schemas.message_ref(&output, binding.naming)}},
        })
    };
    responses.insert(binding.success_status.as_str().to_owned(), success);
    responses.insert(
        "400".to_owned(),
        error("Invalid request: `invalid_argument` with `fields`, or a domain reason."),
    );
    if binding.naming == Naming::Snake {
        responses.insert(
            "401".to_owned(),
            error("Missing or invalid API key (`unauthenticated`)."),
        );
        responses.insert("403".to_owned(), error("Access, webhooks or scope not granted."));
        responses.insert("404".to_owned(), error("No such resource (`not_found`)."));
        responses.insert(
            "429".to_owned(),
            error("Rate limit reached (`rate_limited`); see `Retry-After`."),
        );
    }
    if crate::multipart::is_upload(binding) {
        responses.insert(
            "413".to_owned(),
            error("File larger than FRONTDESK_MAX_UPLOAD_MB, default 20 MB (`payload_too_large`)."),
        );
    } else if !matches!(binding.body, BodyRule::None) {
        responses.insert(
            "413".to_owned(),
            error("Request body larger than 1 MiB (`payload_too_large`)."),
        );
    }
    responses.insert(
        "500".to_owned(),
        error("Server error (`internal`, `payment_provider_error`)."),
    );
    let output = schemas.message_ref(&binding.method.output(), binding.naming);
    responses.insert(
        "503".to_owned(),
        json!({
            "description": "Unavailable: the error body, or for health the degraded status.",
            "content": {"application/json": {"schema": {"anyOf": [{"$ref": ERROR_SCHEMA}, output]}}},
        }),
    );
    Value::Object(responses)
}

fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "The error body of every failed call.",
        "required": ["success", "error"],
        "properties": {
            "success": {"type": "boolean", "const": false},
            "error": {
                "type": "object",
                "required": ["code", "message", "request_id"],
                "properties": {
                    "code": {"type": "string", "description": "Stable snake_case reason, e.g. `invalid_argument`."},
                    "message": {"type": "string"},
                    "fields": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["field", "message"],
                            "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                        },
                    },
                    "request_id": {"type": "string"},
                },
            },
        },
    })
}

/// Messages that appear in responses: their fields are always present, so the schema marks them required.
fn response_messages(bindings: &[Binding]) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut pending: Vec<MessageDescriptor> = bindings.iter().map(|b| b.method.output()).collect();
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

struct Schemas<'a> {
    comments: &'a Comments,
    done: BTreeMap<String, Value>,
    responses: HashSet<String>,
}

impl Schemas<'_> {
    /// A `$ref` to the message's schema, generating it (and what it uses) on first sight.
    fn message_ref(&mut self, message: &MessageDescriptor, naming: Naming) -> Value {
        let name = message.full_name().to_owned();
        if !self.done.contains_key(&name) {
            self.done.insert(name.clone(), Value::Null); // placeholder: recursive types terminate
            let mut properties = Map::new();
            for field in message.fields() {
                let mut schema = self.field(&field, naming);
                if let Some(description) = field_description(self.comments, &field).as_str() {
                    schema = with_description(schema, description);
                }
                properties.insert(naming.field_name(&field).to_owned(), schema);
            }
            let mut schema = json!({"type": "object", "properties": properties, "additionalProperties": false});
            if self.responses.contains(&name) {
                schema["required"] = message.fields().map(|f| json!(naming.field_name(&f))).collect();
            }
            if let Some(description) = self.comments.of(message.parent_file().name(), message.path()) {
                schema["description"] = json!(description);
            }
            self.done.insert(name.clone(), schema);
        }
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    fn field(&mut self, field: &FieldDescriptor, naming: Naming) -> Value {
        if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return json!({"type": "object"});
            };
            let value = entry.map_entry_value_field();
            return json!({"type": "object", "additionalProperties": self.kind(&value.kind(), naming)});
        }
        let schema = self.kind(&field.kind(), naming);
        if field.is_list() {
            json!({"type": "array", "items": schema})
        } else if field.supports_presence() {
            // Optional scalars and unset messages are written as JSON null.
            json!({"anyOf": [schema, {"type": "null"}]})
        } else {
            schema
        }
    }

    fn kind(&mut self, kind: &Kind, naming: Naming) -> Value {
        match kind {
            Kind::String => json!({"type": "string"}),
            Kind::Bool => json!({"type": "boolean"}),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => json!({"type": "integer", "format": "int32"}),
            Kind::Uint32 | Kind::Fixed32 => json!({"type": "integer", "format": "int64", "minimum": 0}),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => json!({"type": "integer", "format": "int64"}),
            Kind::Uint64 | Kind::Fixed64 => json!({"type": "integer", "minimum": 0}),
            Kind::Float | Kind::Double => json!({"type": "number"}),
            Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
            Kind::Enum(e) => {
                json!({"type": "string", "enum": e.values().map(|v| v.name().to_owned()).collect::<Vec<_>>()})
            }
            Kind::Message(m) => match m.full_name() {
                "google.protobuf.Timestamp" => json!({"type": "string", "format": "date-time"}),
                "google.protobuf.Duration" | "google.protobuf.FieldMask" => json!({"type": "string"}),
                "google.protobuf.Struct" => json!({"type": "object"}),
                "google.protobuf.Value" => json!({}),
                "google.protobuf.ListValue" => json!({"type": "array"}),
                "google.protobuf.Empty" => json!({"type": "object", "additionalProperties": false}),
                "google.protobuf.StringValue" => json!({"type": ["string", "null"]}),
                "google.protobuf.BoolValue" => json!({"type": ["boolean", "null"]}),
                "google.protobuf.DoubleValue" | "google.protobuf.FloatValue" => json!({"type": ["number", "null"]}),
                "google.protobuf.Int32Value"
                | "google.protobuf.Int64Value"
                | "google.protobuf.UInt32Value"
                | "google.protobuf.UInt64Value" => json!({"type": ["integer", "null"]}),
                _ => self.message_ref(m, naming),
            },
        }
    }
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
