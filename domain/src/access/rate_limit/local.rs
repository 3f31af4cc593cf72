//! The in-process windows: the embedded default, and the fallback while Redis is unreachable.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use super::{Decision, decide};

/// Per key (an account, or a web chat visitor or address): the start of the current window, its count, and
/// the previous window's count. Keys whose windows are over are swept out as the map grows, so keys that
/// come and go (visitors) do not pile up.
#[derive(Default)]
pub struct LocalWindows(Mutex<Windows>);

#[derive(Default)]
struct Windows {
    by_key: HashMap<String, (u64, u32, u32)>,
    /// The size at which the next sweep runs.
    sweep_at: usize,
}

/// The smallest map that is swept.
const SWEEP_FROM: usize = 1024;

impl LocalWindows {
    pub fn check(&self, account_id: &str, limit: u32, window: Duration) -> Decision {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let window_secs = window.as_secs().max(1);
        let start = (now as u64 / window_secs) * window_secs;
        let mut windows = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if windows.by_key.len() >= windows.sweep_at.max(SWEEP_FROM) {
            // A key last counted two windows ago or more would start from nothing anyway.
            windows.by_key.retain(|_, entry| entry.0 + window_secs >= start);
            windows.sweep_at = windows.by_key.len() * 2;
        }
        let entry = windows.by_key.entry(account_id.to_owned()).or_insert((start, 0, 0));
        if entry.0 != start {
            let previous = if entry.0 + window_secs == start { entry.1 } else { 0 };
            *entry = (start, 0, previous);
        }
        let decision = decide(
            limit,
            window_secs as f64,
            now - start as f64,
            f64::from(entry.2),
            f64::from(entry.1),
        );
        if decision.allowed {
            entry.1 += 1;
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_account_up_to_the_limit() {
        let windows = LocalWindows::default();
        let window = Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(windows.check("a", 3, window).allowed);
        }
        let refused = windows.check("a", 3, window);
        assert!(!refused.allowed && refused.retry_after >= 1);
        assert!(windows.check("b", 3, window).allowed, "accounts are counted apart");
    }
}
