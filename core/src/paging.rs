//! Opaque list cursors: the (created_at, id) of the last row of a page, base64url encoded. Pages continue
//! strictly after it in newest-first order, so rows created meanwhile never shift a later page.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub id: String,
}

impl Cursor {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.created_at.timestamp_micros(), self.id))
    }

    /// The cursor in `s`, when it is one this API gave out for rows whose ids start with `id_prefix`.
    pub fn decode(s: &str, id_prefix: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (micros, id) = text.split_once(':')?;
        let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        (id.starts_with(id_prefix) && id.len() <= 64).then(|| Self {
            created_at,
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let cursor = Cursor {
            created_at: DateTime::from_timestamp_micros(1_767_323_045_123_456).unwrap(),
            id: "deal_abc".into(),
        };
        assert_eq!(Cursor::decode(&cursor.encode(), "deal_"), Some(cursor));
        for garbage in [
            "",
            "!!!",
            "bm9wZQ",
            &URL_SAFE_NO_PAD.encode("x:deal_1"),
            &URL_SAFE_NO_PAD.encode("1:user_1"),
        ] {
            assert_eq!(Cursor::decode(garbage, "deal_"), None, "{garbage}");
        }
    }
}
