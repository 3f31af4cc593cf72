//! The routing decision, free of storage: given a channel's candidate rules and default, which agent
//! answers a conversation. The highest-priority enabled rule whose every set criterion matches wins (ties:
//! the oldest rule); else the channel default; else nobody.

use chrono::{DateTime, Utc};

/// A rule as the resolver sees it (rules of paused agents are left out by the caller).
#[derive(Clone, Debug)]
pub struct Rule {
    pub id: String,
    pub agent_id: String,
    pub keywords: Vec<String>,
    pub referral: String,
    pub url_prefix: String,
    pub priority: i32,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
}

/// What the conversation shows at its start.
#[derive(Clone, Debug, Default)]
pub struct Inbound<'a> {
    pub text: &'a str,
    pub referral: &'a str,
    pub url: &'a str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    EntryPoint { agent_id: String, entry_point_id: String },
    ChannelDefault { agent_id: String },
    NoRoute,
}

impl Route {
    /// The agent that answers, if any.
    pub fn agent_id(&self) -> Option<&str> {
        match self {
            Self::EntryPoint { agent_id, .. } | Self::ChannelDefault { agent_id } => Some(agent_id),
            Self::NoRoute => None,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            Self::EntryPoint { .. } => "entry_point",
            Self::ChannelDefault { .. } => "channel_default",
            Self::NoRoute => "no_route",
        }
    }
}

pub fn resolve(rules: &[Rule], default_agent: Option<&str>, inbound: &Inbound<'_>) -> Route {
    let mut candidates: Vec<&Rule> = rules.iter().filter(|r| r.enabled).collect();
    candidates.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.created_at.cmp(&b.created_at))
            .then(a.id.cmp(&b.id))
    });
    if let Some(rule) = candidates.into_iter().find(|rule| matches(rule, inbound)) {
        return Route::EntryPoint {
            agent_id: rule.agent_id.clone(),
            entry_point_id: rule.id.clone(),
        };
    }
    match default_agent {
        Some(agent_id) => Route::ChannelDefault {
            agent_id: agent_id.to_owned(),
        },
        None => Route::NoRoute,
    }
}

/// Every criterion the rule sets holds; a rule without criteria takes every conversation of its channel.
fn matches(rule: &Rule, inbound: &Inbound<'_>) -> bool {
    let keywords = rule.keywords.is_empty() || rule.keywords.iter().any(|k| contains_phrase(inbound.text, k));
    let referral = rule.referral.is_empty() || rule.referral == inbound.referral;
    let url = rule.url_prefix.is_empty() || inbound.url.starts_with(&rule.url_prefix);
    keywords && referral && url
}

/// `phrase` occurs in `text` as whole words, ignoring case ("price" is in "Price?" but not in "pricey").
pub fn contains_phrase(text: &str, phrase: &str) -> bool {
    let phrase = phrase.trim().to_lowercase();
    if phrase.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let is_word = |c: char| c.is_alphanumeric();
    // Every start, overlapping ones included ("a a" is in "ba a a" at the second `a`).
    text.char_indices().any(|(start, _)| {
        text[start..].starts_with(&phrase) && {
            let before = text[..start].chars().next_back();
            let after = text[start + phrase.len()..].chars().next();
            !before.is_some_and(is_word) && !after.is_some_and(is_word)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, agent: &str, priority: i32, keywords: &[&str], age_secs: i64) -> Rule {
        Rule {
            id: id.into(),
            agent_id: agent.into(),
            keywords: keywords.iter().map(|k| (*k).to_owned()).collect(),
            referral: String::new(),
            url_prefix: String::new(),
            priority,
            enabled: true,
            created_at: DateTime::from_timestamp(1_800_000_000 - age_secs, 0).unwrap(),
        }
    }

    fn text(text: &str) -> Inbound<'_> {
        Inbound {
            text,
            ..Inbound::default()
        }
    }

    #[test]
    fn phrases_match_whole_words_ignoring_case() {
        assert!(contains_phrase("What is the PRICE?", "price"));
        assert!(contains_phrase("book a demo please", "book a demo"));
        assert!(!contains_phrase("that is pricey", "price"));
        assert!(!contains_phrase("anything", " "));
        assert!(contains_phrase("Ünïcode wörd here", "wörd"));
        assert!(contains_phrase("ba a a", "a a"));
    }

    #[test]
    fn precedence() {
        let rules = vec![
            rule("ep_low", "agt_low", 1, &[], 10),
            rule("ep_high", "agt_high", 5, &["price"], 5),
            rule("ep_old_tie", "agt_old", 1, &[], 20),
        ];
        let route = |t| resolve(&rules, Some("agt_default"), &text(t));
        assert_eq!(route("price?").reason(), "entry_point");
        assert_eq!(
            route("price?"),
            Route::EntryPoint {
                agent_id: "agt_high".into(),
                entry_point_id: "ep_high".into()
            }
        );
        // The keyword misses: the tie at priority 1 goes to the older rule.
        assert_eq!(
            route("hello"),
            Route::EntryPoint {
                agent_id: "agt_old".into(),
                entry_point_id: "ep_old_tie".into()
            }
        );
        let mut disabled = rules.clone();
        disabled.iter_mut().for_each(|r| r.enabled = false);
        assert_eq!(
            resolve(&disabled, Some("agt_default"), &text("price")),
            Route::ChannelDefault {
                agent_id: "agt_default".into()
            }
        );
        assert_eq!(resolve(&disabled, None, &text("price")), Route::NoRoute);
    }

    #[test]
    fn every_set_criterion_must_hold() {
        let mut r = rule("ep", "agt", 0, &["sale"], 0);
        r.referral = "ad42".into();
        r.url_prefix = "https://shop.example.com/".into();
        let hit = Inbound {
            text: "sale",
            referral: "ad42",
            url: "https://shop.example.com/x",
        };
        assert_eq!(resolve(std::slice::from_ref(&r), None, &hit).reason(), "entry_point");
        for miss in [
            Inbound {
                referral: "other",
                ..hit.clone()
            },
            Inbound {
                url: "https://other.example.com/",
                ..hit.clone()
            },
            Inbound {
                text: "hi",
                ..hit.clone()
            },
        ] {
            assert_eq!(resolve(std::slice::from_ref(&r), None, &miss), Route::NoRoute);
        }
    }
}
