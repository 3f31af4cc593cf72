//! The job engine's settings.

use std::time::Duration;

use clap::Args;

use crate::env_values::{parse_duration, parse_positive_duration};

/// The durable job engine (sends, AI replies, imports, broadcasts). Durations are written `500ms`, `5s`,
/// `5m`, `2h` or `3d`.
#[derive(Args, Clone, Debug)]
pub struct JobConfig {
    /// Jobs running at once in this process; 0 runs none (an API-only replica, whose jobs the replicas
    /// with workers run).
    #[arg(id = "job_concurrency", value_name = "CONCURRENCY", long = "job-concurrency", env = "FRONTDESK_JOB_CONCURRENCY", default_value_t = 256, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub concurrency: u32,

    /// Jobs of one lane (one channel's sends; an account's jobs without a lane) running at once across
    /// every replica, so a provider that hangs holds only its lane's share of the workers.
    #[arg(id = "job_lane_concurrency", value_name = "LANE_CONCURRENCY", long = "job-lane-concurrency", env = "FRONTDESK_JOB_LANE_CONCURRENCY", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub lane_concurrency: u32,

    /// Jobs of one account and class (interactive or bulk) running at once across every replica, so one
    /// tenant cannot take every worker.
    #[arg(id = "job_account_concurrency", value_name = "ACCOUNT_CONCURRENCY", long = "job-account-concurrency", env = "FRONTDESK_JOB_ACCOUNT_CONCURRENCY", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub account_concurrency: u32,

    /// Of this process's job slots, how many bulk work (broadcast sends, imports, embeddings) may hold;
    /// the rest stay for interactive work. Default: three quarters of FRONTDESK_JOB_CONCURRENCY.
    #[arg(id = "job_bulk_concurrency", value_name = "BULK_CONCURRENCY", long = "job-bulk-concurrency", env = "FRONTDESK_JOB_BULK_CONCURRENCY", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub bulk_concurrency: Option<u32>,

    /// How long a claimed job belongs to its worker without a renewal; the worker renews it every third of
    /// this while the job runs, so a job whose worker died runs again within this. At least 1s.
    #[arg(id = "job_lease", value_name = "LEASE", long = "job-lease", env = "FRONTDESK_JOB_LEASE", default_value = "5s", value_parser = parse_duration)]
    pub lease: Duration,

    /// How many runs of one job may be cut short by the death of their worker (killed, out of memory, a
    /// crash) before the job fails for good with `crashed`: such runs spend no try, so a job that kills
    /// every process that runs it would otherwise be claimed for ever.
    #[arg(id = "job_max_crashes", value_name = "MAX_CRASHES", long = "job-max-crashes", env = "FRONTDESK_JOB_MAX_CRASHES", default_value_t = 5, value_parser = clap::value_parser!(i32).range(1..=100))]
    pub max_crashes: i32,

    /// With PostgreSQL, how long a replica with nothing due sleeps before it looks again: a commit of work
    /// due now on any replica wakes it at once (`LISTEN`/`NOTIFY`), and work due later wakes it at its time.
    /// Also for the webhook deliveries.
    #[arg(id = "idle_poll_interval", value_name = "IDLE_POLL_INTERVAL", long = "idle-poll-interval", env = "FRONTDESK_IDLE_POLL_INTERVAL", default_value = "1s", value_parser = parse_positive_duration)]
    pub idle_poll: Duration,

    /// How often idle workers look for due jobs (a job enqueued in this process wakes them at once); with
    /// PostgreSQL, only while due jobs wait for a concurrency cap or wake-ups are not reaching this replica.
    #[arg(id = "job_poll_interval", value_name = "POLL_INTERVAL", long = "job-poll-interval", env = "FRONTDESK_JOB_POLL_INTERVAL", default_value = "50ms", value_parser = parse_positive_duration)]
    pub poll_interval: Duration,

    /// How long failed and cancelled jobs are kept for operators after they settled.
    #[arg(id = "job_retention", value_name = "RETENTION", long = "job-retention", env = "FRONTDESK_JOB_RETENTION", default_value = "30d", value_parser = parse_positive_duration)]
    pub retention: Duration,
}

impl JobConfig {
    /// The slots bulk work may hold in this process.
    pub fn bulk_slots(&self) -> u32 {
        self.bulk_concurrency
            .unwrap_or(self.concurrency - self.concurrency / 4)
            .min(self.concurrency)
            .max(1)
    }
}
