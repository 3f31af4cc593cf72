//! A provider backed by a chat model (`anthropic`, `openai`): the context becomes a prompt, the model answers
//! or calls tools (at most `MAX_CALLS_PER_ROUND` of them made per round), the tools' answers go back, for at
//! most `MAX_TOOL_ROUNDS` rounds and `limits.per_reply` in all. A failed call is tried four times (waits of 1, 2 and 4 s +-20%, or the provider's `retry-after`
//! when it asks for longer, within the reply's time); then the conversation goes to a person with
//! `model_unavailable`. Nothing here touches the database but the tools, each in its own short transaction.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use super::{
    chat::{ChatAnswer, ChatError, ChatMessage, ChatModel, ChatRequest, ToolResult},
    phrases, prompt,
    provider::{Basis, Context, Decision, HandoffReason, ModelProvider, Profile, ToolOutcome, Toolbox, Turn},
    recap::{self, Facts, prose},
};
use crate::retry::RetrySchedule;
use tracing::Instrument;

/// What the model is asked to make of an imported section.
const PAIRS: &str = "You turn one section of a business's web page into the questions its customers would ask and \
                     the answers the section gives. Answer with JSON only: {\"pairs\": [{\"question\": \"...\", \
                     \"answer\": \"...\"}]}, at most 5 pairs, answered from the section alone, in its language.";

/// What the model is asked for a follow-up.
const NUDGE: &str = "\nThe customer has not answered your last message for a while. Write one short, friendly \
                     follow-up message that invites them to go on; add no new facts.\n";

/// Rounds of tool calls a reply may make; a model that still calls tools after them is handed off.
pub const MAX_TOOL_ROUNDS: usize = 5;
/// Tool calls of one round that are made; the model's further calls of the round are answered
/// `limit_reached` without being made.
pub const MAX_CALLS_PER_ROUND: usize = 8;
/// The waits before the second, third and fourth tries of one call (the retry rule of every outside call:
/// each +-20%, a provider's `Retry-After` lengthening one up to twice).
const WAITS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];

/// How long and how much a reply may take.
#[derive(Clone, Copy, Debug)]
pub struct ReplyLimits {
    /// The whole reply: every model call, wait and tool call.
    pub per_reply: Duration,
    /// Tokens of instructions, knowledge and messages sent.
    pub context_tokens: usize,
    /// Tokens of the model's answer.
    pub answer_tokens: u32,
}

impl Default for ReplyLimits {
    fn default() -> Self {
        Self {
            per_reply: Duration::from_secs(60),
            context_tokens: 8_000,
            answer_tokens: 1_024,
        }
    }
}

pub struct RemoteProvider {
    pub chat: Arc<dyn ChatModel>,
    pub model: String,
    pub limits: ReplyLimits,
}

#[async_trait::async_trait]
impl ModelProvider for RemoteProvider {
    fn name(&self) -> &'static str {
        self.chat.protocol()
    }

    fn is_model(&self) -> bool {
        true
    }

    async fn nudge(&self, agent: &Profile, history: &[Turn]) -> Option<String> {
        self.write_nudge(agent, history).await
    }

    async fn recap(&self, facts: &Facts) -> String {
        match self.write_recap(facts).await {
            Ok(prose) => prose,
            Err(err) => {
                tracing::warn!(provider = self.name(), model = %self.model, error = err.message(), "the model wrote no recap; the facts are written out instead");
                recap::extractive(facts)
            }
        }
    }

    async fn decide(&self, context: &Context, tools: &dyn Toolbox) -> Decision {
        let deadline = Instant::now() + self.limits.per_reply;
        let handoff = |reason| Decision::Handoff {
            text: phrases::of(&context.agent.language).handoff.to_owned(),
            reason,
        };
        if let Some(decision) = super::provider::without_text(context) {
            return decision;
        }
        let mut request = prompt::request(
            context,
            tools.specs(),
            &self.model,
            self.limits.context_tokens,
            self.limits.answer_tokens,
        );
        let mut round = 0;
        loop {
            let answer = match self.complete(&request, deadline).await {
                Ok(answer) => answer,
                Err(err) => {
                    tracing::warn!(provider = self.name(), model = %self.model, error = err.message(), "the model gave no answer; the conversation goes to a person");
                    return handoff(HandoffReason::ModelUnavailable);
                }
            };
            if answer.calls.is_empty() {
                let text = answer.text.trim();
                return if text.is_empty() {
                    handoff(HandoffReason::NoConfidentAnswer)
                } else {
                    Decision::Answer {
                        text: text.to_owned(),
                        basis: Basis::Model,
                    }
                };
            }
            if round == MAX_TOOL_ROUNDS {
                tracing::warn!(provider = self.name(), model = %self.model, "the model still called tools after {MAX_TOOL_ROUNDS} rounds");
                return handoff(HandoffReason::ToolRounds);
            }
            let mut results = Vec::with_capacity(answer.calls.len());
            for (n, call) in answer.calls.iter().enumerate() {
                if n >= MAX_CALLS_PER_ROUND {
                    results.push(ToolResult {
                        call_id: call.id.clone(),
                        content: format!("limit_reached: at most {MAX_CALLS_PER_ROUND} tool calls per round"),
                        is_error: true,
                    });
                    continue;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let outcome = tokio::time::timeout(left, tools.call(call))
                    .await
                    .unwrap_or_else(|_| ToolOutcome::Error("the reply ran out of time".into()));
                let (content, is_error) = match outcome {
                    ToolOutcome::Answer(content) => (content, false),
                    ToolOutcome::Error(content) => (content, true),
                    ToolOutcome::Handoff(reason) => return handoff(HandoffReason::Requested(reason)),
                };
                results.push(ToolResult {
                    call_id: call.id.clone(),
                    content,
                    is_error,
                });
            }
            let ChatAnswer { text, calls } = answer;
            request.messages.push(ChatMessage::Assistant { text, calls });
            request.messages.push(ChatMessage::ToolResults(results));
            round += 1;
        }
    }
}

impl RemoteProvider {
    /// The question-answer pairs the model writes from an imported section; `None` when it gave none usable.
    pub async fn write_pairs(&self, heading: &str, text: &str) -> Option<Vec<(String, String)>> {
        let deadline = Instant::now() + self.limits.per_reply;
        let request = ChatRequest {
            model: self.model.clone(),
            system: PAIRS.to_owned(),
            messages: vec![ChatMessage::User(format!("Heading: {heading}\n\n{text}"))],
            tools: Vec::new(),
            max_tokens: self.limits.answer_tokens,
        };
        match self.complete(&request, deadline).await {
            Ok(answer) => parse_pairs(&answer.text),
            Err(err) => {
                tracing::warn!(provider = self.name(), model = %self.model, error = err.message(), "the model wrote no pairs; the section stays one FAQ");
                None
            }
        }
    }

    async fn write_nudge(&self, agent: &Profile, history: &[Turn]) -> Option<String> {
        let deadline = Instant::now() + self.limits.per_reply;
        let context = Context {
            agent: agent.clone(),
            history: history.to_vec(),
            ..Context::default()
        };
        let mut request = prompt::request(
            &context,
            Vec::new(),
            &self.model,
            self.limits.context_tokens,
            self.limits.answer_tokens,
        );
        request.system.push_str(NUDGE);
        // Both protocols answer a user turn: the silence is one.
        request
            .messages
            .push(ChatMessage::User("(no answer from the customer)".into()));
        match self.complete(&request, deadline).await {
            Ok(answer) if !answer.text.trim().is_empty() => Some(answer.text.trim().to_owned()),
            Ok(_) => None,
            Err(err) => {
                tracing::warn!(provider = self.name(), model = %self.model, error = err.message(), "the model wrote no follow-up; the fixed one is sent");
                None
            }
        }
    }

    /// Prose of the facts and the conversation's end; a transcript of several chunks is read into notes
    /// first, chunk by chunk, all within one reply's time.
    async fn write_recap(&self, facts: &Facts) -> Result<String, ChatError> {
        let deadline = Instant::now() + self.limits.per_reply;
        let tokens = self.limits.answer_tokens;
        let chunks = prose::chunks(&facts.digest.transcript);
        let conversation = if chunks.len() == 1 {
            chunks.concat()
        } else {
            let mut notes = String::new();
            for (part, chunk) in chunks.iter().enumerate() {
                let request = prose::notes_request(&self.model, chunk, part + 1, chunks.len(), tokens);
                let answer = self.complete(&request, deadline).await?;
                notes.push_str(&format!("Part {}: {}\n", part + 1, answer.text.trim()));
            }
            notes
        };
        let request = prose::recap_request(&self.model, facts, &conversation, tokens);
        let answer = self.complete(&request, deadline).await?;
        match answer.text.trim() {
            "" => Err(ChatError::Permanent("the model answered with no text".into())),
            prose => Ok(prose.to_owned()),
        }
    }

    /// One answer, tried again after each of `WAITS` while `deadline` allows.
    async fn complete(&self, request: &ChatRequest, deadline: Instant) -> Result<ChatAnswer, ChatError> {
        let retries = RetrySchedule::new(WAITS.to_vec());
        let mut attempt = 1;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            crate::jobs::guard::before_effect().await;
            let provider = self.name();
            let span = frontdesk_kernel::trace_span!(
                "model",
                otel.name = %format_args!("model {provider}"),
                otel.kind = "client",
                attempt
            );
            let call = self.chat.complete(request).instrument(span);
            let error = match tokio::time::timeout(left, call).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(error)) => error,
                Err(_) => ChatError::Permanent("the reply's time ran out waiting for the model".into()),
            };
            let ChatError::Transient { message, retry_after } = &error else {
                return Err(error);
            };
            let Some(wait) = retries.wait_after(attempt, *retry_after) else {
                return Err(error);
            };
            if Instant::now() + wait >= deadline {
                return Err(error);
            }
            tracing::info!(provider = self.name(), attempt, error = %message, wait_ms = wait.as_millis() as u64, "the model call is tried again");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

/// `{"pairs": [{"question", "answer"}]}` out of a model's answer (which may wrap it in prose or a code fence).
fn parse_pairs(text: &str) -> Option<Vec<(String, String)>> {
    #[derive(serde::Deserialize)]
    struct Pairs {
        pairs: Vec<Pair>,
    }
    #[derive(serde::Deserialize)]
    struct Pair {
        question: String,
        answer: String,
    }
    let json = text.get(text.find('{')?..=text.rfind('}')?)?;
    let parsed: Pairs = serde_json::from_str(json).ok()?;
    Some(parsed.pairs.into_iter().map(|p| (p.question, p.answer)).collect())
}

#[cfg(test)]
mod tests {
    use super::parse_pairs;

    #[test]
    fn pairs_are_read_out_of_prose_and_fences() {
        let answer = "Here you go:\n```json\n{\"pairs\": [{\"question\": \"When do you open?\", \"answer\": \"At nine.\"}]}\n```";
        assert_eq!(
            parse_pairs(answer),
            Some(vec![("When do you open?".to_owned(), "At nine.".to_owned())])
        );
        assert_eq!(parse_pairs("no JSON at all"), None);
        assert_eq!(parse_pairs("{\"pairs\": \"not a list\"}"), None);
    }
}
