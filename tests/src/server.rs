//! The real `frontdesk` process: started on ephemeral ports with JSON logs, its addresses read from the
//! "listening" log lines, its logs kept for assertions, killed when dropped (`process::launch`).

use std::{collections::BTreeMap, path::PathBuf, process::Command, time::Duration};

use crate::{
    Db, binary,
    process::{Errors, Launched, launch},
};

pub struct Server {
    process: Launched,
    dir: Option<PathBuf>,
    mode: Vec<String>,
    env: BTreeMap<String, String>,
    /// `http://127.0.0.1:PORT` of the REST edge (when the mode runs one).
    pub http: String,
    /// `http://127.0.0.1:PORT` of the gRPC core (when the mode runs one).
    pub grpc: String,
}

impl Server {
    /// `frontdesk serve` on `db`, with extra environment variables.
    pub async fn start(db: &Db, env: &[(&str, &str)]) -> Self {
        let mut vars = base_env();
        vars.insert("DATABASE_URL".into(), db.url());
        vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Self::spawn(None, vec!["serve".into()], vars).await
    }

    /// Any mode (`core`, `edge --core URL`, ...) with exactly these variables (see `base_env`), in `dir` or
    /// the test's working directory.
    pub async fn spawn(dir: Option<PathBuf>, mode: Vec<String>, env: BTreeMap<String, String>) -> Self {
        crate::secrets::remember_env(env.iter());
        let mut command = Command::new(binary::path());
        if let Some(dir) = &dir {
            command.current_dir(dir);
        }
        command
            .args(&mode)
            .env_clear()
            .envs(&env)
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        // `serve` (also the default with no subcommand) opens two listeners, `core` and `edge` one each.
        let listeners = match mode.first().map(String::as_str) {
            Some("core" | "edge") => 1,
            _ => 2,
        };
        let process = tokio::task::spawn_blocking(move || launch(command, listeners, Errors::Keep))
            .await
            .expect("wait for listeners")
            .unwrap_or_else(|failed| panic!("frontdesk did not start: {failed}"));
        let url = |message| {
            process
                .listener(message)
                .map_or_else(String::new, |addr| format!("http://{addr}"))
        };
        let (http, grpc) = (url("http listening"), url("grpc listening"));
        Self {
            process,
            dir,
            mode,
            env,
            http,
            grpc,
        }
    }

    /// Stops the process (SIGKILL: nothing gets to flush), unless it has exited already, and starts it again
    /// with the same settings.
    pub async fn restart(mut self) -> Self {
        self.kill();
        let (dir, mode, env) = (
            self.dir.take(),
            std::mem::take(&mut self.mode),
            std::mem::take(&mut self.env),
        );
        Self::spawn(dir, mode, env).await
    }

    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Asks the process to stop as an orchestrator does (SIGTERM) and waits for it to exit; how long that
    /// took. Panics (after a SIGKILL) when it is still running `within` after the signal, or when it exits
    /// with a failure.
    pub async fn terminate(&mut self, within: Duration) -> Duration {
        let started = std::time::Instant::now();
        self.signal("TERM");
        loop {
            if let Some(status) = self.process.try_wait() {
                assert!(status.success(), "frontdesk exited with {status}:\n{}", self.logs());
                return started.elapsed();
            }
            if started.elapsed() > within {
                self.kill();
                panic!("frontdesk still ran {within:?} after SIGTERM:\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends the process signal `name` (`TERM`, `STOP`, `CONT`).
    pub fn signal(&self, name: &str) {
        self.process.signal(name);
    }

    /// Everything the process logged so far.
    pub fn logs(&self) -> String {
        self.process.logs()
    }

    /// `base + path` on the REST edge.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.http)
    }

    /// The OpenAPI document the server publishes.
    pub async fn openapi(&self) -> serde_json::Value {
        crate::http_client()
            .get(self.url("/openapi.json"))
            .send()
            .await
            .expect("the document")
            .json()
            .await
            .expect("JSON")
    }

    /// The value of the metric `name` whose labels include `label` (`kind="send"`), from `/metrics`.
    pub async fn metric(&self, name: &str, label: &str) -> f64 {
        let metrics = self.metrics().await;
        sample(&metrics, name, &[label]).unwrap_or_else(|| panic!("no {name} with {label} in {metrics}"))
    }

    /// Waits (30 s at most) until the text of `/metrics` satisfies `done` (a counter's first increment, say);
    /// that text.
    pub async fn metrics_when(&self, done: impl Fn(&str) -> bool) -> String {
        let started = std::time::Instant::now();
        loop {
            let metrics = self.metrics().await;
            if done(&metrics) {
                return metrics;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the metrics never came:\n{metrics}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let answer = crate::http_client()
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("metrics");
        assert_eq!(answer.status(), 200);
        answer.text().await.expect("metrics text")
    }
}

/// The value of the sample of metric `name` whose labels include every one of `labels`, in the Prometheus text
/// `metrics`; `None` when there is none (a counter not yet incremented).
pub fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|line| line.split(['{', ' ']).next() == Some(name))
        .find(|line| labels.iter().all(|l| line.contains(l)))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

/// A stopped server's logs must hold none of the secrets the tests have used (`secrets`).
impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if !std::thread::panicking() {
            let leaks = crate::secrets::leaked_in(&self.process.log_lines());
            assert!(leaks.is_empty(), "frontdesk logged secrets:\n{}", leaks.join("\n"));
        }
    }
}

/// The repository's sentence-embedding model folder (`scripts/fetch-model`, run by `scripts/test-prereqs`).
pub fn embedding_model() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../models/all-MiniLM-L6-v2");
    assert!(
        std::path::Path::new(dir).join("model.safetensors").is_file(),
        "{dir} is missing: run scripts/fetch-model"
    );
    dir.to_owned()
}

/// Key of sealed credentials in tests (PostgreSQL deployments must set one).
pub const TEST_SECRET_KEY: &str = "dGVzdC1zZWNyZXQta2V5LTMyLWJ5dGVzLWxvbmchISE=";

/// Ephemeral ports, JSON logs, and the local payment provider with a known key secret.
pub fn base_env() -> BTreeMap<String, String> {
    [
        ("FRONTDESK_HTTP_ADDR", "127.0.0.1:0"),
        ("FRONTDESK_GRPC_ADDR", "127.0.0.1:0"),
        ("FRONTDESK_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
        ("RAZORPAY_KEY_SECRET", crate::razorpay::TEST_KEY_SECRET),
        ("FRONTDESK_ADMIN_TOKEN", crate::admin::TEST_ADMIN_TOKEN),
        ("FRONTDESK_SECRET_KEY", TEST_SECRET_KEY),
        // Retrieval is lexical unless a test asks for the model (`embedding_model`).
        ("FRONTDESK_EMBEDDING_MODEL", "none"),
        // The pools' two-core sizes on any machine: the tests at once grow with the cores, and PostgreSQL's
        // connections must not grow with both.
        ("FRONTDESK_DB_MAX_CONNECTIONS", "8"),
        ("FRONTDESK_DB_WORKER_CONNECTIONS", "8"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}
