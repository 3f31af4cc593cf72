//! A Redis server of the test's own (on a free port), for tests that stop Redis mid-way without disturbing
//! the shared one.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub struct PrivateRedis {
    child: Child,
    port: u16,
    pub url: String,
}

impl PrivateRedis {
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self {
            child: spawn(port),
            port,
            url: format!("redis://127.0.0.1:{port}"),
        }
    }

    /// Kills the server: connections to it are refused until `start_again`.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A new, empty server on the same port, after `stop`.
    pub fn start_again(&mut self) {
        self.child = spawn(self.port);
    }

    /// Pauses the server (SIGSTOP): connections open, nothing answered, until `resume`.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "kill {signal} reached the private redis");
    }
}

/// A Redis server on `port` that keeps nothing on disk; returns once it accepts connections.
fn spawn(port: u16) -> Child {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is installed (scripts/test-prereqs)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "private redis did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The shared Redis of the test machine.
pub fn shared_url() -> String {
    std::env::var("FRONTDESK_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}
