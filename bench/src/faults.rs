//! The faults a drill puts the service through while its clients work: SIGKILLs of `serve`, or one outside
//! dependency failing for a while (Redis killed or paused, PostgreSQL stopped and started again, the channel
//! provider answering 500 and then hanging). On PostgreSQL a drill runs on a cluster and a Redis server of
//! its own, so a restart touches nothing else on the machine.

use std::{
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU8, Ordering},
    },
    time::{Duration, Instant},
};

use frontdesk_tests::{postgres_server::PrivatePostgres, redis_server::PrivateRedis};

use crate::{process::ServerProcess, scenarios::Setup};

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// `serve` killed with SIGKILL `--kills` times over `--window` seconds, restarted at once each time.
    Kill,
    /// Redis killed; a new, empty one on the same port after `--outage` seconds.
    RedisDown,
    /// Redis paused (SIGSTOP) for `--outage` seconds: connections open, nothing answered.
    RedisPause,
    /// PostgreSQL stopped (a fast shutdown ends every session) and started again after `--outage` seconds.
    PostgresRestart,
    /// The channel provider answers 500 for half of `--outage`, then holds every request unanswered for the
    /// other half (sends only).
    Provider,
    /// The model provider holds every request unanswered for `--outage` seconds (replies only).
    Model,
}

impl Fault {
    /// What the report's title says.
    pub fn describe(self, kills: u32, window: f64, outage: f64) -> String {
        match self {
            Self::Kill => format!("{kills} SIGKILLs of serve in {window:.1} s"),
            Self::RedisDown => format!("Redis killed for {outage:.1} s"),
            Self::RedisPause => format!("Redis paused (SIGSTOP) for {outage:.1} s"),
            Self::PostgresRestart => format!("PostgreSQL stopped for {outage:.1} s, then started"),
            Self::Model => format!("the model provider hanging for {outage:.1} s"),
            Self::Provider => format!(
                "the provider answering 500 for {:.1} s, then hanging for {:.1} s",
                outage / 2.0,
                outage / 2.0
            ),
        }
    }
}

/// How the drill's channel or model provider answers right now.
#[derive(Clone, Default)]
pub struct ProviderSwitch(Arc<AtomicU8>);

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Answers,
    Fails,
    Hangs,
}

impl ProviderSwitch {
    pub fn get(&self) -> Provider {
        match self.0.load(Ordering::Relaxed) {
            1 => Provider::Fails,
            2 => Provider::Hangs,
            _ => Provider::Answers,
        }
    }

    /// Each state of `phases` for its time, then answering again.
    async fn play(&self, phases: &[(Provider, Duration)]) {
        for &(state, time) in phases {
            self.set(state);
            tokio::time::sleep(time).await;
        }
        self.set(Provider::Answers);
    }

    fn set(&self, state: Provider) {
        let code = match state {
            Provider::Answers => 0,
            Provider::Fails => 1,
            Provider::Hangs => 2,
        };
        self.0.store(code, Ordering::Relaxed);
    }
}

/// The drill's own database and Redis servers (none on SQLite), and its provider's switch.
pub struct Stage {
    postgres: Option<PrivatePostgres>,
    redis: Option<PrivateRedis>,
    pub provider: ProviderSwitch,
    /// `setup` pointed at the drill's own servers.
    pub setup: Setup,
}

impl Stage {
    /// Starts a PostgreSQL cluster and a Redis server for the drill unless it runs on SQLite.
    pub async fn start(setup: &Setup, sqlite: bool) -> anyhow::Result<Self> {
        let (postgres, redis) = if sqlite {
            (None, None)
        } else {
            let (postgres, redis) =
                tokio::task::spawn_blocking(|| (PrivatePostgres::start(), PrivateRedis::start())).await?;
            (Some(postgres), Some(redis))
        };
        let mut setup = setup.clone();
        if let (Some(postgres), Some(redis)) = (&postgres, &redis) {
            setup.postgres.clone_from(&postgres.url);
            setup.redis.clone_from(&redis.url);
        }
        Ok(Self {
            postgres,
            redis,
            provider: ProviderSwitch::default(),
            setup,
        })
    }

    /// After a second of the clients' work, puts the service through `args.fault`: for SIGKILLs, each restart's
    /// `address` is published in `current` (none while it is down). Returns the `serve` left running, and
    /// when the fault began and ended (the first kill and the last restart, or the dependency back).
    pub async fn disrupt(
        &mut self,
        mut serve: ServerProcess,
        spawn: impl Fn() -> anyhow::Result<ServerProcess>,
        current: &RwLock<Option<SocketAddr>>,
        address: fn(&ServerProcess) -> Option<SocketAddr>,
        args: &crate::drill::DrillArgs,
    ) -> anyhow::Result<(ServerProcess, (Instant, Instant))> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let began = Instant::now();
        let outage = Duration::from_secs_f64(args.outage);
        match args.fault {
            Fault::Kill => {
                let gap = Duration::from_secs_f64(args.window / f64::from(args.kills.max(1)));
                let mut last_restart = Instant::now();
                for _ in 0..args.kills {
                    *current.write().unwrap_or_else(|e| e.into_inner()) = None;
                    drop(serve); // SIGKILL, then wait for the process to be gone
                    serve = spawn()?;
                    last_restart = Instant::now();
                    *current.write().unwrap_or_else(|e| e.into_inner()) = address(&serve);
                    tokio::time::sleep(gap).await;
                }
                return Ok((serve, (began, last_restart)));
            }
            Fault::RedisDown => {
                let redis = self.redis.as_mut().expect("a private redis");
                tokio::task::block_in_place(|| redis.stop());
                tokio::time::sleep(outage).await;
                tokio::task::block_in_place(|| redis.start_again());
            }
            Fault::RedisPause => {
                let redis = self.redis.as_ref().expect("a private redis");
                redis.pause();
                tokio::time::sleep(outage).await;
                redis.resume();
            }
            Fault::PostgresRestart => {
                let postgres = self.postgres.as_ref().expect("a private postgres");
                tokio::task::block_in_place(|| postgres.stop());
                tokio::time::sleep(outage).await;
                tokio::task::block_in_place(|| postgres.up());
            }
            Fault::Provider => {
                let phases = [(Provider::Fails, outage / 2), (Provider::Hangs, outage / 2)];
                self.provider.play(&phases).await;
            }
            Fault::Model => self.provider.play(&[(Provider::Hangs, outage)]).await,
        }
        Ok((serve, (began, Instant::now())))
    }
}
