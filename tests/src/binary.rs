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
        let mut build = Command::new(cargo);
        build.args(["build", "--workspace", "--bins", "--tests", "--manifest-path", manifest]);
        // Cargo gives a test process the variables it sets for the package under test (`CARGO_PKG_NAME`,
        // `CARGO_MANIFEST_DIR`, `OUT_DIR`, ...). Build scripts such as ring's rerun when those change, so
        // passing them on would rebuild most of the workspace here, and relink the running test binary.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(set_by_cargo_for_the_test) {
                build.env_remove(name);
            }
        }
        let output = build.output().expect("cargo runs");
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

/// A variable cargo sets for the package whose tests run, rather than one the user set for every build.
fn set_by_cargo_for_the_test(name: &str) -> bool {
    const PREFIXES: [&str; 4] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_"];
    const NAMES: [&str; 4] = [
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|prefix| name.starts_with(prefix)) || NAMES.contains(&name)
}
