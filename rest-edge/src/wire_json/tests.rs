//! The plan-based writer against the reflective one (`json_out` over a decoded `DynamicMessage`): for every
//! message of the published contract and of the fixture, filled and empty, and for encodings prost never
//! writes but protobuf allows (unpacked lists, interleaved and repeated fields, unknown fields), the two
//! agree byte for byte. Malformed input is an error in both.

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, Value};

use super::{Plans, reader::WireError};
use crate::{bindings::Naming, json_out::JsonMessage, transcode_tests::pool};

fn contract_pool() -> DescriptorPool {
    DescriptorPool::decode(frontdesk_api::FILE_DESCRIPTOR_SET).expect("contract descriptors")
}

fn planned(descriptor: &MessageDescriptor, bytes: &[u8], naming: Naming) -> Result<String, WireError> {
    let mut plans = Plans::default();
    let id = plans.plan(descriptor);
    let mut out = Vec::new();
    plans.write(id, bytes, naming, &mut out)?;
    Ok(String::from_utf8(out).expect("the writer writes UTF-8"))
}

fn reflective(descriptor: &MessageDescriptor, bytes: &[u8], naming: Naming) -> Option<String> {
    let message = DynamicMessage::decode(descriptor.clone(), bytes).ok()?;
    serde_json::to_string(&JsonMessage {
        message: &message,
        naming,
    })
    .ok()
}

/// Both writers, both namings: the same text, or both refuse.
fn assert_agree(descriptor: &MessageDescriptor, bytes: &[u8]) {
    for naming in [Naming::Snake, Naming::LowerCamel] {
        let ours = planned(descriptor, bytes, naming).ok();
        let theirs = reflective(descriptor, bytes, naming);
        assert_eq!(ours, theirs, "{} ({naming:?}) from {bytes:?}", descriptor.full_name());
        if let Some(text) = ours {
            serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
        }
    }
}

/// A value of `kind`, different for each `variant`, choosing the awkward ones: escapes, negatives, extremes.
fn sample(kind: &Kind, variant: usize, depth: usize) -> Value {
    let v = variant as i64;
    match kind {
        Kind::Double => Value::F64([-1.5, 1e21, 0.1][variant % 3]),
        Kind::Float => Value::F32([0.1, -3.25, 7.0][variant % 3]),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(-7 - v as i32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(-(1 << 40) - v),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(u32::MAX - variant as u32),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(u64::MAX - variant as u64),
        Kind::Bool => Value::Bool(variant.is_multiple_of(2)),
        Kind::String => Value::String(format!("q\"b\\s/\n\t\u{1}\u{7f}é😀{variant}")),
        Kind::Bytes => Value::Bytes(vec![0, 255, 1, variant as u8].into()),
        Kind::Enum(e) => Value::EnumNumber(e.values().last().map_or(0, |value| value.number())),
        Kind::Message(message) => Value::Message(filled(message, depth + 1)),
    }
}

/// `descriptor` with every field set (one member per oneof, one entry per map so the order is fixed),
/// down to a few levels of nesting.
fn filled(descriptor: &MessageDescriptor, depth: usize) -> DynamicMessage {
    let mut message = DynamicMessage::new(descriptor.clone());
    if depth > 3 || descriptor.full_name() == "google.protobuf.Any" {
        return message;
    }
    if descriptor.full_name() == "google.protobuf.Timestamp" {
        message.set_field_by_name("seconds", Value::I64(1_767_323_045));
        message.set_field_by_name("nanos", Value::I32(120_000_000));
        return message;
    }
    for field in descriptor.fields() {
        if let Some(oneof) = field.containing_oneof()
            && oneof.fields().any(|member| message.has_field(&member))
        {
            continue;
        }
        let value = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                unreachable!()
            };
            let key = match sample(&entry.map_entry_key_field().kind(), 1, depth) {
                Value::String(s) => MapKey::String(s),
                Value::I32(n) => MapKey::I32(n),
                Value::I64(n) => MapKey::I64(n),
                Value::U32(n) => MapKey::U32(n),
                Value::U64(n) => MapKey::U64(n),
                Value::Bool(b) => MapKey::Bool(b),
                other => panic!("not a map key: {other:?}"),
            };
            Value::Map([(key, sample(&entry.map_entry_value_field().kind(), 2, depth))].into())
        } else if field.is_list() {
            Value::List((0..3).map(|variant| sample(&field.kind(), variant, depth)).collect())
        } else {
            sample(&field.kind(), 0, depth)
        };
        message.set_field(&field, value);
    }
    message
}

#[test]
fn every_contract_message_renders_as_the_reflective_writer_does() {
    for pool in [contract_pool(), pool()] {
        for descriptor in pool.all_messages() {
            if descriptor.is_map_entry() || descriptor.full_name() == "google.protobuf.Any" {
                continue;
            }
            assert_agree(&descriptor, &[]);
            assert_agree(&descriptor, &filled(&descriptor, 0).encode_to_vec());
        }
    }
}

/// Unknown group 35 holding itself `depth` times.
fn nested_groups(depth: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..depth {
        bytes = [field(35, 3, &bytes), field(35, 4, &[])].concat();
    }
    bytes
}

fn scalars() -> MessageDescriptor {
    pool().get_message_by_name("frontdesk.v1fixture.Scalars").unwrap()
}

/// Field `number`'s tag for wire type `wire`, followed by `rest`.
fn field(number: u32, wire: u8, rest: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    prost::encoding::encode_varint(u64::from(number << 3 | u32::from(wire)), &mut bytes);
    bytes.extend_from_slice(rest);
    bytes
}

#[test]
fn encodings_prost_never_writes_read_as_protobuf_reads_them() {
    let scalars = scalars();
    let cases: &[(&str, Vec<u8>)] = &[
        // `loose` is declared unpacked but may arrive packed, and `packed` the other way round.
        ("packed list of an unpacked field", field(18, 2, &[2, 5, 6])),
        (
            "unpacked items of a packed field",
            [field(17, 0, &[3]), field(17, 0, &[4])].concat(),
        ),
        (
            "a list in several runs around other fields",
            [
                field(18, 0, &[1]),
                field(3, 0, &[9]),
                field(18, 2, &[2, 2, 3]),
                field(18, 0, &[4]),
            ]
            .concat(),
        ),
        (
            "a singular scalar twice: the last wins",
            [field(3, 0, &[1]), field(3, 0, &[2])].concat(),
        ),
        (
            "a singular string twice",
            [field(14, 2, b"\x01a"), field(14, 2, b"\x01b")].concat(),
        ),
        (
            "a singular message twice merges",
            [
                field(27, 2, &[2]),
                field(3, 0, &[5]),
                field(27, 2, &[2]),
                field(13, 0, &[1]),
            ]
            .concat(),
        ),
        (
            "fields out of order",
            [
                field(13, 0, &[1]),
                field(3, 0, &[7]),
                field(1, 1, &1.0f64.to_le_bytes()),
            ]
            .concat(),
        ),
        (
            "unknown fields of every wire type are skipped",
            [
                field(31, 0, &[1]),
                field(32, 1, &[0; 8]),
                field(33, 2, &[1, 0]),
                field(34, 5, &[0; 4]),
                field(35, 3, &field(1, 0, &[1])),
                field(35, 4, &[]),
                field(3, 0, &[1]),
            ]
            .concat(),
        ),
        ("an enum number with no name", field(16, 0, &[42])),
        (
            "negative int32, ten-byte varint",
            field(3, 0, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]),
        ),
        (
            "NaN, infinity",
            [
                field(1, 1, &f64::NAN.to_le_bytes()),
                field(2, 5, &f32::NEG_INFINITY.to_le_bytes()),
            ]
            .concat(),
        ),
        (
            "a map repeating a key: the last value wins (order compared apart)",
            [
                field(22, 2, &[4, 0x08, 1, 0x10, 1]), // {true: RED}
                field(22, 2, &[2, 0x08, 0]),          // {false: <default>}
                field(22, 2, &[4, 0x08, 1, 0x10, 0]), // {true: COLOR_UNSPECIFIED}
            ]
            .concat(),
        ),
        ("a map entry without key or value", field(21, 2, &[0])),
        (
            "a oneof member and an optional set to their defaults",
            [field(23, 2, &[0]), field(26, 0, &[0])].concat(),
        ),
        (
            "timestamps in a list, one with unknown fields",
            [field(25, 2, &[2, 0x08, 1]), field(25, 2, &[4, 0x18, 7, 0x10, 5])].concat(),
        ),
        (
            "two members of one oneof: the last is the one set",
            [field(23, 2, b"\x01a"), field(24, 2, &[2, 0x10, 1])].concat(),
        ),
        (
            "a map entry giving its message value twice merges them",
            field(21, 2, &[12, 0x08, 1, 0x12, 3, 0x0a, 1, b'a', 0x12, 3, 0x12, 1, b'b']),
        ),
        (
            "negative zero in a field without presence is its default",
            [
                field(1, 1, &(-0.0f64).to_le_bytes()),
                field(2, 5, &(-0.0f32).to_le_bytes()),
                field(19, 2, &[8, 0, 0, 0, 0, 0, 0, 0, 0x80]),
            ]
            .concat(),
        ),
        (
            "a nested message twice: the lists inside it join",
            [
                field(27, 2, &[5, 0xca, 0x01, 2, 0x08, 1]),
                field(27, 2, &[5, 0xca, 0x01, 2, 0x10, 5]),
            ]
            .concat(),
        ),
        (
            "a group inside an unknown group",
            [
                field(35, 3, &field(36, 3, &field(36, 4, &[]))),
                field(35, 4, &[]),
                field(3, 0, &[2]),
            ]
            .concat(),
        ),
        ("groups nested to a depth prost allows", nested_groups(50)),
        (
            "a field twice in a nested message: the whole answer is written by json_out",
            [field(3, 0, &[7]), field(27, 2, &[4, 0x18, 1, 0x18, 2])].concat(),
        ),
        (
            "a field twice in a map's message value",
            [
                field(3, 0, &[7]),
                field(21, 2, &[10, 0x08, 1, 0x12, 6, 0x0a, 1, b'a', 0x0a, 1, b'b']),
            ]
            .concat(),
        ),
        (
            "a nested map repeating a key after other fields",
            [
                field(3, 0, &[7]),
                field(27, 2, &[12, 0x18, 9, 0xb2, 0x01, 2, 0x08, 1, 0xb2, 0x01, 2, 0x08, 1]),
            ]
            .concat(),
        ),
    ];
    for (case, bytes) in cases {
        for naming in [Naming::Snake, Naming::LowerCamel] {
            let ours = planned(&scalars, bytes, naming).unwrap_or_else(|e| panic!("{case}: {e}"));
            let theirs = reflective(&scalars, bytes, naming).unwrap_or_else(|| panic!("{case}: prost-reflect"));
            if case.contains("order compared apart") {
                let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
                assert_eq!(parse(&ours), parse(&theirs), "{case}");
            } else {
                assert_eq!(ours, theirs, "{case} ({naming:?})");
            }
        }
    }
}

#[test]
fn malformed_answers_are_errors_not_guesses() {
    let scalars = scalars();
    let cases: &[(&str, Vec<u8>)] = &[
        ("truncated varint", field(3, 0, &[0x80])),
        ("truncated string", field(14, 2, &[5, b'a'])),
        ("string that is not UTF-8", field(14, 2, &[2, 0xc3, 0x28])),
        ("known field with the wrong wire type", field(14, 0, &[1])),
        ("field number zero", vec![0x00, 1]),
        ("wire type 7", vec![0x1f]),
        ("end group without a start", field(3, 4, &[])),
        (
            "varint longer than ten bytes",
            field(3, 0, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]),
        ),
        ("packed fixed run of the wrong length", field(19, 2, &[3, 0, 0, 0])),
        ("nested message truncated", field(27, 2, &[3, 0x18, 1])),
        (
            "a replaced string that is not UTF-8",
            [field(14, 2, &[2, 0xc3, 0x28]), field(14, 2, b"\x01a")].concat(),
        ),
        // (1 << 32) | field 3, varint: read as 32 bits it would be an unknown field.
        ("a key over 32 bits", vec![0x98, 0x80, 0x80, 0x80, 0x10, 1]),
        ("groups nested past the limit", nested_groups(150)),
        (
            "a group ended by another group's end",
            [field(35, 3, &[]), field(36, 4, &[])].concat(),
        ),
        ("a group never ended", field(35, 3, &field(3, 0, &[1]))),
    ];
    for (case, bytes) in cases {
        assert!(planned(&scalars, bytes, Naming::Snake).is_err(), "{case}");
        assert!(
            reflective(&scalars, bytes, Naming::Snake).is_none(),
            "{case}: prost-reflect accepts it"
        );
    }
}

#[test]
fn nesting_is_followed_to_the_limit_and_refused_beyond_it() {
    let scalars = scalars();
    let nested = |levels: usize| {
        let mut bytes = Vec::new();
        for _ in 0..levels {
            let mut length = Vec::new();
            prost::encoding::encode_varint(bytes.len() as u64, &mut length);
            bytes = [field(27, 2, &length), bytes].concat();
        }
        bytes
    };
    assert!(planned(&scalars, &nested(90), Naming::Snake).is_ok());
    assert_agree(&scalars, &nested(90));
    assert!(planned(&scalars, &nested(150), Naming::Snake).is_err());
    assert!(reflective(&scalars, &nested(150), Naming::Snake).is_none());
}
