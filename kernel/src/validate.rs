//! Request checks shared by the platform resources: every problem of a request is collected and reported
//! at once as one 400 with `fields`.

use chrono::{DateTime, Utc};
use sea_orm::ActiveEnum;

use crate::{
    error::{ApiError, ApiResult, FieldViolation},
    timestamps,
};

/// No database stores U+0000 in text (PostgreSQL refuses it).
const NUL: &str = "must not contain the NUL character (U+0000)";

/// The violations found so far in one request.
#[derive(Debug, Default)]
pub struct Violations(Vec<FieldViolation>);

impl Violations {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn check(&mut self, ok: bool, field: &str, message: impl Into<String>) {
        if !ok {
            self.0.push(FieldViolation::new(field, message));
        }
    }

    pub fn push(&mut self, violation: FieldViolation) {
        self.0.push(violation);
    }

    /// Free text of at most `max` characters; `required` also refuses blank text.
    pub fn text(&mut self, field: &str, value: &str, required: bool, max: usize) {
        if value.contains('\0') {
            self.0.push(FieldViolation::new(field, NUL));
        } else if required && value.trim().is_empty() {
            self.0.push(FieldViolation::new(field, "is required"));
        } else if value.chars().count() > max {
            self.0
                .push(FieldViolation::new(field, format!("must be at most {max} characters")));
        }
    }

    /// At most `max_items` entries of at most `max_chars` characters each, none blank.
    pub fn list(&mut self, field: &str, values: &[String], max_items: usize, max_chars: usize) {
        if values.len() > max_items {
            self.0.push(FieldViolation::new(
                field,
                format!("must hold at most {max_items} entries"),
            ));
        }
        if values.iter().any(|v| v.contains('\0')) {
            self.0.push(FieldViolation::new(field, NUL));
        } else if values
            .iter()
            .any(|v| v.trim().is_empty() || v.chars().count() > max_chars)
        {
            self.0.push(FieldViolation::new(
                field,
                format!("entries must be non-empty and at most {max_chars} characters"),
            ));
        }
    }

    /// A request's Timestamp (`None` when absent or out of range; out of range is a violation).
    pub fn timestamp(&mut self, field: &str, at: Option<prost_types::Timestamp>) -> Option<DateTime<Utc>> {
        timestamps::from_proto_noting(field, at, &mut self.0)
    }

    pub fn one_of(&mut self, field: &str, value: &str, allowed: &[&str]) {
        self.check(
            allowed.contains(&value),
            field,
            format!("must be one of {}", allowed.join(", ")),
        );
    }

    /// The variant of `E` whose word (the value it is stored as) is `value`; `None`, noted, when none is.
    pub fn one_of_variants<E: ActiveEnum<Value = String>>(&mut self, field: &str, value: &str) -> Option<E> {
        let variant = E::try_from_value(&value.to_owned()).ok();
        if variant.is_none() {
            let words = E::values();
            self.push(FieldViolation::new(
                field,
                format!("must be one of {}", words.join(", ")),
            ));
        }
        variant
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok` when nothing was found, else the 400.
    pub fn finish(self) -> ApiResult<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.into_error())
        }
    }

    /// The 400 of what was found, for a request that cannot be checked further.
    pub fn into_error(self) -> ApiError {
        ApiError::invalid(self.0)
    }
}

/// A resource name (webhooks, channels): `^[a-z][a-z0-9_-]{0,63}$`, never all digits, so a name cannot be
/// mistaken for a positional id.
pub fn check_name(name: &str) -> Result<(), FieldViolation> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(FieldViolation::new(
            "name",
            "must start with a lowercase letter and hold only lowercase letters, digits, `_` and `-` (at most 64)",
        ))
    }
}

/// A well-formed BCP 47 language tag (RFC 5646 `langtag`: language, optional extlangs, script, region,
/// variants, extensions and private use), e.g. `en`, `hi-IN`, `zh-Hant-TW`, `es-419`.
pub fn is_language_tag(tag: &str) -> bool {
    let alpha = |s: &str, range: std::ops::RangeInclusive<usize>| {
        range.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphabetic())
    };
    let alnum = |s: &str, range: std::ops::RangeInclusive<usize>| {
        range.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
    };
    let mut parts = tag.split('-').peekable();
    let Some(language) = parts.next() else {
        return false;
    };
    if !alpha(language, 2..=3) && !alpha(language, 5..=8) {
        return false;
    }
    let mut extlangs = 0;
    while language.len() <= 3 && extlangs < 3 && parts.peek().is_some_and(|p| alpha(p, 3..=3)) {
        parts.next();
        extlangs += 1;
    }
    if parts.peek().is_some_and(|p| alpha(p, 4..=4)) {
        parts.next();
    }
    if parts
        .peek()
        .is_some_and(|p| alpha(p, 2..=2) || (p.len() == 3 && p.bytes().all(|b| b.is_ascii_digit())))
    {
        parts.next();
    }
    let is_variant = |p: &str| alnum(p, 5..=8) || (p.len() == 4 && p.as_bytes()[0].is_ascii_digit() && alnum(p, 4..=4));
    while parts.peek().is_some_and(|p| is_variant(p)) {
        parts.next();
    }
    // Extensions (`u-...`) and private use (`x-...`): a singleton, then one or more subtags.
    while let Some(singleton) = parts.next() {
        if singleton.len() != 1 || !singleton.as_bytes()[0].is_ascii_alphanumeric() {
            return false;
        }
        let private = singleton.eq_ignore_ascii_case("x");
        let min = if private { 1 } else { 2 };
        let mut subtags = 0;
        while parts
            .peek()
            .is_some_and(|p| alnum(p, min..=8) && (private || p.len() > 1))
        {
            parts.next();
            subtags += 1;
        }
        if subtags == 0 {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["crm", "a", "crm-sync_2", &"a".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1", "123", "Crm", "crm sync", "-crm", &"a".repeat(65), "crm.sync"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn language_tags() {
        for good in [
            "en",
            "hi-IN",
            "pt-BR",
            "zh-Hant-TW",
            "es-419",
            "sl-rozaj",
            "de-DE-u-co-phonebk",
            "en-x-custom",
        ] {
            assert!(is_language_tag(good), "{good}");
        }
        for bad in [
            "",
            "e",
            "english!",
            "en_US",
            "en-",
            "-en",
            "1234",
            "en-US-u",
            "toolongtag9",
            "en--US",
        ] {
            assert!(!is_language_tag(bad), "{bad}");
        }
    }

    #[test]
    fn collects_every_problem() {
        let mut v = Violations::new();
        v.text("name", " ", true, 10);
        v.text("goal", "abcdefghijk", false, 10);
        v.one_of("tier", "ultra", &["mini", "pro"]);
        v.list("rules", &["".into()], 5, 10);
        let error = v.finish().unwrap_err();
        assert_eq!(error.fields.len(), 4);
    }
}
