//! The servers under test, as separate processes started by the test kit's launcher (`process::launch`),
//! their CPU time and memory read from `/proc`.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::Path,
    process::Command,
    sync::LazyLock,
    time::{Duration, Instant},
};

use frontdesk_tests::process::{Errors, Launched, launch};

/// When the bench started: progress lines count from it.
static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);

/// A progress line on standard error, stamped with the time since the bench started (the table goes to
/// standard output once every scenario ran; this says where a long run is, and what each part took).
pub fn progress(what: &str) {
    eprintln!("[{:>7.1} s] {what}", STARTED.elapsed().as_secs_f64());
}

pub struct ServerProcess {
    process: Launched,
    pub http: Option<SocketAddr>,
    pub grpc: Option<SocketAddr>,
    /// From spawn to every listener up.
    pub started_in: Duration,
}

impl ServerProcess {
    /// Spawns `program args` with exactly `env` (plus PATH) and waits for `listeners` "... listening" lines;
    /// its errors are echoed as they come (a figure measured past them may mean nothing).
    pub fn spawn(
        program: &Path,
        args: &[&str],
        env: &BTreeMap<String, String>,
        listeners: usize,
    ) -> anyhow::Result<Self> {
        let started = Instant::now();
        let name = program.file_name().unwrap_or_default().to_string_lossy();
        progress(&format!("starting {name} {}", args.join(" ")));
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(env)
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        let process = launch(command, listeners, Errors::Echo).map_err(anyhow::Error::msg)?;
        Ok(Self {
            http: process.listener("http listening"),
            grpc: process.listener("grpc listening"),
            process,
            started_in: started.elapsed(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// User + system CPU seconds the process has used so far.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(&self.pid().to_string())
    }

    /// Resident memory now and at its peak, in MiB.
    pub fn rss_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .map_or(0.0, |kib| kib / 1024.0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

/// User + system CPU seconds that process `pid` has used so far (0 once it is gone).
fn cpu_seconds_of(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (1-based).
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    ticks / clock_ticks_per_second()
}

/// CPU seconds used so far by every PostgreSQL process on this machine (the server the bench's services
/// use; its backends live as long as the services' pooled connections, so a difference over a scenario is
/// what the database spent on it, give or take a connection that closed meanwhile).
pub fn database_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "postgres"))
        .map(|pid| cpu_seconds_of(&pid))
        .sum()
}

/// CPU seconds the whole machine has been busy so far, summed over its cores (every process and the kernel's
/// interrupt work: `/proc/stat`'s user, nice, system, irq, softirq and steal), so that a scenario's CPU per
/// request counts the load generator, Redis and anything else it made work, and no idle time.
pub fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(total) = stat.lines().find(|line| line.starts_with("cpu ")) else {
        return 0.0;
    };
    let ticks: Vec<f64> = total
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let busy: f64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|i| ticks.get(*i)).sum();
    busy / clock_ticks_per_second()
}

/// Linux reports CPU times in clock ticks of `sysconf(_SC_CLK_TCK)` per second.
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}
