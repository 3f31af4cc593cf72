//! How each message is written, worked out once from its descriptor.

use std::collections::HashMap;

use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};

use super::writer::write_str;
use crate::bindings::Naming;

/// Messages whose field numbers all fit a lookup table this long get a plan; others (none in the contract)
/// go through `json_out`.
const MAX_PLANNED_NUMBER: u32 = 1024;
pub(super) const NO_FIELD: u16 = u16::MAX;

/// Which plan in `Plans` renders a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanId(pub(super) usize);

/// The plans of a set of messages and of every message they reach.
#[derive(Default)]
pub struct Plans {
    pub(super) messages: Vec<MessagePlan>,
    ids: HashMap<String, PlanId>,
}

pub(super) enum MessagePlan {
    /// `google.protobuf.Timestamp`, written here: the most common well-known type.
    Timestamp,
    /// The other well-known types keep their canonical JSON through `json_out`, as does a message this
    /// module has no plan for.
    Reflective(MessageDescriptor),
    Fields(FieldsPlan),
    /// Reserved while the plan is being built (a message that reaches itself).
    Building,
}

pub(super) struct FieldsPlan {
    pub(super) descriptor: MessageDescriptor,
    /// In declaration order, the order the JSON object lists them in.
    pub(super) fields: Vec<FieldPlan>,
    /// Index into `fields` by field number (`NO_FIELD` where there is none).
    pub(super) by_number: Box<[u16]>,
}

pub(super) struct FieldPlan {
    /// `"name":` for each naming, indexed by `naming_index`.
    pub(super) keys: [Box<[u8]>; 2],
    pub(super) shape: Shape,
    /// The (non-synthetic) oneof the field belongs to.
    pub(super) oneof: Option<usize>,
}

pub(super) enum Shape {
    /// A singular field, and the JSON written when it is absent from the wire.
    Single {
        value: ValueKind,
        presence: bool,
        unset: Box<[u8]>,
    },
    List(ValueKind),
    Map {
        key: Scalar,
        value: ValueKind,
    },
}

pub(super) enum ValueKind {
    Scalar(Scalar),
    /// Quoted value names by number, sorted by number.
    Enum(Vec<(i32, Box<[u8]>)>),
    Message(PlanId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scalar {
    Double,
    Float,
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Bool,
    String,
    Bytes,
}

impl Scalar {
    fn of(kind: &Kind) -> Option<Self> {
        Some(match kind {
            Kind::Double => Self::Double,
            Kind::Float => Self::Float,
            Kind::Int32 => Self::Int32,
            Kind::Int64 => Self::Int64,
            Kind::Uint32 => Self::UInt32,
            Kind::Uint64 => Self::UInt64,
            Kind::Sint32 => Self::SInt32,
            Kind::Sint64 => Self::SInt64,
            Kind::Fixed32 => Self::Fixed32,
            Kind::Fixed64 => Self::Fixed64,
            Kind::Sfixed32 => Self::SFixed32,
            Kind::Sfixed64 => Self::SFixed64,
            Kind::Bool => Self::Bool,
            Kind::String => Self::String,
            Kind::Bytes => Self::Bytes,
            Kind::Message(_) | Kind::Enum(_) => return None,
        })
    }

    /// The JSON of the type's default value.
    pub(super) fn default_json(self) -> &'static [u8] {
        match self {
            Self::Bool => b"false",
            Self::String | Self::Bytes => b"\"\"",
            Self::Float | Self::Double => b"0.0",
            _ => b"0",
        }
    }
}

impl ValueKind {
    /// The JSON of an absent value that has no presence: the type's default (a message always has presence).
    fn unset_json(&self) -> Box<[u8]> {
        match self {
            Self::Scalar(scalar) => scalar.default_json().into(),
            Self::Enum(names) => names
                .iter()
                .find(|(number, _)| *number == 0)
                .map_or_else(|| b"0".as_slice().into(), |(_, name)| name.clone()),
            Self::Message(_) => b"null".as_slice().into(),
        }
    }
}

pub(super) fn naming_index(naming: Naming) -> usize {
    match naming {
        Naming::Snake => 0,
        Naming::LowerCamel => 1,
    }
}

impl Plans {
    /// The plan of `message`, building it (and those of the messages it reaches) on first use.
    pub fn plan(&mut self, message: &MessageDescriptor) -> PlanId {
        if let Some(id) = self.ids.get(message.full_name()) {
            return *id;
        }
        let id = PlanId(self.messages.len());
        self.messages.push(MessagePlan::Building);
        self.ids.insert(message.full_name().to_owned(), id);
        let plan = match message.full_name() {
            "google.protobuf.Timestamp" => MessagePlan::Timestamp,
            name if name.starts_with("google.protobuf.") => MessagePlan::Reflective(message.clone()),
            _ => self
                .fields_plan(message)
                .map_or_else(|| MessagePlan::Reflective(message.clone()), MessagePlan::Fields),
        };
        self.messages[id.0] = plan;
        id
    }

    /// `None` for what no plan covers: field numbers past `MAX_PLANNED_NUMBER`, a map keyed by a non-scalar.
    fn fields_plan(&mut self, message: &MessageDescriptor) -> Option<FieldsPlan> {
        let top = message.fields().map(|f| f.number()).max().unwrap_or(0);
        if top > MAX_PLANNED_NUMBER {
            return None;
        }
        let mut by_number = vec![NO_FIELD; top as usize + 1].into_boxed_slice();
        let mut fields = Vec::new();
        for (field, index) in message.fields().zip(0u16..) {
            by_number[field.number() as usize] = index;
            fields.push(self.field_plan(&field)?);
        }
        Some(FieldsPlan {
            descriptor: message.clone(),
            fields,
            by_number,
        })
    }

    fn field_plan(&mut self, field: &FieldDescriptor) -> Option<FieldPlan> {
        let keys = [Naming::Snake, Naming::LowerCamel].map(|naming| {
            let mut key = Vec::new();
            write_str(&mut key, naming.field_name(field).as_bytes());
            key.push(b':');
            key.into_boxed_slice()
        });
        let shape = match field.kind() {
            Kind::Message(entry) if field.is_map() => Shape::Map {
                key: Scalar::of(&entry.map_entry_key_field().kind())?,
                value: self.value_kind(&entry.map_entry_value_field()),
            },
            _ if field.is_list() => Shape::List(self.value_kind(field)),
            _ => {
                let value = self.value_kind(field);
                let presence = field.supports_presence();
                let unset = if presence {
                    b"null".as_slice().into()
                } else {
                    value.unset_json()
                };
                Shape::Single { value, presence, unset }
            }
        };
        let oneof = field
            .containing_oneof()
            .filter(|oneof| !oneof.is_synthetic())
            .and_then(|oneof| field.parent_message().oneofs().position(|o| o.name() == oneof.name()));
        Some(FieldPlan { keys, shape, oneof })
    }

    fn value_kind(&mut self, field: &FieldDescriptor) -> ValueKind {
        match field.kind() {
            Kind::Message(message) => ValueKind::Message(self.plan(&message)),
            Kind::Enum(descriptor) => ValueKind::Enum(enum_names(&descriptor)),
            kind => ValueKind::Scalar(Scalar::of(&kind).unwrap_or(Scalar::Bytes)),
        }
    }
}

/// Each number's quoted name, the one prost-reflect picks when aliases share a number.
fn enum_names(descriptor: &EnumDescriptor) -> Vec<(i32, Box<[u8]>)> {
    let mut numbers: Vec<i32> = descriptor.values().map(|value| value.number()).collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
        .into_iter()
        .filter_map(|number| {
            let value = descriptor.get_value(number)?;
            let mut name = Vec::new();
            write_str(&mut name, value.name().as_bytes());
            Some((number, name.into_boxed_slice()))
        })
        .collect()
}
