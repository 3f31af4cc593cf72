//! How knobs read from the environment are parsed: durations (`500ms`, `5s`, `5m`, `2h`, `3d`), lists of
//! them, weights. Shared by the rooms that declare their own settings and by the composition in `config`.

use std::time::Duration;

/// A comma-separated list of durations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationList(pub Vec<Duration>);

/// `500ms`, `5s`, `5m`, `2h` or `3d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 500ms, 5s, 5m, 2h or 3d"))?;
    let millis = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("`{text}` needs a unit: ms, s, m, h or d")),
    };
    Ok(Duration::from_millis(number.saturating_mul(millis)))
}

/// A duration that is not zero.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).and_then(|d| {
        if d.is_zero() {
            Err(format!("`{text}` must be longer than zero"))
        } else {
            Ok(d)
        }
    })
}

pub fn parse_duration_list(text: &str) -> Result<DurationList, String> {
    text.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(parse_duration)
        .collect::<Result<_, _>>()
        .map(DurationList)
}

/// A number between 0 and 1.
pub fn parse_weight(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if (0.0..=1.0).contains(&w) => Ok(w),
        _ => Err(format!("{s:?} is not a weight between 0 and 1")),
    }
}
