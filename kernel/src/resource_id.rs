//! Ids of resources as types. The entities' id columns of these kinds arrive as them (a column type, as
//! `AccountId` is one), and the functions that are handed two ids at once (a contact and its channel, an
//! agent and one of its FAQs) take them typed: passed in the wrong order, they do not compile. A column
//! that holds `""` for "none" stays text. Unlike the tenant (`AccountId`) an id carries no trust: a caller
//! may name any id, and scoped lookups still filter by the account; so anyone may build one, at the point
//! where the string is known to be that kind of id. The prefixes of new ids live in `ids::Kind`.
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
    pub enum Broadcast {}
    pub enum Channel {}
    pub enum Contact {}
    pub enum Conversation {}
    pub enum Delivery {}
    pub enum Event {}
    pub enum Faq {}
    pub enum Gap {}
    pub enum KnowledgeGroup {}
    pub enum Message {}
    pub enum Pipeline {}
    pub enum Source {}
    pub enum Webhook {}
}

pub type AgentId = Id<kind::Agent>;
pub type BroadcastId = Id<kind::Broadcast>;
pub type ChannelId = Id<kind::Channel>;
pub type ContactId = Id<kind::Contact>;
pub type ConversationId = Id<kind::Conversation>;
pub type DeliveryId = Id<kind::Delivery>;
pub type EventId = Id<kind::Event>;
pub type FaqId = Id<kind::Faq>;
pub type GapId = Id<kind::Gap>;
pub type KnowledgeGroupId = Id<kind::KnowledgeGroup>;
pub type MessageId = Id<kind::Message>;
pub type PipelineId = Id<kind::Pipeline>;
pub type SourceId = Id<kind::Source>;
pub type WebhookId = Id<kind::Webhook>;

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

impl<K> PartialEq<&str> for Id<K> {
    fn eq(&self, other: &&str) -> bool {
        self.value == *other
    }
}

impl<K> PartialEq<Id<K>> for String {
    fn eq(&self, other: &Id<K>) -> bool {
        *self == other.value
    }
}

/// Written as the text it is, as the id was in an event's payload or a job's arguments before it had a type.
impl<K> serde::Serialize for Id<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.value)
    }
}

impl<K> PartialEq for Id<K> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<K> Eq for Id<K> {}

impl<K> std::hash::Hash for Id<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.value.hash(state);
    }
}

impl<K> From<&str> for Id<K> {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl<K> From<String> for Id<K> {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

/// Read as the text it is wherever text is wanted (a log field, a map keyed by strings); a function that
/// tells two ids apart takes them typed.
impl<K> std::ops::Deref for Id<K> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.value
    }
}

impl<K> From<Id<K>> for String {
    fn from(id: Id<K>) -> Self {
        id.value
    }
}

impl<K> From<&Id<K>> for String {
    fn from(id: &Id<K>) -> Self {
        id.value.clone()
    }
}

// A column type, as `DeriveValueType` would make one for a non-generic newtype: an entity's id columns
// arrive as their kind's id, stored as text.

/// So that a query filters on it as on its string: `Column::ContactId.eq(contact)`.
impl<K> From<&Id<K>> for sea_orm::Value {
    fn from(id: &Id<K>) -> Self {
        id.as_str().into()
    }
}

impl<K> From<Id<K>> for sea_orm::Value {
    fn from(id: Id<K>) -> Self {
        id.value.into()
    }
}

impl<K> sea_orm::TryGetable for Id<K> {
    fn try_get_by<I: sea_orm::ColIdx>(res: &sea_orm::QueryResult, idx: I) -> Result<Self, sea_orm::TryGetError> {
        String::try_get_by(res, idx).map(Self::new)
    }
}

impl<K> sea_orm::sea_query::ValueType for Id<K> {
    fn try_from(v: sea_orm::Value) -> Result<Self, sea_orm::sea_query::ValueTypeErr> {
        <String as sea_orm::sea_query::ValueType>::try_from(v).map(Self::new)
    }

    fn type_name() -> String {
        "Id".to_owned()
    }

    fn array_type() -> sea_orm::sea_query::ArrayType {
        <String as sea_orm::sea_query::ValueType>::array_type()
    }

    fn column_type() -> sea_orm::sea_query::ColumnType {
        <String as sea_orm::sea_query::ValueType>::column_type()
    }
}

impl<K> sea_orm::sea_query::Nullable for Id<K> {
    fn null() -> sea_orm::Value {
        <String as sea_orm::sea_query::Nullable>::null()
    }
}

impl<K> sea_orm::IntoActiveValue<Id<K>> for Id<K> {
    fn into_active_value(self) -> sea_orm::ActiveValue<Id<K>> {
        sea_orm::ActiveValue::Set(self)
    }
}

impl<K> sea_orm::sea_query::postgres_array::NotU8 for Id<K> {}

/// Ids are text: no number becomes one (a primary key's type must say so).
impl<K> sea_orm::TryFromU64 for Id<K> {
    fn try_from_u64(_: u64) -> Result<Self, sea_orm::DbErr> {
        Err(sea_orm::DbErr::ConvertFromU64("Id"))
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
