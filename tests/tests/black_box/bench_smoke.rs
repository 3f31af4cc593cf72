//! The performance harness in smoke mode: a few seconds at tiny concurrency, so it cannot rot. It must run
//! every scenario with requests and no errors, and print the table and the targets.

use frontdesk_tests::binary;

#[test]
fn the_benchmark_harness_runs_every_scenario() {
    let frontdesk = binary::path();
    let bench = frontdesk.with_file_name("frontdesk-bench");
    let output = std::process::Command::new(&bench)
        .arg("--smoke")
        .arg("--frontdesk")
        .arg(&frontdesk)
        // The build-against-build figures, with this build standing in for the previous one.
        .arg("--previous")
        .arg(&frontdesk)
        .env("FRONTDESK_EMBEDDING_MODEL", frontdesk_tests::server::embedding_model())
        .output()
        .expect("frontdesk-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let scenarios = [
        "limit: bare axum",
        "call limit: bare axum + the service's rate-limit call",
        "GET /healthz through the edge",
        "POST /payments/create-order (SQLite)",
        "GET /v1/api-keys/current, serve",
        "POST /payments/create-order (PostgreSQL)",
        "GET /v1/deals?limit=50",
        "floor: the rate-limit script with the key's access stamp",
        "GET /v1/api-keys/current, split",
        "GetCurrentApiKey, gRPC direct",
        "webhook fan-out: events x 10 subscriptions",
        "webhook fan-out, a committed backlog",
        "webhook fan-out at half capacity",
        "limit: the Twilio receiver",
        "engine: GET /v1/api-keys/current, same serve",
        "engine: POST /v1/contacts/{id}/send-message",
        "engine floor: the call's storage work",
        "engine floor: a send's storage work",
        "engine: pipeline capacity",
        "engine: pipeline at half capacity",
        "engine: POST /hooks/twilio/{channelId}",
        "engine: a quiet tenant's sends (20/s), accept to provider, idle engine",
        "engine: a quiet tenant's sends (20/s), accept to provider, beside 20,000 other tenants' queues",
        "engine: pipeline capacity, the broadcast's baseline",
        "engine: broadcast audience of 100,000 contacts by tag",
        "engine: broadcast of 100,000 recipients",
        "engine: another tenant's and the broadcasting tenant's own API sends",
        "engine: the broadcasting tenant's AI replies",
        "ai: question stored to reply queued",
        "ai: replies stored per second",
        "ai model: question stored to model request",
        "ai model: 500 conversations asking at once",
        "compared: webhook fan-out, this build",
        "compared: webhook fan-out, previous build",
        "compared: send pipeline capacity, this build",
        "compared: send pipeline capacity, previous build",
        "kb bulk import",
        "kb search: 10,000 FAQs, fused",
        "kb search: 10,000 FAQs, lexical only",
        "GET /v1/summaries/daily",
        "floor: rate script + the daily summary's queries",
    ];
    for scenario in scenarios {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {scenario}")))
            .unwrap_or_else(|| panic!("no row for {scenario}:\n{stdout}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let per_second: f64 = cells[2].parse().unwrap();
        assert!(per_second > 0.0, "{scenario} made requests: {row}");
        assert_eq!(cells[8], "0", "{scenario} had no errors: {row}");
    }
    assert!(stdout.contains("| start to healthy (SQLite) |"), "{stdout}");
    assert!(
        stdout.contains("| fairness: a quiet tenant's send, accept to provider p99"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| compared: send pipeline capacity, this build / previous build"),
        "{stdout}"
    );
    assert!(stdout.contains("| embedding at import, one core"), "{stdout}");
    assert!(
        stdout.contains("| AI replies with a model: the service's memory per reply waiting on the model"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| accepting a send: the most its share can be here"),
        "the accept's ceiling from the floors:\n{stdout}"
    );
    let stored = stdout
        .lines()
        .find(|l| l.starts_with("| inbound: each answered request stored one message"))
        .unwrap_or_else(|| panic!("no inbound storage check:\n{stdout}"));
    assert!(
        stored.ends_with("| yes |"),
        "every inbound request stored once: {stored}"
    );
    assert!(
        stdout.contains("Index Scan Backward using deals_newest"),
        "the deals list uses its index:\n{stdout}"
    );
}

/// `frontdesk-bench` with `args` after `--frontdesk`; its standard output, once it exited successfully.
fn bench(args: &[&str]) -> String {
    bench_with(args, &[])
}

/// `bench` with `env` set for it and the servers it starts.
fn bench_with(args: &[&str], env: &[(&str, &str)]) -> String {
    let frontdesk = binary::path();
    let output = std::process::Command::new(frontdesk.with_file_name("frontdesk-bench"))
        .arg("--frontdesk")
        .arg(&frontdesk)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("frontdesk-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The crash drills in short form: one SIGKILL while clients create deals, and while they send 500
/// messages; nothing acknowledged is lost (the drill fails otherwise) and no answer is a 5xx but 503.
#[test]
fn the_crash_drills_lose_nothing_in_short_form() {
    let short = ["--sqlite", "--kills", "1", "--window", "1", "--clients", "4"];
    let deals = bench(&[&["crash-drill", "--path", "deals"][..], &short].concat());
    assert!(
        deals.contains("| lost (acknowledged, never delivered) | 0 |"),
        "{deals}"
    );
    let sends = bench(&[&["crash-drill", "--path", "sends", "--sends", "500"][..], &short].concat());
    assert!(sends.contains("| lost (accepted, never delivered) | 0 |"), "{sends}");
    assert!(sends.contains("| answers 5xx other than 503 | 0 {} |"), "{sends}");
}

/// The fault drills in short form, each on a PostgreSQL cluster and Redis server of its own: 300 sends or
/// more while Redis is killed, Redis is paused, PostgreSQL is stopped and started, and the provider answers
/// 500 then hangs, each for 2 s: nothing accepted is lost, no answer is a 5xx but 503, and the service takes
/// sends again once the fault is over.
#[test]
fn the_fault_drills_lose_nothing_in_short_form() {
    // A provider that hangs is given up on after a second, and retried soon, so the drill ends in seconds.
    let env = [
        ("FRONTDESK_PROVIDER_TIMEOUT", "1s"),
        ("FRONTDESK_SEND_RETRY_SCHEDULE", "200ms,500ms,1s,1s,1s,1s,1s"),
    ];
    for fault in ["redis-down", "redis-pause", "postgres-restart", "provider"] {
        let args = ["crash-drill", "--path", "sends", "--fault", fault, "--outage", "2"];
        let short = ["--sends", "300", "--clients", "4"];
        let report = bench_with(&[&args[..], &short].concat(), &env);
        for row in [
            "| lost (accepted, never delivered) | 0 |",
            "| answers 5xx other than 503 | 0 {} |",
            "| deliveries failed | 0 |",
        ] {
            assert!(report.contains(row), "{fault}: {row}\n{report}");
        }
        assert!(
            !report.contains("| first send accepted after the fault ended | none |"),
            "{fault}: accepting again\n{report}"
        );
    }
}

/// The drills on AI replies and deals in short form: customers' questions while the model hangs (each call
/// given up on after a second) and while serve is killed during their burst of inbound webhooks (on SQLite),
/// each stored once and answered once; a broadcast to 1,000 numbers through a SIGKILL reaches each of them;
/// a 30-page import through a SIGKILL stores and charges each page once; deals made while PostgreSQL
/// restarts all reach their webhook.
#[test]
fn questions_broadcasts_imports_and_deals_survive_their_faults_in_short_form() {
    let env = [("FRONTDESK_MODEL_TIMEOUT", "1s")];
    for fault in [
        &["--fault", "model", "--outage", "2"][..],
        &["--kills", "1", "--window", "1", "--sqlite"],
    ] {
        let args = ["crash-drill", "--path", "replies", "--sends", "200", "--clients", "4"];
        let report = bench_with(&[&args[..], fault].concat(), &env);
        for row in [
            "| lost (acknowledged, never stored) | 0 |",
            "| stored twice or more | 0 |",
            "| unanswered | 0 |",
            "| answered twice or more | 0 |",
            "| answers 5xx other than 503 | 0 {} |",
        ] {
            assert!(report.contains(row), "{fault:?}: {row}\n{report}");
        }
    }
    let kill = ["--kills", "1", "--window", "1", "--sends", "1000"];
    let broadcast = bench(&[&["crash-drill", "--path", "broadcast"][..], &kill].concat());
    for row in [
        "| missed (never received the opener) | 0 |",
        "| sent to a number not in the audience | 0 |",
        "| the broadcast's counts: recipients, sent | 1000, 1000 |",
    ] {
        assert!(broadcast.contains(row), "{row}\n{broadcast}");
    }
    let kill = ["--kills", "1", "--window", "1", "--sends", "30", "--sqlite"];
    let model = frontdesk_tests::server::embedding_model();
    let model = [("FRONTDESK_EMBEDDING_MODEL", model.as_str())];
    let import = bench_with(&[&["crash-drill", "--path", "import"][..], &kill].concat(), &model);
    for row in [
        "| the source's status at the end | ready |",
        "| pages read | 30 of 30 |",
        "| pages without their sections (lost) | 0 |",
        "| sections stored twice or more | 0 |",
        "| charges, pages charged | 30, 30 |",
        "| FAQ vectors, sections | 90, 90 |",
    ] {
        assert!(import.contains(row), "{row}\n{import}");
    }
    let restart = ["--fault", "postgres-restart", "--outage", "2", "--clients", "4"];
    let deals = bench(&[&["crash-drill", "--path", "deals"][..], &restart].concat());
    assert!(
        deals.contains("| lost (acknowledged, never delivered) | 0 |"),
        "{deals}"
    );
}

/// The large account's bench in short form (2,000 contacts, SQLite): every query answered without error.
#[test]
fn the_large_account_bench_runs_in_short_form() {
    let stdout = bench(&["large-account", "--contacts", "2000", "--seconds", "1", "--sqlite"]);
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| contacts ") || l.starts_with("| conversations"))
        .collect();
    assert_eq!(rows.len(), 22, "eleven queries on two accounts:\n{stdout}");
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cells[2].parse::<f64>().unwrap() > 0.0, "requests made: {row}");
        assert_eq!(cells[8], "0", "no errors: {row}");
    }
}
