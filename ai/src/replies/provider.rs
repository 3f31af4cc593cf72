//! What a model is asked and what it answers. The reply job (`reply`) gathers the context (the agent's
//! profile, the latest messages, the question, the knowledge passages found for it) and stores what the
//! provider decides; providers do no database work and hold no transaction.

use super::chat::{ToolCall, ToolSpec};
use crate::{agents::fields::BookingSettings, knowledge::retrieval::Coverage};

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
    /// The cosine of its closest vector to the question's (none when ranked by words alone).
    pub cosine: Option<f64>,
    /// How much of what the question is about it says.
    pub coverage: Coverage,
    /// The part of the answer that answers the question: the answer itself when it is short.
    pub excerpt: String,
}

/// One message of a burst with the FAQs found for it alone, best first.
#[derive(Clone, Debug, Default)]
pub struct Question {
    pub text: String,
    pub passages: Vec<Passage>,
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
    /// The latest unanswered messages when there are several, oldest first, each with the FAQs found for
    /// it alone (empty for one message).
    pub questions: Vec<Question>,
    /// The passages were ranked by meaning and words (a sentence-embedding model is installed); without it
    /// their scores are their words' alone.
    pub semantic: bool,
}

/// Why a conversation goes to a person (`handoff_reason`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandoffReason {
    /// The knowledge holds no confident answer (or the model answered nothing).
    NoConfidentAnswer,
    /// The customer asked for a person.
    AskedForPerson,
    /// The messages were attachments alone, which only a person can look at.
    Attachment,
    /// The account's credits do not cover a reply.
    InsufficientCredits,
    /// The model failed every try, or the reply ran out of time.
    ModelUnavailable,
    /// The model still called tools after the last round it may make.
    ToolRounds,
    /// The model handed the conversation over (`handoff_to_human`) with this reason.
    Requested(String),
}

impl HandoffReason {
    /// Whether a model chose it, having been asked: such a handoff costs the tier as an answer would.
    pub fn is_models_choice(&self) -> bool {
        matches!(self, Self::NoConfidentAnswer | Self::ToolRounds | Self::Requested(_))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::NoConfidentAnswer => "no_confident_answer",
            Self::AskedForPerson => "asked_for_person",
            Self::Attachment => "attachment",
            Self::InsufficientCredits => "insufficient_credits",
            Self::ModelUnavailable => "model_unavailable",
            Self::ToolRounds => "tool_rounds",
            Self::Requested(reason) => reason,
        }
    }
}

/// What an answer rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Basis {
    /// A FAQ's answer.
    Faq(String),
    /// The answers of several FAQs, one for each question of a burst, in the order they were asked.
    Faqs(Vec<String>),
    Greeting,
    Thanks,
    Booking,
    /// A model's own words.
    Model,
    /// A model's follow-up after the contact went quiet.
    FollowUp,
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

/// What a tool call came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The tool's answer, for the model.
    Answer(String),
    /// What went wrong, for the model (it may try otherwise).
    Error(String),
    /// The conversation goes to a person for this reason; the reply ends.
    Handoff(String),
}

/// The tools of one reply.
#[async_trait::async_trait]
pub trait Toolbox: Send + Sync {
    fn specs(&self) -> Vec<ToolSpec>;

    async fn call(&self, call: &ToolCall) -> ToolOutcome;
}

/// No tools: what a provider that calls none is given.
pub struct NoTools;

#[async_trait::async_trait]
impl Toolbox for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    async fn call(&self, call: &ToolCall) -> ToolOutcome {
        ToolOutcome::Error(format!("there is no tool `{}`", call.name))
    }
}

/// A model: context and tools in, decision out.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync {
    /// `local`, `anthropic`, `openai`.
    fn name(&self) -> &'static str;

    /// Whether a model behind a network call answers: asking it costs the operator money (its price is held
    /// against the account's credits first) and it may call tools (a reply loads them only then).
    fn is_model(&self) -> bool {
        false
    }

    async fn decide(&self, context: &Context, tools: &dyn Toolbox) -> Decision;

    /// A short follow-up in the agent's words to a contact who went quiet after `history`; `None` when this
    /// provider writes none (the fixed sentence is said instead) or the model gave none.
    async fn nudge(&self, _agent: &Profile, _history: &[Turn]) -> Option<String> {
        None
    }

    /// The recap of a conversation for a person who was not in it: the facts written out, unless a model
    /// writes prose of them.
    async fn recap(&self, facts: &super::recap::Facts) -> String {
        super::recap::extractive(facts)
    }
}

/// The decision for unanswered messages without text, whatever the provider: attachments alone go to a
/// person (only a person can look at them), nothing at all gets nothing.
pub fn without_text(context: &Context) -> Option<Decision> {
    if !context.question.trim().is_empty() {
        return None;
    }
    Some(if context.attachments_only {
        Decision::Handoff {
            text: super::phrases::of(&context.agent.language).handoff.to_owned(),
            reason: HandoffReason::Attachment,
        }
    } else {
        Decision::Silent
    })
}
