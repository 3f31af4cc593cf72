//! What a chat model is told: the agent's profile and its knowledge in the instructions, the conversation as
//! messages, all within a token budget. Tokens are counted as characters / 4, the usual rule for English
//! and near enough for a budget: what does not fit is the oldest messages and the lowest-ranked passages.

use super::{
    chat::{ChatMessage, ChatRequest, ToolSpec},
    phrases,
    provider::{Context, Speaker},
};

/// Characters per token, for the budget.
const CHARS_PER_TOKEN: usize = 4;
/// The share of the budget the knowledge passages may take; the conversation gets the rest.
const PASSAGE_SHARE: f64 = 0.5;
/// The share of the budget the tools' declarations may take.
const TOOL_SHARE: f64 = 0.4;
/// The most of one passage's answer the model reads.
const PASSAGE_CHARS: usize = 2_000;

/// The request for `context`: `budget` tokens at most for the tools' declarations, the instructions, the
/// knowledge and the messages. The tools take at most `TOOL_SHARE` of it, in their order (the built-ins
/// first); those that do not fit are left out of the request.
pub fn request(context: &Context, tools: Vec<ToolSpec>, model: &str, budget: usize, max_tokens: u32) -> ChatRequest {
    let chars = budget * CHARS_PER_TOKEN;
    let tools = fitting(tools, (chars as f64 * TOOL_SHARE) as usize);
    let declared: usize = tools.iter().map(ToolSpec::size).sum();
    let profile = profile(context, !tools.is_empty());
    let room = chars.saturating_sub(declared).saturating_sub(profile.len());
    let knowledge = knowledge(context, (room as f64 * PASSAGE_SHARE) as usize);
    let messages = messages(context, room.saturating_sub(knowledge.len()));
    ChatRequest {
        model: model.to_owned(),
        system: format!("{profile}{knowledge}"),
        messages,
        tools,
        max_tokens,
    }
}

/// The first tools whose declarations fit in `room` characters.
fn fitting(tools: Vec<ToolSpec>, room: usize) -> Vec<ToolSpec> {
    let mut used = 0;
    let total = tools.len();
    let kept: Vec<ToolSpec> = tools
        .into_iter()
        .take_while(|tool| {
            used += tool.size();
            used <= room
        })
        .collect();
    if kept.len() < total {
        tracing::warn!(
            kept = kept.len(),
            left_out = total - kept.len(),
            "the agent's tools do not fit in the model's token budget (FRONTDESK_MODEL_CONTEXT_TOKENS); the last are left out"
        );
    }
    kept
}

fn profile(context: &Context, has_tools: bool) -> String {
    let agent = &context.agent;
    let mut out = format!(
        "You are {}, answering a business's customers in its chat channels. Answer in {} ({}), briefly, as \
         in a chat message, in plain text: a few sentences at most (under 400 characters when you can), \
         from the part of the knowledge that answers the question.\n",
        if agent.name.is_empty() {
            "the front desk"
        } else {
            &agent.name
        },
        phrases::language_name(&agent.language),
        agent.language,
    );
    for (title, text) in [
        ("Instructions", &agent.instructions),
        ("Goal", &agent.goal),
        ("Personality", &agent.personality),
    ] {
        if !text.trim().is_empty() {
            out.push_str(&format!("\n{title}: {}\n", text.trim()));
        }
    }
    if !agent.rules.is_empty() {
        out.push_str("\nRules you always follow:\n");
        for rule in &agent.rules {
            out.push_str(&format!("- {}\n", rule.trim()));
        }
    }
    let booking = &agent.booking;
    if booking.enabled {
        out.push_str("\nBooking is open.");
        if !booking.link.is_empty() {
            out.push_str(&format!(" Customers may book at {}.", booking.link));
        }
        if !booking.instructions.trim().is_empty() {
            out.push_str(&format!(" {}", booking.instructions.trim()));
        }
        out.push('\n');
    }
    out.push_str(
        "\nAnswer questions about the business from the knowledge below only. When it does not hold the answer, \
         or the customer wants a person, do not guess",
    );
    out.push_str(if has_tools {
        ": call handoff_to_human with the reason.\n"
    } else {
        ": say that a person of the team will answer.\n"
    });
    out
}

/// The passages, best first, as many as fit in `room` characters.
fn knowledge(context: &Context, room: usize) -> String {
    if context.passages.is_empty() {
        return "\nKnowledge: none.\n".to_owned();
    }
    let mut out = String::from("\nKnowledge (question and answer pairs, best match first):\n");
    for (i, passage) in context.passages.iter().enumerate() {
        let answer: String = passage.answer.chars().take(PASSAGE_CHARS).collect();
        let entry = format!("[{}] Q: {}\nA: {}\n", i + 1, passage.question.trim(), answer.trim());
        if out.len() + entry.len() > room {
            break;
        }
        out.push_str(&entry);
    }
    out
}

/// The latest messages that fit in `room` characters, oldest first, starting with the customer's and with
/// consecutive messages of one side joined (both protocols want the two sides to take turns). A person of the
/// business speaks on the assistant's side, marked as such.
fn messages(context: &Context, room: usize) -> Vec<ChatMessage> {
    let mut kept = Vec::new();
    let mut used = 0;
    for turn in context.history.iter().rev() {
        let text = match turn.speaker {
            Speaker::Business => format!("(a person of the team wrote) {}", turn.text.trim()),
            _ => turn.text.trim().to_owned(),
        };
        if text.is_empty() {
            continue;
        }
        // The newest message always goes in, cut to the room if need be.
        if used + text.len() > room && !kept.is_empty() {
            break;
        }
        let text: String = if kept.is_empty() { cut(&text, room) } else { text };
        used += text.len();
        kept.push((turn.speaker == Speaker::Contact, text));
    }
    kept.reverse();
    let mut out: Vec<ChatMessage> = Vec::new();
    for (from_contact, text) in kept.into_iter().skip_while(|(from_contact, _)| !from_contact) {
        match (out.last_mut(), from_contact) {
            (Some(ChatMessage::User(previous)), true) => join(previous, &text),
            (Some(ChatMessage::Assistant { text: previous, .. }), false) => join(previous, &text),
            (_, true) => out.push(ChatMessage::User(text)),
            (_, false) => out.push(ChatMessage::Assistant {
                text,
                calls: Vec::new(),
            }),
        }
    }
    if out.is_empty() {
        // The history was empty or is all the business's: the unanswered messages are the question.
        out.push(ChatMessage::User(cut(context.question.trim(), room.max(1))));
    }
    // Both protocols refuse an empty message (instructions that fill the budget leave no room for one).
    for message in &mut out {
        if let ChatMessage::User(text) | ChatMessage::Assistant { text, .. } = message
            && text.is_empty()
        {
            text.push_str("...");
        }
    }
    out
}

fn join(previous: &mut String, text: &str) {
    previous.push('\n');
    previous.push_str(text);
}

/// The end of `text` within `room` characters: of a long message, the latest words matter.
fn cut(text: &str, room: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(room)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replies::provider::{Passage, Profile, Turn};

    fn turn(speaker: Speaker, text: &str) -> Turn {
        Turn {
            speaker,
            text: text.to_owned(),
        }
    }

    fn context() -> Context {
        Context {
            agent: Profile {
                name: "Ava".into(),
                instructions: "Sell the spa day.".into(),
                rules: vec!["Never promise discounts.".into()],
                language: "es".into(),
                ..Profile::default()
            },
            history: vec![
                turn(Speaker::Agent, "Welcome!"),
                turn(Speaker::Contact, "Hi"),
                turn(Speaker::Contact, "When do you open?"),
                turn(Speaker::Business, "Let me check"),
                turn(Speaker::Contact, "And on Sundays?"),
            ],
            question: "And on Sundays?".into(),
            passages: vec![
                Passage {
                    faq_id: "faq_1".into(),
                    question: "Opening hours".into(),
                    answer: "Nine to five, Monday to Saturday.".into(),
                    score: 0.8,
                    cosine: None,
                    coverage: Default::default(),
                    excerpt: String::new(),
                },
                Passage {
                    faq_id: "faq_2".into(),
                    question: "Parking".into(),
                    answer: "Behind the building.".into(),
                    score: 0.4,
                    cosine: None,
                    coverage: Default::default(),
                    excerpt: String::new(),
                },
            ],
            ..Context::default()
        }
    }

    #[test]
    fn the_request_carries_profile_knowledge_and_turns() {
        let request = request(&context(), Vec::new(), "m", 4_000, 512);
        assert!(request.system.contains("You are Ava"), "{}", request.system);
        assert!(request.system.contains("Spanish (es)"), "{}", request.system);
        assert!(request.system.contains("- Never promise discounts."));
        assert!(request.system.contains("[1] Q: Opening hours\nA: Nine to five"));
        assert_eq!(
            request.messages,
            vec![
                ChatMessage::User("Hi\nWhen do you open?".into()),
                ChatMessage::Assistant {
                    text: "(a person of the team wrote) Let me check".into(),
                    calls: Vec::new()
                },
                ChatMessage::User("And on Sundays?".into()),
            ],
            "starts with the customer, sides take turns"
        );
        assert_eq!(request.max_tokens, 512);
    }

    /// Characters of the tools' declarations, the instructions and the messages.
    fn sent_chars(request: &ChatRequest) -> usize {
        let messages: usize = request
            .messages
            .iter()
            .map(|m| match m {
                ChatMessage::User(t) | ChatMessage::Assistant { text: t, .. } => t.len(),
                ChatMessage::ToolResults(_) => 0,
            })
            .sum();
        request.tools.iter().map(ToolSpec::size).sum::<usize>() + request.system.len() + messages
    }

    #[test]
    fn tools_count_in_the_budget_and_those_past_their_share_are_left_out() {
        let tool = |n: usize| ToolSpec {
            name: format!("tool_{n}"),
            description: "d".repeat(1_000),
            parameters: serde_json::json!({"type": "object"}),
        };
        let tools: Vec<ToolSpec> = (0..10).map(tool).collect();
        let request = request(&context(), tools, "m", 2_000, 512);
        // 8,000 characters in all, 3,200 of them for tools of ~1,030 each: three fit.
        let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["tool_0", "tool_1", "tool_2"]);
        assert!(
            sent_chars(&request) <= 2_000 * CHARS_PER_TOKEN,
            "{}",
            sent_chars(&request)
        );
    }

    #[test]
    fn a_small_budget_drops_the_oldest_turns_and_the_lowest_passages() {
        let mut context = context();
        context
            .history
            .insert(0, turn(Speaker::Contact, &"old words ".repeat(500)));
        let request = request(&context, Vec::new(), "m", 250, 512);
        assert!(
            sent_chars(&request) <= 250 * CHARS_PER_TOKEN,
            "{}",
            sent_chars(&request)
        );
        assert!(!format!("{:?}", request.messages).contains("old words"));
        assert_eq!(
            request.messages.last(),
            Some(&ChatMessage::User("And on Sundays?".into()))
        );
    }
}
