//! Time enters the service through `Clock`, so tests can steer it; production uses the system clock.

use chrono::{DateTime, SubsecRound, Utc};

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;

    /// How far an operator moved this clock from the system's (only a test clock moves): the job engine
    /// keeps its leases on the database's clock and adds this, so steered time still makes work due.
    fn steered_by(&self) -> chrono::Duration {
        chrono::Duration::zero()
    }

    /// The time a job's lease is measured on: the system's, which steering never moves, so a test that
    /// moves its clock forward makes scheduled work due without ending the lease of a run in progress.
    fn lease_now(&self) -> DateTime<Utc> {
        self.now() - self.steered_by()
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// Microsecond precision: what PostgreSQL stores, so a value reads back as it was written.
    fn now(&self) -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }
}

/// The system clock shifted by an offset that an operator may move (admin `SetTestClock`, allowed only with
/// `FRONTDESK_TEST_CLOCK=true`), so black-box tests can cross instants such as the campaigns sunset.
#[derive(Debug, Default)]
pub struct SteerableClock {
    offset_micros: std::sync::atomic::AtomicI64,
}

impl SteerableClock {
    /// Makes the clock read `now` at this moment (time runs on from there); `None` returns to system time.
    pub fn set(&self, now: Option<DateTime<Utc>>) {
        let offset = now.map_or(0, |now| (now - SystemClock.now()).num_microseconds().unwrap_or(0));
        self.offset_micros.store(offset, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn offset(&self) -> chrono::Duration {
        chrono::Duration::microseconds(self.offset_micros.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl Clock for SteerableClock {
    fn now(&self) -> DateTime<Utc> {
        let now = SystemClock.now();
        now.checked_add_signed(self.offset()).unwrap_or(now)
    }

    fn steered_by(&self) -> chrono::Duration {
        self.offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steering_moves_now_and_resets() {
        let clock = SteerableClock::default();
        let target = DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z").unwrap().to_utc();
        clock.set(Some(target));
        assert!((clock.now() - target).num_seconds().abs() < 5);
        clock.set(None);
        assert_eq!(clock.offset(), chrono::Duration::zero());
        assert!((clock.now() - Utc::now()).num_seconds().abs() < 5);
    }
}
