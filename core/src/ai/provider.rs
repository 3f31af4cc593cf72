//! What a model is asked and what it answers. The reply job (`reply`) gathers the context (the agent's
//! profile, the latest messages, the question, the knowledge passages found for it) and stores what the
//! provider decides; providers do no database work and hold no transaction.

use crate::agents::fields::BookingSettings;

/// The agent as a provider sees it.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub name: String,
    pub instructions: String,
    pub rules: Vec<String>,
    pub goal: String,
    pub personality: String,
    /// BCP 47 tag: the language it answers in.
    pub language: String,
    pub booking: BookingSettings,
}

/// Who said a message of the conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    Contact,
    /// This agent (an AI reply).
    Agent,
    /// A person of the business, or an integration, through the API.
    Business,
}

/// One message of the conversation.
#[derive(Clone, Debug)]
pub struct Turn {
    pub speaker: Speaker,
    pub text: String,
}

/// A FAQ found for the question.
#[derive(Clone, Debug)]
pub struct Passage {
    pub faq_id: String,
    pub question: String,
    pub answer: String,
    /// How well it matched, in [0, 1]: the fused score of meaning and words, or the words' alone
    /// (`Context::semantic`).
    pub score: f64,
}

/// What a provider decides from.
#[derive(Clone, Debug, Default)]
pub struct Context {
    pub agent: Profile,
    /// The latest messages, oldest first (at most 20).
    pub history: Vec<Turn>,
    /// The unanswered messages' text, joined.
    pub question: String,
    /// The unanswered messages carried attachments and no text.
    pub attachments_only: bool,
    /// The FAQs found for the question, best first.
    pub passages: Vec<Passage>,
    /// The passages were ranked by meaning and words (a sentence-embedding model is installed); without it
    /// their scores are their words' alone.
    pub semantic: bool,
}

/// Why a conversation goes to a person (`handoff_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoffReason {
    /// The knowledge holds no confident answer.
    NoConfidentAnswer,
    /// The customer asked for a person.
    AskedForPerson,
    /// The messages were attachments alone, which only a person can look at.
    Attachment,
    /// The account's credits do not cover a reply.
    InsufficientCredits,
}

impl HandoffReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoConfidentAnswer => "no_confident_answer",
            Self::AskedForPerson => "asked_for_person",
            Self::Attachment => "attachment",
            Self::InsufficientCredits => "insufficient_credits",
        }
    }
}

/// What an answer rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Basis {
    /// A FAQ's answer.
    Faq(String),
    Greeting,
    Thanks,
    Booking,
}

/// What the agent does about the unanswered messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Reply with this text (charged at the agent's tier).
    Answer { text: String, basis: Basis },
    /// Say this sentence (free) and hand the conversation to a person.
    Handoff { text: String, reason: HandoffReason },
    /// Nothing to answer (the messages held no text and no attachment).
    Silent,
}

/// A model: context in, decision out.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync {
    /// `local`, `anthropic`, `openai`.
    fn name(&self) -> &'static str;

    async fn decide(&self, context: &Context) -> Decision;
}
