//! Run-time configuration. Every knob is a `FRONTDESK_*` (or conventional) environment variable with a
//! documented default, declared once here with clap so `frontdesk --help` and the README table agree.

use std::{net::SocketAddr, time::Duration};

use clap::{Args, ValueEnum};

use crate::site::prices::PriceTable;

/// Settings of the gRPC core: listener, database, counters, admin token and payment provider. Not `Debug`:
/// it holds secrets.
#[derive(Args, Clone)]
pub struct CoreConfig {
    /// gRPC core listener.
    #[arg(long, env = "FRONTDESK_GRPC_ADDR", default_value = "0.0.0.0:50051")]
    pub grpc_addr: SocketAddr,

    /// SQLite file (`sqlite://PATH?mode=rwc`) or PostgreSQL (`postgres://...`) URL.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://frontdesk.db?mode=rwc")]
    pub database_url: String,

    /// Largest number of pooled database connections.
    #[arg(long, env = "FRONTDESK_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,

    /// Redis for rate-limit counters shared by every replica (`redis://HOST:6379`); unset: counted in process.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,

    /// Length of the rate-limit window in seconds (limits are requests per window).
    #[arg(long, env = "FRONTDESK_RATE_WINDOW_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub rate_window_secs: u64,

    /// Bearer token of the admin gRPC service (`FRONTDESK_ADMIN_TOKEN`, environment only); unset: every
    /// admin call is refused.
    #[arg(skip = std::env::var("FRONTDESK_ADMIN_TOKEN").ok())]
    pub admin_token: Option<String>,

    #[command(flatten)]
    pub payments: PaymentConfig,
}

/// Which payment provider creates orders, and its credentials. Not `Debug`: it holds the key secret.
#[derive(Args, Clone)]
pub struct PaymentConfig {
    /// `local` (orders created here; the embedded default) or `razorpay` (Razorpay Orders API).
    #[arg(
        long = "payment-provider",
        env = "FRONTDESK_PAYMENT_PROVIDER",
        default_value = "local"
    )]
    pub provider: PaymentProviderKind,

    /// Checkout key id. Default for `local`: `rzp_test_local`; required for `razorpay`.
    #[arg(long = "razorpay-key-id", env = "RAZORPAY_KEY_ID")]
    pub key_id: Option<String>,

    /// Checkout key secret (HMAC key of payment signatures), from the environment only so it never shows in
    /// the process list. Default for `local`: generated once and kept in the database; required for `razorpay`.
    #[arg(skip = std::env::var("RAZORPAY_KEY_SECRET").ok())]
    pub key_secret: Option<String>,

    /// Base URL of the Razorpay Orders API.
    #[arg(
        long = "razorpay-base-url",
        env = "RAZORPAY_BASE_URL",
        default_value = "https://api.razorpay.com"
    )]
    pub razorpay_base_url: String,

    /// Time limit of one call to the payment provider, in milliseconds.
    #[arg(
        long = "payment-timeout-ms",
        env = "FRONTDESK_PAYMENT_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub timeout_ms: u64,

    /// Price overrides, `plan.CURRENCY=amount` pairs in the smallest currency unit, comma separated
    /// (e.g. `growth.INR=699900,launch.USD=2900`); unlisted prices keep their defaults.
    #[arg(long = "prices", env = "FRONTDESK_PRICES", default_value = "", value_parser = PriceTable::parse_overrides)]
    pub prices: PriceTable,
}

impl PaymentConfig {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaymentProviderKind {
    Local,
    Razorpay,
}

/// Settings of the REST edge.
#[derive(Args, Clone, Debug)]
pub struct EdgeListenConfig {
    /// REST edge listener.
    #[arg(long, env = "FRONTDESK_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,
}

/// Logging output format.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
