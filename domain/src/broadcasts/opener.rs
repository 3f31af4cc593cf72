//! The opener's placeholders: `{{name}}`, `{{first_name}}` and `{{attributes.KEY}}`, filled from each
//! recipient's contact (a missing value renders empty). A malformed opener (an unclosed `{{`, an unknown
//! or empty placeholder) is refused when the broadcast is written, never found at send time.

use std::collections::BTreeMap;

/// One piece of a parsed opener.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Name,
    FirstName,
    Attribute(&'a str),
}

/// An attribute key as a placeholder can name it: no spaces or braces, at most 64 characters.
fn is_key(key: &str) -> bool {
    !key.is_empty() && key.chars().count() <= 64 && !key.contains(|c: char| c.is_whitespace() || c == '{' || c == '}')
}

fn parse(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            pieces.push(Piece::Text(&rest[..open]));
        }
        let inside = &rest[open + 2..];
        let close = inside
            .find("}}")
            .ok_or_else(|| "has a `{{` that is never closed with `}}`".to_owned())?;
        let name = inside[..close].trim();
        pieces.push(match name {
            "name" => Piece::Name,
            "first_name" => Piece::FirstName,
            _ => match name.strip_prefix("attributes.") {
                Some(key) if is_key(key) => Piece::Attribute(key),
                _ => {
                    return Err(format!(
                        "has an unknown placeholder `{{{{{name}}}}}`: use {{{{name}}}}, {{{{first_name}}}} or \
                         {{{{attributes.KEY}}}}"
                    ));
                }
            },
        });
        rest = &inside[close + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

/// Why `text` cannot be an opener (or a template parameter), if it cannot.
pub fn check(text: &str) -> Result<(), String> {
    parse(text).map(|_| ())
}

/// The values a recipient's placeholders take.
pub struct Values<'a> {
    pub name: &'a str,
    pub attributes: &'a BTreeMap<String, String>,
}

/// `text` with its placeholders filled for one recipient. A text that does not parse (never stored: checked
/// on write) is sent as it is.
pub fn render(text: &str, values: &Values<'_>) -> String {
    let Ok(pieces) = parse(text) else {
        return text.to_owned();
    };
    let mut out = String::with_capacity(text.len());
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Name => out.push_str(values.name.trim()),
            Piece::FirstName => out.push_str(values.name.split_whitespace().next().unwrap_or_default()),
            Piece::Attribute(key) => out.push_str(values.attributes.get(key).map_or("", String::as_str)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("city".to_owned(), "Pune".to_owned()),
            ("visits".to_owned(), "3".to_owned()),
        ])
    }

    #[test]
    fn fills_each_placeholder_and_leaves_missing_ones_empty() {
        let attributes = attributes();
        let values = Values {
            name: "Asha Rao",
            attributes: &attributes,
        };
        assert_eq!(
            render(
                "Hi {{first_name}} ({{ name }}) from {{attributes.city}}, visit {{attributes.visits}}{{attributes.plan}}!",
                &values
            ),
            "Hi Asha (Asha Rao) from Pune, visit 3!"
        );
        let nameless = Values {
            name: "",
            attributes: &attributes,
        };
        assert_eq!(render("Hi {{first_name}}, {x} }}", &nameless), "Hi , {x} }}");
    }

    #[test]
    fn refuses_malformed_openers() {
        assert!(check("Hi {{first_name}}").is_ok());
        assert!(check("no placeholders, { braces } fine").is_ok());
        assert!(check("Hi {{first_name").unwrap_err().contains("never closed"));
        assert!(
            check("Hi {{email}}")
                .unwrap_err()
                .contains("unknown placeholder `{{email}}`")
        );
        assert!(check("Hi {{}}").is_err());
        assert!(check("Hi {{attributes.}}").is_err());
        assert!(check("Hi {{attributes.a b}}").is_err());
    }
}
