//! Every secret the tests hand the service or get from it (API keys, webhook signing secrets, visitor tokens,
//! provider credentials, the service's own keys), remembered as the kit sees them pass, so that each server's
//! logs can be checked for them when it stops: no secret may ever be written to a log.
//!
//! A secret is found by its longest run of letters, digits, `_` and `-` (at least 12 characters), looked up
//! among the same runs of each log line, then confirmed whole: a check that costs a set lookup per word of
//! the logs however many secrets the test process has seen.

use std::{
    collections::{HashMap, HashSet},
    sync::{Mutex, OnceLock},
};

use serde_json::Value;

/// The shortest run a secret is recognised by; shorter ones would match ordinary words.
const SHORTEST: usize = 12;

fn known() -> &'static Mutex<HashMap<String, HashSet<String>>> {
    static KNOWN: OnceLock<Mutex<HashMap<String, HashSet<String>>>> = OnceLock::new();
    KNOWN.get_or_init(Default::default)
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .filter(|word| word.len() >= SHORTEST)
}

/// Remembers `secret` (ignored when it has no run long enough to be told from an ordinary word).
pub fn remember(secret: &str) {
    let Some(longest) = words(secret).max_by_key(|word| word.len()) else {
        return;
    };
    known()
        .lock()
        .unwrap()
        .entry(longest.to_owned())
        .or_default()
        .insert(secret.to_owned());
}

/// Whether a field of this name holds a secret: a key, token, password or secret, but not a public id that
/// merely ends in `key` (`widget_key`, `idempotency_key`).
fn is_secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["secret", "token", "password", "api_key", "apikey"]
        .iter()
        .any(|word| name.contains(word))
        && !name.ends_with("_tokens")
        || name == "key"
}

/// Remembers every string under a secret-named field of `json`, however deep.
pub fn remember_in(json: &Value) {
    match json {
        Value::Object(fields) => {
            for (name, value) in fields {
                match value {
                    Value::String(secret) if is_secret_field(name) => remember(secret),
                    _ => remember_in(value),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(remember_in),
        _ => {}
    }
}

/// Remembers the secret values of environment variables named as secrets (`FRONTDESK_SECRET_KEY`,
/// `FRONTDESK_ADMIN_TOKEN`, `ANTHROPIC_API_KEY`, ...).
pub fn remember_env<'a>(vars: impl Iterator<Item = (&'a String, &'a String)>) {
    for (name, value) in vars {
        let name = name.to_ascii_uppercase();
        if ["SECRET", "TOKEN", "PASSWORD", "API_KEY"]
            .iter()
            .any(|w| name.contains(w))
        {
            remember(value);
        }
    }
}

/// The log lines that hold a remembered secret, each with the secret's first characters.
pub fn leaked_in(lines: &[String]) -> Vec<String> {
    let known = known().lock().unwrap();
    let mut leaks = Vec::new();
    for line in lines {
        for word in words(line) {
            let Some(secrets) = known.get(word) else {
                continue;
            };
            if let Some(secret) = secrets.iter().find(|secret| line.contains(secret.as_str())) {
                let shown: String = secret.chars().take(6).collect();
                leaks.push(format!("{shown}…: {line}"));
            }
        }
    }
    leaks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn secrets_are_found_in_lines_and_public_ids_are_not_secrets() {
        super::remember_in(&json!({
            "webhook": {"secret": "whsec_AAAAbbbbCCCCdddd1234"},
            "channel": {"widget_key": "wk_PublicPublicPublic1234"},
            "usage": {"input_tokens": 1200},
            "config": [{"auth_token": "0123456789abcdef0123"}],
        }));
        super::remember("short");
        let lines = [
            r#"{"message":"delivering","secret":"whsec_AAAAbbbbCCCCdddd1234"}"#.to_owned(),
            "token=0123456789abcdef0123&x=1".to_owned(),
            "widget wk_PublicPublicPublic1234 loaded, short".to_owned(),
        ];
        let leaks = super::leaked_in(&lines);
        assert_eq!(leaks.len(), 2, "{leaks:?}");
        assert!(leaks[0].starts_with("whsec_…") && leaks[1].starts_with("012345…"));
    }
}
