//! Web chat's settings: session lifetimes and the visitor limits.

use std::time::Duration;

use crate::env_values::parse_positive_duration;

/// Web chat visitors: how long a session lasts and how fast a visitor may go.
#[derive(clap::Args, Clone, Debug)]
pub struct WebChatConfig {
    /// How long a visitor's session token lasts after the session last resumed (a page load renews it).
    #[arg(long = "webchat-session-ttl", env = "FRONTDESK_WEBCHAT_SESSION_TTL", default_value = "30d", value_parser = parse_positive_duration)]
    pub session_ttl: Duration,

    /// Messages one visitor session may send per minute (over the API and the socket together).
    #[arg(long = "webchat-messages-per-minute", env = "FRONTDESK_WEBCHAT_MESSAGES_PER_MINUTE", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub messages_per_minute: u32,

    /// New sessions one client address may start per minute (an IPv6 address counts with its /64).
    #[arg(long = "webchat-sessions-per-minute", env = "FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub sessions_per_minute: u32,

    /// New sessions one web chat channel may have started per minute, from every address together.
    #[arg(long = "webchat-channel-sessions-per-minute", env = "FRONTDESK_WEBCHAT_CHANNEL_SESSIONS_PER_MINUTE", default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub channel_sessions_per_minute: u32,

    /// New sessions one account's web chat channels may have started per minute, together.
    #[arg(long = "webchat-account-sessions-per-minute", env = "FRONTDESK_WEBCHAT_ACCOUNT_SESSIONS_PER_MINUTE", default_value_t = 1_200, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub account_sessions_per_minute: u32,

    /// Visitor messages one web chat channel may take per minute, from every session together.
    #[arg(long = "webchat-channel-messages-per-minute", env = "FRONTDESK_WEBCHAT_CHANNEL_MESSAGES_PER_MINUTE", default_value_t = 3_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub channel_messages_per_minute: u32,

    /// Visitor messages one account's web chat channels may take per minute, together.
    #[arg(long = "webchat-account-messages-per-minute", env = "FRONTDESK_WEBCHAT_ACCOUNT_MESSAGES_PER_MINUTE", default_value_t = 6_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub account_messages_per_minute: u32,

    /// Resumes, thread reads and socket openings of one session per minute.
    #[arg(long = "webchat-reads-per-minute", env = "FRONTDESK_WEBCHAT_READS_PER_MINUTE", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub reads_per_minute: u32,

    /// `seen` and `typing` frames of one session per minute.
    #[arg(long = "webchat-signals-per-minute", env = "FRONTDESK_WEBCHAT_SIGNALS_PER_MINUTE", default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub signals_per_minute: u32,

    /// Open sockets of one session on one core process.
    #[arg(long = "webchat-sockets-per-session", env = "FRONTDESK_WEBCHAT_SOCKETS_PER_SESSION", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sockets_per_session: u32,

    /// Open sockets from one client address (an IPv6 address with its /64) on one core process.
    #[arg(long = "webchat-sockets-per-address", env = "FRONTDESK_WEBCHAT_SOCKETS_PER_ADDRESS", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub sockets_per_address: u32,

    /// How long a session in which nothing was written is kept after the visitor was last seen; then it
    /// is deleted, with its contact when that holds nothing else.
    #[arg(long = "webchat-empty-session-ttl", env = "FRONTDESK_WEBCHAT_EMPTY_SESSION_TTL", default_value = "24h", value_parser = parse_positive_duration)]
    pub empty_session_ttl: Duration,
}
