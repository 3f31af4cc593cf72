//! The part of a FAQ's answer that answers the question: an SMS customer who asks which package owns a file
//! wants the sentence that says so, not the section on the package manager's options. A short answer is
//! given whole; a longer one is cut to whole sentences around the sentence that matches the question best,
//! at most `EXCERPT_CHARS`. A sentence matches by the question's terms (or their synonyms) it holds, and,
//! with a model, by lying in the passage of the answer whose vector was closest to the question's.

use std::ops::Range;

use super::analyzer::Analyzer;

/// The most characters an answer is cut to.
pub const EXCERPT_CHARS: usize = 400;

/// The excerpt of `answer` for a question of `groups` (each term with its synonyms). `closest` is the byte
/// range of the answer's passage that was closest in meaning, when a model ranked it.
pub fn excerpt(answer: &str, analyzer: &Analyzer, groups: &[Vec<String>], closest: Option<Range<usize>>) -> String {
    let answer = answer.trim();
    if answer.chars().count() <= EXCERPT_CHARS {
        return answer.to_owned();
    }
    let sentences = sentences(answer);
    let score = |range: &Range<usize>| {
        let terms = analyzer.terms(&answer[range.clone()]);
        let matched = groups
            .iter()
            .filter(|group| group.iter().any(|t| terms.contains(t)))
            .count() as f64;
        let in_closest = closest
            .as_ref()
            .is_some_and(|c| range.start < c.end && c.start < range.end);
        matched + if in_closest { 0.5 } else { 0.0 }
    };
    // The best sentence (the first of equals), then its neighbours while they fit: the next one first, as
    // an answer's detail usually follows the sentence that names it.
    let Some(best) =
        (0..sentences.len()).max_by(|&a, &b| score(&sentences[a]).total_cmp(&score(&sentences[b])).then(b.cmp(&a)))
    else {
        return cut(answer);
    };
    let (mut first, mut last) = (best, best);
    let chars = |first: usize, last: usize| answer[sentences[first].start..sentences[last].end].chars().count();
    loop {
        if last + 1 < sentences.len() && chars(first, last + 1) <= EXCERPT_CHARS {
            last += 1;
        } else if first > 0 && chars(first - 1, last) <= EXCERPT_CHARS {
            first -= 1;
        } else {
            break;
        }
    }
    cut(answer[sentences[first].start..sentences[last].end].trim())
}

/// The byte ranges of `text`'s sentences: each ends after `.`, `!` or `?` followed by white space, or at a
/// line break.
fn sentences(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let ends = c == '\n' || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace));
        if ends {
            let end = i + c.len_utf8();
            if !text[start..end].trim().is_empty() {
                out.push(start..end);
            }
            start = end;
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(start..text.len());
    }
    out
}

/// `text` within `EXCERPT_CHARS` (one very long sentence is cut).
fn cut(text: &str) -> String {
    cut_at_word(text, EXCERPT_CHARS)
}

/// `text` within `max` characters: cut at a word break, with an ellipsis, when it is longer.
pub fn cut_at_word(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let end = text
        .char_indices()
        .nth(max.saturating_sub(1))
        .map_or(text.len(), |(i, _)| i);
    let head = &text[..end];
    let head = head.rfind(char::is_whitespace).map_or(head, |i| &head[..i]);
    format!("{}…", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(analyzer: &Analyzer, question: &str) -> Vec<Vec<String>> {
        analyzer.terms(question).into_iter().map(|t| vec![t]).collect()
    }

    #[test]
    fn a_short_answer_is_whole_and_a_long_one_the_sentences_that_answer() {
        let en = Analyzer::for_language("en");
        assert_eq!(excerpt("Nine to five.", &en, &[], None), "Nine to five.");
        let answer = "Dpkg installs packages. It keeps a database of installed files. \
                      Use apt to fetch packages from the archive, which resolves dependencies for you. "
            .repeat(3)
            + "To find which package owns a file, run dpkg -S with the file's path, for example dpkg -S \
               /usr/bin/convert. The search covers every installed package.";
        let found = excerpt(&answer, &en, &groups(&en, "which package owns /usr/bin/convert"), None);
        assert!(found.contains("dpkg -S /usr/bin/convert"), "{found}");
        assert!(found.chars().count() <= EXCERPT_CHARS, "{}", found.len());
        assert!(
            found.starts_with("To find") || !found.starts_with("Dpkg installs"),
            "{found}"
        );
        for part in found.split_inclusive(". ") {
            assert!(answer.contains(part.trim()), "whole sentences of the answer: {part}");
        }
    }

    #[test]
    fn the_closest_passage_decides_between_equal_sentences_and_a_long_sentence_is_cut() {
        let en = Analyzer::for_language("en");
        let first = "Parking is behind the building. ";
        let filler = "We value every visitor and hope to see you soon. ".repeat(12);
        let second = "Parking for bikes is at the front.";
        let answer = format!("{first}{filler}{second}");
        let start = answer.find(second).unwrap();
        let near_second = excerpt(&answer, &en, &groups(&en, "parking"), Some(start..answer.len()));
        assert!(near_second.ends_with(second), "{near_second}");
        let one_sentence = "word ".repeat(200);
        let cut_one = excerpt(&one_sentence, &en, &[], None);
        assert!(
            cut_one.ends_with('…') && cut_one.chars().count() <= EXCERPT_CHARS,
            "{cut_one}"
        );
    }
}
