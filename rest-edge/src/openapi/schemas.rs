//! JSON Schemas of the messages, in the surface's naming, with what the service enforces on each field
//! (`frontdesk.v1.rules`): lengths, patterns, closed sets of values, ranges, formats and required fields.

use std::collections::{BTreeMap, HashSet};

use frontdesk_api::v1::FieldRules;
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use super::{
    Comments,
    names::{self, SchemaNames},
    options,
};
use crate::bindings::Naming;

pub struct Schemas<'a> {
    pub comments: &'a Comments,
    pub names: &'a SchemaNames,
    pub done: BTreeMap<String, Value>,
    /// Messages that appear in answers: their fields are always present, so the schema marks them required.
    pub responses: HashSet<String>,
    /// Messages that appear in requests: JSON null stands for an unset field there, so a field that is not
    /// required may be null.
    pub requests: HashSet<String>,
}

impl Schemas<'_> {
    pub fn reference(&self, message: &MessageDescriptor) -> Value {
        json!({"$ref": format!("#/components/schemas/{}", self.names.of(message))})
    }

    /// A `$ref` to the message's schema, generating it (and what it uses) on first sight.
    pub fn message_ref(&mut self, message: &MessageDescriptor, naming: Naming) -> Value {
        let name = self.names.of(message);
        if !self.done.contains_key(&name) {
            self.done.insert(name.clone(), Value::Null); // placeholder: recursive types terminate
            let mut properties = Map::new();
            let mut required = Vec::new();
            let in_answers = self.responses.contains(message.full_name());
            let in_requests = self.requests.contains(message.full_name());
            for field in message.fields().filter(|f| !crate::request::is_update_mask(f)) {
                let rules = options::rules(&field);
                let mut schema = self.field(&field, naming);
                // Optional scalars and unset messages are written as JSON null, and a request may send null
                // for anything it does not have to send.
                if !rules.required && (in_requests || (field.supports_presence() && !field.is_list())) {
                    schema = nullable(schema);
                }
                if let Some(description) = super::field_description(self.comments, &field).as_str() {
                    schema = super::with_description(schema, description);
                }
                let field_name = naming.field_name(&field).to_owned();
                if in_answers || rules.required {
                    required.push(json!(field_name));
                }
                properties.insert(field_name, schema);
            }
            let mut schema = json!({"type": "object", "properties": properties, "additionalProperties": false});
            if !required.is_empty() {
                schema["required"] = Value::Array(required);
            }
            if let Some(description) = self.comments.of(message.parent_file().name(), message.path()) {
                schema["description"] = json!(description);
            }
            self.done.insert(name, schema);
        }
        self.reference(message)
    }

    /// The field's schema with its rules, never null (a message's schema adds null where it may be).
    pub fn field(&mut self, field: &FieldDescriptor, naming: Naming) -> Value {
        let rules = options::rules(field);
        if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return json!({"type": "object"});
            };
            let value = entry.map_entry_value_field();
            let mut schema = json!({"type": "object", "additionalProperties": self.kind(&value.kind(), naming)});
            if let Some(max) = rules.max_items {
                schema["maxProperties"] = json!(max);
            }
            return schema;
        }
        let mut schema = self.kind(&field.kind(), naming);
        constrain(&mut schema, &rules);
        if schema.get("enum").is_some() {
            schema = self.named_values(field, schema);
        }
        if field.is_list() {
            let mut list = json!({"type": "array", "items": schema});
            if let Some(max) = rules.max_items {
                list["maxItems"] = json!(max);
            }
            if rules.required {
                list["minItems"] = json!(1);
            }
            list
        } else {
            schema
        }
    }

    /// A closed set of values as a schema of its own, named after its message and field
    /// (`CreateAgentRequestAiTier`), so that a client generator makes one enum type of a name a person would
    /// write; inline where that name is taken.
    fn named_values(&mut self, field: &FieldDescriptor, schema: Value) -> Value {
        let name = format!(
            "{}{}",
            self.names.of(field.parent_message()),
            names::pascal(field.name())
        );
        match self.done.get(&name) {
            Some(existing) if *existing != schema => schema,
            Some(_) => json!({"$ref": format!("#/components/schemas/{name}")}),
            None if self.names.is_taken(&name) => schema,
            None => {
                self.done.insert(name.clone(), schema);
                json!({"$ref": format!("#/components/schemas/{name}")})
            }
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

/// The schema, or null: `"type": [T, "null"]` where the schema has a type (a client generator then makes an
/// optional value rather than a union), else `anyOf` with null.
fn nullable(mut schema: Value) -> Value {
    match schema.get("type").cloned() {
        Some(Value::String(kind)) => {
            schema["type"] = json!([kind, "null"]);
            if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut) {
                values.push(Value::Null);
            }
            schema
        }
        Some(_) => schema,
        None if schema["anyOf"]
            .as_array()
            .is_some_and(|v| v.iter().any(|s| s["type"] == "null")) =>
        {
            schema
        }
        None => json!({"anyOf": [schema, {"type": "null"}]}),
    }
}

/// A scalar's schema narrowed by its rules.
fn constrain(schema: &mut Value, rules: &FieldRules) {
    if schema.get("$ref").is_some() {
        return;
    }
    if let Some(max) = rules.max_length {
        schema["maxLength"] = json!(max);
    }
    if let Some(min) = rules.min_length {
        schema["minLength"] = json!(min);
    } else if rules.required && schema["type"] == "string" {
        schema["minLength"] = json!(1);
    }
    if !rules.pattern.is_empty() {
        schema["pattern"] = json!(rules.pattern);
    }
    if !rules.values.is_empty() {
        schema["enum"] = json!(rules.values);
    }
    if let Some(min) = rules.minimum {
        schema["minimum"] = number(min);
    }
    if let Some(max) = rules.maximum {
        schema["maximum"] = number(max);
    }
    if !rules.format.is_empty() {
        schema["format"] = json!(rules.format);
    }
}

/// A whole bound as an integer, so that an integer field's schema stays an integer's.
fn number(bound: f64) -> Value {
    if bound.fract() == 0.0 && bound.abs() < 9.0e15 {
        json!(bound as i64)
    } else {
        json!(bound)
    }
}
