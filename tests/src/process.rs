//! A service as a separate process, the one launcher of the tests and the bench: spawned with exactly the
//! environment given, its JSON log lines read from standard error and kept, the addresses of its listeners
//! read from its "... listening" lines.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

/// How long a process may take to open its listeners.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running process, killed when dropped.
pub struct Launched {
    child: Child,
    program: String,
    logs: Arc<Mutex<Vec<String>>>,
    /// Each listener as it announced itself: its message (`http listening`, `grpc listening`) and address.
    listeners: Vec<(String, SocketAddr)>,
}

/// Whether the process's errors are also written to this process's standard error as they come (a long bench
/// run shows them where they happen; a test reads `logs()` instead).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Errors {
    Keep,
    Echo,
}

/// Spawns `command` (its program, arguments, environment and directory set by the caller) with standard error
/// piped and waits until it has announced `listeners` listeners. Fails with its logs when it stops first (a
/// `frontdesk stopped` line) or takes longer than 30 s.
pub fn launch(mut command: Command, listeners: usize, errors: Errors) -> Result<Launched, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stderr = child.stderr.take().expect("piped stderr");
    let logs = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let sink = logs.clone();
    let name = program.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) {
                let message = json["message"].as_str().unwrap_or_default();
                if errors == Errors::Echo && json["level"] == "ERROR" {
                    eprintln!("{name} error: {line}");
                }
                if message.ends_with(" listening") || message == "frontdesk stopped" {
                    let addr = json["addr"].as_str().unwrap_or_default().parse().ok();
                    let _ = tx.send((message.to_owned(), addr));
                }
            }
            sink.lock().unwrap().push(line);
        }
    });
    let mut launched = Launched {
        child,
        program,
        logs,
        listeners: Vec::new(),
    };
    while launched.listeners.len() < listeners {
        match rx.recv_timeout(START_TIMEOUT) {
            Ok((message, Some(addr))) if message.ends_with(" listening") => launched.listeners.push((message, addr)),
            Ok(_) | Err(_) => {
                launched.kill();
                return Err(format!(
                    "{} did not start listening:\n{}",
                    launched.program,
                    launched.logs()
                ));
            }
        }
    }
    Ok(launched)
}

impl Launched {
    /// The address of the listener that announced itself as `message` (`http listening`).
    pub fn listener(&self, message: &str) -> Option<SocketAddr> {
        self.listeners.iter().find(|(m, _)| m == message).map(|(_, addr)| *addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process logged so far, a line each.
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    /// The lines logged so far, for a check over each of them.
    pub fn log_lines(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.logs.lock().unwrap()
    }

    /// SIGKILL (nothing gets to flush), and the exit reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("the process's exit status")
    }

    /// Sends the process signal `name` (`TERM`, `STOP`, `CONT`).
    pub fn signal(&self, name: &str) {
        let signalled = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(signalled.success(), "kill -{name} {} failed", self.pid());
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.kill();
    }
}
