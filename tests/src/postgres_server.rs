//! A PostgreSQL cluster of the caller's own (`initdb` into a temporary directory, on a free port), for drills
//! that stop or restart the database without disturbing the shared server. PostgreSQL refuses to run as
//! root, so as root its programs run as the `postgres` user.

use std::{
    net::TcpListener,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

pub struct PrivatePostgres {
    dir: PathBuf,
    port: u16,
    /// The server, without a database: `postgres://postgres@127.0.0.1:{port}`.
    pub url: String,
}

impl PrivatePostgres {
    /// Creates the cluster and starts it; panics with PostgreSQL's own words when it cannot.
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("frontdesk-pg-{port}-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).expect("a directory for the cluster");
        if as_root() {
            run(Command::new("chown").arg("postgres:postgres").arg(&dir));
        }
        let data = dir.join("data");
        run(pg("initdb")
            .arg("--auth=trust")
            .args(["--username=postgres", "--encoding=UTF8", "--no-sync", "-D"])
            .arg(&data));
        let options = format!(
            "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c max_connections=300",
            dir.display()
        );
        std::fs::write(dir.join("options"), options).expect("the cluster's options");
        let cluster = Self {
            url: format!("postgres://postgres@127.0.0.1:{port}"),
            dir,
            port,
        };
        cluster.up();
        cluster
    }

    /// Stops the server as an administrator's fast shutdown does: every session is ended, then the server.
    pub fn stop(&self) {
        self.pg_ctl(&["stop", "-m", "fast", "-w"]);
    }

    /// Starts the stopped server again, on the same port; returns once it accepts connections.
    pub fn up(&self) {
        let options = std::fs::read_to_string(self.dir.join("options")).expect("the cluster's options");
        let log = self.dir.join("server.log");
        self.pg_ctl(&["start", "-w", "-t", "60", "-o", &options, "-l", &log.to_string_lossy()]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "the private PostgreSQL did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn pg_ctl(&self, args: &[&str]) {
        run(pg("pg_ctl").arg("-D").arg(self.dir.join("data")).args(args));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = pg("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["stop", "-m", "immediate", "-w"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// PostgreSQL's program `name` from the installation `pg_config` names (else Debian's newest), as the
/// `postgres` user when root.
fn pg(name: &str) -> Command {
    let named = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let bin = named
        .or_else(debian_bin_dir)
        .expect("PostgreSQL is installed (scripts/test-prereqs)");
    let program = bin.join(name);
    if as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// `/usr/lib/postgresql/{newest version}/bin`.
fn debian_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<u32> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    versions.sort_unstable();
    Some(PathBuf::from(format!("/usr/lib/postgresql/{}/bin", versions.last()?)))
}

fn run(command: &mut Command) {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
