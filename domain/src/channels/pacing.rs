//! Per-channel pacing of sends (`max_per_second` in the channel's config, default 10): each send takes the
//! channel's next free slot, one `1 / max_per_second` after the last. A slot within `MAX_WAIT` is waited for
//! in the job; a later one is not taken, and the job is deferred to about when it frees, so a burst of
//! thousands waits in the queue rather than in memory. With Redis (`REDIS_URL`) every replica takes its slots
//! from one shared schedule per channel (`pace.lua`, on Redis's clock), so a channel's rate holds however many
//! replicas send; without Redis, or while a configured one is unreachable, each process keeps its own (a
//! channel's rate is then at most replicas x `max_per_second`).

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use tokio::time::Instant;

use crate::store::redis_script::GuardedScript;

/// The longest a send waits in its job for its slot.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// Default of `max_per_second` for providers that limit senders (Twilio, Meta).
pub const DEFAULT_PER_SECOND: f64 = 10.0;
/// Ceiling of `max_per_second`, which paces nothing, and the default of web chat, whose "provider" is this
/// service.
pub const MAX_PER_SECOND: f64 = 100_000.0;

/// Floor of `max_per_second`: one send an hour. Slower rates would make intervals that overflow a
/// `Duration` or Redis's integers.
pub const MIN_PER_SECOND: f64 = 1.0 / 3600.0;

/// The channel's rate from its config value (absent, unreadable, zero or negative: `default`), held between
/// `MIN_PER_SECOND` and `MAX_PER_SECOND`.
pub fn per_second(config_value: Option<&str>, default: f64) -> f64 {
    config_value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| r.is_finite() && *r > 0.0)
        .map_or(default, |r| r.clamp(MIN_PER_SECOND, MAX_PER_SECOND))
}

/// When a send may go.
#[derive(Debug, PartialEq, Eq)]
pub enum Slot {
    /// At this instant (now or soon): wait for it, then send.
    At(Instant),
    /// Not within reach: try again after this long.
    Later(Duration),
}

pub struct Pacer {
    /// Channel id -> the next free slot, when this process paces on its own.
    next_free: Mutex<HashMap<String, Instant>>,
    /// The schedule every replica shares, when Redis is configured.
    shared: Option<GuardedScript>,
}

impl Pacer {
    /// Paces this process's sends on their own.
    pub fn local() -> Self {
        Self {
            next_free: Mutex::default(),
            shared: None,
        }
    }

    /// Takes slots from the schedule every replica shares in the Redis at `url` (connecting on first use);
    /// this process's own schedule stands in while Redis is unreachable.
    pub fn shared(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            shared: Some(GuardedScript::new(
                url,
                include_str!("pace.lua"),
                "channels' sends are paced in each process",
            )?),
            ..Self::local()
        })
    }

    /// The slot of a send on channel `channel_id`, sending `per_second`. A channel at the ceiling (web chat,
    /// whose provider is this service, by default) is not paced: it takes no slot and asks Redis nothing.
    pub async fn slot(&self, channel_id: &str, per_second: f64) -> Slot {
        if per_second >= MAX_PER_SECOND {
            return Slot::At(Instant::now());
        }
        let interval = Duration::from_secs_f64(1.0 / per_second);
        if let Some(shared) = &self.shared {
            let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
            let key = format!("frontdesk:pace:{channel_id}");
            let taken = shared
                .call::<(i64, i64)>(|call| {
                    call.key(&key).arg(micros(interval)).arg(micros(MAX_WAIT));
                })
                .await;
            match taken {
                Ok((took, after)) => {
                    let after = Duration::from_micros(u64::try_from(after).unwrap_or(0));
                    return if took == 1 {
                        Slot::At(Instant::now() + after)
                    } else {
                        Slot::Later(after)
                    };
                }
                Err(err) => {
                    metrics::counter!("frontdesk_pacing_redis_fallbacks_total").increment(1);
                    shared.warn_unreachable(&err);
                }
            }
        }
        self.local_slot(channel_id, interval, Instant::now())
    }

    /// The slot from this process's own schedule.
    fn local_slot(&self, channel_id: &str, interval: Duration, now: Instant) -> Slot {
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
        let pacer = Pacer::local();
        let now = Instant::now();
        let tenth = Duration::from_millis(100);
        let mut slots = Vec::new();
        for _ in 0..21 {
            slots.push(pacer.local_slot("ch", tenth, now));
        }
        assert_eq!(slots[0], Slot::At(now));
        assert_eq!(slots[1], Slot::At(now + Duration::from_millis(100)));
        assert_eq!(slots[20], Slot::At(now + Duration::from_secs(2)));
        assert!(
            matches!(pacer.local_slot("ch", tenth, now), Slot::Later(_)),
            "beyond two seconds"
        );
        assert_eq!(
            pacer.local_slot("other", tenth, now),
            Slot::At(now),
            "channels pace apart"
        );
    }

    #[test]
    fn rates_from_config() {
        assert_eq!(per_second(None, DEFAULT_PER_SECOND), 10.0);
        assert_eq!(per_second(Some("250"), DEFAULT_PER_SECOND), 250.0);
        assert_eq!(per_second(Some("0"), DEFAULT_PER_SECOND), 10.0);
        assert_eq!(per_second(Some("fast"), MAX_PER_SECOND), MAX_PER_SECOND);
        assert_eq!(per_second(Some("1e9"), DEFAULT_PER_SECOND), MAX_PER_SECOND);
        assert_eq!(
            per_second(Some("1e-20"), DEFAULT_PER_SECOND),
            MIN_PER_SECOND,
            "an interval a Duration holds"
        );
    }
}
