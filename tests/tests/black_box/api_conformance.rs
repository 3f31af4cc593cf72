//! The OpenAPI document as fuzzers see it: schemathesis, stateful phase on, against a live server with a real
//! key. It must find no server error, no status the document does not list, no answer that breaks its schema,
//! and no invalid input accepted. The service runs in a network namespace of its own with only loopback, so
//! nothing the fuzzer makes it call (webhook URLs, imports, tool servers, providers) can leave the machine.
//!
//! `FRONTDESK_API_FUZZ_EXAMPLES` sets the cases per operation and phase (a short run by default);
//! `scripts/api-fuzz` runs the full form and prints its figures.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use frontdesk_tests::{
    Db, Server, admin, binary, platform::Platform, twilio::FakeTwilio, webchat, webhook_receiver::Receiver,
};
use serde_json::Value;

/// Set in the child that runs inside the namespace.
const INSIDE: &str = "FRONTDESK_API_FUZZ_INSIDE";
const EXAMPLES: &str = "FRONTDESK_API_FUZZ_EXAMPLES";
/// Cases per operation and phase of the short form.
const SHORT_EXAMPLES: &str = "4";

/// What schemathesis checks; `positive_data_acceptance` is left out because data the schema allows may
/// still name nothing that exists (a stage id, an agent id), which the service rightly refuses.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
    response_headers_conformance,response_schema_conformance,negative_data_rejection,use_after_free,\
    ensure_resource_availability";

#[test]
fn schemathesis_finds_no_server_error_undocumented_status_or_schema_violation() {
    let frontdesk = binary::path();
    // This process's own image, which stays executable even when a build replaces the file it came from.
    let exe = format!("/proc/{}/exe", std::process::id());
    let status = Command::new("unshare")
        .args(["--net", "--", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(&exe)
        .args([
            "api_conformance::inside_a_network_of_its_own",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(INSIDE, "1")
        .env("FRONTDESK_BIN", &frontdesk)
        .status()
        .expect("unshare runs (util-linux, as root)");
    assert!(status.success(), "the run inside its own network failed: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by schemathesis_finds_no_server_error_undocumented_status_or_schema_violation, in a network namespace"]
async fn inside_a_network_of_its_own() {
    assert!(std::env::var_os(INSIDE).is_some(), "run only inside its own network");
    let interfaces = std::fs::read_to_string("/proc/net/dev").expect("/proc/net/dev");
    let names: Vec<&str> = interfaces
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(names, ["lo"], "the namespace has loopback only");

    // One resource of every kind, made as the isolation sweep makes them (a customer's conversation
    // included), whose ids the fuzzer is given for the parameters that name them: without them most
    // operations could only answer 404 to made-up ids.
    let twilio = FakeTwilio::start().await;
    let hook = Receiver::start().await;
    let db = Db::sqlite();
    let server = webchat::start(&db, &[]).await;
    let owner = Platform::new(&server).await;
    admin::grant_credits(&server, &owner.account_id, "10000").await;
    let world = crate::isolation::make_world(&server, &owner, &twilio, &hook).await;
    let config = std::env::temp_dir().join(format!("frontdesk-schemathesis-{}.toml", std::process::id()));
    std::fs::write(&config, parameters(&world.ids)).unwrap();
    let document = server.openapi().await;
    let examples = std::env::var(EXAMPLES).unwrap_or_else(|_| SHORT_EXAMPLES.to_owned());
    // The key's own revocation and rotation would end every later call of the run with 401, so they run
    // apart, each with a key of its own.
    let mut runs = Vec::new();
    // The world's owner runs the main form; alone, the key's own calls have no links to follow, so the
    // stateful phase is the main run's.
    for filter in [
        vec![
            "--exclude-operation-id",
            "revokeApiKey",
            "--exclude-operation-id",
            "rotateApiKey",
            "--phases",
            "examples,coverage,fuzzing,stateful",
        ],
        vec![
            "--include-operation-id",
            "rotateApiKey",
            "--phases",
            "examples,coverage,fuzzing",
        ],
        vec![
            "--include-operation-id",
            "revokeApiKey",
            "--phases",
            "examples,coverage,fuzzing",
        ],
    ] {
        let key = if runs.is_empty() {
            owner.key.clone()
        } else {
            admin::account(&server, "growth", 0).await.1
        };
        runs.push(schemathesis(&server, &key, &config, &filter, &examples));
    }
    let _ = std::fs::remove_file(&config);
    let mut answers = Answers::default();
    for run in &runs {
        println!("{}", run.stdout);
        answers.add(&document, &run.har);
    }
    let operations = document["paths"].as_object().map_or(0, |paths| {
        paths
            .values()
            .filter_map(Value::as_object)
            .map(|methods| methods.len())
            .sum()
    });
    println!(
        "api-fuzz: {operations} operations, {} reached a 2xx ({:.0}%), {} calls, {} failing runs of {}",
        answers.reached.len(),
        100.0 * answers.reached.len() as f64 / operations.max(1) as f64,
        answers.calls,
        runs.iter().filter(|r| !r.passed).count(),
        runs.len()
    );
    for run in &runs {
        assert!(run.passed, "schemathesis found problems:\n{}", run.stdout);
    }
}

struct Run {
    passed: bool,
    stdout: String,
    /// The run's exchanges (HAR).
    har: Value,
}

/// schemathesis' configuration: the value of each parameter that names a resource of the world.
fn parameters(ids: &BTreeMap<&'static str, String>) -> String {
    let mut toml = String::from("[parameters]\n");
    for (name, id) in ids {
        toml.push_str(&format!("{name} = {}\n", Value::String(id.clone())));
    }
    toml
}

fn schemathesis(server: &Server, key: &str, config: &Path, filter: &[&str], examples: &str) -> Run {
    let har = std::env::temp_dir().join(format!(
        "frontdesk-schemathesis-{}-{}.har",
        std::process::id(),
        filter[1]
    ));
    // schemathesis keeps a cache in its working directory: the run's scratch space, not the repository.
    let output = Command::new("st")
        .current_dir(std::env::temp_dir())
        .arg("--config-file")
        .arg(config)
        .arg("run")
        .arg(server.url("/openapi.json"))
        .args(["--header", &format!("X-API-Key: {key}")])
        .args(["--checks", CHECKS])
        .args(["--max-examples", examples, "--seed", "1", "--workers", "2"])
        .args(["--request-timeout", "30", "--no-color"])
        .args(filter)
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .output()
        .expect("schemathesis runs (pip install -r tests/requirements.txt)");
    let exchanges = std::fs::read_to_string(&har)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let _ = std::fs::remove_file(&har);
    Run {
        passed: output.status.success(),
        stdout: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        har: exchanges,
    }
}

/// The documented operations that answered a 2xx, and the calls made.
#[derive(Default)]
struct Answers {
    reached: BTreeSet<(String, String)>,
    calls: usize,
}

impl Answers {
    fn add(&mut self, document: &Value, har: &Value) {
        let templates: Vec<(String, String)> = document["paths"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(path, methods)| {
                methods
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(m, _)| (m.to_uppercase(), path.clone()))
            })
            .collect();
        for entry in har["log"]["entries"].as_array().into_iter().flatten() {
            self.calls += 1;
            let status = entry["response"]["status"].as_u64().unwrap_or(0);
            let method = entry["request"]["method"].as_str().unwrap_or_default();
            let url = entry["request"]["url"].as_str().unwrap_or_default();
            let path = url
                .split("://")
                .nth(1)
                .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
                .unwrap_or("/");
            let path = path.split('?').next().unwrap_or(path);
            if (200..300).contains(&status)
                && let Some(template) = template_of(&templates, method, path)
            {
                self.reached.insert((method.to_owned(), template));
            }
        }
    }
}

/// The documented path a concrete path was made from: segment by segment, a variable matching anything;
/// of several, the one with the most fixed segments (`/v1/entry-points/resolve` over `/{entry_point_id}`).
fn template_of(templates: &[(String, String)], method: &str, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    templates
        .iter()
        .filter(|(m, _)| m == method)
        .filter_map(|(_, template)| {
            let parts: Vec<&str> = template.split('/').collect();
            let matches =
                parts.len() == segments.len() && parts.iter().zip(&segments).all(|(p, s)| p.starts_with('{') || p == s);
            matches.then(|| (parts.iter().filter(|p| !p.starts_with('{')).count(), template.clone()))
        })
        .max()
        .map(|(_, template)| template)
}
