//! Key scopes: a key has every section (`*`) or a list of them. `api-keys` calls are always allowed.

use crate::error::{ApiError, FieldViolation};

/// The sections of the platform API a key can be limited to.
pub const SECTIONS: &[&str] = &[
    "summaries",
    "agents",
    "campaigns",
    "broadcasts",
    "deals",
    "knowledge",
    "entry_points",
    "webhooks",
    "messages",
    "contacts",
    "conversations",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scopes {
    All,
    Sections(Vec<String>),
}

impl Scopes {
    /// From a request: empty means all sections; every name must be a known section.
    pub fn parse(names: &[String]) -> Result<Self, ApiError> {
        if names.is_empty() || names.iter().all(|n| n == "*") {
            return Ok(Self::All);
        }
        let unknown: Vec<FieldViolation> = names
            .iter()
            .filter(|n| !SECTIONS.contains(&n.as_str()))
            .map(|n| {
                FieldViolation::new(
                    "scopes",
                    format!("unknown section `{n}`; known: {}", SECTIONS.join(", ")),
                )
            })
            .collect();
        if !unknown.is_empty() {
            return Err(ApiError::invalid(unknown));
        }
        let mut sections: Vec<String> = names.to_vec();
        sections.sort();
        sections.dedup();
        Ok(Self::Sections(sections))
    }

    /// The stored form: `*` or `a,b,c`.
    pub fn from_stored(stored: &str) -> Self {
        if stored == "*" {
            Self::All
        } else {
            Self::Sections(stored.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
        }
    }

    pub fn to_stored(&self) -> String {
        match self {
            Self::All => "*".to_owned(),
            Self::Sections(s) => s.join(","),
        }
    }

    /// `["*"]` or the section names.
    pub fn names(&self) -> Vec<String> {
        match self {
            Self::All => vec!["*".to_owned()],
            Self::Sections(s) => s.clone(),
        }
    }

    pub fn allows(&self, section: &str) -> bool {
        match self {
            Self::All => true,
            Self::Sections(s) => s.iter().any(|x| x == section),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_store_and_check() {
        assert_eq!(Scopes::parse(&[]).unwrap(), Scopes::All);
        let s = Scopes::parse(&["deals".into(), "agents".into(), "deals".into()]).unwrap();
        assert_eq!(s.to_stored(), "agents,deals");
        assert_eq!(Scopes::from_stored("agents,deals"), s);
        assert!(s.allows("deals") && !s.allows("webhooks"));
        assert!(Scopes::from_stored("*").allows("webhooks"));
        assert!(Scopes::parse(&["deal".into()]).is_err());
    }
}
