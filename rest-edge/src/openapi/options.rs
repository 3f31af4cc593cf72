//! The API's own proto options that the document publishes: a field's rules (`frontdesk.v1.rules`), a
//! method's errors (`frontdesk.v1.errors`) and the media types of a document answer
//! (`frontdesk.v1.media_types`).

use frontdesk_api::{
    reason::Reason,
    v1::{ErrorAnswer, FieldRules},
};
use prost_reflect::{DynamicMessage, FieldDescriptor, MethodDescriptor, ReflectMessage, Value};

/// The field's rules; the default (nothing enforced) when it has none.
pub fn rules(field: &FieldDescriptor) -> FieldRules {
    extension(&field.options(), "frontdesk.v1.rules")
        .and_then(|value| value.as_message().and_then(|m| m.transcode_to().ok()))
        .unwrap_or_default()
}

/// The method's own errors, checked: each names a reason of the API, and a reason with a status of its own
/// is declared with that status.
pub fn errors(method: &MethodDescriptor) -> Result<Vec<ErrorAnswer>, String> {
    let Some(Value::List(items)) = extension(&method.options(), "frontdesk.v1.errors") else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .map(|item| {
            let answer: ErrorAnswer = item
                .as_message()
                .and_then(|m| m.transcode_to().ok())
                .ok_or_else(|| format!("{}: frontdesk.v1.errors does not decode", method.full_name()))?;
            let reason = Reason::parse(&answer.reason)
                .ok_or_else(|| format!("{}: no reason `{}`", method.full_name(), answer.reason))?;
            let status = u16::try_from(answer.status).ok().filter(|s| (400..600).contains(s));
            match (status, reason.http_status()) {
                (None, _) => Err(format!(
                    "{}: {} is not an error status",
                    method.full_name(),
                    answer.status
                )),
                (Some(status), Some(own)) if status != own => Err(format!(
                    "{}: `{}` answers {own}, not {status}",
                    method.full_name(),
                    answer.reason
                )),
                _ => Ok(answer),
            }
        })
        .collect()
}

/// The media types of a method that answers a document (`google.api.HttpBody`).
pub fn media_types(method: &MethodDescriptor) -> Vec<String> {
    match extension(&method.options(), "frontdesk.v1.media_types") {
        Some(Value::List(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

fn extension(options: &DynamicMessage, name: &str) -> Option<Value> {
    let extension = options.descriptor().parent_pool().get_extension_by_name(name)?;
    options
        .has_extension(&extension)
        .then(|| options.get_extension(&extension).into_owned())
}
