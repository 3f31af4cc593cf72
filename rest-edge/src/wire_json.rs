//! Response JSON written straight from the core's encoded protobuf answer, without decoding it into a
//! `DynamicMessage` first. At start-up every response message gets a plan: its fields in declaration order
//! with their JSON keys already quoted for both namings, their kinds, and what an unset field writes. A
//! response is then one pass over its bytes per message plus one pass writing JSON.
//!
//! The output is exactly `json_out`'s (the tests hold the two byte for byte): defaults written, unset fields
//! with presence as `null`, 64-bit integers as numbers, Timestamps as RFC 3339. The other well-known types, and
//! the rare input that needs protobuf's merge semantics (a singular message field sent twice), go through
//! `json_out` for that message only.

use std::collections::HashMap;

use base64::Engine;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};

use crate::{
    bindings::Naming,
    json_out::{self, JsonMessage},
};

/// Nesting deeper than this is refused, as prost refuses it when decoding.
const MAX_DEPTH: usize = 100;
/// Messages whose field numbers all fit a lookup table this long get a plan; others (none in the contract)
/// go through `json_out`.
const MAX_PLANNED_NUMBER: u32 = 1024;
const NO_FIELD: u16 = u16::MAX;

/// A response the core sent that is not valid protobuf for its declared message.
#[derive(Debug, thiserror::Error)]
#[error("malformed response: {0}")]
pub struct WireError(String);

fn malformed(what: impl Into<String>) -> WireError {
    WireError(what.into())
}

/// Which plan in `Plans` renders a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanId(usize);

/// The plans of a set of messages and of every message they reach.
#[derive(Default)]
pub struct Plans {
    messages: Vec<MessagePlan>,
    ids: HashMap<String, PlanId>,
}

enum MessagePlan {
    /// `google.protobuf.Timestamp`, written here: the most common well-known type.
    Timestamp,
    /// The other well-known types keep their canonical JSON through `json_out`.
    Reflective(MessageDescriptor),
    Fields {
        descriptor: MessageDescriptor,
        /// In declaration order, the order the JSON object lists them in.
        fields: Vec<FieldPlan>,
        /// Index into `fields` by field number (`NO_FIELD` where there is none).
        by_number: Box<[u16]>,
    },
    /// Reserved while the plan is being built (a message that reaches itself).
    Building,
}

struct FieldPlan {
    /// `"name":` for each naming, indexed by `naming_index`.
    keys: [Box<str>; 2],
    shape: Shape,
}

enum Shape {
    /// A singular field and the JSON written when it is absent from the wire.
    Single {
        value: ValueKind,
        unset: Box<str>,
    },
    List(ValueKind),
    Map {
        key: Scalar,
        value: ValueKind,
        value_unset: Box<str>,
    },
}

enum ValueKind {
    Scalar(Scalar),
    /// Quoted value names by number, sorted by number.
    Enum(Vec<(i32, Box<str>)>),
    Message(PlanId),
}

#[derive(Clone, Copy, Debug)]
enum Scalar {
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

/// The wire type a value of each kind is written with (a packed list uses length-delimited instead).
#[derive(Clone, Copy, PartialEq, Eq)]
enum WireType {
    Varint = 0,
    Fixed64 = 1,
    Delimited = 2,
    StartGroup = 3,
    EndGroup = 4,
    Fixed32 = 5,
}

impl WireType {
    fn of(tag: u64) -> Result<Self, WireError> {
        Ok(match tag & 7 {
            0 => Self::Varint,
            1 => Self::Fixed64,
            2 => Self::Delimited,
            3 => Self::StartGroup,
            4 => Self::EndGroup,
            5 => Self::Fixed32,
            other => return Err(malformed(format!("wire type {other}"))),
        })
    }
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

    fn wire_type(self) -> WireType {
        match self {
            Self::Double | Self::Fixed64 | Self::SFixed64 => WireType::Fixed64,
            Self::Float | Self::Fixed32 | Self::SFixed32 => WireType::Fixed32,
            Self::String | Self::Bytes => WireType::Delimited,
            _ => WireType::Varint,
        }
    }

    /// The JSON of the type's default value.
    fn default_json(self) -> &'static str {
        match self {
            Self::Bool => "false",
            Self::String | Self::Bytes => "\"\"",
            Self::Float | Self::Double => "0.0",
            _ => "0",
        }
    }
}

impl ValueKind {
    fn wire_type(&self) -> WireType {
        match self {
            Self::Scalar(scalar) => scalar.wire_type(),
            Self::Enum(_) => WireType::Varint,
            Self::Message(_) => WireType::Delimited,
        }
    }

    /// What an absent value writes (a map entry without a value, a field without presence).
    fn default_json(&self) -> Box<str> {
        match self {
            Self::Scalar(scalar) => scalar.default_json().into(),
            Self::Enum(names) => names
                .iter()
                .find(|(number, _)| *number == 0)
                .map_or_else(|| "0".into(), |(_, name)| name.clone()),
            Self::Message(_) => "null".into(),
        }
    }
}

fn naming_index(naming: Naming) -> usize {
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
            _ if message.fields().any(|f| f.number() > MAX_PLANNED_NUMBER) => MessagePlan::Reflective(message.clone()),
            _ => {
                let fields: Vec<FieldPlan> = message.fields().map(|field| self.field_plan(&field)).collect();
                let top = message.fields().map(|f| f.number()).max().unwrap_or(0);
                let mut by_number = vec![NO_FIELD; top as usize + 1].into_boxed_slice();
                for (field, index) in message.fields().zip(0u16..) {
                    by_number[field.number() as usize] = index;
                }
                MessagePlan::Fields {
                    descriptor: message.clone(),
                    fields,
                    by_number,
                }
            }
        };
        self.messages[id.0] = plan;
        id
    }

    fn field_plan(&mut self, field: &FieldDescriptor) -> FieldPlan {
        let keys = [Naming::Snake, Naming::LowerCamel].map(|naming| {
            let mut key = Vec::new();
            write_str(&mut key, naming.field_name(field));
            key.push(b':');
            String::from_utf8(key).unwrap_or_default().into_boxed_str()
        });
        let shape = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                unreachable!("a map field's kind is its entry message")
            };
            let value = self.value_kind(&entry.map_entry_value_field());
            Shape::Map {
                key: Scalar::of(&entry.map_entry_key_field().kind()).unwrap_or(Scalar::String),
                value_unset: value.default_json(),
                value,
            }
        } else if field.is_list() {
            Shape::List(self.value_kind(field))
        } else {
            let value = self.value_kind(field);
            let unset = if field.supports_presence() {
                "null".into()
            } else {
                value.default_json()
            };
            Shape::Single { value, unset }
        };
        FieldPlan { keys, shape }
    }

    fn value_kind(&mut self, field: &FieldDescriptor) -> ValueKind {
        match field.kind() {
            Kind::Message(message) => ValueKind::Message(self.plan(&message)),
            Kind::Enum(descriptor) => {
                let mut names: Vec<(i32, Box<str>)> = descriptor
                    .values()
                    .map(|value| {
                        let mut name = Vec::new();
                        write_str(&mut name, value.name());
                        (
                            value.number(),
                            String::from_utf8(name).unwrap_or_default().into_boxed_str(),
                        )
                    })
                    .collect();
                // Aliases share a number; the first declared name is the one written, as prost-reflect does.
                names.sort_by_key(|(number, _)| *number);
                names.dedup_by_key(|(number, _)| *number);
                ValueKind::Enum(names)
            }
            kind => ValueKind::Scalar(Scalar::of(&kind).unwrap_or(Scalar::Bytes)),
        }
    }

    /// Appends the JSON of the message encoded in `bytes`, rendered by plan `id`, to `out`.
    pub fn write(&self, id: PlanId, bytes: &[u8], naming: Naming, out: &mut Vec<u8>) -> Result<(), WireError> {
        Writer {
            plans: self,
            naming,
            out,
        }
        .message(id, bytes, 0)
    }
}

/// One field's value as it appears on the wire.
#[derive(Clone, Copy)]
enum Raw<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Delimited(&'a [u8]),
}

/// A known field's value, found in a message's bytes.
struct Occurrence<'a> {
    field: u16,
    raw: Raw<'a>,
}

struct Writer<'p, 'o> {
    plans: &'p Plans,
    naming: Naming,
    out: &'o mut Vec<u8>,
}

impl Writer<'_, '_> {
    fn message(&mut self, id: PlanId, bytes: &[u8], depth: usize) -> Result<(), WireError> {
        if depth > MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        match &self.plans.messages[id.0] {
            MessagePlan::Timestamp => self.timestamp(bytes),
            MessagePlan::Reflective(descriptor) => self.reflective(descriptor, bytes),
            MessagePlan::Fields {
                descriptor,
                fields,
                by_number,
            } => match occurrences(fields, by_number, bytes)? {
                Some(found) => self.fields(fields, &found, depth),
                None => self.reflective(descriptor, bytes),
            },
            MessagePlan::Building => Err(malformed("plan still building")),
        }
    }

    fn fields(&mut self, fields: &[FieldPlan], found: &[Occurrence<'_>], depth: usize) -> Result<(), WireError> {
        let key = naming_index(self.naming);
        self.out.push(b'{');
        let mut next = 0;
        for (index, field) in (0u16..).zip(fields) {
            if index > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(field.keys[key].as_bytes());
            let first = next;
            while next < found.len() && found[next].field == index {
                next += 1;
            }
            let mut values = found[first..next].iter().map(|occurrence| occurrence.raw);
            match &field.shape {
                Shape::Single { value, unset } => match values.next_back() {
                    Some(raw) => self.value(value, raw, depth)?,
                    None => self.out.extend_from_slice(unset.as_bytes()),
                },
                Shape::List(value) => {
                    self.out.push(b'[');
                    let mut first_item = true;
                    for raw in values {
                        match (value, raw) {
                            // A packed run of numbers (scalars and enums are never length-delimited otherwise).
                            (ValueKind::Scalar(_) | ValueKind::Enum(_), Raw::Delimited(packed))
                                if value.wire_type() != WireType::Delimited =>
                            {
                                let mut reader = Reader::new(packed);
                                while !reader.done() {
                                    let item = reader.value(value.wire_type())?;
                                    self.separator(&mut first_item);
                                    self.value(value, item, depth)?;
                                }
                            }
                            _ => {
                                self.separator(&mut first_item);
                                self.value(value, raw, depth)?;
                            }
                        }
                    }
                    self.out.push(b']');
                }
                Shape::Map {
                    key,
                    value,
                    value_unset,
                } => self.map(*key, value, value_unset, values, depth)?,
            }
        }
        self.out.push(b'}');
        Ok(())
    }

    fn separator(&mut self, first: &mut bool) {
        if !std::mem::take(first) {
            self.out.push(b',');
        }
    }

    /// A map: its entries in wire order, a repeated key keeping its last value (protobuf's rule).
    fn map<'a>(
        &mut self,
        key_kind: Scalar,
        value: &ValueKind,
        value_unset: &str,
        entries: impl Iterator<Item = Raw<'a>>,
        depth: usize,
    ) -> Result<(), WireError> {
        let mut parsed: Vec<(Vec<u8>, Option<Raw<'a>>)> = Vec::new();
        for raw in entries {
            let Raw::Delimited(entry) = raw else {
                return Err(malformed("map entry is not length-delimited"));
            };
            let (mut entry_key, mut entry_value) = (None, None);
            let mut reader = Reader::new(entry);
            while let Some((number, wire)) = reader.tag()? {
                let raw = reader.value(wire)?;
                match number {
                    1 if wire == key_kind.wire_type() => entry_key = Some(raw),
                    2 if wire == value.wire_type() => entry_value = Some(raw),
                    1 | 2 => return Err(malformed("map entry field has the wrong wire type")),
                    _ => {}
                }
            }
            let mut rendered = Vec::new();
            match entry_key {
                None => rendered.extend_from_slice(key_kind.default_json().as_bytes()),
                Some(raw) => Writer {
                    plans: self.plans,
                    naming: self.naming,
                    out: &mut rendered,
                }
                .scalar(key_kind, raw)?,
            }
            if !rendered.starts_with(b"\"") {
                rendered.insert(0, b'"');
                rendered.push(b'"');
            }
            match parsed.iter_mut().find(|(seen, _)| *seen == rendered) {
                Some(earlier) => earlier.1 = entry_value,
                None => parsed.push((rendered, entry_value)),
            }
        }
        self.out.push(b'{');
        let mut first = true;
        for (key, raw) in parsed {
            self.separator(&mut first);
            self.out.extend_from_slice(&key);
            self.out.push(b':');
            match (raw, value) {
                (Some(raw), _) => self.value(value, raw, depth)?,
                // An entry without its value holds the default: for a message, an empty one.
                (None, ValueKind::Message(id)) => self.message(*id, &[], depth + 1)?,
                (None, _) => self.out.extend_from_slice(value_unset.as_bytes()),
            }
        }
        self.out.push(b'}');
        Ok(())
    }

    fn value(&mut self, kind: &ValueKind, raw: Raw<'_>, depth: usize) -> Result<(), WireError> {
        match (kind, raw) {
            (ValueKind::Scalar(scalar), raw) => self.scalar(*scalar, raw),
            (ValueKind::Enum(names), Raw::Varint(v)) => {
                let number = v as i32;
                match names.binary_search_by_key(&number, |(n, _)| *n) {
                    Ok(at) => self.out.extend_from_slice(names[at].1.as_bytes()),
                    Err(_) => self
                        .out
                        .extend_from_slice(itoa::Buffer::new().format(number).as_bytes()),
                }
                Ok(())
            }
            (ValueKind::Message(id), Raw::Delimited(bytes)) => self.message(*id, bytes, depth + 1),
            _ => Err(malformed("value has the wrong wire type")),
        }
    }

    fn scalar(&mut self, scalar: Scalar, raw: Raw<'_>) -> Result<(), WireError> {
        let mut digits = itoa::Buffer::new();
        let text = match (scalar, raw) {
            (Scalar::Int32, Raw::Varint(v)) => digits.format(v as i32),
            (Scalar::Int64, Raw::Varint(v)) => digits.format(v as i64),
            (Scalar::UInt32, Raw::Varint(v)) => digits.format(v as u32),
            (Scalar::UInt64, Raw::Varint(v)) => digits.format(v),
            (Scalar::SInt32, Raw::Varint(v)) => {
                let v = v as u32;
                digits.format((v >> 1) as i32 ^ -((v & 1) as i32))
            }
            (Scalar::SInt64, Raw::Varint(v)) => digits.format((v >> 1) as i64 ^ -((v & 1) as i64)),
            (Scalar::Bool, Raw::Varint(v)) => {
                if v != 0 {
                    "true"
                } else {
                    "false"
                }
            }
            (Scalar::Fixed32, Raw::Fixed32(v)) => digits.format(v),
            (Scalar::SFixed32, Raw::Fixed32(v)) => digits.format(v as i32),
            (Scalar::Fixed64, Raw::Fixed64(v)) => digits.format(v),
            (Scalar::SFixed64, Raw::Fixed64(v)) => digits.format(v as i64),
            (Scalar::Float, Raw::Fixed32(v)) => {
                self.float(f64::from(f32::from_bits(v)));
                return Ok(());
            }
            (Scalar::Double, Raw::Fixed64(v)) => {
                self.float(f64::from_bits(v));
                return Ok(());
            }
            (Scalar::String, Raw::Delimited(bytes)) => {
                let text = std::str::from_utf8(bytes).map_err(|_| malformed("string is not UTF-8"))?;
                write_str(self.out, text);
                return Ok(());
            }
            (Scalar::Bytes, Raw::Delimited(bytes)) => {
                self.out.push(b'"');
                let start = self.out.len();
                self.out.resize(start + bytes.len().div_ceil(3) * 4, 0);
                let written = base64::engine::general_purpose::STANDARD
                    .encode_slice(bytes, &mut self.out[start..])
                    .map_err(|e| malformed(e.to_string()))?;
                self.out.truncate(start + written);
                self.out.push(b'"');
                return Ok(());
            }
            _ => return Err(malformed(format!("{scalar:?} value has the wrong wire type"))),
        };
        self.out.extend_from_slice(text.as_bytes());
        Ok(())
    }

    /// Finite numbers as JSON numbers; NaN and infinities as proto3 JSON's strings.
    fn float(&mut self, v: f64) {
        let text = if v.is_nan() {
            "\"NaN\""
        } else if v.is_infinite() {
            if v > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" }
        } else {
            // serde_json's own formatting, so that both writers agree to the digit (a Vec sink cannot fail).
            let _ = serde::Serializer::serialize_f64(&mut serde_json::Serializer::new(&mut *self.out), v);
            return;
        };
        self.out.extend_from_slice(text.as_bytes());
    }

    fn timestamp(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        let (mut seconds, mut nanos) = (0i64, 0i32);
        let mut reader = Reader::new(bytes);
        while let Some((number, wire)) = reader.tag()? {
            match (number, reader.value(wire)?) {
                (1, Raw::Varint(v)) => seconds = v as i64,
                (2, Raw::Varint(v)) => nanos = v as i32,
                (1 | 2, _) => return Err(malformed("timestamp field has the wrong wire type")),
                _ => {}
            }
        }
        self.out.push(b'"');
        json_out::write_rfc3339(self.out, seconds, nanos);
        self.out.push(b'"');
        Ok(())
    }

    fn reflective(&mut self, descriptor: &MessageDescriptor, bytes: &[u8]) -> Result<(), WireError> {
        let message = DynamicMessage::decode(descriptor.clone(), bytes).map_err(|e| malformed(e.to_string()))?;
        serde_json::to_writer(
            &mut *self.out,
            &JsonMessage {
                message: &message,
                naming: self.naming,
            },
        )
        .map_err(|e| malformed(e.to_string()))
    }
}

/// The known fields' values in `bytes`, grouped by field in declaration order (wire order within a field);
/// unknown fields are skipped. `None` when a singular message field appears twice: protobuf merges the two,
/// which the reflective path does.
fn occurrences<'a>(
    fields: &[FieldPlan],
    by_number: &[u16],
    bytes: &'a [u8],
) -> Result<Option<Vec<Occurrence<'a>>>, WireError> {
    let mut found: Vec<Occurrence<'a>> = Vec::with_capacity(fields.len());
    let mut reader = Reader::new(bytes);
    while let Some((number, wire)) = reader.tag()? {
        let raw = reader.value(wire)?;
        let index = by_number.get(number as usize).copied().unwrap_or(NO_FIELD);
        if index == NO_FIELD {
            continue;
        }
        let expected = match &fields[usize::from(index)].shape {
            Shape::Single { value, .. } => value.wire_type() == wire,
            Shape::List(value) => value.wire_type() == wire || wire == WireType::Delimited,
            Shape::Map { .. } => wire == WireType::Delimited,
        };
        if !expected {
            return Err(malformed(format!("field {number} has the wrong wire type")));
        }
        found.push(Occurrence { field: index, raw });
    }
    if !found.is_sorted_by_key(|o| o.field) {
        // Stable: values of one field keep their wire order.
        found.sort_by_key(|o| o.field);
    }
    let merges = found.windows(2).any(|pair| {
        pair[0].field == pair[1].field
            && matches!(
                fields[usize::from(pair[0].field)].shape,
                Shape::Single {
                    value: ValueKind::Message(_),
                    ..
                }
            )
    });
    Ok((!merges).then_some(found))
}

/// Reads tags and values off encoded protobuf.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// The next field's number and wire type, or `None` at the end.
    fn tag(&mut self) -> Result<Option<(u32, WireType)>, WireError> {
        if self.done() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3).map_err(|_| malformed("field number out of range"))?;
        if number == 0 {
            return Err(malformed("field number 0"));
        }
        Ok(Some((number, WireType::of(tag)?)))
    }

    fn value(&mut self, wire: WireType) -> Result<Raw<'a>, WireError> {
        Ok(match wire {
            WireType::Varint => Raw::Varint(self.varint()?),
            WireType::Fixed64 => Raw::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default())),
            WireType::Fixed32 => Raw::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default())),
            WireType::Delimited => {
                let len = usize::try_from(self.varint()?).map_err(|_| malformed("length out of range"))?;
                Raw::Delimited(self.take(len)?)
            }
            WireType::StartGroup => {
                self.skip_group()?;
                Raw::Delimited(&[])
            }
            WireType::EndGroup => return Err(malformed("unexpected end of group")),
        })
    }

    /// Skips a (proto2) group up to its matching end; only unknown fields can be groups here.
    fn skip_group(&mut self) -> Result<(), WireError> {
        let mut open = 1usize;
        while open > 0 {
            let (_, wire) = self.tag()?.ok_or_else(|| malformed("unterminated group"))?;
            match wire {
                WireType::StartGroup => open += 1,
                WireType::EndGroup => open -= 1,
                other => {
                    self.value(other)?;
                }
            }
        }
        Ok(())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| malformed("truncated"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self.bytes.get(self.at).ok_or_else(|| malformed("truncated varint"))?;
            self.at += 1;
            if shift == 63 && byte > 1 {
                return Err(malformed("varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(malformed("varint longer than 10 bytes"))
    }
}

/// `text` as a JSON string, escaped as serde_json escapes it.
fn write_str(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut run = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escape = ESCAPE[usize::from(byte)];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[run..at]);
        run = at + 1;
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let hex = [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex[0], hex[1]]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// For each byte: 0 when it is written as is, else the letter after the backslash (`u` for `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

#[cfg(test)]
#[path = "wire_json_tests.rs"]
mod tests;
