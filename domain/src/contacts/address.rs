//! The two addresses a person is reached and recognised by, parsed once at the boundary: the checkout's
//! subscriber and a contact are both keyed by them, so both read them with the same rules.

/// A phone number in E.164 form: `+`, then 8 to 15 digits, the first not 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct E164Phone(String);

impl E164Phone {
    pub fn parse(s: &str) -> Option<Self> {
        let digits = s.strip_prefix('+')?;
        let valid =
            (8..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
        valid.then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An e-mail address: one `@`, a non-empty local part, a dotted domain of letters, digits and hyphens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    pub fn parse(s: &str) -> Option<Self> {
        let (local, domain) = s.split_once('@')?;
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && local
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"@()<>[]:;,\\\"".contains(&b));
        let labels: Vec<&str> = domain.split('.').collect();
        let domain_ok = labels.len() >= 2
            && labels.iter().all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        (local_ok && domain_ok && s.len() <= 254).then(|| Self(s.to_owned()))
    }

    /// The address in lower case (a parsed address is ASCII): the form contacts are stored and matched in, so
    /// that `Ana@Example.com` and `ana@example.com` are one person, as every mail provider treats them.
    pub fn folded(&self) -> Self {
        Self(self.0.to_ascii_lowercase())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e164_rules() {
        for ok in ["+919812345678", "+14155550123", "+12345678", "+123456789012345"] {
            assert!(E164Phone::parse(ok).is_some(), "{ok}");
        }
        for bad in [
            "98123",
            "+0123456789",
            "+1234567",
            "+1234567890123456",
            "919812345678",
            "+91 98123 45678",
            "+",
        ] {
            assert!(E164Phone::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn email_rules() {
        for ok in ["x@y.io", "first.last+tag@mail.example.com"] {
            assert!(Email::parse(ok).is_some(), "{ok}");
        }
        for bad in ["x@", "@y.io", "x@y", "x y@z.io", "x@-y.io", "x@y..io", "x@@y.io"] {
            assert!(Email::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn folding_lowers_the_whole_address() {
        let email = Email::parse("Ana.Rao@Example.COM").unwrap();
        assert_eq!(
            email.as_str(),
            "Ana.Rao@Example.COM",
            "parsing keeps the address as given"
        );
        assert_eq!(email.folded().as_str(), "ana.rao@example.com");
    }
}
