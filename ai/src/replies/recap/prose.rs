//! What a chat model is asked for a recap: prose from the facts the local provider would list and from the
//! conversation's end. A transcript longer than one chunk is first read chunk by chunk into notes, so that no
//! call carries more than `CHUNK_CHARS` of it, however long the conversation.

use std::collections::VecDeque;

use super::{
    super::{
        chat::{ChatMessage, ChatRequest},
        phrases,
        provider::{Speaker, Turn},
    },
    Facts, extractive,
};

/// The most transcript one call reads, in characters.
pub const CHUNK_CHARS: usize = 12_000;

const RECAP: &str = "You write a short recap of a business's chat conversation with a customer, for a member of the \
                     team who was not in it. Write in {language}, in plain text, at most 150 words: what the \
                     customer wanted, what they were told, appointments, deals, handoffs to a person and why, \
                     and what is still open. Use only the facts and the conversation given; invent nothing.";

const NOTES: &str = "You read part {part} of {parts} of a business's chat conversation with a customer. Write brief \
                     notes of what the customer asked, what they were told and what was agreed: at most 80 words, \
                     plain text.";

/// The transcript as lines (`Customer:`, `Agent:`, `Team:`), in chunks of at most `CHUNK_CHARS`.
pub fn chunks(transcript: &VecDeque<Turn>) -> Vec<String> {
    let mut chunks = vec![String::new()];
    let mut current_chars = 0;
    for turn in transcript {
        let who = match turn.speaker {
            Speaker::Contact => "Customer",
            Speaker::Agent => "Agent",
            Speaker::Business => "Team",
        };
        let line = format!("{who}: {}\n", turn.text);
        let line_chars = line.chars().count();
        match chunks.last_mut() {
            Some(current) if current.is_empty() || current_chars + line_chars <= CHUNK_CHARS => {
                current.push_str(&line);
                current_chars += line_chars;
            }
            _ => {
                chunks.push(line);
                current_chars = line_chars;
            }
        }
    }
    chunks
}

/// Notes of one chunk of several.
pub fn notes_request(model: &str, chunk: &str, part: usize, parts: usize, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        system: NOTES
            .replace("{part}", &part.to_string())
            .replace("{parts}", &parts.to_string()),
        messages: vec![ChatMessage::User(chunk.to_owned())],
        tools: Vec::new(),
        max_tokens,
    }
}

/// The recap, from the facts and `conversation`: the transcript itself, or the notes of its chunks.
pub fn recap_request(model: &str, facts: &Facts, conversation: &str, max_tokens: u32) -> ChatRequest {
    let language = format!(
        "{} ({})",
        phrases::language_name(&facts.language),
        if facts.language.is_empty() {
            "en"
        } else {
            &facts.language
        }
    );
    ChatRequest {
        model: model.to_owned(),
        system: RECAP.replace("{language}", &language),
        messages: vec![ChatMessage::User(format!(
            "Facts:\n{}\n\nConversation:\n{conversation}",
            extractive(facts)
        ))],
        tools: Vec::new(),
        max_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_transcript_is_cut_into_bounded_chunks_in_order() {
        let transcript: VecDeque<Turn> = (0..100)
            .map(|n| Turn {
                speaker: if n % 2 == 0 { Speaker::Contact } else { Speaker::Agent },
                text: format!("{n} {}", "words ".repeat(100)),
            })
            .collect();
        let chunks = chunks(&transcript);
        assert!(chunks.len() >= 5, "{}", chunks.len());
        assert!(chunks.iter().all(|c| c.chars().count() <= CHUNK_CHARS));
        assert!(chunks[0].starts_with("Customer: 0 "));
        assert!(chunks.last().unwrap().contains("Agent: 99 "));
        assert_eq!(chunks.concat().lines().count(), 100);
        assert_eq!(super::chunks(&VecDeque::new()), vec![String::new()]);
    }
}
