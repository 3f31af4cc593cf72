//! AI replies: the routed agent answers every inbound burst from its knowledge, hands off what it cannot, and
//! charges credits. `provider` is what a model is asked and answers; `local` is the model that runs in
//! process without a network; `reply` is the durable job that asks it and stores the answer; `intent` and
//! `phrases` are the words it reads and says without a model. docs/ai-replies.md describes the behaviour.

mod intent;
pub mod local;
mod phrases;
pub mod provider;
pub mod reply;
