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
    use super::{ChannelId, ContactId};

    #[test]
    fn an_id_filters_a_query_as_its_string_does() {
        let (contact, channel) = (ContactId::new("cnt_1"), ChannelId::new("chn_1"));
        assert_eq!(sea_orm::Value::from(&contact), sea_orm::Value::from("cnt_1"));
        assert_eq!(channel.to_string(), "chn_1");
        assert!(contact == *"cnt_1");
    }
}
