//! A Redis server of the test's own (on a free port), for tests that stop Redis mid-way without disturbing
//! the shared one.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub struct PrivateRedis {
    child: Child,
    pub url: String,
}

impl PrivateRedis {
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
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
        Self {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
