//! Credits: decimals with at most three fractional digits, stored as integer milli-credits.

/// Parses `"100"`, `"0.15"`, `"2.5"` into milli-credits; refuses signs, more than three decimals and
/// amounts past a trillion credits.
pub fn parse_milli(s: &str) -> Option<i64> {
    let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 12 || fraction.len() > 3 || !digits(whole) || !digits(fraction) {
        return None;
    }
    if s.contains('.') && fraction.is_empty() {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    let fraction: i64 = format!("{fraction:0<3}").parse().ok()?;
    whole.checked_mul(1000)?.checked_add(fraction)
}

/// Milli-credits as the decimal number shown to users.
pub fn to_decimal(milli: i64) -> f64 {
    milli as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_to_milli() {
        assert_eq!(parse_milli("100"), Some(100_000));
        assert_eq!(parse_milli("0.15"), Some(150));
        assert_eq!(parse_milli("0.001"), Some(1));
        assert_eq!(parse_milli("2.5"), Some(2_500));
        for bad in [
            "",
            "-1",
            "+1",
            "1.2345",
            "1.",
            ".5",
            "1e3",
            "abc",
            "1,5",
            "9999999999999",
        ] {
            assert_eq!(parse_milli(bad), None, "{bad}");
        }
        assert!((to_decimal(150) - 0.15).abs() < f64::EPSILON);
    }
}
