//! HTTP request -> request message. The body (when the rule has one), the path variables and the query
//! string are merged into one proto3-JSON object, which is then parsed against the method's input type with
//! unknown fields refused. Every failure names where it is: a line and column for malformed JSON, a field
//! path for a wrong type or an unknown field.

use prost_reflect::{DeserializeOptions, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use crate::{
    bindings::{Binding, BodyRule, Naming},
    error::HttpError,
};

/// Cross-cutting platform parameters that travel as gRPC metadata rather than message fields.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lifted {
    /// Every `apiKey` query parameter (the core refuses two different keys).
    pub api_keys: Vec<String>,
    /// `sub_account_id` from the query string or the body.
    pub sub_account_id: Option<String>,
}

/// Query parameter carrying an API key.
const API_KEY_PARAM: &str = "apiKey";
/// Query parameter or body field naming the sub-account an agency acts on.
pub const SUB_ACCOUNT_PARAM: &str = "sub_account_id";

/// Only the lifted parameters of a query string, for a request that could not be parsed as a whole.
pub fn lift_query(query: Option<&str>) -> Lifted {
    let mut lifted = Lifted::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            API_KEY_PARAM => lifted.api_keys.push(value.into_owned()),
            SUB_ACCOUNT_PARAM => lifted.sub_account_id = Some(value.into_owned()),
            _ => {}
        }
    }
    lifted
}

/// Builds the request message of `binding` from the captured path parameters, query string and body. On the
/// platform surface, `apiKey` and `sub_account_id` are lifted out (see `Lifted`).
pub fn build(
    binding: &Binding,
    path_params: &[(String, String)],
    query: Option<&str>,
    body: &[u8],
) -> Result<(DynamicMessage, Lifted), HttpError> {
    let input = binding.input();
    let platform = binding.naming == Naming::Snake;
    let mut lifted = Lifted::default();
    let mut root = match &binding.body {
        BodyRule::Whole => body_object(body)?,
        BodyRule::Field(field) => {
            let mut root = Map::new();
            if let Some(value) = body_value(body)? {
                root.insert(field.name().to_owned(), value);
            }
            root
        }
        BodyRule::None => {
            match body_value(body)? {
                None => {}
                Some(Value::Object(map)) if map.is_empty() => {}
                Some(_) => return Err(HttpError::invalid_field("body", "this operation takes no request body")),
            }
            Map::new()
        }
    };
    let partial = binding.http_method == http::Method::PATCH || binding.http_method == http::Method::PUT;
    if partial && matches!(binding.body, BodyRule::Whole) {
        fill_update_mask(&input, &mut root)?;
    }
    if platform && let Some(value) = root.remove(SUB_ACCOUNT_PARAM) {
        let Value::String(id) = value else {
            return Err(HttpError::invalid_field(SUB_ACCOUNT_PARAM, "must be a string"));
        };
        lifted.sub_account_id = Some(id);
    }
    for variable in &binding.template.variables {
        let value = path_params
            .iter()
            .find(|(name, _)| *name == variable.param)
            .map(|(_, value)| value.as_str())
            .unwrap_or_default();
        let fields = field_chain(&input, variable.field_path.iter().map(String::as_str))
            .ok_or_else(|| HttpError::invalid("path variable does not match the request type"))?;
        set_path(&mut root, &fields, scalar_json(fields.last(), value), false)
            .map_err(|problem| HttpError::invalid_field(variable.field_path.join("."), problem))?;
    }
    if let Some(query) = query {
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if platform && key == API_KEY_PARAM {
                lifted.api_keys.push(value.into_owned());
                continue;
            }
            if platform && key == SUB_ACCOUNT_PARAM {
                if lifted.sub_account_id.replace(value.into_owned()).is_some() {
                    return Err(HttpError::invalid_field(SUB_ACCOUNT_PARAM, "is given more than once"));
                }
                continue;
            }
            if matches!(binding.body, BodyRule::Whole) {
                return Err(HttpError::invalid_field(key, "unknown query parameter"));
            }
            let fields = field_chain(&input, key.split('.'))
                .filter(|fields| fields.last().is_some_and(is_query_compatible))
                .ok_or_else(|| HttpError::invalid_field(key.as_ref(), "unknown query parameter"))?;
            set_path(&mut root, &fields, scalar_json(fields.last(), &value), true)
                .map_err(|problem| HttpError::invalid_field(key.as_ref(), problem))?;
        }
    }
    if let Some(field) = too_deep(&input, &root) {
        return Err(HttpError::invalid_field(
            field,
            format!("JSON nests deeper than {MAX_DYNAMIC_DEPTH} levels"),
        ));
    }
    if let Some(field) = nul_field(&root) {
        // No database stores U+0000 in text (PostgreSQL refuses it): refuse it here, for every field.
        return Err(HttpError::invalid_field(
            field,
            "must not contain the NUL character (U+0000)",
        ));
    }
    Ok((parse_message(input, Value::Object(root))?, lifted))
}

/// Deepest nesting of JSON objects and arrays accepted in a `google.protobuf.Struct`, `Value` or `ListValue`
/// field (the field's own object is level 1). Each level of an object costs protobuf three levels of
/// nesting (Struct, map entry, Value), and the core's decoder refuses more than 100: 32 levels, with the
/// request's own nesting, stay below that. Refusing them here names the field; the core's refusal cannot.
pub const MAX_DYNAMIC_DEPTH: usize = 32;

/// The dotted path of the first schema-free field (Struct, Value, ListValue) of `message` in `object` whose
/// JSON nests deeper than `MAX_DYNAMIC_DEPTH`, searching nested messages, lists and maps. Unknown keys are
/// skipped: parsing refuses them.
fn too_deep(message: &MessageDescriptor, object: &Map<String, Value>) -> Option<String> {
    object.iter().find_map(|(key, value)| {
        let field = message
            .get_field_by_name(key)
            .or_else(|| message.get_field_by_json_name(key))?;
        let kind = match field.kind() {
            Kind::Message(entry) if field.is_map() => entry.map_entry_value_field().kind(),
            kind => kind,
        };
        let Kind::Message(inner) = kind else {
            return None;
        };
        let schema_free = is_schema_free(&inner);
        let deep = |value: &Value| match value {
            _ if schema_free => (json_depth(value) > MAX_DYNAMIC_DEPTH).then(String::new),
            Value::Object(fields) => too_deep(&inner, fields),
            _ => None,
        };
        let below = match value {
            Value::Array(items) if field.is_list() => items.iter().find_map(deep),
            Value::Object(entries) if field.is_map() => entries.values().find_map(deep),
            _ => deep(value),
        }?;
        Some(if below.is_empty() {
            key.clone()
        } else {
            format!("{key}.{below}")
        })
    })
}

/// Message types that hold any JSON.
fn is_schema_free(message: &MessageDescriptor) -> bool {
    matches!(
        message.full_name(),
        "google.protobuf.Struct" | "google.protobuf.Value" | "google.protobuf.ListValue"
    )
}

/// Levels of objects and arrays in `value` (a scalar is 0). serde_json refuses input nested deeper than 128
/// while parsing, so this recursion is bounded.
fn json_depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The dotted path of the first string (key or value) holding U+0000.
fn nul_field(object: &Map<String, Value>) -> Option<String> {
    fn walk(value: &Value) -> Option<String> {
        match value {
            Value::String(s) if s.contains('\0') => Some(String::new()),
            Value::Array(items) => items.iter().find_map(walk),
            Value::Object(map) => nul_field(map),
            _ => None,
        }
    }
    object.iter().find_map(|(key, value)| {
        if key.contains('\0') {
            return Some("body".to_owned());
        }
        walk(value).map(|rest| {
            if rest.is_empty() {
                key.clone()
            } else {
                format!("{key}.{rest}")
            }
        })
    })
}

/// Field holding the fields a PATCH changes.
const UPDATE_MASK: &str = "update_mask";

/// Whether the field is a request's `google.protobuf.FieldMask update_mask`, which REST fills from the body's
/// keys (the OpenAPI document leaves it out).
pub fn is_update_mask(field: &FieldDescriptor) -> bool {
    field.name() == UPDATE_MASK
        && matches!(field.kind(), Kind::Message(m) if m.full_name() == "google.protobuf.FieldMask")
}

/// For a PATCH or PUT whose request has an `update_mask`, the mask is the body's keys: absent fields stay as they
/// are. Over REST the body's keys are the one way to name what changes, so a body that gives a mask itself is
/// refused (gRPC callers set it).
fn fill_update_mask(input: &MessageDescriptor, root: &mut Map<String, Value>) -> Result<(), HttpError> {
    let Some(mask_field) = input.get_field_by_name(UPDATE_MASK).filter(is_update_mask) else {
        return Ok(());
    };
    if root.contains_key(UPDATE_MASK) || root.contains_key(mask_field.json_name()) {
        return Err(HttpError::invalid_field(
            UPDATE_MASK,
            "is not taken over REST: the fields the body names are the ones that change",
        ));
    }
    let paths: Vec<String> = root
        .keys()
        .filter_map(|key| {
            input
                .get_field_by_name(key)
                .or_else(|| input.get_field_by_json_name(key))
        })
        .map(|field| field.json_name().to_owned())
        .collect();
    root.insert(UPDATE_MASK.to_owned(), Value::String(paths.join(",")));
    Ok(())
}

/// The body as a JSON object; an empty body reads as `{}`.
fn body_object(body: &[u8]) -> Result<Map<String, Value>, HttpError> {
    match body_value(body)? {
        None => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(other) => Err(HttpError::invalid_field(
            "body",
            format!("must be a JSON object, not {}", json_type(&other)),
        )),
    }
}

fn body_value(body: &[u8]) -> Result<Option<Value>, HttpError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| HttpError::invalid_field("body", format!("malformed JSON: {e}")))
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Resolves a dotted path whose segments are proto or JSON field names.
fn field_chain<'a>(message: &MessageDescriptor, path: impl Iterator<Item = &'a str>) -> Option<Vec<FieldDescriptor>> {
    let mut fields: Vec<FieldDescriptor> = Vec::new();
    let mut current = message.clone();
    for name in path {
        if let Some(last) = fields.last() {
            match last.kind() {
                Kind::Message(inner) if !last.is_list() && !last.is_map() => current = inner,
                _ => return None,
            }
        }
        let field = current
            .get_field_by_name(name)
            .or_else(|| current.get_field_by_json_name(name))?;
        fields.push(field);
    }
    (!fields.is_empty()).then_some(fields)
}

/// Query parameters may set scalars, enums, well-known value types and lists of those.
fn is_query_compatible(field: &FieldDescriptor) -> bool {
    !field.is_map()
        && match field.kind() {
            Kind::Message(m) => m.full_name().starts_with("google.protobuf."),
            _ => true,
        }
}

/// A path or query string as proto3 JSON: booleans become JSON booleans; every other kind accepts its
/// string form (numbers, enums by name, timestamps, wrappers).
fn scalar_json(field: Option<&FieldDescriptor>, value: &str) -> Value {
    match (field.map(FieldDescriptor::kind), value) {
        (Some(Kind::Bool), "true") => Value::Bool(true),
        (Some(Kind::Bool), "false") => Value::Bool(false),
        _ => Value::String(value.to_owned()),
    }
}

/// Sets (or, for a repeated query parameter, appends) `value` at the field path, creating objects on the way.
/// Path variables (`from_query` false) replace what the body said.
fn set_path(
    root: &mut Map<String, Value>,
    fields: &[FieldDescriptor],
    value: Value,
    from_query: bool,
) -> Result<(), &'static str> {
    let Some((leaf, parents)) = fields.split_last() else {
        return Ok(());
    };
    let mut object = root;
    for field in parents {
        let key = entry_key(object, field);
        let entry = object.entry(key).or_insert_with(|| Value::Object(Map::new()));
        object = entry
            .as_object_mut()
            .ok_or("conflicts with a non-object value in the body")?;
    }
    let key = entry_key(object, leaf);
    match object.get_mut(&key) {
        Some(Value::Array(items)) if leaf.is_list() && from_query => items.push(value),
        Some(_) if from_query => return Err("is given more than once"),
        _ => {
            let value = if leaf.is_list() {
                Value::Array(vec![value])
            } else {
                value
            };
            object.insert(key, value);
        }
    }
    Ok(())
}

/// The key of `field` under whichever spelling (proto or JSON name) the body already used.
fn entry_key(object: &Map<String, Value>, field: &FieldDescriptor) -> String {
    if !object.contains_key(field.name()) && object.contains_key(field.json_name()) {
        field.json_name().to_owned()
    } else {
        field.name().to_owned()
    }
}

/// Parses proto3 JSON into the message, reporting the path of the first problem.
fn parse_message(input: MessageDescriptor, json: Value) -> Result<DynamicMessage, HttpError> {
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let mut track = serde_path_to_error::Track::new();
    let deserializer = serde_path_to_error::Deserializer::new(json, &mut track);
    DynamicMessage::deserialize_with_options(input, deserializer, &options).map_err(|err| {
        let path = track.path().to_string();
        let message = err.to_string();
        match message
            .strip_prefix("unrecognized field name '")
            .and_then(|m| m.strip_suffix('\''))
        {
            Some(unknown) => HttpError::invalid_field(join_path(&path, unknown), "unknown field"),
            None => HttpError::invalid_field(if path == "." { "body".to_owned() } else { path }, message),
        }
    })
}

fn join_path(parent: &str, name: &str) -> String {
    if parent == "." {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}
