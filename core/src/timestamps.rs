//! Stored times to wire times and back: `google.protobuf.Timestamp`, written as whole seconds (RFC 3339
//! `...Z` in JSON).

use chrono::{DateTime, Utc};

pub fn to_proto(at: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: 0,
    }
}

/// A request's Timestamp as a time; `None` when absent or out of range.
pub fn from_proto(at: Option<prost_types::Timestamp>) -> Option<DateTime<Utc>> {
    at.and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
}
