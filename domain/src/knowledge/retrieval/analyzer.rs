//! Text to index terms, in one language: Unicode words, lower-cased, stop words dropped, then the Snowball
//! stem. A language is picked by the primary subtag of the agent's BCP 47 tag (`pt-BR` is `pt`). The
//! stemmer is Snowball's for the 18 languages it covers (ar da de el en es fi fr hu it nl no pt ro ru sv ta
//! tr; `nb` and `nn` read as `no`), the stop words NLTK's list where it has one (the same languages and a
//! few more, such as `he` and `id`). A language with neither (e.g. `hi`, `ja`) is analysed without stemming
//! or stop words, under the key `none`: stemming it as English would only mangle its words.

use std::collections::HashSet;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

/// Longer "words" (hashes, encoded blobs, URLs run together) are not searched for and would only bloat
/// the index.
const MAX_TERM_CHARS: usize = 40;

/// The language key of text analysed without stemming or stop words.
const NO_LANGUAGE: &str = "none";

pub struct Analyzer {
    language: String,
    stemmer: Option<Stemmer>,
    stop_words: HashSet<&'static str>,
}

fn snowball(language: &str) -> Option<Algorithm> {
    Some(match language {
        "ar" => Algorithm::Arabic,
        "da" => Algorithm::Danish,
        "de" => Algorithm::German,
        "el" => Algorithm::Greek,
        "en" => Algorithm::English,
        "es" => Algorithm::Spanish,
        "fi" => Algorithm::Finnish,
        "fr" => Algorithm::French,
        "hu" => Algorithm::Hungarian,
        "it" => Algorithm::Italian,
        "nl" => Algorithm::Dutch,
        "no" => Algorithm::Norwegian,
        "pt" => Algorithm::Portuguese,
        "ro" => Algorithm::Romanian,
        "ru" => Algorithm::Russian,
        "sv" => Algorithm::Swedish,
        "ta" => Algorithm::Tamil,
        "tr" => Algorithm::Turkish,
        _ => return None,
    })
}

impl Analyzer {
    /// The analyzer for a BCP 47 tag.
    pub fn for_language(tag: &str) -> Self {
        let primary = tag.split('-').next().unwrap_or_default().to_ascii_lowercase();
        let primary = match primary.as_str() {
            "nb" | "nn" => "no".to_owned(),
            _ => primary,
        };
        let stemmer = snowball(&primary).map(Stemmer::create);
        let stop_words: HashSet<&'static str> = stop_words::lookup(&primary)
            .map(|words| words.iter().copied().collect())
            .unwrap_or_default();
        let language = if stemmer.is_some() || !stop_words.is_empty() {
            primary
        } else {
            NO_LANGUAGE.to_owned()
        };
        Self {
            language,
            stemmer,
            stop_words,
        }
    }

    /// The key its terms are stored under: two analyzers with the same key make the same terms.
    pub fn language(&self) -> &str {
        &self.language
    }

    /// The index terms of `text`, in order, repeats kept (they are the term frequencies).
    pub fn terms(&self, text: &str) -> Vec<String> {
        self.words(text).into_iter().map(|(_, term)| term).collect()
    }

    /// The words of `text` that make terms, lower-cased, each with its term, in order. A word is cut at its
    /// apostrophes ("what's", "l'horaire", "don't"): the pieces are words of their own, and the stop words
    /// take those that are ("s", "l", "t").
    pub fn words(&self, text: &str) -> Vec<(String, String)> {
        text.unicode_words()
            .flat_map(|word| word.split(['\'', '\u{2019}']))
            .filter(|piece| piece.chars().count() > 1)
            .map(str::to_lowercase)
            .filter(|word| word.chars().count() <= MAX_TERM_CHARS && !self.stop_words.contains(word.as_str()))
            .map(|word| {
                let term = match &self.stemmer {
                    Some(stemmer) => stemmer.stem(&word).into_owned(),
                    None => word.clone(),
                };
                (word, term)
            })
            .filter(|(_, term)| !term.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_stems_and_drops_stop_words() {
        let en = Analyzer::for_language("en-GB");
        assert_eq!(en.language(), "en");
        assert_eq!(en.terms("How do I get my Refunds?"), ["get", "refund"]);
        assert_eq!(en.terms("refund"), en.terms("refunding"));
        assert_eq!(en.terms("What's your address?"), ["address"]);
    }

    #[test]
    fn other_languages_use_their_own_stemmer_and_stop_words() {
        let de = Analyzer::for_language("de");
        assert_eq!(de.terms("die Rückerstattungen"), de.terms("Rückerstattung"));
        assert_eq!(Analyzer::for_language("nb-NO").language(), "no");
    }

    #[test]
    fn a_language_without_stemmer_or_stop_list_keeps_its_words() {
        let hi = Analyzer::for_language("hi-IN");
        assert_eq!(hi.language(), "none");
        assert_eq!(hi.terms("रिफंड कैसे मिलेगा"), ["रिफंड", "कैसे", "मिलेगा"]);
        assert_eq!(Analyzer::for_language("ja").language(), "none");
    }

    #[test]
    fn overlong_words_are_not_terms() {
        let en = Analyzer::for_language("en");
        assert_eq!(en.terms(&format!("refund {}", "x".repeat(41))), ["refund"]);
    }
}
