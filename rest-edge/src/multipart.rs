//! `multipart/form-data` request bodies, for operations whose request message has a field of type
//! `frontdesk.v1.FilePart` (an upload). Such a field is the part of the same name: its file name, content
//! type and bytes fill the message. Every other part is a text part, read as the JSON value of its field,
//! so path variables, the query string and the usual checks (unknown fields, types) apply as for a JSON
//! body; a `sub_account_id` part names the sub-account an agency acts on, as it does in a JSON body. The
//! body is read as a stream with size limits: a file part over the upload limit is refused with 413 as soon
//! as its bytes pass the limit, without reading the rest.

use bytes::Bytes;
use futures_util::stream::BoxStream;
use http::{HeaderMap, StatusCode, header};
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value as ProtoValue};
use serde_json::{Map, Value};

use crate::{
    bindings::{Binding, BodyRule},
    body::BodyError,
    error::HttpError,
    request::{self, Lifted},
};

/// The message type of a field that is an uploaded file.
pub const FILE_PART: &str = "frontdesk.v1.FilePart";
/// Largest text part (any part that is not a file).
const MAX_TEXT_PART_BYTES: u64 = 64 * 1024;
/// What the body may hold beyond its files: text parts, part headers and boundaries.
const MAX_OVERHEAD_BYTES: u64 = 256 * 1024;

/// Whether the binding takes an upload: its whole body is the request and the request has a file field.
pub fn is_upload(binding: &Binding) -> bool {
    matches!(binding.body, BodyRule::Whole) && binding.input().fields().any(|f| is_file_field(&f))
}

fn is_file_field(field: &FieldDescriptor) -> bool {
    !field.is_list() && matches!(field.kind(), Kind::Message(m) if m.full_name() == FILE_PART)
}

/// 413 for a body over the limit.
fn too_large(max_file_bytes: usize) -> HttpError {
    HttpError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the file is larger than the upload limit of {} MB (FRONTDESK_MAX_UPLOAD_MB)",
            max_file_bytes / (1024 * 1024)
        ),
    )
}

/// Builds the request message of an upload `binding` from a multipart body, refusing files over
/// `max_file_bytes`.
pub async fn build(
    binding: &Binding,
    path_params: &[(String, String)],
    query: Option<&str>,
    headers: &HeaderMap,
    body: BoxStream<'static, Result<Bytes, BodyError>>,
    max_file_bytes: usize,
) -> Result<(DynamicMessage, Lifted), HttpError> {
    let input = binding.input();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        HttpError::invalid_field(
            "body",
            "must be multipart/form-data (send the document as the part `file`)",
        )
    })?;
    let files: Vec<FieldDescriptor> = input.fields().filter(is_file_field).collect();
    let max_file = max_file_bytes as u64;
    let whole = max_file
        .saturating_mul(files.len() as u64)
        .saturating_add(MAX_OVERHEAD_BYTES);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > whole) {
        return Err(too_large(max_file_bytes));
    }
    let limits = files.iter().fold(
        multer::SizeLimit::new()
            .whole_stream(whole)
            .per_field(MAX_TEXT_PART_BYTES),
        |limits, field| limits.for_field(field.name(), max_file),
    );
    let mut multipart =
        multer::Multipart::with_constraints(body, boundary, multer::Constraints::new().size_limit(limits));
    let mut text = Map::new();
    let mut uploads: Vec<(FieldDescriptor, DynamicMessage)> = Vec::new();
    while let Some(part) = multipart.next_field().await.map_err(|e| refused(&e, max_file_bytes))? {
        let name = part.name().unwrap_or_default().to_owned();
        if name == request::SUB_ACCOUNT_PARAM && !text.contains_key(&name) {
            // The sub-account an agency acts on, lifted out as from a JSON body.
            let value = part.text().await.map_err(|e| refused(&e, max_file_bytes))?;
            text.insert(name, Value::String(value));
            continue;
        }
        let field = field_named(&input, &name).ok_or_else(|| HttpError::invalid_field(&name, "unknown part"))?;
        let seen = text.contains_key(field.name()) || uploads.iter().any(|(f, _)| f == &field);
        if seen {
            return Err(HttpError::invalid_field(&name, "is given more than once"));
        }
        if is_file_field(&field) {
            let file_name = part.file_name().unwrap_or_default().to_owned();
            let content_type = part.content_type().map(ToString::to_string).unwrap_or_default();
            let data = part.bytes().await.map_err(|e| refused(&e, max_file_bytes))?;
            uploads.push((field.clone(), file_part(&field, file_name, content_type, data)));
        } else {
            let value = part.text().await.map_err(|e| refused(&e, max_file_bytes))?;
            text.insert(field.name().to_owned(), text_value(&field, value));
        }
    }
    let body = serde_json::to_vec(&Value::Object(text)).map_err(|e| HttpError::invalid(e.to_string()))?;
    let (mut message, lifted) = request::build(binding, path_params, query, &body)?;
    for (field, file) in uploads {
        message.set_field(&field, ProtoValue::Message(file));
    }
    Ok((message, lifted))
}

fn field_named(input: &MessageDescriptor, name: &str) -> Option<FieldDescriptor> {
    input
        .get_field_by_name(name)
        .or_else(|| input.get_field_by_json_name(name))
}

fn file_part(field: &FieldDescriptor, file_name: String, content_type: String, data: Bytes) -> DynamicMessage {
    let Kind::Message(descriptor) = field.kind() else {
        unreachable!("a file field is a message field");
    };
    let mut file = DynamicMessage::new(descriptor);
    file.set_field_by_name("file_name", ProtoValue::String(file_name));
    file.set_field_by_name("content_type", ProtoValue::String(content_type));
    file.set_field_by_name("data", ProtoValue::Bytes(data));
    file
}

/// A text part as JSON: a string for scalar fields (proto3 JSON reads numbers and enums from strings),
/// booleans as booleans, and JSON for message and repeated fields.
fn text_value(field: &FieldDescriptor, text: String) -> Value {
    match field.kind() {
        Kind::Bool if !field.is_list() => match text.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::String(text),
        },
        Kind::Message(_) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        _ if field.is_list() => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        _ => Value::String(text),
    }
}

/// A body multer could not read: 413 past a size limit, the body's own refusal (too slow, over the edge's
/// budget) when reading it failed, else 400.
fn refused(error: &multer::Error, max_file_bytes: usize) -> HttpError {
    match error {
        multer::Error::StreamReadFailed(cause) if cause.is::<BodyError>() => cause
            .downcast_ref::<BodyError>()
            .map_or_else(|| HttpError::invalid("unreadable body"), BodyError::http),
        multer::Error::FieldSizeExceeded { limit, .. } if *limit == MAX_TEXT_PART_BYTES => HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("a text part is larger than {MAX_TEXT_PART_BYTES} bytes"),
        ),
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => too_large(max_file_bytes),
        other => HttpError::invalid_field("body", format!("malformed multipart/form-data: {other}")),
    }
}
