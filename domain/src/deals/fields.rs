//! Deal fields as the domain accepts them: a create or a partial update is parsed into `DealFields`, every
//! problem reported at once, before anything is stored.

use chrono::{DateTime, Utc};

use crate::error::{ApiError, ApiResult, FieldViolation};

pub const PRIORITIES: &[&str] = &["low", "medium", "high", "urgent"];
pub const STATUSES: &[&str] = &["open", "won", "lost"];
pub const SOURCES: &[&str] = &["manual", "api", "ai_agent", "broadcast", "import", "website"];
const MAX_TAGS: usize = 50;
const MAX_TAG_CHARS: usize = 64;
const MAX_TEXT_CHARS: usize = 200;
const MAX_DESCRIPTION_CHARS: usize = 10_000;

/// The fields a request sets; `None` leaves a field as it is (or at its default on create).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DealFields {
    pub title: Option<String>,
    pub description: Option<String>,
    pub company: Option<String>,
    pub stage: Option<String>,
    pub value: Option<f64>,
    pub probability: Option<f64>,
    pub priority: Option<String>,
    pub status: Option<String>,
    pub source: Option<String>,
    pub contact_id: Option<String>,
    pub assigned_to: Option<String>,
    pub tags: Option<Vec<String>>,
    /// `Some(None)` clears the close date.
    pub close_date: Option<Option<DateTime<Utc>>>,
}

impl DealFields {
    /// Checks every set field; `creating` also requires title and stage.
    pub fn validate(&self, creating: bool) -> ApiResult<()> {
        let mut violations = Vec::new();
        let mut check = |field: &str, ok: bool, message: String| {
            if !ok {
                violations.push(FieldViolation::new(field, message));
            }
        };
        if creating || self.title.is_some() {
            let title = self.title.as_deref().unwrap_or_default().trim();
            check("title", !title.is_empty(), "is required".into());
            check(
                "title",
                title.chars().count() <= MAX_TEXT_CHARS,
                "must be at most 200 characters".into(),
            );
        }
        if creating || self.stage.is_some() {
            check(
                "stage",
                !self.stage.as_deref().unwrap_or_default().is_empty(),
                "is required".into(),
            );
        }
        for (field, value) in [
            ("company", &self.company),
            ("contact_id", &self.contact_id),
            ("assigned_to", &self.assigned_to),
        ] {
            let long = value.as_ref().is_some_and(|v| v.chars().count() > MAX_TEXT_CHARS);
            check(field, !long, "must be at most 200 characters".into());
        }
        let long = self
            .description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS);
        check("description", !long, "must be at most 10000 characters".into());
        if let Some(value) = self.value {
            check(
                "value",
                value.is_finite() && value >= 0.0,
                "must be a non-negative number".into(),
            );
        }
        if let Some(probability) = self.probability {
            check(
                "probability",
                (0.0..=100.0).contains(&probability),
                "must be between 0 and 100".into(),
            );
        }
        for (field, value, allowed) in [
            ("priority", &self.priority, PRIORITIES),
            ("status", &self.status, STATUSES),
            ("source", &self.source, SOURCES),
        ] {
            if let Some(value) = value {
                check(
                    field,
                    allowed.contains(&value.as_str()),
                    format!("must be one of {}", allowed.join(", ")),
                );
            }
        }
        if let Some(tags) = &self.tags {
            check("tags", tags.len() <= MAX_TAGS, format!("at most {MAX_TAGS} tags"));
            let bad = tags
                .iter()
                .any(|t| t.trim().is_empty() || t.chars().count() > MAX_TAG_CHARS);
            check(
                "tags",
                !bad,
                format!("each tag must be 1 to {MAX_TAG_CHARS} characters"),
            );
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(violations))
        }
    }
}

/// Checks a filter value against the allowed values (an empty filter is no filter).
pub fn check_filter(field: &str, value: &str, allowed: &[&str]) -> Result<(), FieldViolation> {
    if value.is_empty() || allowed.contains(&value) {
        Ok(())
    } else {
        Err(FieldViolation::new(
            field,
            format!("must be one of {}", allowed.join(", ")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields_of(err: ApiError) -> Vec<String> {
        err.fields.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn creation_needs_title_and_stage() {
        let err = DealFields::default().validate(true).unwrap_err();
        assert_eq!(fields_of(err), ["title", "stage"]);
        assert!(DealFields::default().validate(false).is_ok(), "an empty update is fine");
    }

    #[test]
    fn every_rule_names_its_field() {
        let bad = DealFields {
            value: Some(-1.0),
            probability: Some(101.0),
            priority: Some("asap".into()),
            status: Some("closed".into()),
            source: Some("fax".into()),
            tags: Some(vec!["t".repeat(65)]),
            ..Default::default()
        };
        let err = bad.validate(false).unwrap_err();
        assert_eq!(
            fields_of(err),
            ["value", "probability", "priority", "status", "source", "tags"]
        );
        let many = DealFields {
            tags: Some((0..51).map(|i| format!("t{i}")).collect()),
            ..Default::default()
        };
        assert_eq!(fields_of(many.validate(false).unwrap_err()), ["tags"]);
    }
}
