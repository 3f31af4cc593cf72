//! Twilio's request signature (`X-Twilio-Signature`): base64 of HMAC-SHA1, keyed with the account's auth token,
//! over the full URL Twilio called followed by each POST parameter's name and value, sorted by name (the values
//! of a repeated name sorted too). Twilio signs the URL with or without its port depending on how the webhook
//! was configured, so both spellings are tried, as Twilio's own libraries do.

use base64::{Engine, engine::general_purpose::STANDARD};
use ring::hmac;

/// Whether `header` is Twilio's signature of a request to `url` carrying `params`.
pub fn verify(key: &hmac::Key, url: &str, params: &[(impl AsRef<str>, impl AsRef<str>)], header: &str) -> bool {
    let Ok(tag) = STANDARD.decode(header.trim()) else {
        return false;
    };
    let other_spelling = with_port_toggled(url);
    std::iter::once(url)
        .chain(other_spelling.as_deref())
        .any(|url| hmac::verify(key, signed_text(url, params).as_bytes(), &tag).is_ok())
}

/// The text Twilio signs.
fn signed_text(url: &str, params: &[(impl AsRef<str>, impl AsRef<str>)]) -> String {
    let mut sorted: Vec<(&str, &str)> = params.iter().map(|(n, v)| (n.as_ref(), v.as_ref())).collect();
    sorted.sort_unstable();
    let mut text = String::with_capacity(url.len() + sorted.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>());
    text.push_str(url);
    for (name, value) in sorted {
        text.push_str(name);
        text.push_str(value);
    }
    text
}

/// For an http(s) URL, the same URL without its port when one is written, else with the scheme's default port.
fn with_port_toggled(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else if scheme.eq_ignore_ascii_case("http") {
        "80"
    } else {
        return None;
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let (userinfo, host_port) = authority.split_at(authority.rfind('@').map_or(0, |at| at + 1));
    // A colon inside an IPv6 literal's brackets is not a port separator.
    let host = match host_port.rfind(':').filter(|&colon| !host_port[colon..].contains(']')) {
        Some(colon) => host_port[..colon].to_owned(),
        None => format!("{host_port}:{default_port}"),
    };
    Some(format!("{scheme}://{userinfo}{host}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The vectors of twilio-python's own tests (tests/unit/test_request_validator.py, RequestValidator), the
    // example Twilio's webhook-security documentation uses: auth token "12345", this URL and these parameters.
    const TOKEN: &str = "12345";
    const URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
    const PARAMS: [(&str, &str); 5] = [
        ("CallSid", "CA1234567890ABCDE"),
        ("Digits", "1234"),
        ("From", "+14158675309"),
        ("To", "+18005551212"),
        ("Caller", "+14158675309"),
    ];
    const EXPECTED: &str = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";

    fn key(token: &str) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, token.as_bytes())
    }

    fn sign(token: &str, url: &str, params: &[(&str, &str)]) -> String {
        STANDARD.encode(hmac::sign(&key(token), signed_text(url, params).as_bytes()))
    }

    #[test]
    fn documented_vector() {
        assert_eq!(sign(TOKEN, URL, &PARAMS), EXPECTED);
        assert!(verify(&key(TOKEN), URL, &PARAMS, EXPECTED));
    }

    #[test]
    fn repeated_names_sort_their_values() {
        // twilio-python's test_compute_signature_duplicate_multi_dict.
        let params = [
            ("Sid", "CA123"),
            ("SidAccount", "AC123"),
            ("Digits", "5678"),
            ("Digits", "1234"),
        ];
        assert_eq!(sign(TOKEN, URL, &params), "IK+Dwps556ElfBT0I3Rgjkr1wJU=");
    }

    #[test]
    fn either_port_spelling_verifies() {
        // twilio-python's test_validation_{removes,adds}_port_on_{https,http}.
        let key = key(TOKEN);
        assert!(verify(
            &key,
            "https://mycompany.com:1234/myapp.php?foo=1&bar=2",
            &PARAMS,
            EXPECTED
        ));
        assert!(verify(
            &key,
            "http://mycompany.com:1234/myapp.php?foo=1&bar=2",
            &PARAMS,
            "Zmvh+3yNM1Phv2jhDCwEM3q5ebU="
        ));
        assert!(verify(&key, URL, &PARAMS, "kvajT1Ptam85bY51eRf/AJRuM3w="));
        assert!(verify(
            &key,
            "http://mycompany.com/myapp.php?foo=1&bar=2",
            &PARAMS,
            "0ZXoZLH/DfblKGATFgpif+LLRf4="
        ));
    }

    #[test]
    fn wrong_token_tampered_params_and_junk_fail() {
        assert!(!verify(&key("54321"), URL, &PARAMS, EXPECTED));
        let mut tampered = PARAMS;
        tampered[1].1 = "1235";
        assert!(!verify(&key(TOKEN), URL, &tampered, EXPECTED));
        assert!(!verify(&key(TOKEN), URL, &PARAMS[..4], EXPECTED));
        assert!(!verify(
            &key(TOKEN),
            "https://mycompany.com/myapp.php?foo=1&bar=3",
            &PARAMS,
            EXPECTED
        ));
        assert!(!verify(&key(TOKEN), URL, &PARAMS, ""));
        assert!(!verify(&key(TOKEN), URL, &PARAMS, "not base64!"));
    }

    #[test]
    fn port_toggling() {
        let cases = [
            ("https://a.example/x?y=1", Some("https://a.example:443/x?y=1")),
            ("https://a.example:8443/x", Some("https://a.example/x")),
            ("http://a.example", Some("http://a.example:80")),
            ("http://u:p@a.example:81?q", Some("http://u:p@a.example?q")),
            ("http://[::1]:8080/h", Some("http://[::1]/h")),
            ("http://[::1]/h", Some("http://[::1]:80/h")),
            ("ftp://a.example/x", None),
            ("not a url", None),
        ];
        for (url, toggled) in cases {
            assert_eq!(with_port_toggled(url).as_deref(), toggled, "{url}");
        }
    }
}
