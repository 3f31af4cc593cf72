//! The local provider: no network, no GPU, the same answer for the same context. It answers a greeting or
//! a thank-you alone, offers the booking link on a booking request when booking is on, answers with the best
//! FAQ's answer (the part of it that answers the question: `retrieval::excerpt`) when retrieval is
//! confident, and otherwise hands off in one sentence of the agent's language. A burst of messages that
//! asks several things gets each message's answer when every one of them has a confident one.
//!
//! Confident means the best FAQ scored at least `confident` (`confident_words` when the passages were ranked
//! by their words alone, without a sentence-embedding model), says what the question is about (its subject
//! terms, `says_the_subject`) and leads the runner-up by at least `margin` (`margin_words`) unless the
//! runner-up gives the same answer: two FAQs close to each other and to the question are a guess. All were
//! tuned on the train split of the evaluation sets of `bench/eval` and measured on the held-out one
//! (docs/ai-replies.md); a logistic rerank of the passages fitted there (`bench/eval/fit_rerank.py`) made
//! no more right decisions at as few wrong ones, so the rule stands.

use super::{
    intent,
    phrases::{self, booking_offer},
    provider::{Basis, Context, Decision, HandoffReason, ModelProvider, Passage, Toolbox, without_text},
};

/// The best FAQ's least fused score for an answer (the retrieval index's handoff threshold).
pub const CONFIDENT: f64 = crate::knowledge::retrieval::CONFIDENT;
/// The same for words alone: on the evaluation set the rule that made the most right decisions (68 of 110;
/// words alone rank too many wrong FAQs first to do much better).
pub const CONFIDENT_WORDS: f64 = 0.85;
/// A passage this close in meaning to the question may leave one more of its subject terms unsaid: "Where
/// can I park my car?" against "Is there parking?" (0.57), not "Can I bring my dog to the clinic?" against
/// "Where is the clinic located?" (0.35).
pub const CLOSE: f64 = 0.5;
/// The least lead of the best FAQ over a runner-up with another answer. With the model no lead above zero
/// made a right decision more: where the best FAQ is wrong, it leads by as much as where it is right.
pub const MARGIN: f64 = 0.0;
/// The same for words alone, where many FAQs say every word of a question and score alike: without a lead,
/// 29 of the 100 answers on the evaluation sets were another FAQ's; with it, 2 of 38.
pub const MARGIN_WORDS: f64 = 0.1;

pub struct LocalModel {
    pub confident: f64,
    pub confident_words: f64,
    pub margin: f64,
    pub margin_words: f64,
}

impl Default for LocalModel {
    fn default() -> Self {
        Self {
            confident: CONFIDENT,
            confident_words: CONFIDENT_WORDS,
            margin: MARGIN,
            margin_words: MARGIN_WORDS,
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for LocalModel {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn decide(&self, context: &Context, _tools: &dyn Toolbox) -> Decision {
        self.decide_now(context)
    }
}

impl LocalModel {
    /// The decision, computed at once (no await inside).
    pub fn decide_now(&self, context: &Context) -> Decision {
        if let Some(decision) = without_text(context) {
            return decision;
        }
        self.answer_each(context)
            .unwrap_or_else(|| self.decide_text(context, &context.question, &context.passages))
    }

    /// A burst that asks several things ("When are you open?" / "Can I park?"), each message decided alone:
    /// the answers of their FAQs in the order asked, greetings and thanks among them passed over. `None` when
    /// a message has no confident FAQ answer of its own ("I have a question", a request for a person): the
    /// burst is then decided as a whole.
    fn answer_each(&self, context: &Context) -> Option<Decision> {
        let mut faqs: Vec<String> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        for question in &context.questions {
            match self.decide_text(context, &question.text, &question.passages) {
                Decision::Answer {
                    text,
                    basis: Basis::Faq(faq),
                } => {
                    if !faqs.contains(&faq) {
                        faqs.push(faq);
                        texts.push(text);
                    }
                }
                Decision::Answer {
                    basis: Basis::Greeting | Basis::Thanks,
                    ..
                } => {}
                _ => return None,
            }
        }
        let basis = match faqs.len() {
            0 => return None,
            1 => Basis::Faq(faqs.remove(0)),
            _ => Basis::Faqs(faqs),
        };
        Some(Decision::Answer {
            text: texts.join("\n\n"),
            basis,
        })
    }

    /// The decision for one question with the passages found for it.
    fn decide_text(&self, context: &Context, question: &str, passages: &[Passage]) -> Decision {
        let language = &context.agent.language;
        let sentences = phrases::of(language);
        let handoff = |reason| Decision::Handoff {
            text: sentences.handoff.to_owned(),
            reason,
        };
        let reading = intent::read(question);
        if reading.person {
            return handoff(HandoffReason::AskedForPerson);
        }
        let booking = &context.agent.booking;
        if reading.booking && booking.enabled && !booking.link.is_empty() {
            return Decision::Answer {
                text: booking_offer(language, &booking.link, &booking.instructions),
                basis: Basis::Booking,
            };
        }
        if reading.greeting_only {
            return answer(sentences.greeting, Basis::Greeting);
        }
        if reading.thanks_only {
            return answer(sentences.thanks, Basis::Thanks);
        }
        match self.confident_passage(passages, context.semantic) {
            Some(best) => Decision::Answer {
                text: best.excerpt.clone(),
                basis: Basis::Faq(best.faq_id.clone()),
            },
            None => handoff(HandoffReason::NoConfidentAnswer),
        }
    }

    /// The best passage when it is a confident answer.
    fn confident_passage<'a>(&self, passages: &'a [Passage], semantic: bool) -> Option<&'a Passage> {
        let best = passages.first()?;
        let (least, margin) = if semantic {
            (self.confident, self.margin)
        } else {
            (self.confident_words, self.margin_words)
        };
        if best.score < least || !says_the_subject(best) {
            return None;
        }
        let lead = match passages.get(1) {
            Some(runner) if runner.answer.trim() != best.answer.trim() => best.score - runner.score,
            _ => f64::INFINITY,
        };
        (lead >= margin).then_some(best)
    }
}

/// Whether the passage says what the question is about: at most a third of the question's subject terms
/// go unsaid by it, and one more when its meaning is close to the question's as a whole. A score carried by
/// words the question shares with a FAQ ("clinic", "how much ... cost") while its subject ("dog", "root
/// canal") is in no FAQ is no answer, however high; nor is a FAQ without a price for a question that asks one.
fn says_the_subject(passage: &Passage) -> bool {
    let coverage = passage.coverage;
    let close = passage.cosine.is_some_and(|c| c >= CLOSE);
    !coverage.price_unstated && coverage.unsaid <= coverage.subject / 3 + usize::from(close)
}

fn answer(text: &str, basis: Basis) -> Decision {
    Decision::Answer {
        text: text.to_owned(),
        basis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        agents::fields::BookingSettings,
        replies::provider::{Profile, Question},
    };

    fn passages(found: &[(&str, &str, f64)]) -> Vec<Passage> {
        found
            .iter()
            .map(|(id, answer, score)| Passage {
                faq_id: (*id).into(),
                question: String::new(),
                answer: (*answer).into(),
                score: *score,
                cosine: None,
                coverage: Default::default(),
                excerpt: (*answer).into(),
            })
            .collect()
    }

    fn context(question: &str, found: &[(&str, &str, f64)]) -> Context {
        Context {
            agent: Profile {
                language: "en".into(),
                ..Profile::default()
            },
            question: question.into(),
            semantic: true,
            passages: passages(found),
            ..Context::default()
        }
    }

    #[test]
    fn a_burst_of_two_questions_gets_both_answers_or_a_person() {
        let local = LocalModel::default();
        let hours = ("faq_1", "Nine to five.", 0.9);
        let parking = ("faq_2", "Yes, parking is free.", 0.9);
        let mut burst = context("Hi\nWhen are you open?\nCan I park?", &[hours, parking]);
        burst.questions = vec![
            Question {
                text: "Hi".into(),
                passages: Vec::new(),
            },
            Question {
                text: "When are you open?".into(),
                passages: passages(&[hours, ("faq_2", "Yes, parking is free.", 0.2)]),
            },
            Question {
                text: "Can I park?".into(),
                passages: passages(&[parking, ("faq_1", "Nine to five.", 0.1)]),
            },
        ];
        // The two FAQs tie for the burst as a whole, by meaning and words or by words alone; each message
        // has its own.
        for semantic in [true, false] {
            burst.semantic = semantic;
            assert_eq!(
                local.decide_now(&burst),
                Decision::Answer {
                    text: "Nine to five.\n\nYes, parking is free.".into(),
                    basis: Basis::Faqs(vec!["faq_1".into(), "faq_2".into()]),
                },
            );
        }
        burst.questions[2].passages = passages(&[("faq_1", "Nine to five.", 0.1)]);
        assert!(
            matches!(
                local.decide_now(&burst),
                Decision::Handoff {
                    reason: HandoffReason::NoConfidentAnswer,
                    ..
                }
            ),
            "a question without an answer of its own leaves the burst to its whole: two FAQs close for it"
        );
        burst.questions.remove(2);
        assert_eq!(
            local.decide_now(&burst),
            Decision::Answer {
                text: "Nine to five.".into(),
                basis: Basis::Faq("faq_1".into()),
            }
        );
    }

    #[test]
    fn a_confident_faq_is_the_answer_and_a_weak_one_a_handoff() {
        let local = LocalModel {
            confident: 0.27,
            confident_words: 0.5,
            margin: 0.05,
            margin_words: 0.1,
        };
        let hours = context(
            "when do you open",
            &[("faq_1", "Nine to five.", 0.6), ("faq_2", "No.", 0.3)],
        );
        assert_eq!(
            local.decide_now(&hours),
            Decision::Answer {
                text: "Nine to five.".into(),
                basis: Basis::Faq("faq_1".into())
            }
        );
        let weak = context("what is the meaning of life", &[("faq_1", "Nine to five.", 0.2)]);
        assert!(matches!(
            local.decide_now(&weak),
            Decision::Handoff {
                reason: HandoffReason::NoConfidentAnswer,
                ..
            }
        ));
        let close = context(
            "when",
            &[("faq_1", "Nine to five.", 0.40), ("faq_2", "Ten to six.", 0.38)],
        );
        assert!(
            matches!(local.decide_now(&close), Decision::Handoff { .. }),
            "two different answers neck and neck are a guess"
        );
        let same = context(
            "when",
            &[("faq_1", "Nine to five.", 0.40), ("faq_2", "Nine to five.", 0.39)],
        );
        assert!(
            matches!(local.decide_now(&same), Decision::Answer { .. }),
            "the same answer twice is no doubt"
        );
    }

    #[test]
    fn by_words_alone_the_best_faq_must_lead_the_others() {
        let local = LocalModel::default();
        let mut tied = context(
            "how do I cancel my order",
            &[("faq_1", "From your account page.", 1.0), ("faq_2", "By phone.", 0.95)],
        );
        tied.semantic = false;
        assert!(
            matches!(local.decide_now(&tied), Decision::Handoff { .. }),
            "two FAQs that say every word alike are a guess"
        );
        tied.passages[1].score = 0.8;
        assert!(matches!(local.decide_now(&tied), Decision::Answer { .. }));
    }

    #[test]
    fn greetings_thanks_bookings_and_persons() {
        let local = LocalModel::default();
        assert!(matches!(
            local.decide_now(&context("Hello!", &[])),
            Decision::Answer {
                basis: Basis::Greeting,
                ..
            }
        ));
        assert!(matches!(
            local.decide_now(&context("thank you so much", &[])),
            Decision::Answer {
                basis: Basis::Thanks,
                ..
            }
        ));
        let mut booking = context("Can I book an appointment?", &[]);
        assert!(
            matches!(local.decide_now(&booking), Decision::Handoff { .. }),
            "no booking link: a person books"
        );
        booking.agent.booking = BookingSettings {
            enabled: true,
            link: "https://cal.example/acme".into(),
            ..BookingSettings::default()
        };
        match local.decide_now(&booking) {
            Decision::Answer { text, basis } => {
                assert_eq!(basis, Basis::Booking);
                assert!(text.ends_with("https://cal.example/acme"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            local.decide_now(&context("I want to talk to a person", &[("faq_1", "x", 0.9)])),
            Decision::Handoff {
                reason: HandoffReason::AskedForPerson,
                ..
            }
        ));
    }

    #[test]
    fn empty_and_attachment_only_messages() {
        let local = LocalModel::default();
        assert_eq!(local.decide_now(&context("   ", &[])), Decision::Silent);
        let mut photo = context("", &[]);
        photo.attachments_only = true;
        assert!(matches!(
            local.decide_now(&photo),
            Decision::Handoff {
                reason: HandoffReason::Attachment,
                ..
            }
        ));
    }

    #[test]
    fn the_handoff_sentence_is_in_the_agents_language() {
        let mut weak = context("¿Cuánto cuesta el envío a Marte?", &[]);
        weak.agent.language = "es-MX".into();
        match LocalModel::default().decide_now(&weak) {
            Decision::Handoff { text, .. } => assert_eq!(text, phrases::of("es").handoff),
            other => panic!("{other:?}"),
        }
    }
}
