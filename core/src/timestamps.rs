//! Stored times to wire times: `google.protobuf.Timestamp`, whole seconds (RFC 3339 `...Z` in JSON).

use chrono::{DateTime, Utc};

pub fn to_proto(at: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: 0,
    }
}
