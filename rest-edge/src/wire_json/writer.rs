//! Writes a message's JSON by its plan, reading its bytes once.

use std::collections::HashSet;

use base64::Engine;
use prost_reflect::{DynamicMessage, MessageDescriptor};

use super::{
    MAX_DEPTH,
    plan::{FieldPlan, FieldsPlan, MessagePlan, NO_FIELD, PlanId, Plans, Scalar, Shape, ValueKind, naming_index},
    reader::{Raw, Reader, WireError, WireType, malformed},
};
use crate::{
    bindings::Naming,
    json_out::{self, JsonMessage},
};

impl Plans {
    /// Appends the JSON of the message encoded in `bytes`, rendered by plan `id`, to `out`.
    /// An encoding that needs protobuf's merge rules anywhere in the answer has the whole answer written by
    /// `json_out` instead, under prost's own limits (prost never writes one).
    pub fn write(&self, id: PlanId, bytes: &[u8], naming: Naming, out: &mut Vec<u8>) -> Result<(), WireError> {
        let start = out.len();
        let mut writer = Writer {
            plans: self,
            naming,
            out: &mut *out,
        };
        match writer.message(id, bytes, 0) {
            Ok(()) => Ok(()),
            Err(Stop::Malformed(error)) => Err(error),
            Err(Stop::Reflective) => {
                out.truncate(start);
                match &self.messages[id.0] {
                    MessagePlan::Fields(plan) => reflective(out, &plan.descriptor, bytes, naming),
                    _ => Err(malformed("no plan could write the answer")),
                }
            }
        }
    }
}

/// Why writing stopped.
enum Stop {
    Malformed(WireError),
    /// The encoding needs protobuf's merge rules: the answer is written by `json_out`.
    Reflective,
}

impl From<WireError> for Stop {
    fn from(error: WireError) -> Self {
        Self::Malformed(error)
    }
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
    fn message(&mut self, id: PlanId, bytes: &[u8], depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(malformed("nested too deeply").into());
        }
        match &self.plans.messages[id.0] {
            MessagePlan::Timestamp => self.timestamp(bytes, depth),
            MessagePlan::Reflective(descriptor) => Ok(reflective(self.out, descriptor, bytes, self.naming)?),
            MessagePlan::Fields(plan) => self.fields(plan, bytes, depth),
            MessagePlan::Building => Err(malformed("plan still building").into()),
        }
    }

    fn fields(&mut self, plan: &FieldsPlan, bytes: &[u8], depth: usize) -> Result<(), Stop> {
        let found = occurrences(plan, bytes, depth)?;
        let key = naming_index(self.naming);
        self.out.push(b'{');
        let mut next = 0;
        for (index, field) in (0u16..).zip(&plan.fields) {
            if index > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(&field.keys[key]);
            let first = next;
            while next < found.len() && found[next].field == index {
                next += 1;
            }
            let values = found[first..next].iter().map(|occurrence| occurrence.raw);
            match &field.shape {
                Shape::Single { value, presence, unset } => match found[first..next].first() {
                    // prost-reflect keeps no -0.0 in a field without presence: it equals the default.
                    Some(o) if !presence && is_float_zero(value, o.raw) => self.out.extend_from_slice(unset),
                    Some(o) => self.value(value, o.raw, depth)?,
                    None => self.out.extend_from_slice(unset),
                },
                Shape::List(value) => self.list(value, values, depth)?,
                Shape::Map { key, value } => self.map(*key, value, values, depth)?,
            }
        }
        self.out.push(b'}');
        Ok(())
    }

    fn list<'a>(&mut self, value: &ValueKind, items: impl Iterator<Item = Raw<'a>>, depth: usize) -> Result<(), Stop> {
        self.out.push(b'[');
        let mut first = true;
        let item_wire = wire_type(value);
        for raw in items {
            match raw {
                // A packed run of numbers (scalars and enums are never length-delimited otherwise).
                Raw::Delimited(packed) if item_wire != WireType::Delimited => {
                    let mut reader = Reader::new(packed);
                    while !reader.done() {
                        let item = reader.value(item_wire)?;
                        self.separator(&mut first);
                        self.value(value, item, depth)?;
                    }
                }
                raw => {
                    self.separator(&mut first);
                    self.value(value, raw, depth)?;
                }
            }
        }
        self.out.push(b']');
        Ok(())
    }

    /// A map, its entries in wire order. A key given twice, or an entry giving its key or value twice,
    /// needs protobuf's rules (the last wins, messages merge): `Stop::Reflective`.
    fn map<'a>(
        &mut self,
        key_kind: Scalar,
        value: &ValueKind,
        entries: impl Iterator<Item = Raw<'a>>,
        depth: usize,
    ) -> Result<(), Stop> {
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        self.out.push(b'{');
        let mut first = true;
        for raw in entries {
            let Raw::Delimited(entry) = raw else {
                return Err(malformed("map entry is not length-delimited").into());
            };
            let (mut entry_key, mut entry_value) = (None, None);
            let mut reader = Reader::new(entry);
            while let Some((number, wire, raw)) = reader.field(depth + 1)? {
                let slot = match number {
                    1 if wire == wire_type(&ValueKind::Scalar(key_kind)) => &mut entry_key,
                    2 if wire == wire_type(value) => &mut entry_value,
                    1 | 2 => return Err(malformed("map entry field has the wrong wire type").into()),
                    _ => continue,
                };
                if slot.replace(raw).is_some() {
                    return Err(Stop::Reflective);
                }
            }
            let mut rendered = Vec::new();
            match entry_key {
                None => rendered.extend_from_slice(key_kind.default_json()),
                Some(raw) => write_scalar(&mut rendered, key_kind, raw)?,
            }
            if !rendered.starts_with(b"\"") {
                rendered.insert(0, b'"');
                rendered.push(b'"');
            }
            self.separator(&mut first);
            self.out.extend_from_slice(&rendered);
            if !seen.insert(rendered) {
                return Err(Stop::Reflective);
            }
            self.out.push(b':');
            match (entry_value, value) {
                (Some(raw), _) => self.value(value, raw, depth)?,
                // An entry without its value holds the default: for a message, an empty one.
                (None, ValueKind::Message(id)) => self.message(*id, &[], depth + 1)?,
                (None, ValueKind::Scalar(scalar)) => self.out.extend_from_slice(scalar.default_json()),
                (None, ValueKind::Enum(_)) => self.value(value, Raw::Varint(0), depth)?,
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

    fn value(&mut self, kind: &ValueKind, raw: Raw<'_>, depth: usize) -> Result<(), Stop> {
        match (kind, raw) {
            (ValueKind::Scalar(scalar), raw) => write_scalar(self.out, *scalar, raw)?,
            (ValueKind::Enum(names), Raw::Varint(v)) => {
                let number = v as i32;
                match names.binary_search_by_key(&number, |(n, _)| *n) {
                    Ok(at) => self.out.extend_from_slice(&names[at].1),
                    Err(_) => self
                        .out
                        .extend_from_slice(itoa::Buffer::new().format(number).as_bytes()),
                }
            }
            (ValueKind::Message(id), Raw::Delimited(bytes)) => self.message(*id, bytes, depth + 1)?,
            _ => return Err(malformed("value has the wrong wire type").into()),
        }
        Ok(())
    }

    fn timestamp(&mut self, bytes: &[u8], depth: usize) -> Result<(), Stop> {
        let (mut seconds, mut nanos) = (0i64, 0i32);
        let mut reader = Reader::new(bytes);
        while let Some((number, _, raw)) = reader.field(depth)? {
            match (number, raw) {
                (1, Raw::Varint(v)) => seconds = v as i64,
                (2, Raw::Varint(v)) => nanos = v as i32,
                (1 | 2, _) => return Err(malformed("timestamp field has the wrong wire type").into()),
                _ => {}
            }
        }
        self.out.push(b'"');
        json_out::write_rfc3339(self.out, seconds, nanos);
        self.out.push(b'"');
        Ok(())
    }
}

/// `bytes` decoded by prost-reflect and written by `json_out`.
fn reflective(
    out: &mut Vec<u8>,
    descriptor: &MessageDescriptor,
    bytes: &[u8],
    naming: Naming,
) -> Result<(), WireError> {
    let message = DynamicMessage::decode(descriptor.clone(), bytes).map_err(|e| malformed(e.to_string()))?;
    serde_json::to_writer(
        out,
        &JsonMessage {
            message: &message,
            naming,
        },
    )
    .map_err(|e| malformed(e.to_string()))
}

/// The known fields' values in `bytes`, grouped by field in declaration order (wire order within a list);
/// unknown fields are skipped. A singular field or a oneof given twice is `Stop::Reflective`: the last
/// wins, messages merge, and the earlier value must still be valid.
fn occurrences<'a>(plan: &FieldsPlan, bytes: &'a [u8], depth: usize) -> Result<Vec<Occurrence<'a>>, Stop> {
    let mut found: Vec<Occurrence<'a>> = Vec::with_capacity(plan.fields.len());
    let mut reader = Reader::new(bytes);
    while let Some((number, wire, raw)) = reader.field(depth)? {
        let index = plan.by_number.get(number as usize).copied().unwrap_or(NO_FIELD);
        if index == NO_FIELD {
            continue;
        }
        let expected = match &plan.fields[usize::from(index)].shape {
            Shape::Single { value, .. } => wire_type(value) == wire,
            Shape::List(value) => wire_type(value) == wire || wire == WireType::Delimited,
            Shape::Map { .. } => wire == WireType::Delimited,
        };
        if !expected {
            return Err(malformed(format!("field {number} has the wrong wire type")).into());
        }
        found.push(Occurrence { field: index, raw });
    }
    if !found.is_sorted_by_key(|o| o.field) {
        // Stable: the items of a list keep their wire order.
        found.sort_by_key(|o| o.field);
    }
    let field = |o: &Occurrence<'_>| &plan.fields[usize::from(o.field)];
    let twice = found
        .windows(2)
        .any(|pair| pair[0].field == pair[1].field && matches!(field(&pair[0]).shape, Shape::Single { .. }));
    if twice || two_members_of_a_oneof(found.iter().map(field)) {
        return Err(Stop::Reflective);
    }
    Ok(found)
}

/// Whether two of the present fields (each present once) belong to one oneof.
fn two_members_of_a_oneof<'p>(present: impl Iterator<Item = &'p FieldPlan>) -> bool {
    let mut oneofs: Vec<usize> = present.filter_map(|field| field.oneof).collect();
    let count = oneofs.len();
    oneofs.sort_unstable();
    oneofs.dedup();
    oneofs.len() < count
}

fn wire_type(value: &ValueKind) -> WireType {
    match value {
        ValueKind::Scalar(Scalar::Double | Scalar::Fixed64 | Scalar::SFixed64) => WireType::Fixed64,
        ValueKind::Scalar(Scalar::Float | Scalar::Fixed32 | Scalar::SFixed32) => WireType::Fixed32,
        ValueKind::Scalar(Scalar::String | Scalar::Bytes) | ValueKind::Message(_) => WireType::Delimited,
        ValueKind::Scalar(_) | ValueKind::Enum(_) => WireType::Varint,
    }
}

fn is_float_zero(value: &ValueKind, raw: Raw<'_>) -> bool {
    match (value, raw) {
        (ValueKind::Scalar(Scalar::Double), Raw::Fixed64(bits)) => f64::from_bits(bits) == 0.0,
        (ValueKind::Scalar(Scalar::Float), Raw::Fixed32(bits)) => f32::from_bits(bits) == 0.0,
        _ => false,
    }
}

fn write_scalar(out: &mut Vec<u8>, scalar: Scalar, raw: Raw<'_>) -> Result<(), WireError> {
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
            write_float(out, f64::from(f32::from_bits(v)));
            return Ok(());
        }
        (Scalar::Double, Raw::Fixed64(v)) => {
            write_float(out, f64::from_bits(v));
            return Ok(());
        }
        (Scalar::String, Raw::Delimited(bytes)) => {
            std::str::from_utf8(bytes).map_err(|_| malformed("string is not UTF-8"))?;
            write_str(out, bytes);
            return Ok(());
        }
        (Scalar::Bytes, Raw::Delimited(bytes)) => {
            out.push(b'"');
            let start = out.len();
            out.resize(start + bytes.len().div_ceil(3) * 4, 0);
            let written = base64::engine::general_purpose::STANDARD
                .encode_slice(bytes, &mut out[start..])
                .map_err(|e| malformed(e.to_string()))?;
            out.truncate(start + written);
            out.push(b'"');
            return Ok(());
        }
        _ => return Err(malformed(format!("{scalar:?} value has the wrong wire type"))),
    };
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// Finite numbers as JSON numbers; NaN and infinities as proto3 JSON's strings.
fn write_float(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"\"Infinity\"" } else { b"\"-Infinity\"" });
    } else {
        // serde_json's own formatting, so that both writers agree to the digit (a Vec sink cannot fail).
        let _ = serde::Serializer::serialize_f64(&mut serde_json::Serializer::new(&mut *out), v);
    }
}

/// `text` (valid UTF-8) as a JSON string, escaped as serde_json escapes it.
pub(super) fn write_str(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    let mut run = 0;
    for (at, &byte) in text.iter().enumerate() {
        let escape = ESCAPE[usize::from(byte)];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&text[run..at]);
        run = at + 1;
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let hex = [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex[0], hex[1]]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
    }
    out.extend_from_slice(&text[run..]);
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
