//! A reaction's emoji: exactly one grapheme cluster (what a person sees as one character: a flag, a family,
//! a thumbs-up with a skin tone) that Unicode counts as an emoji.

use unicode_properties::UnicodeEmoji;
use unicode_segmentation::UnicodeSegmentation;

/// The longest emoji taken, in bytes: the longest sequences (families with skin tones, subdivision flags)
/// are about 35.
const MAX_BYTES: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emoji(String);

impl Emoji {
    /// `text` when it is one emoji. Its first character must be an emoji character (`Emoji=Yes`); the ASCII
    /// ones (digits, `#`, `*`) only as a keycap or with the emoji variation selector.
    pub fn parse(text: &str) -> Option<Self> {
        if text.len() > MAX_BYTES {
            return None;
        }
        let mut graphemes = text.graphemes(true);
        let (Some(grapheme), None) = (graphemes.next(), graphemes.next()) else {
            return None;
        };
        let lead = grapheme.chars().next()?;
        let emoji = lead.is_emoji_char() && (!lead.is_ascii() || grapheme.contains(['\u{FE0F}', '\u{20E3}']));
        emoji.then(|| Self(grapheme.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Emoji;

    #[test]
    fn one_emoji_of_any_shape() {
        for good in [
            "👍",
            "👍🏽",
            "❤️",
            "❤",
            "🇮🇳",
            "👨‍👩‍👧‍👦",
            "🏳️‍🌈",
            "1️⃣",
            "🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}",
        ] {
            assert_eq!(Emoji::parse(good).map(|e| e.0), Some(good.to_owned()), "{good}");
        }
    }

    #[test]
    fn not_text_nor_two_emoji() {
        for bad in [
            "",
            "a",
            "ab",
            "1",
            "#",
            "👍👍",
            "👍 ",
            " 👍",
            "ok👍",
            "é",
            &"👍".repeat(20),
        ] {
            assert_eq!(Emoji::parse(bad), None, "{bad}");
        }
    }
}
