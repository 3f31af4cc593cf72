//! Contact fields as the domain accepts them: a create or a partial update is parsed into `ContactFields`,
//! every problem reported at once, before anything is stored.

use std::collections::{BTreeMap, HashMap, HashSet};

use frontdesk_api::v1::ContactIdentity;

use super::{
    address::{E164Phone, Email},
    identity::{IdentityKind, NewIdentity},
    store::NewContact,
};
use crate::{
    error::{ApiResult, FieldViolation},
    validate::Violations,
};

const MAX_NAME_CHARS: usize = 200;
const MAX_TAGS: usize = 50;
const MAX_TAG_CHARS: usize = 64;
const MAX_ATTRIBUTES: usize = 50;
const MAX_ATTRIBUTE_KEY_CHARS: usize = 64;
const MAX_ATTRIBUTE_VALUE_CHARS: usize = 1_000;
const MAX_IDENTITIES: usize = 20;
const MAX_EXTERNAL_ID_CHARS: usize = 256;

/// The fields a request sets, as received; `None` where it does not set one.
#[derive(Clone, Debug, Default)]
pub struct Input {
    pub name: Option<String>,
    pub phone: Option<String>,
    pub email: Option<String>,
    pub identities: Option<Vec<ContactIdentity>>,
    pub tags: Option<Vec<String>>,
    pub attributes: Option<HashMap<String, String>>,
    pub opted_out: Option<bool>,
}

/// The fields a request sets, parsed; `None` leaves a field as it is (at its default on create), and
/// `Some(None)` clears a phone or e-mail.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContactFields {
    pub name: Option<String>,
    pub phone: Option<Option<E164Phone>>,
    pub email: Option<Option<Email>>,
    pub identities: Option<Vec<NewIdentity>>,
    pub tags: Option<Vec<String>>,
    pub attributes: Option<BTreeMap<String, String>>,
    pub opted_out: Option<bool>,
}

impl Input {
    /// Parses every set field, or the 400 naming each bad one.
    pub fn parse(self) -> ApiResult<ContactFields> {
        let mut v = Violations::new();
        let name = self.name.map(|name| {
            let name = name.trim().to_owned();
            v.text("name", &name, false, MAX_NAME_CHARS);
            name
        });
        let phone = self.phone.map(|phone| {
            address(
                &mut v,
                "phone",
                &phone,
                E164Phone::parse,
                "must be in E.164 format, e.g. +919812345678",
            )
        });
        let email = self
            .email
            .map(|email| address(&mut v, "email", &email, Email::parse, "must be a valid e-mail address"));
        let identities = self.identities.map(|given| identities(&mut v, given));
        let tags = self.tags.map(|mut tags| {
            v.list("tags", &tags, MAX_TAGS, MAX_TAG_CHARS);
            let mut seen = HashSet::new();
            tags.retain(|tag| seen.insert(tag.clone()));
            tags
        });
        let attributes = self.attributes.map(|given| attributes(&mut v, given));
        v.finish()?;
        Ok(ContactFields {
            name,
            phone,
            email,
            identities,
            tags,
            attributes,
            opted_out: self.opted_out,
        })
    }
}

impl ContactFields {
    /// A new contact with these fields, the unset ones empty.
    pub fn into_new(self) -> NewContact {
        NewContact {
            name: self.name.unwrap_or_default(),
            phone: self.phone.flatten(),
            email: self.email.flatten(),
            identities: self.identities.unwrap_or_default(),
            tags: self.tags.unwrap_or_default(),
            attributes: self.attributes.unwrap_or_default(),
        }
    }
}

/// "" (none) or an address `parse` accepts.
fn address<T>(
    v: &mut Violations,
    field: &str,
    value: &str,
    parse: impl Fn(&str) -> Option<T>,
    message: &str,
) -> Option<T> {
    if value.is_empty() {
        return None;
    }
    let parsed = parse(value);
    v.check(parsed.is_some(), field, message);
    parsed
}

fn identities(v: &mut Violations, given: Vec<ContactIdentity>) -> Vec<NewIdentity> {
    v.check(
        given.len() <= MAX_IDENTITIES,
        "identities",
        format!("must hold at most {MAX_IDENTITIES} entries"),
    );
    let mut seen = HashSet::new();
    let mut parsed = Vec::with_capacity(given.len());
    for (i, identity) in given.into_iter().enumerate() {
        let external_id = format!("identities[{i}].external_id");
        v.text(&external_id, &identity.external_id, true, MAX_EXTERNAL_ID_CHARS);
        let Some(kind) = IdentityKind::parse(&identity.r#type) else {
            let kinds: Vec<&str> = IdentityKind::ALL.iter().map(|k| k.as_str()).collect();
            v.push(FieldViolation::new(
                format!("identities[{i}].type"),
                format!("must be one of {}", kinds.join(", ")),
            ));
            continue;
        };
        v.check(
            seen.insert((kind, identity.external_id.clone())),
            &format!("identities[{i}]"),
            "repeats an earlier identity",
        );
        // `channel` is the service's record of where an identity was first seen: not the caller's to set.
        parsed.push(NewIdentity {
            kind,
            external_id: identity.external_id,
            channel: String::new(),
        });
    }
    parsed
}

fn attributes(v: &mut Violations, given: HashMap<String, String>) -> BTreeMap<String, String> {
    let sorted: BTreeMap<String, String> = given.into_iter().collect();
    v.check(
        sorted.len() <= MAX_ATTRIBUTES,
        "attributes",
        format!("must hold at most {MAX_ATTRIBUTES} keys"),
    );
    let bad_key =
        |key: &String| key.trim().is_empty() || key.contains('\0') || key.chars().count() > MAX_ATTRIBUTE_KEY_CHARS;
    v.check(
        !sorted.keys().any(bad_key),
        "attributes",
        format!("keys must be 1 to {MAX_ATTRIBUTE_KEY_CHARS} characters"),
    );
    for (key, value) in &sorted {
        v.text(&format!("attributes.{key}"), value, false, MAX_ATTRIBUTE_VALUE_CHARS);
    }
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields_of(input: Input) -> Vec<String> {
        input.parse().unwrap_err().fields.into_iter().map(|f| f.field).collect()
    }

    fn identity(kind: &str, external_id: &str) -> ContactIdentity {
        ContactIdentity {
            channel: String::new(),
            r#type: kind.into(),
            external_id: external_id.into(),
        }
    }

    #[test]
    fn a_full_contact_parses() {
        let fields = Input {
            name: Some("  Asha Rao ".into()),
            phone: Some("+919812345678".into()),
            email: Some("Asha@Example.com".into()),
            identities: Some(vec![identity("whatsapp", "919812345678")]),
            tags: Some(vec!["vip".into(), "lead".into(), "vip".into()]),
            attributes: Some(HashMap::from([("city".into(), "Pune".into())])),
            opted_out: None,
        }
        .parse()
        .unwrap();
        assert_eq!(fields.name.as_deref(), Some("Asha Rao"));
        assert_eq!(fields.phone, Some(E164Phone::parse("+919812345678")));
        assert_eq!(
            fields.tags,
            Some(vec!["vip".to_owned(), "lead".to_owned()]),
            "a repeated tag counts once"
        );
        let new = fields.into_new();
        assert_eq!(new.identities[0].kind, IdentityKind::Whatsapp);
        assert_eq!(new.attributes["city"], "Pune");
    }

    #[test]
    fn empty_addresses_clear_and_nothing_set_is_fine() {
        let fields = Input {
            phone: Some(String::new()),
            email: Some(String::new()),
            ..Default::default()
        }
        .parse()
        .unwrap();
        assert_eq!((fields.phone, fields.email), (Some(None), Some(None)));
        assert_eq!(Input::default().parse().unwrap(), ContactFields::default());
    }

    #[test]
    fn every_rule_names_its_field() {
        let bad = Input {
            name: Some("n".repeat(201)),
            phone: Some("98123".into()),
            email: Some("x@".into()),
            identities: Some(vec![identity("sms", "1"), identity("webchat", " ")]),
            tags: Some(vec!["t".repeat(65)]),
            attributes: Some(HashMap::from([("note".into(), "v".repeat(1_001))])),
            opted_out: None,
        };
        assert_eq!(
            fields_of(bad),
            [
                "name",
                "phone",
                "email",
                "identities[0].type",
                "identities[1].external_id",
                "tags",
                "attributes.note"
            ]
        );
        let many = Input {
            tags: Some((0..51).map(|i| format!("t{i}")).collect()),
            attributes: Some((0..51).map(|i| (format!("k{i}"), String::new())).collect()),
            identities: Some((0..21).map(|i| identity("webchat", &format!("v{i}"))).collect()),
            ..Default::default()
        };
        assert_eq!(fields_of(many), ["identities", "tags", "attributes"]);
        let odd = Input {
            attributes: Some(HashMap::from([("k".repeat(65), String::new())])),
            identities: Some(vec![identity("webchat", "v1"), identity("webchat", "v1")]),
            ..Default::default()
        };
        assert_eq!(fields_of(odd), ["identities[1]", "attributes"]);
    }
}
