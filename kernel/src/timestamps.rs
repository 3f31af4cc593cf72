//! Stored times to wire times and back: `google.protobuf.Timestamp`, written as whole seconds (RFC 3339
//! `...Z` in JSON).

use chrono::{DateTime, Utc};

use crate::error::{ApiError, ApiResult, FieldViolation};

pub fn to_proto(at: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: 0,
    }
}

/// Seconds of 0001-01-01T00:00:00Z and of 9999-12-31T23:59:59Z: the range `google.protobuf.Timestamp` allows.
const SECONDS: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// A request's Timestamp as a time, `None` when absent. One outside the range the Timestamp type defines
/// (nanos outside 0..1e9, a year outside 1..9999) is a 400 naming `field`, not a value read as unset.
pub fn from_proto(field: &str, at: Option<prost_types::Timestamp>) -> ApiResult<Option<DateTime<Utc>>> {
    let Some(t) = at else { return Ok(None) };
    let nanos = u32::try_from(t.nanos).ok().filter(|n| *n < 1_000_000_000);
    match nanos.filter(|_| SECONDS.contains(&t.seconds)) {
        Some(nanos) => Ok(DateTime::from_timestamp(t.seconds, nanos)),
        None => Err(ApiError::field(
            field,
            "must be a valid timestamp between years 1 and 9999 (nanos 0 to 999999999)",
        )),
    }
}

/// `from_proto` for a request whose problems are reported together: an out-of-range Timestamp joins
/// `violations` and reads as absent.
pub fn from_proto_noting(
    field: &str,
    at: Option<prost_types::Timestamp>,
    violations: &mut Vec<FieldViolation>,
) -> Option<DateTime<Utc>> {
    from_proto(field, at).unwrap_or_else(|e| {
        violations.extend(e.fields);
        None
    })
}

#[cfg(test)]
mod tests {
    use prost_types::Timestamp;

    use super::from_proto;

    #[test]
    fn timestamps_outside_the_protobuf_range_are_refused() {
        let at = |seconds, nanos| Some(Timestamp { seconds, nanos });
        assert_eq!(from_proto("f", None), Ok(None));
        let valid = from_proto("f", at(1_700_000_000, 5)).unwrap().unwrap();
        assert_eq!((valid.timestamp(), valid.timestamp_subsec_nanos()), (1_700_000_000, 5));
        assert!(from_proto("f", at(-62_135_596_800, 0)).unwrap().is_some());
        assert!(from_proto("f", at(253_402_300_799, 999_999_999)).unwrap().is_some());
        for (seconds, nanos) in [(0, -1), (0, 1_000_000_000), (-62_135_596_801, 0), (253_402_300_800, 0)] {
            let err = from_proto("close_date", at(seconds, nanos)).unwrap_err();
            assert_eq!(err.fields[0].field, "close_date", "{seconds} {nanos}");
        }
    }
}
