//! The outbound status machine. Status only moves forward: queued -> sent -> delivered -> read; failed is
//! terminal and reachable only before delivered. A report that skips a state (read before delivered) passes
//! through the skipped ones, each with its own event, in order; a late or repeated report changes nothing.

use crate::{events::EventType, store::entities::messages::MessageStatus};

/// The event a message reaching `status` publishes.
pub fn event(status: MessageStatus) -> Option<EventType> {
    match status {
        MessageStatus::Received | MessageStatus::Queued => None,
        MessageStatus::Sent => Some(EventType::MessageSent),
        MessageStatus::Delivered => Some(EventType::MessageDelivered),
        MessageStatus::Read => Some(EventType::MessageRead),
        MessageStatus::Failed => Some(EventType::MessageFailed),
    }
}

/// The states a message at `current` passes through when a report says `reported`, in order; empty when
/// the report is late, repeated or not allowed (failed after delivered, anything after failed).
pub fn steps(current: MessageStatus, reported: MessageStatus) -> Vec<MessageStatus> {
    use MessageStatus::{Delivered, Failed, Queued, Read, Received, Sent};
    match (current, reported) {
        (Failed | Received, _) | (_, Queued | Received) => Vec::new(),
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
    use super::{MessageStatus::*, steps};

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

    #[test]
    fn an_inbound_message_has_no_outbound_steps() {
        assert!(steps(Received, Read).is_empty());
        assert!(steps(Queued, Received).is_empty());
    }
}
