//! Per-channel pacing of sends (`max_per_second` in the channel's config, default 10): each send takes the
//! channel's next free slot, one `1 / max_per_second` after the last. A slot within `MAX_WAIT` is waited for
//! in the job; a later one is not taken, and the job is deferred to about when it frees, so a burst of
//! thousands waits in the queue rather than in memory. The pace is kept per process: with several core
//! replicas a channel's rate is at most replicas x `max_per_second`.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use tokio::time::Instant;

/// The longest a send waits in its job for its slot.
const MAX_WAIT: Duration = Duration::from_secs(2);
/// Default of `max_per_second` for providers that limit senders (Twilio, Meta).
pub const DEFAULT_PER_SECOND: f64 = 10.0;
/// Ceiling of `max_per_second`, and the default of web chat, whose "provider" is this service.
pub const MAX_PER_SECOND: f64 = 100_000.0;

/// The channel's rate from its config value (absent, unreadable or out of range: `default`).
pub fn per_second(config_value: Option<&str>, default: f64) -> f64 {
    config_value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| r.is_finite() && *r > 0.0)
        .map_or(default, |r| r.min(MAX_PER_SECOND))
}

/// When a send may go.
#[derive(Debug, PartialEq, Eq)]
pub enum Slot {
    /// At this instant (now or soon): wait for it, then send.
    At(Instant),
    /// Not within reach: try again after this long.
    Later(Duration),
}

#[derive(Default)]
pub struct Pacer {
    /// Channel id -> the next free slot.
    next_free: Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    pub fn slot(&self, channel_id: &str, per_second: f64, now: Instant) -> Slot {
        let interval = Duration::from_secs_f64(1.0 / per_second);
        let mut next_free = self.next_free.lock().unwrap_or_else(PoisonError::into_inner);
        let next = next_free.get(channel_id).copied().unwrap_or(now).max(now);
        if next - now > MAX_WAIT {
            return Slot::Later(next - now - MAX_WAIT / 2);
        }
        next_free.insert(channel_id.to_owned(), next + interval);
        Slot::At(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_spaced_and_far_ones_are_not_taken() {
        let pacer = Pacer::default();
        let now = Instant::now();
        let mut slots = Vec::new();
        for _ in 0..21 {
            slots.push(pacer.slot("ch", 10.0, now));
        }
        assert_eq!(slots[0], Slot::At(now));
        assert_eq!(slots[1], Slot::At(now + Duration::from_millis(100)));
        assert_eq!(slots[20], Slot::At(now + Duration::from_secs(2)));
        assert!(
            matches!(pacer.slot("ch", 10.0, now), Slot::Later(_)),
            "beyond two seconds"
        );
        assert_eq!(pacer.slot("other", 10.0, now), Slot::At(now), "channels pace apart");
    }

    #[test]
    fn rates_from_config() {
        assert_eq!(per_second(None, DEFAULT_PER_SECOND), 10.0);
        assert_eq!(per_second(Some("250"), DEFAULT_PER_SECOND), 250.0);
        assert_eq!(per_second(Some("0"), DEFAULT_PER_SECOND), 10.0);
        assert_eq!(per_second(Some("fast"), MAX_PER_SECOND), MAX_PER_SECOND);
    }
}
