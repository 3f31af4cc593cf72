//! Domain types of the checkout: a create-order request is parsed into a `Checkout` at the service boundary,
//! so the rest of the code never sees an unchecked plan, currency, phone or e-mail.

pub use crate::plan::Plan;
use crate::{
    contacts::{E164Phone, Email},
    error::{ApiError, ApiResult, FieldViolation},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Currency {
    Inr,
    Usd,
    Aed,
}

impl Currency {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "INR" => Some(Self::Inr),
            "USD" => Some(Self::Usd),
            "AED" => Some(Self::Aed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inr => "INR",
            Self::Usd => "USD",
            Self::Aed => "AED",
        }
    }
}

/// Longest accepted free-text name.
const MAX_NAME_CHARS: usize = 200;

/// A validated create-order request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkout {
    pub plan: Plan,
    pub currency: Currency,
    pub phone: E164Phone,
    pub name: String,
    pub email: Option<Email>,
    pub business_name: String,
}

/// The raw request fields, as received.
pub struct CheckoutInput<'a> {
    pub plan: &'a str,
    pub currency: &'a str,
    pub phone: &'a str,
    pub name: &'a str,
    pub email: &'a str,
    pub business_name: &'a str,
}

impl Checkout {
    /// Parses every field and reports every problem at once.
    pub fn parse(input: CheckoutInput<'_>) -> ApiResult<Self> {
        let mut violations = Vec::new();
        let plan = required(
            &mut violations,
            "plan",
            input.plan,
            Plan::parse,
            "must be one of launch, growth, scale",
        );
        let currency = required(
            &mut violations,
            "currency",
            input.currency,
            Currency::parse,
            "must be one of INR, USD, AED",
        );
        let phone = required(
            &mut violations,
            "phone",
            input.phone,
            E164Phone::parse,
            "must be in E.164 format, e.g. +919812345678",
        );
        let email = if input.email.is_empty() {
            None
        } else {
            let email = Email::parse(input.email);
            if email.is_none() {
                violations.push(FieldViolation::new("email", "must be a valid e-mail address"));
            }
            email
        };
        for (field, value) in [("name", input.name), ("businessName", input.business_name)] {
            if value.chars().count() > MAX_NAME_CHARS {
                violations.push(FieldViolation::new(field, "must be at most 200 characters"));
            }
        }
        match (plan, currency, phone) {
            (Some(plan), Some(currency), Some(phone)) if violations.is_empty() => Ok(Self {
                plan,
                currency,
                phone,
                name: input.name.to_owned(),
                email,
                business_name: input.business_name.to_owned(),
            }),
            _ => Err(ApiError::invalid(violations)),
        }
    }
}

/// Parses a required field, recording "is required" or `invalid` when it fails.
fn required<T>(
    violations: &mut Vec<FieldViolation>,
    field: &str,
    value: &str,
    parse: impl Fn(&str) -> Option<T>,
    invalid: &str,
) -> Option<T> {
    if value.is_empty() {
        violations.push(FieldViolation::new(field, "is required"));
        return None;
    }
    let parsed = parse(value);
    if parsed.is_none() {
        violations.push(FieldViolation::new(field, invalid));
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(plan: &'a str, currency: &'a str, phone: &'a str, email: &'a str) -> CheckoutInput<'a> {
        CheckoutInput {
            plan,
            currency,
            phone,
            name: "",
            email,
            business_name: "",
        }
    }

    fn fields(err: ApiError) -> Vec<String> {
        err.fields.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn a_valid_request_parses() {
        let c = Checkout::parse(input("growth", "INR", "+919812345678", "a.b@example.co.in")).unwrap();
        assert_eq!(c.plan, Plan::Growth);
        assert_eq!(c.currency, Currency::Inr);
        assert_eq!(c.email.unwrap().as_str(), "a.b@example.co.in");
    }

    #[test]
    fn every_bad_field_is_reported() {
        let err = Checkout::parse(input("gold", "EUR", "98123", "x@")).unwrap_err();
        assert_eq!(fields(err), ["plan", "currency", "phone", "email"]);
        let err = Checkout::parse(input("", "", "", "")).unwrap_err();
        assert_eq!(err.fields[0].message, "is required");
        assert_eq!(fields(err), ["plan", "currency", "phone"]);
    }
}
