//! Time enters the service through `Clock`, so tests can steer it; production uses the system clock.

use chrono::{DateTime, SubsecRound, Utc};

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// Microsecond precision: what PostgreSQL stores, so a value reads back as it was written.
    fn now(&self) -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }
}
