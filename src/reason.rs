//! The stable reasons of every error the service answers: the REST body's `error.code` and the gRPC
//! `ErrorInfo.reason` (upper case). One enum for the core, which picks them, and the edge, which maps the
//! few that have an HTTP status of their own (402, 410, 413) and renders them all.

macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal $(=> $status:literal)?,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            pub const ALL: &[Reason] = &[$(Self::$variant,)*];

            /// The snake_case wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// The HTTP status this reason answers with whatever its gRPC code, when it has one of its own.
            pub fn http_status(self) -> Option<u16> {
                match self {
                    $($(Self::$variant => Some($status),)?)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

reasons! {
    InvalidArgument => "invalid_argument",
    Unauthenticated => "unauthenticated",
    InsufficientScope => "insufficient_scope",
    NotFound => "not_found",
    AlreadyExists => "already_exists",
    FailedPrecondition => "failed_precondition",
    Aborted => "aborted",
    RateLimited => "rate_limited",
    Unavailable => "unavailable",
    DeadlineExceeded => "deadline_exceeded",
    Internal => "internal",
    Unimplemented => "unimplemented",
    MethodNotAllowed => "method_not_allowed",
    UpgradeRequired => "upgrade_required",
    /// The account's credit balance is below the cost.
    InsufficientCredits => "insufficient_credits" => 402,
    /// The resource is gone for good (the campaigns API past its sunset).
    Gone => "gone" => 410,
    PayloadTooLarge => "payload_too_large" => 413,
    IdempotencyConflict => "idempotency_conflict",
    OptedOut => "opted_out",
    NoChannel => "no_channel",
    ApiAccessDisabled => "api_access_disabled",
    WebhooksDisabled => "webhooks_disabled",
    InvalidSignature => "invalid_signature",
    OriginNotAllowed => "origin_not_allowed",
    TooManySockets => "too_many_sockets",
    UnknownOrder => "unknown_order",
    OrderAlreadyPaid => "order_already_paid",
    PaymentProviderError => "payment_provider_error",
    /// Operator API: no admin token is configured.
    AdminDisabled => "admin_disabled",
    TestClockDisabled => "test_clock_disabled",
    /// A preflight's credentials passed every check (internal, edge to core).
    PreflightPassed => "preflight_passed",
}

impl Reason {
    /// The reason of a wire name, either case (`ErrorInfo` carries it upper case).
    pub fn parse(wire: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|r| r.as_str().eq_ignore_ascii_case(wire))
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn every_reason_parses_back_from_either_case() {
        for reason in Reason::ALL {
            assert_eq!(Reason::parse(reason.as_str()), Some(*reason));
            assert_eq!(Reason::parse(&reason.as_str().to_ascii_uppercase()), Some(*reason));
        }
        assert_eq!(Reason::parse("no_such_reason"), None);
    }

    #[test]
    fn three_reasons_have_a_status_of_their_own() {
        let own: Vec<(&str, u16)> = Reason::ALL
            .iter()
            .filter_map(|r| r.http_status().map(|s| (r.as_str(), s)))
            .collect();
        assert_eq!(
            own,
            [("insufficient_credits", 402), ("gone", 410), ("payload_too_large", 413)]
        );
    }
}
