//! BM25F scoring over a FAQ's two fields, in plain Rust arithmetic on integer counts read from the store,
//! so SQLite and PostgreSQL give the same scores to the last bit.
//!
//! For a query term t and a FAQ d, the field frequencies are normalised by each field's length against the
//! field's average over the agent's FAQs, weighted, and summed:
//!
//! ```text
//! tf(t, d) = Σ_field  weight_field · tf_field / (1 − b + b · len_field / avg_len_field)
//! score(d) = Σ_t  idf(t) · tf(t, d) / (k1 + tf(t, d))
//! idf(t)   = ln(1 + (N − df + 0.5) / (df + 0.5))
//! ```
//!
//! with N the agent's FAQs and df those holding t. k1 = 1.2 and b = 0.75 are the usual BM25 defaults (term
//! frequency saturates quickly; long fields are discounted but not fully); FAQ answers of a few sentences
//! sit well within the range they were tuned on. The question weighs 2.5 times the answer: a customer's
//! question is usually a paraphrase of the FAQ's question, while the answer holds many words that are not
//! what the FAQ is about. This idf never goes negative, so a term in most FAQs still adds a little.

/// Term-frequency saturation.
pub const K1: f64 = 1.2;
/// Length normalisation (0: none, 1: full).
pub const B: f64 = 0.75;
/// Weight of a term found in the question; one in the answer weighs 1.
pub const QUESTION_WEIGHT: f64 = 2.5;

/// What the scores are relative to: the FAQs searched.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Collection {
    pub faqs: u64,
    pub avg_question_len: f64,
    pub avg_answer_len: f64,
}

impl Collection {
    /// From the FAQ count and the total lengths of their fields.
    pub fn new(faqs: u64, question_terms: u64, answer_terms: u64) -> Self {
        let avg = |total: u64| if faqs == 0 { 0.0 } else { total as f64 / faqs as f64 };
        Self {
            faqs,
            avg_question_len: avg(question_terms),
            avg_answer_len: avg(answer_terms),
        }
    }

    /// The inverse document frequency of a term held by `df` FAQs.
    pub fn idf(&self, df: u64) -> f64 {
        let (n, df) = (self.faqs as f64, df as f64);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The contribution of one query term (of inverse document frequency `idf`) to a FAQ's score.
    pub fn term_score(&self, idf: f64, posting: &Posting) -> f64 {
        let field = |tf: u32, len: u32, avg: f64| {
            if tf == 0 || avg == 0.0 {
                0.0
            } else {
                f64::from(tf) / (1.0 - B + B * f64::from(len) / avg)
            }
        };
        let tf = QUESTION_WEIGHT * field(posting.question_tf, posting.question_len, self.avg_question_len)
            + field(posting.answer_tf, posting.answer_len, self.avg_answer_len);
        idf * tf / (K1 + tf)
    }
}

/// One query term in one FAQ: its frequency in each field and the field lengths, in terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posting {
    pub question_tf: u32,
    pub answer_tf: u32,
    pub question_len: u32,
    pub answer_len: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posting(question_tf: u32, answer_tf: u32) -> Posting {
        Posting {
            question_tf,
            answer_tf,
            question_len: 4,
            answer_len: 20,
        }
    }

    #[test]
    fn the_question_field_weighs_more_than_the_answer() {
        let c = Collection::new(10, 40, 200);
        let idf = c.idf(2);
        assert!(c.term_score(idf, &posting(1, 0)) > c.term_score(idf, &posting(0, 1)));
    }

    #[test]
    fn rarer_terms_weigh_more_and_never_negative() {
        let c = Collection::new(10, 40, 200);
        assert!(c.idf(1) > c.idf(5));
        assert!(c.idf(10) > 0.0);
    }

    #[test]
    fn frequency_saturates() {
        let c = Collection::new(10, 40, 200);
        let idf = c.idf(1);
        let (one, two, ten) = (
            c.term_score(idf, &posting(0, 1)),
            c.term_score(idf, &posting(0, 2)),
            c.term_score(idf, &posting(0, 10)),
        );
        assert!(one < two && two < ten);
        assert!(
            ten - two < (two - one) * 8.0,
            "eight more occurrences add less than eight times one more"
        );
        assert!(ten < idf, "bounded by the idf");
    }
}
