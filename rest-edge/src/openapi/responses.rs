//! The answers of an operation: its success, the errors every operation of its kind can answer, and the
//! method's own (`frontdesk.v1.errors`), each status with the error schema and an example per reason.

use std::collections::BTreeMap;

use frontdesk_api::v1::ErrorAnswer;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::{
    names::{ERROR_DETAIL_NAME, ERROR_SCHEMA_NAME, FIELD_VIOLATION_NAME},
    schemas::Schemas,
};
use crate::bindings::{Binding, BodyRule, Naming};

/// The health check, whose degraded answer is a 503 with the health body itself.
const HEALTH: &str = "frontdesk.site.v0.Site.Health";

/// One error an operation answers: its status, reason and when.
struct Refusal {
    status: u16,
    reason: &'static str,
    when: String,
}

impl Refusal {
    fn new(status: u16, reason: &'static str, when: impl Into<String>) -> Self {
        Self {
            status,
            reason,
            when: when.into(),
        }
    }
}

/// The errors an operation can answer: the ones its shape implies, then its method's own.
fn refusals(binding: &Binding, own: &[ErrorAnswer], deprecated: bool) -> Vec<Refusal> {
    let mut all = vec![Refusal::new(
        400,
        "invalid_argument",
        "a field, query parameter or the body is invalid; `fields` names each problem",
    )];
    if binding.naming == Naming::Snake {
        all.push(Refusal::new(
            401,
            "unauthenticated",
            "the API key is missing, unknown or revoked",
        ));
        all.push(Refusal::new(
            403,
            "insufficient_scope",
            "the key's scopes do not include this section",
        ));
        all.push(Refusal::new(
            403,
            "api_access_disabled",
            "the account's plan does not include API access",
        ));
        all.push(Refusal::new(
            429,
            "rate_limited",
            "the key's rate limit is reached; see `Retry-After`",
        ));
    }
    if !binding.template.variables.is_empty() {
        all.push(Refusal::new(404, "not_found", "no such resource on this account"));
    }
    if crate::multipart::is_upload(binding) {
        all.push(Refusal::new(
            413,
            "payload_too_large",
            "the file is larger than FRONTDESK_MAX_UPLOAD_MB (default 20 MB)",
        ));
    } else if !matches!(binding.body, BodyRule::None) {
        all.push(Refusal::new(413, "payload_too_large", "the body is larger than 1 MiB"));
    }
    if deprecated {
        all.push(Refusal::new(
            410,
            "gone",
            "the call was retired at its sunset (the `Sunset` header); the message names its replacement",
        ));
    }
    all.push(Refusal::new(
        503,
        "unavailable",
        "the service or its database is unavailable for a moment; retry after `Retry-After`",
    ));
    all.push(Refusal::new(
        504,
        "deadline_exceeded",
        "the call did not finish in time",
    ));
    for answer in own {
        let reason = frontdesk_api::reason::Reason::parse(&answer.reason).map_or("internal", |r| r.as_str());
        all.push(Refusal::new(answer.status as u16, reason, answer.when.clone()));
    }
    all
}

/// The operation's `responses`: success first, then each error status.
pub fn responses(
    binding: &Binding,
    schemas: &mut Schemas<'_>,
    own: &[ErrorAnswer],
    deprecated: bool,
    media_types: &[String],
) -> Map<String, Value> {
    let mut responses = Map::new();
    let output = binding.method.output();
    let success = if output.full_name() == "google.api.HttpBody" {
        let content: Map<String, Value> = media_types
            .iter()
            .map(|media_type| (media_type.clone(), json!({"schema": {"type": "string"}})))
            .collect();
        json!({"description": "Success: the document itself, in the media type its `format` picks.", "content": content})
    } else {
        json!({
            "description": if binding.success_status == StatusCode::ACCEPTED { "Accepted." } else { "Success." },
            "content": {"application/json": {"schema": schemas.message_ref(&output, binding.naming)}},
        })
    };
    responses.insert(binding.success_status.as_str().to_owned(), success);

    let mut by_status: BTreeMap<u16, Vec<Refusal>> = BTreeMap::new();
    for refusal in refusals(binding, own, deprecated) {
        by_status.entry(refusal.status).or_default().push(refusal);
    }
    for (status, refusals) in by_status {
        let description = refusals
            .iter()
            .map(|r| format!("`{}`: {}.", r.reason, r.when))
            .collect::<Vec<_>>()
            .join(" ");
        let examples: Map<String, Value> = refusals
            .iter()
            .map(|r| (r.reason.to_owned(), json!({"value": example(r)})))
            .collect();
        let mut schema = json!({"$ref": format!("#/components/schemas/{ERROR_SCHEMA_NAME}")});
        if status == 503 && binding.method.full_name() == HEALTH {
            // A degraded health check answers 503 with the health body itself.
            schema = json!({"anyOf": [schema, schemas.message_ref(&binding.method.output(), binding.naming)]});
        }
        responses.insert(
            status.to_string(),
            json!({
                "description": description,
                "content": {"application/json": {"schema": schema, "examples": examples}},
            }),
        );
    }
    responses
}

fn example(refusal: &Refusal) -> Value {
    let mut message = refusal.when.clone();
    if let Some(first) = message.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    json!({
        "success": false,
        "error": {"code": refusal.reason, "message": message, "request_id": "req_3f9c2a7d1b8e4f60"},
    })
}

/// The error body and its parts, by name.
pub fn error_schemas() -> [(&'static str, Value); 3] {
    let reference = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    [
        (
            ERROR_SCHEMA_NAME,
            json!({
                "type": "object",
                "description": "The error body of every failed call.",
                "required": ["success", "error"],
                "properties": {"success": {"type": "boolean", "const": false}, "error": reference(ERROR_DETAIL_NAME)},
            }),
        ),
        (
            ERROR_DETAIL_NAME,
            json!({
                "type": "object",
                "required": ["code", "message", "request_id"],
                "properties": {
                    "code": {"type": "string", "description": "Stable snake_case reason, e.g. `invalid_argument`."},
                    "message": {"type": "string"},
                    "fields": {"type": "array", "items": reference(FIELD_VIOLATION_NAME)},
                    "request_id": {"type": "string"},
                },
            }),
        ),
        (
            FIELD_VIOLATION_NAME,
            json!({
                "type": "object",
                "description": "One problem with one request field.",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            }),
        ),
    ]
}
