//! Locates the `frontdesk` binary under test: `FRONTDESK_BIN` when set, else the workspace's debug build,
//! built once per test process (cargo releases its build lock before it runs tests).

use std::{path::PathBuf, process::Command, sync::OnceLock};

pub fn path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(bin) = std::env::var_os("FRONTDESK_BIN") {
            return PathBuf::from(bin);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
        // Built as `cargo test --workspace` builds: `--tests` unifies the dev-dependencies' features too, so
        // the binaries link against the dependencies the test run compiled instead of compiling them again.
        let output = Command::new(cargo)
            .args(["build", "--workspace", "--bins", "--tests", "--manifest-path", manifest])
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "building frontdesk failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // target/debug/deps/<test binary> -> target/debug/frontdesk
        let exe = std::env::current_exe().expect("test binary path");
        let dir = exe.parent().and_then(|deps| deps.parent()).expect("target dir");
        dir.join("frontdesk")
    })
    .clone()
}
