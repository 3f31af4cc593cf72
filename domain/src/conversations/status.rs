//! The outbound status machine. Status only moves forward: queued -> sent -> delivered -> read; failed is
//! terminal and reachable only before delivered. A report that skips a state (read before delivered) passes
//! through the skipped ones, each with its own event, in order; a late or repeated report changes nothing.

use crate::events::EventType;

/// Where an outbound message stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Queued,
    Sent,
    Delivered,
    Read,
    Failed,
}

impl Status {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "queued" => Self::Queued,
            "sent" => Self::Sent,
            "delivered" => Self::Delivered,
            "read" => Self::Read,
            "failed" => Self::Failed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
        }
    }

    pub fn event(self) -> Option<EventType> {
        match self {
            Self::Queued => None,
            Self::Sent => Some(EventType::MessageSent),
            Self::Delivered => Some(EventType::MessageDelivered),
            Self::Read => Some(EventType::MessageRead),
            Self::Failed => Some(EventType::MessageFailed),
        }
    }
}

/// The states a message at `current` passes through when a report says `reported`, in order; empty when
/// the report is late, repeated or not allowed (failed after delivered, anything after failed).
pub fn steps(current: Status, reported: Status) -> Vec<Status> {
    use Status::{Delivered, Failed, Queued, Read, Sent};
    match (current, reported) {
        (Failed, _) | (_, Queued) => Vec::new(),
        (Queued | Sent, Failed) => vec![Failed],
        (_, Failed) => Vec::new(),
        _ => [Sent, Delivered, Read]
            .into_iter()
            .filter(|s| *s > current && *s <= reported)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Status::*, steps};

    #[test]
    fn forward_only_with_skipped_states_filled_in() {
        assert_eq!(steps(Queued, Sent), [Sent]);
        assert_eq!(steps(Sent, Read), [Delivered, Read]);
        assert_eq!(steps(Queued, Delivered), [Sent, Delivered]);
        assert!(steps(Read, Delivered).is_empty(), "late");
        assert!(steps(Delivered, Delivered).is_empty(), "repeated");
        assert!(steps(Delivered, Sent).is_empty());
    }

    #[test]
    fn failed_is_terminal_and_only_before_delivered() {
        assert_eq!(steps(Queued, Failed), [Failed]);
        assert_eq!(steps(Sent, Failed), [Failed]);
        assert!(steps(Delivered, Failed).is_empty());
        assert!(steps(Read, Failed).is_empty());
        assert!(steps(Failed, Read).is_empty());
        assert!(steps(Failed, Failed).is_empty());
    }
}
