//! AI replies: the routed agent answers every inbound burst from its knowledge, hands off what it cannot, and
//! charges credits. `provider` is what a model is asked and answers; `local` is the model that runs in
//! process without a network; `remote` asks a chat model (`chat`: Anthropic's and OpenAI's wire) with a
//! prompt (`prompt`) and runs its tool rounds (`tools`); `provider_choice` picks the account's own or the server's
//! (`config`), and `own_provider` is the API an account connects its own with; `passages` is the knowledge it is
//! given for a question; `reply` is the durable job that asks it and stores the answer; `evaluations` decide
//! a business's questions as replies would, nothing sent; `gaps` groups what it handed off for want of an
//! answer; `intent` and `phrases` are the words it reads and
//! says without a model; `recap` is what it writes of a whole conversation for a person who was not in it.
//! docs/ai-replies.md describes the behaviour.

pub mod chat;
pub mod config;
pub mod evaluations;
pub mod follow_up;
pub mod gaps;
mod intent;
pub mod local;
pub mod own_provider;
pub mod passages;
mod phrases;
mod prompt;
pub mod provider;
pub mod provider_choice;
#[cfg(test)]
mod quality_tests;
pub mod recap;
mod remote;
pub mod reply;
pub mod tools;
