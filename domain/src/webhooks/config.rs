//! The webhook delivery engine's settings.

use std::time::Duration;

use clap::Args;

use crate::env_values::{DurationList, parse_duration, parse_duration_list};

/// The webhook delivery engine. Durations are written `500ms`, `5s`, `5m`, `2h` or `3d`.
#[derive(Args, Clone, Debug)]
pub struct WebhookConfig {
    /// Waits before each retry after a failed attempt (each +-20%); a delivery fails for good once all are
    /// used.
    #[arg(
        long = "webhook-retry-schedule",
        env = "FRONTDESK_WEBHOOK_RETRY_SCHEDULE",
        default_value = "5s,5m,30m,2h,5h,10h,14h,20h,24h",
        value_parser = parse_duration_list
    )]
    pub retry_schedule: DurationList,

    /// Time limit of one delivery attempt.
    #[arg(long = "webhook-timeout", env = "FRONTDESK_WEBHOOK_TIMEOUT", default_value = "15s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Continuous failure (no success since the first failure) after which a subscription is disabled.
    #[arg(long = "webhook-disable-after", env = "FRONTDESK_WEBHOOK_DISABLE_AFTER", default_value = "3d", value_parser = parse_duration)]
    pub disable_after: Duration,

    /// How long a claimed delivery belongs to the worker that claimed it without a renewal; the worker renews
    /// it every third of this until the attempt's result is recorded, so a delivery whose worker died is
    /// attempted again (as the same attempt) within this. At least 1s.
    #[arg(long = "webhook-lease", env = "FRONTDESK_WEBHOOK_LEASE", default_value = "5s", value_parser = parse_duration)]
    pub lease: Duration,

    /// Deliveries in hand at once in this process (an attempt running, or its result being recorded). A slot
    /// costs a task and a claimed row; it is held from the claim through the attempt to the commit of its
    /// result, about 30 ms under load even when endpoints answer in 2 ms, so the slots bound a busy
    /// account's deliveries (it may hold half of them; docs/benchmarks/engine.md).
    #[arg(long = "webhook-concurrency", env = "FRONTDESK_WEBHOOK_CONCURRENCY", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,

    /// Attempts running at once to one subscription in this process; an account's subscriptions together
    /// get at most half of `FRONTDESK_WEBHOOK_CONCURRENCY`. A slow or dead endpoint then holds only its share.
    /// 64: one subscription taking 500 events a second on the loaded bench machine queued behind 32 (the
    /// claim passes over a full endpoint until an answer frees it), stretching the p99 to seconds
    /// (docs/benchmarks/inbound-and-channels.md, "Web chat").
    #[arg(long = "webhook-endpoint-concurrency", env = "FRONTDESK_WEBHOOK_ENDPOINT_CONCURRENCY", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub endpoint_concurrency: u32,

    /// How long a delivery's record (with its attempts) is kept after it was delivered or failed for good;
    /// an event goes once no delivery refers to it. Pending deliveries are kept however old.
    #[arg(long = "webhook-retention", env = "FRONTDESK_WEBHOOK_RETENTION", default_value = "30d", value_parser = parse_duration)]
    pub retention: Duration,

    /// How often idle workers look for new events and due retries.
    #[arg(long = "webhook-poll-interval", env = "FRONTDESK_WEBHOOK_POLL_INTERVAL", default_value = "50ms", value_parser = parse_duration)]
    pub poll_interval: Duration,
}
