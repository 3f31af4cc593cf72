//! Response JSON: proto3 JSON with the contract's stricter shape. Every field is written, defaults included;
//! a field with presence (proto3 `optional`, a message, a oneof member) that is unset is written as `null`,
//! which prost-reflect would omit; 64-bit integers are JSON numbers. Well-known types (Timestamp, Struct, ...)
//! keep their canonical forms through prost-reflect.

use base64::Engine;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, SerializeOptions, Value};
use serde::ser::{Error, Serialize, SerializeMap, SerializeSeq, Serializer};

/// JSON field naming of a surface: the site API speaks lowerCamelCase, the platform API snake_case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    LowerCamel,
    Snake,
}

impl Naming {
    pub fn field_name(self, field: &FieldDescriptor) -> &str {
        match self {
            Self::LowerCamel => field.json_name(),
            Self::Snake => field.name(),
        }
    }
}

/// The message as a JSON value, exactly as REST responses render it (webhook payloads use this too).
pub fn to_value(message: &DynamicMessage, naming: Naming) -> serde_json::Value {
    serde_json::to_value(JsonMessage { message, naming }).unwrap_or(serde_json::Value::Null)
}

/// A message to serialize in the given naming.
pub struct JsonMessage<'a> {
    pub message: &'a DynamicMessage,
    pub naming: Naming,
}

impl Serialize for JsonMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let descriptor = prost_reflect::ReflectMessage::descriptor(self.message);
        if descriptor.full_name() == "google.protobuf.Timestamp" {
            // The most common well-known type, written here: prost-reflect's path costs thousands of
            // instructions per timestamp (docs/BENCHMARKS.md), and a page of deals carries hundreds.
            let seconds = self
                .message
                .get_field_by_name("seconds")
                .and_then(|v| v.as_i64())
                .unwrap_or(0);
            let nanos = self
                .message
                .get_field_by_name("nanos")
                .and_then(|v| v.as_i32())
                .unwrap_or(0);
            return serializer.serialize_str(&rfc3339(seconds, nanos));
        }
        if descriptor.full_name().starts_with("google.protobuf.") {
            let options = SerializeOptions::new()
                .stringify_64_bit_integers(false)
                .use_proto_field_name(self.naming == Naming::Snake);
            return self.message.serialize_with_options(serializer, &options);
        }
        // Only set fields carry a value; the rest get their defaults written here without allocating one
        // (`get_field` would build a default `Value` per unset field).
        let set: Vec<(u32, &Value)> = self
            .message
            .fields()
            .map(|(field, value)| (field.number(), value))
            .collect();
        let mut map = serializer.serialize_map(Some(descriptor.fields().len()))?;
        for field in descriptor.fields() {
            let key = self.naming.field_name(&field);
            match set.iter().find(|(number, _)| *number == field.number()) {
                Some((_, value)) => {
                    map.serialize_entry(
                        key,
                        &JsonValue {
                            value,
                            field: &field,
                            naming: self.naming,
                        },
                    )?;
                }
                None => map.serialize_entry(key, &UnsetField(&field))?,
            }
        }
        map.end()
    }
}

/// The JSON of an unset field: null for fields with presence, else the type's default.
struct UnsetField<'a>(&'a FieldDescriptor);

impl Serialize for UnsetField<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let field = self.0;
        if field.is_list() {
            return serializer.serialize_seq(Some(0))?.end();
        }
        if field.is_map() {
            return serializer.serialize_map(Some(0))?.end();
        }
        if field.supports_presence() {
            return serializer.serialize_unit();
        }
        match field.kind() {
            Kind::Bool => serializer.serialize_bool(false),
            Kind::String | Kind::Bytes => serializer.serialize_str(""),
            Kind::Float | Kind::Double => serializer.serialize_f64(0.0),
            Kind::Enum(e) => match e.get_value(0) {
                Some(v) => serializer.serialize_str(v.name()),
                None => serializer.serialize_i32(0),
            },
            Kind::Message(_) => serializer.serialize_unit(),
            _ => serializer.serialize_i32(0),
        }
    }
}

/// One field value; `field` gives the enum type and map value kind.
struct JsonValue<'a> {
    value: &'a Value,
    field: &'a FieldDescriptor,
    naming: Naming,
}

impl Serialize for JsonValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let naming = self.naming;
        match self.value {
            Value::Bool(v) => serializer.serialize_bool(*v),
            Value::I32(v) => serializer.serialize_i32(*v),
            Value::I64(v) => serializer.serialize_i64(*v),
            Value::U32(v) => serializer.serialize_u32(*v),
            Value::U64(v) => serializer.serialize_u64(*v),
            Value::F32(v) => float(serializer, f64::from(*v)),
            Value::F64(v) => float(serializer, *v),
            Value::String(v) => serializer.serialize_str(v),
            Value::Bytes(v) => serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v)),
            Value::EnumNumber(n) => {
                let name = match self.field.kind() {
                    Kind::Enum(e) => e.get_value(*n).map(|v| v.name().to_owned()),
                    _ => None,
                };
                match name {
                    Some(name) => serializer.serialize_str(&name),
                    None => serializer.serialize_i32(*n),
                }
            }
            Value::Message(message) => JsonMessage { message, naming }.serialize(serializer),
            Value::List(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&JsonValue {
                        value: item,
                        field: self.field,
                        naming,
                    })?;
                }
                seq.end()
            }
            Value::Map(entries) => {
                let Kind::Message(entry) = self.field.kind() else {
                    return Err(S::Error::custom("map field without an entry type"));
                };
                let value_field = entry.map_entry_value_field();
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    let key = match key {
                        MapKey::Bool(b) => b.to_string(),
                        MapKey::I32(n) => n.to_string(),
                        MapKey::I64(n) => n.to_string(),
                        MapKey::U32(n) => n.to_string(),
                        MapKey::U64(n) => n.to_string(),
                        MapKey::String(s) => s.clone(),
                    };
                    map.serialize_entry(
                        &key,
                        &JsonValue {
                            value,
                            field: &value_field,
                            naming,
                        },
                    )?;
                }
                map.end()
            }
        }
    }
}

/// A Timestamp as proto3 JSON writes it: RFC 3339 in UTC with `Z`, and 0, 3, 6 or 9 fractional digits.
fn rfc3339(seconds: i64, nanos: i32) -> String {
    let mut out = Vec::with_capacity(32);
    write_rfc3339(&mut out, seconds, nanos);
    String::from_utf8_lossy(&out).into_owned()
}

/// Appends `rfc3339(seconds, nanos)` (unquoted) to `out`. Nanos outside 0..1e9, which the core never
/// writes, are clamped.
pub fn write_rfc3339(out: &mut Vec<u8>, seconds: i64, nanos: i32) {
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    match u32::try_from(year) {
        Ok(year) if year <= 9999 => digits(out, year, 4),
        _ => out.extend_from_slice(year.to_string().as_bytes()),
    }
    // Each remaining part is below 100 by construction.
    let parts = [month, day, of_day / 3600, of_day % 3600 / 60, of_day % 60].map(|p| p as u32);
    for (separator, part) in [b'-', b'-', b'T', b':', b':'].into_iter().zip(parts) {
        out.push(separator);
        digits(out, part, 2);
    }
    let nanos = nanos.clamp(0, 999_999_999) as u32;
    match nanos {
        0 => {}
        n if n % 1_000_000 == 0 => {
            out.push(b'.');
            digits(out, n / 1_000_000, 3);
        }
        n if n % 1_000 == 0 => {
            out.push(b'.');
            digits(out, n / 1_000, 6);
        }
        n => {
            out.push(b'.');
            digits(out, n, 9);
        }
    }
    out.push(b'Z');
}

/// `value` in exactly `width` (at most 9) decimal digits, zero-padded (`value` must fit). Divides by the
/// constant 10 only, which compiles to multiplications: timestamps are a hot part of every list answer.
fn digits(out: &mut Vec<u8>, mut value: u32, width: usize) {
    let mut buffer = [b'0'; 9];
    for slot in buffer[..width].iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
    out.extend_from_slice(&buffer[..width]);
}

/// Finite numbers as JSON numbers; NaN and infinities as proto3 JSON's strings.
fn float<S: Serializer>(serializer: S, v: f64) -> Result<S::Ok, S::Error> {
    if v.is_nan() {
        serializer.serialize_str("NaN")
    } else if v.is_infinite() {
        serializer.serialize_str(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        serializer.serialize_f64(v)
    }
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn timestamps_format_as_proto3_json() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_323_045, 0), "2026-01-02T03:04:05Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_767_323_045, 120_000_000), "2026-01-02T03:04:05.120Z");
        assert_eq!(rfc3339(1_767_323_045, 1_000), "2026-01-02T03:04:05.000001Z");
        assert_eq!(rfc3339(1_767_323_045, 7), "2026-01-02T03:04:05.000000007Z");
        assert_eq!(rfc3339(1_767_323_045, 999_999_999), "2026-01-02T03:04:05.999999999Z");
        assert_eq!(rfc3339(1_767_323_045, 987_654_321), "2026-01-02T03:04:05.987654321Z");
        assert_eq!(rfc3339(-1, 0), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339(253_402_300_799, 0), "9999-12-31T23:59:59Z");
    }
}
