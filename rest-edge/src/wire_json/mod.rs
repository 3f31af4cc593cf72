//! Response JSON written straight from the core's encoded protobuf answer, without decoding it into a
//! `DynamicMessage` first. At start-up every response message gets a plan (`plan`): its fields in
//! declaration order with their JSON keys already quoted for both namings, their kinds, and what an unset
//! field writes. A response is then one pass over its bytes per message (`reader`) and one pass writing JSON
//! (`writer`).
//!
//! The output is `json_out`'s, byte for byte (the tests hold the two together; a map's entries come in wire
//! order where `json_out` follows its hash map): defaults written, unset fields with presence as `null`,
//! 64-bit integers as numbers, Timestamps as RFC 3339. The other well-known types, and the encodings prost
//! never writes whose meaning needs protobuf's merge rules (a singular field, a oneof or a map key given
//! twice), go through `json_out`: the former for that message, the latter for the whole answer.

mod plan;
mod reader;
mod writer;

pub use plan::{PlanId, Plans};

/// Nesting deeper than this is refused, as prost refuses it when decoding.
const MAX_DEPTH: usize = 100;

#[cfg(test)]
mod tests;
