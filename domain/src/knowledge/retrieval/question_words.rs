//! What a customer's question is about, as opposed to how it is asked. "How much does a root canal cost?"
//! shares "how much ... cost" with a FAQ on whitening prices and "Can I bring my dog to the clinic?" shares
//! "clinic" with the FAQ on where the clinic is: on a business's handful of FAQs such shared words carry the
//! score, while the question's subject ("root canal", "dog") is in no FAQ at all. So a question's terms are
//! split into its frame (words any question may carry: `FRAME`) and its subject (the rest), and an answer
//! must cover the subject (`retrieval::coverage`). A question that asks a price ("how much", "cost") is
//! answered only by a FAQ that states one (a figure, or a word of money).
//!
//! A few front-desk words also have synonyms that a small FAQ's words miss ("What's your address?" against
//! "Where is the clinic located?"): `SYNONYMS` lets a FAQ match a question's term by one of them. Both
//! lists are English; other languages have none yet, and their questions are judged on all their terms.

use std::collections::{HashMap, HashSet};

use super::analyzer::Analyzer;

/// Words that say what kind of question it is, not what it is about.
const FRAME: &[&str] = &[
    "time",
    "much",
    "many",
    "cost",
    "costs",
    "price",
    "prices",
    "charge",
    "fee",
    "get",
    "bring",
    "need",
    "want",
    "make",
    "take",
    "use",
    "help",
    "know",
    "tell",
    "like",
    "go",
    "come",
    "let",
    "ask",
    "question",
    "please",
    "thanks",
    "thank",
    "hi",
    "hello",
    "hey",
    "possible",
    "way",
    "anyone",
    "someone",
    "something",
    "thing",
    "ok",
    "okay",
    "also",
    "still",
    "really",
    "sure",
    "find",
    "give",
    "one",
    "day",
    "today",
    "tomorrow",
    "now",
];

/// Words that ask for a price: such a question is answered only by a FAQ that states one.
const PRICE_ASKED: &[&str] = &[
    "much", "cost", "costs", "price", "prices", "fee", "fees", "charge", "charges",
];
/// Words, besides a figure, that state a price.
const PRICE_STATED: &[&str] = &[
    "free", "cost", "costs", "price", "prices", "fee", "fees", "charge", "charges", "rupees", "rs", "inr", "dollars",
    "usd", "euros", "eur", "pounds", "gbp", "$", "€", "£", "₹",
];

/// Front-desk words and the words a FAQ may say for them instead.
const SYNONYMS: &[(&str, &[&str])] = &[
    ("address", &["located", "location", "directions"]),
    ("location", &["located", "address"]),
    ("located", &["location", "address"]),
    ("directions", &["located", "location", "address"]),
    ("hours", &["open", "opening", "close"]),
    ("open", &["hours"]),
    ("price", &["cost", "costs"]),
    ("cost", &["price", "prices"]),
    ("fee", &["cost", "price"]),
    ("charge", &["cost", "price"]),
    ("phone", &["call", "contact"]),
    ("call", &["phone", "contact"]),
    ("email", &["contact"]),
    ("pay", &["payment"]),
    ("payment", &["pay"]),
    ("book", &["appointment", "booking"]),
    ("appointment", &["book", "booking"]),
    ("refund", &["return"]),
    ("return", &["refund"]),
];

/// The frame terms and the synonyms of one language's analyzer, as its terms.
pub struct QuestionWords {
    frame: HashSet<String>,
    synonyms: HashMap<String, Vec<String>>,
    price_asked: HashSet<String>,
}

impl QuestionWords {
    pub fn for_analyzer(analyzer: &Analyzer) -> Self {
        if analyzer.language() != "en" {
            return Self {
                frame: HashSet::new(),
                synonyms: HashMap::new(),
                price_asked: HashSet::new(),
            };
        }
        let term = |word: &str| analyzer.terms(word).into_iter().next();
        let frame = FRAME.iter().filter_map(|w| term(w)).collect();
        let mut synonyms: HashMap<String, Vec<String>> = HashMap::new();
        for (word, others) in SYNONYMS {
            let Some(word) = term(word) else { continue };
            let entry = synonyms.entry(word.clone()).or_default();
            for other in others.iter().filter_map(|o| term(o)) {
                if other != word && !entry.contains(&other) {
                    entry.push(other);
                }
            }
        }
        let price_asked = PRICE_ASKED.iter().filter_map(|w| term(w)).collect();
        Self {
            frame,
            synonyms,
            price_asked,
        }
    }

    /// Whether the question (its terms) asks what something costs.
    pub fn asks_price(&self, terms: &[String]) -> bool {
        terms.iter().any(|t| self.price_asked.contains(t))
    }

    /// Whether `text` states a price: a figure, or a word of money.
    pub fn states_price(text: &str) -> bool {
        text.chars().any(|c| c.is_ascii_digit())
            || text
                .split(|c: char| !c.is_alphanumeric() && !"$€£₹".contains(c))
                .any(|word| PRICE_STATED.contains(&word.to_lowercase().as_str()))
    }

    /// Whether a term is of the question's frame rather than its subject.
    pub fn is_frame(&self, term: &str) -> bool {
        self.frame.contains(term)
    }

    /// The terms a question is searched with: each of its distinct terms with its synonyms.
    pub fn groups(&self, terms: &[String]) -> Vec<Vec<String>> {
        let mut groups: Vec<Vec<String>> = Vec::with_capacity(terms.len());
        for term in terms {
            if groups.iter().any(|g| &g[0] == term) {
                continue;
            }
            let mut group = vec![term.clone()];
            group.extend(self.synonyms.get(term).into_iter().flatten().cloned());
            groups.push(group);
        }
        groups
    }

    /// The question's subject: its distinct terms less the frame's.
    pub fn subject(&self, terms: &[String]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for term in terms.iter().filter(|t| !self.is_frame(t)) {
            if !out.contains(term) {
                out.push(term.clone());
            }
        }
        out
    }

    /// Whether `term` of the question is said by a FAQ holding `has` (itself or one of its synonyms).
    pub fn said(&self, term: &str, has: impl Fn(&str) -> bool) -> bool {
        has(term) || self.synonyms.get(term).into_iter().flatten().any(|s| has(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_set_apart_and_synonyms_added() {
        let en = Analyzer::for_language("en");
        let words = QuestionWords::for_analyzer(&en);
        let terms = en.terms("How much does a root canal cost?");
        assert_eq!(words.subject(&terms), ["root", "canal"]);
        let address = en.terms("What's your address?");
        let groups = words.groups(&address);
        assert_eq!(groups.len(), 1);
        assert!(groups[0].contains(&en.terms("located")[0]), "{groups:?}");
        assert!(words.said("address", |t| t == en.terms("location")[0]));
        assert!(words.asks_price(&terms));
        assert!(!words.asks_price(&en.terms("How many days ahead?")));
        assert!(QuestionWords::states_price("Whitening costs 8,000 rupees."));
        assert!(QuestionWords::states_price("Parking is free."));
        assert!(!QuestionWords::states_price("Order custom cakes three days ahead."));
        let es = QuestionWords::for_analyzer(&Analyzer::for_language("es"));
        assert_eq!(es.subject(&["cuanto".to_owned()]), ["cuanto"]);
    }
}
