//! Subscription plans and what each grants by default.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plan {
    Launch,
    Growth,
    Scale,
}

impl Plan {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "launch" => Some(Self::Launch),
            "growth" => Some(Self::Growth),
            "scale" => Some(Self::Scale),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Launch => "launch",
            Self::Growth => "growth",
            Self::Scale => "scale",
        }
    }

    /// Platform API access and webhooks come with growth and scale; an operator may change either.
    pub fn includes_api_access(self) -> bool {
        !matches!(self, Self::Launch)
    }
}
