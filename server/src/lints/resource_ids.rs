//! No function of the service takes two ids as strings: such ids get `resource_id` types, so swapped ids do
//! not compile (docs/architecture.md).

use super::library_sources;

/// The parameters of every `fn` in `text` that are ids (named `id` or `…_id`) taken as strings.
fn string_id_parameters(text: &str) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("fn ") {
        let after = &rest[at + 3..];
        rest = after;
        let Some(open) = after.find('(') else { break };
        let name = after[..open].split('<').next().unwrap_or_default().trim();
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut depth = 0;
        let mut close = None;
        let mut previous = ' ';
        for (i, c) in after[open..].char_indices() {
            let arrow = c == '>' && previous == '-';
            previous = c;
            match c {
                '(' | '<' | '[' => depth += 1,
                ')' | '>' | ']' if depth > 0 && !arrow => {
                    depth -= 1;
                    if depth == 0 && c == ')' {
                        close = Some(open + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let ids: Vec<String> = split_top_level(&after[open + 1..close])
            .into_iter()
            .filter_map(|param| {
                let (name, ty) = param.split_once(':')?;
                let name = name.trim().trim_start_matches("mut ").to_owned();
                let ty: String = ty.split_whitespace().collect();
                let is_id = name == "id" || name.ends_with("_id");
                // `&str`, `&'a str`, `String`, `&String`
                let is_string = (ty.starts_with('&') && ty.ends_with("str")) || ty.ends_with("String");
                (is_id && is_string).then_some(name)
            })
            .collect();
        if ids.len() >= 2 {
            found.push((name.to_owned(), ids));
        }
    }
    found
}

fn split_top_level(params: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start, mut previous) = (0, 0, ' ');
    for (i, c) in params.char_indices() {
        let arrow = c == '>' && previous == '-';
        previous = c;
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' if !arrow => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&params[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&params[start..]);
    parts
}

#[test]
fn no_function_takes_two_ids_as_strings() {
    let mut offenders = Vec::new();
    for source in library_sources() {
        for (function, ids) in string_id_parameters(&source.code) {
            offenders.push(format!("{}: fn {function}({})", source.path.display(), ids.join(", ")));
        }
    }
    assert!(
        offenders.is_empty(),
        "functions that take two ids as strings (give them resource_id types):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_check_sees_a_signature_over_several_lines() {
    let text = "pub async fn of_contact(\n    db: &impl ConnectionTrait,\n    contact_id: &str,\n    \
                channel_id: &str,\n) -> Result<Vec<u8>, DbErr> {";
    assert_eq!(
        string_id_parameters(text),
        vec![(
            "of_contact".to_owned(),
            vec!["contact_id".to_owned(), "channel_id".to_owned()]
        )]
    );
    assert!(string_id_parameters("fn ok(contact: &ContactId, channel_id: &str) {}").is_empty());
    let lifetimes = "fn sign<'a>(order_id: &'a str, f: impl Fn(&str) -> Vec<u8>, payment_id: String) {}";
    assert_eq!(string_id_parameters(lifetimes)[0].1, ["order_id", "payment_id"]);
}
