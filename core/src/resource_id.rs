//! Ids of resources as types, for the functions that are handed two of them at once (a contact and its
//! channel, an agent and one of its FAQs): passed in the wrong order, they do not compile. Unlike the tenant
//! (`AccountId`) an id carries no trust: a caller may name any id, and scoped lookups still filter by the
//! account; so anyone may build one, at the point where the string is known to be that kind of id.
//!
//! A test below keeps it so: no function of the library takes two ids as strings.

use std::{fmt, marker::PhantomData};

/// The id of a resource of kind `K`.
pub struct Id<K> {
    value: String,
    kind: PhantomData<fn() -> K>,
}

/// The kinds of resource that have an id type.
pub mod kind {
    pub enum Agent {}
    pub enum Channel {}
    pub enum Contact {}
    pub enum Faq {}
    pub enum Gap {}
    pub enum Message {}
    pub enum Pipeline {}
    pub enum Source {}
}

pub type AgentId = Id<kind::Agent>;
pub type ChannelId = Id<kind::Channel>;
pub type ContactId = Id<kind::Contact>;
pub type FaqId = Id<kind::Faq>;
pub type GapId = Id<kind::Gap>;
pub type MessageId = Id<kind::Message>;
pub type PipelineId = Id<kind::Pipeline>;
pub type SourceId = Id<kind::Source>;

impl<K> Id<K> {
    pub fn new(value: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            kind: PhantomData,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.value
    }
}

// Written out rather than derived: a derive would ask the same of `K`, which is never built.
impl<K> Clone for Id<K> {
    fn clone(&self) -> Self {
        Self::new(self.value.clone())
    }
}

impl<K> fmt::Debug for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.value, f)
    }
}

impl<K> fmt::Display for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}

impl<K> PartialEq<str> for Id<K> {
    fn eq(&self, other: &str) -> bool {
        self.value == other
    }
}

/// So that a query filters on it as on its string: `Column::ContactId.eq(contact)`.
impl<K> From<&Id<K>> for sea_orm::Value {
    fn from(id: &Id<K>) -> Self {
        id.as_str().into()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{ChannelId, ContactId};

    /// The parameters of every `fn` in `text` that are ids (named `id` or `…_id`) taken as strings.
    fn string_id_parameters(text: &str) -> Vec<(String, Vec<String>)> {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("fn ") {
            let after = &rest[at + 3..];
            rest = after;
            let Some(open) = after.find('(') else { break };
            let name = after[..open].split('<').next().unwrap_or_default().trim();
            if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let mut depth = 0;
            let mut close = None;
            let mut previous = ' ';
            for (i, c) in after[open..].char_indices() {
                let arrow = c == '>' && previous == '-';
                previous = c;
                match c {
                    '(' | '<' | '[' => depth += 1,
                    ')' | '>' | ']' if depth > 0 && !arrow => {
                        depth -= 1;
                        if depth == 0 && c == ')' {
                            close = Some(open + i);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(close) = close else { continue };
            let ids: Vec<String> = split_top_level(&after[open + 1..close])
                .into_iter()
                .filter_map(|param| {
                    let (name, ty) = param.split_once(':')?;
                    let name = name.trim().trim_start_matches("mut ").to_owned();
                    let ty: String = ty.split_whitespace().collect();
                    let is_id = name == "id" || name.ends_with("_id");
                    // `&str`, `&'a str`, `String`, `&String`
                    let is_string = (ty.starts_with('&') && ty.ends_with("str")) || ty.ends_with("String");
                    (is_id && is_string).then_some(name)
                })
                .collect();
            if ids.len() >= 2 {
                found.push((name.to_owned(), ids));
            }
        }
        found
    }

    fn split_top_level(params: &str) -> Vec<&str> {
        let mut parts = Vec::new();
        let (mut depth, mut start, mut previous) = (0, 0, ' ');
        for (i, c) in params.char_indices() {
            let arrow = c == '>' && previous == '-';
            previous = c;
            match c {
                '(' | '<' | '[' => depth += 1,
                ')' | '>' | ']' if !arrow => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&params[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&params[start..]);
        parts
    }

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read a source folder") {
            let path = entry.expect("a source entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_function_takes_two_ids_as_strings() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        let mut offenders = Vec::new();
        // Tests may name ids as they like (and this one holds a sample of what it looks for).
        for file in files.into_iter().filter(|file| !file.ends_with("tests.rs")) {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            for (function, ids) in string_id_parameters(code) {
                offenders.push(format!("{}: fn {function}({})", file.display(), ids.join(", ")));
            }
        }
        assert!(
            offenders.is_empty(),
            "functions that take two ids as strings (give them resource_id types):\n{}",
            offenders.join("\n")
        );
    }

    #[test]
    fn the_check_sees_a_signature_over_several_lines() {
        let text = "pub async fn of_contact(\n    db: &impl ConnectionTrait,\n    contact_id: &str,\n    \
                    channel_id: &str,\n) -> Result<Vec<u8>, DbErr> {";
        assert_eq!(
            string_id_parameters(text),
            vec![(
                "of_contact".to_owned(),
                vec!["contact_id".to_owned(), "channel_id".to_owned()]
            )]
        );
        assert!(string_id_parameters("fn ok(contact: &ContactId, channel_id: &str) {}").is_empty());
        let lifetimes = "fn sign<'a>(order_id: &'a str, f: impl Fn(&str) -> Vec<u8>, payment_id: String) {}";
        assert_eq!(string_id_parameters(lifetimes)[0].1, ["order_id", "payment_id"]);
    }

    #[test]
    fn an_id_filters_a_query_as_its_string_does() {
        let (contact, channel) = (ContactId::new("cnt_1"), ChannelId::new("chn_1"));
        assert_eq!(sea_orm::Value::from(&contact), sea_orm::Value::from("cnt_1"));
        assert_eq!(channel.to_string(), "chn_1");
        assert!(contact == *"cnt_1");
    }
}
