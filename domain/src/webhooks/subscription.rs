//! A subscription's fields as the API accepts them: the name rule, the event filter and the limits.

use crate::{error::FieldViolation, events::EventType};

/// Subscriptions one account may have.
pub const MAX_PER_ACCOUNT: usize = 50;
const MAX_DESCRIPTION: usize = 1_000;
/// Subscribes to every event type.
pub const ALL_EVENTS: &str = "*";

/// The event filter to store: known types or `*`, without repeats; all events when empty.
pub fn check_events(events: &[String]) -> Result<Vec<String>, FieldViolation> {
    if events.is_empty() {
        return Ok(vec![ALL_EVENTS.to_owned()]);
    }
    let mut kept: Vec<String> = Vec::new();
    for event in events {
        if event != ALL_EVENTS && EventType::parse(event).is_none() {
            let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            return Err(FieldViolation::new(
                "events",
                format!(
                    "`{event}` is not an event type: one of {}, or `*` for all",
                    known.join(", ")
                ),
            ));
        }
        if !kept.contains(event) {
            kept.push(event.clone());
        }
    }
    Ok(kept)
}

pub fn check_description(description: &str) -> Result<(), FieldViolation> {
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(FieldViolation::new("description", "must be at most 1000 characters"));
    }
    Ok(())
}

/// Whether a subscription with the stored filter `events` (JSON array) wants `event_type`.
pub fn wants(events: &[String], event_type: &str) -> bool {
    events.iter().any(|e| e == ALL_EVENTS || e == event_type)
}

pub fn parse_events(stored: &str) -> Vec<String> {
    serde_json::from_str(stored).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events() {
        assert_eq!(check_events(&[]).unwrap(), vec!["*"]);
        let asked = vec!["deal.created".to_owned(), "deal.created".to_owned(), "*".to_owned()];
        assert_eq!(check_events(&asked).unwrap(), vec!["deal.created", "*"]);
        assert!(check_events(&["deal.deleted".to_owned()]).is_err());
        assert!(check_events(&["conversation.handoff".to_owned()]).is_ok());
        assert!(wants(&["deal.created".into()], "deal.created"));
        assert!(!wants(&["deal.created".into()], "deal.updated"));
        assert!(wants(&["*".into()], "webhook.test"));
    }
}
