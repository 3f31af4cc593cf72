//! The clients users generate from `/openapi.json`, as they would: the Python client (openapi-python-client)
//! and a TypeScript one (openapi-typescript types, openapi-fetch calls), generated from the running server's
//! document with no warning, type-checked strictly (mypy, tsc), and each driven through a round trip against
//! the live server (clients/python/round_trip.py, clients/typescript/round_trip.ts).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use frontdesk_tests::{Db, Server, platform::Platform, sms, twilio::FakeTwilio};

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients")
}

/// Runs `command`, which must succeed and print no warning; its output.
fn run(command: &mut Command) -> String {
    let described = format!("{command:?}");
    let Output { status, stdout, stderr } = command.output().unwrap_or_else(|e| panic!("{described}: {e}"));
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    assert!(status.success(), "{described} failed:\n{printed}");
    assert!(
        !printed.to_lowercase().contains("warning"),
        "{described} warned:\n{printed}"
    );
    printed
}

/// The environment of a round trip: the server, a key of a new account, the sms channel's settings.
async fn round_trip_env(server: &Server, twilio: &FakeTwilio) -> Vec<(&'static str, String)> {
    let platform = Platform::new(server).await;
    vec![
        ("FRONTDESK_URL", server.url("")),
        ("FRONTDESK_API_KEY", platform.key.clone()),
        ("FRONTDESK_CHANNEL_CONFIG", twilio.channel_config().to_string()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_typescript_clients_generate_type_check_and_round_trip() {
    let twilio = FakeTwilio::start().await;
    let db = Db::sqlite();
    let server = sms::start(&db, &twilio, &[]).await;
    let work = std::env::temp_dir().join(format!("frontdesk-clients-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let document = work.join("openapi.json");
    std::fs::write(&document, server.openapi().await.to_string()).unwrap();

    let python = clients_dir().join("python");
    run(Command::new("openapi-python-client")
        .args([
            "generate",
            "--meta",
            "none",
            "--fail-on-warning",
            "--overwrite",
            "--path",
        ])
        .arg(&document)
        .arg("--output-path")
        .arg(work.join("frontdesk_client")));
    run(Command::new("python3")
        .args(["-m", "mypy", "--no-incremental", "--config-file"])
        .arg(python.join("mypy.ini"))
        .arg("frontdesk_client")
        .arg(python.join("round_trip.py"))
        .current_dir(&work));
    let printed = run(Command::new("python3")
        .arg(python.join("round_trip.py"))
        .env("PYTHONPATH", &work)
        .envs(round_trip_env(&server, &twilio).await));
    assert!(printed.contains("round trip ok"), "{printed}");

    let typescript = clients_dir().join("typescript");
    assert!(
        typescript.join("node_modules").is_dir(),
        "run scripts/test-prereqs (npm ci in clients/typescript)"
    );
    run(Command::new("npx")
        .args(["--no-install", "openapi-typescript"])
        .arg(&document)
        .args(["-o", "generated/api.ts"])
        .current_dir(&typescript));
    run(Command::new("npx")
        .args(["--no-install", "tsc", "-p", "."])
        .current_dir(&typescript));
    let printed = run(Command::new("node")
        .arg("build/round_trip.js")
        .current_dir(&typescript)
        .envs(round_trip_env(&server, &twilio).await));
    assert!(printed.contains("round trip ok"), "{printed}");
    let _ = std::fs::remove_dir_all(&work);
}
