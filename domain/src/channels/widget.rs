//! A web chat channel's configuration, read from the channel's (sealed) config: how the widget looks and
//! which sites may use it. Checked when the channel is connected, so a stored config always reads.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::FieldViolation;

const DEFAULT_TITLE: &str = "Chat with us";
const DEFAULT_GREETING: &str = "Hi! How can we help?";
const DEFAULT_COLOR: &str = "#2563eb";
const MAX_TITLE_CHARS: usize = 80;
const MAX_GREETING_CHARS: usize = 500;

/// What the widget shows, as the visitor API answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Look {
    pub title: String,
    pub greeting: String,
    pub color: String,
    pub position: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Widget {
    pub look: Look,
    pub origins: AllowedOrigins,
}

impl Widget {
    /// The widget of a channel config; the problems of each key that is wrong, named `config.KEY`.
    pub fn from_config(config: &BTreeMap<String, String>) -> Result<Self, Vec<FieldViolation>> {
        let mut problems = Vec::new();
        let mut text = |key: &str, default: &str, max: usize| {
            let value = config.get(key).map_or(default, |v| v.trim());
            if value.chars().count() > max {
                problems.push(FieldViolation::new(
                    format!("config.{key}"),
                    format!("must be at most {max} characters"),
                ));
            }
            value.to_owned()
        };
        let title = text("title", DEFAULT_TITLE, MAX_TITLE_CHARS);
        let greeting = text("greeting", DEFAULT_GREETING, MAX_GREETING_CHARS);
        let color = config
            .get("color")
            .map_or(DEFAULT_COLOR, |v| v.trim())
            .to_ascii_lowercase();
        if !is_hex_color(&color) {
            problems.push(FieldViolation::new("config.color", "must be a colour as #rrggbb"));
        }
        let position = config.get("position").map_or("right", |v| v.trim()).to_owned();
        if !matches!(position.as_str(), "right" | "left") {
            problems.push(FieldViolation::new("config.position", "must be `right` or `left`"));
        }
        let origins = match AllowedOrigins::parse(config.get("allowed_origins").map_or("", String::as_str)) {
            Ok(origins) => origins,
            Err(problem) => {
                problems.push(FieldViolation::new("config.allowed_origins", problem));
                AllowedOrigins::default()
            }
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            look: Look {
                title: if title.is_empty() {
                    DEFAULT_TITLE.to_owned()
                } else {
                    title
                },
                greeting,
                color,
                position,
            },
            origins,
        })
    }
}

fn is_hex_color(color: &str) -> bool {
    color
        .strip_prefix('#')
        .is_some_and(|hex| hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The origins whose pages may use the widget; none listed: any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedOrigins(Vec<String>);

impl AllowedOrigins {
    /// Comma-separated origins (`https://shop.example`, `http://localhost:3000`), each a scheme, host and
    /// optional port with nothing after it.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut origins = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let url = url::Url::parse(entry)
                .map_err(|_| format!("`{entry}` is not an origin such as https://shop.example"))?;
            let bare = matches!(url.path(), "" | "/") && url.query().is_none() && url.fragment().is_none();
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() || !bare {
                return Err(format!(
                    "`{entry}` is not an origin: an http(s) scheme and host with no path, such as https://shop.example"
                ));
            }
            origins.push(url.origin().ascii_serialization());
        }
        Ok(Self(origins))
    }

    /// Whether a page of `origin` (an `Origin` header) may use the widget on a request to this server. A
    /// request without an origin comes from no browser page; one from a page of this very server
    /// (`/webchat/demo`) is not cross-origin at all; any other page must be listed. None listed: any page
    /// (docs/webchat.md says how to lock a channel to its sites).
    pub fn allow(&self, origin: &str, here: &Here<'_>) -> bool {
        if origin.is_empty() || self.0.is_empty() {
            return true;
        }
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        here.is(&origin) || self.0.contains(&origin)
    }
}

/// This server, as a request reached it: the `Host` it was sent to, and the origin of
/// `FRONTDESK_PUBLIC_URL` (what browsers see behind a proxy that rewrites `Host`).
#[derive(Clone, Copy, Debug)]
pub struct Here<'a> {
    pub host: &'a str,
    pub public_origin: &'a str,
}

impl Here<'_> {
    /// Whether `origin` (lower case) is one of this server's own: its public origin, or the `Host` it was
    /// reached at under the public URL's scheme. A page of the same host under another scheme (`http` for an
    /// `https` service) is another origin, which a network attacker may be able to serve.
    fn is(&self, origin: &str) -> bool {
        let scheme = self
            .public_origin
            .split_once("://")
            .map_or("http", |(scheme, _)| scheme);
        let same_host = origin.split_once("://").is_some_and(|(their_scheme, authority)| {
            !self.host.is_empty() && their_scheme == scheme && authority.eq_ignore_ascii_case(self.host)
        });
        same_host || origin == self.public_origin
    }
}

/// The origin of a URL (`https://frontdesk.example`), lower case; "" for one that has none (never `null`,
/// which a sandboxed page sends).
pub fn origin_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .map(|url| url.origin())
        .filter(url::Origin::is_tuple)
        .map_or_else(String::new, |origin| origin.ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: Here<'static> = Here {
        host: "frontdesk.example",
        public_origin: "https://chat.example",
    };

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_and_checks() {
        let widget = Widget::from_config(&config(&[])).unwrap();
        assert_eq!(widget.look.title, DEFAULT_TITLE);
        assert_eq!(widget.look.color, DEFAULT_COLOR);
        assert!(widget.origins.allow("https://anything.example", &HERE));
        let problems = Widget::from_config(&config(&[
            ("color", "blue"),
            ("position", "top"),
            ("allowed_origins", "https://shop.example/path"),
        ]))
        .unwrap_err();
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["config.color", "config.position", "config.allowed_origins"]);
    }

    #[test]
    fn origins_match_exactly_with_default_ports_folded() {
        let origins = AllowedOrigins::parse("https://Shop.example:443, http://localhost:3000").unwrap();
        let allow = |origin: &str| origins.allow(origin, &HERE);
        assert!(allow("https://shop.example"));
        assert!(allow("http://localhost:3000"));
        assert!(!allow("http://shop.example"));
        assert!(!allow("https://shop.example.evil.example"));
        assert!(!allow("null"));
        assert!(allow(""), "no Origin header: not a browser page");
        assert!(allow("https://frontdesk.example"), "the server's own pages");
        assert!(
            !allow("http://frontdesk.example"),
            "the server's host under another scheme"
        );
        assert!(allow("https://chat.example"), "the public URL's");
        let proxied = Here {
            host: "127.0.0.1:8080",
            public_origin: "",
        };
        assert!(origins.allow("http://127.0.0.1:8080", &proxied));
        assert!(!origins.allow("http://127.0.0.1:8081", &proxied));
        assert_eq!(origin_of("https://Chat.example:443/x?y"), "https://chat.example");
        assert_eq!(origin_of("data:text/plain,x"), "");
        assert!(AllowedOrigins::parse("ftp://x.example").is_err());
    }
}
