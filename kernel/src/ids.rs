//! Random identifiers and secrets: base62 strings from rand's thread-local CSPRNG (ChaCha, seeded and
//! periodically reseeded from the operating system).

use rand::Rng;

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `len` characters drawn uniformly from `[0-9A-Za-z]`.
pub fn base62(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| BASE62[rng.random_range(0..BASE62.len())] as char)
        .collect()
}

/// The kinds of row the service names, each with its id's prefix and how many random characters follow it:
/// the one list of them (a new kind of row gets its line here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// an account: `acc_`.
    Account,
    /// an entry of an account's credit ledger: `led_`.
    LedgerEntry,
    /// a job: `job_`.
    Job,
    /// an event of the outbox: `evt_`.
    Event,
    /// a local payment order: `order_`.
    Order,
    /// a deal: `deal_`.
    Deal,
    /// an agent's custom function: `fn_`.
    CustomFunction,
    /// an agent's MCP server: `mcp_`.
    McpServer,
    /// an FAQ: `faq_`.
    Faq,
    /// an agent: `agt_`.
    Agent,
    /// a channel's default agent: `cd_`.
    ChannelDefault,
    /// an entry point: `ep_`.
    EntryPoint,
    /// a connected channel: `ch_`.
    Channel,
    /// a web chat widget's public key: `wk_`.
    WidgetKey,
    /// a task: `task_`.
    Task,
    /// a message: `msg_`.
    Message,
    /// a conversation: `cv_`.
    Conversation,
    /// a web chat session: `cs_`.
    ChatSession,
    /// an API key (its id, not its secret): `key_`.
    ApiKey,
    /// a contact: `ct_`.
    Contact,
    /// a knowledge source: `kbs_`.
    KnowledgeSource,
    /// a page of a knowledge source: `kbp_`.
    KnowledgePage,
    /// a knowledge source attached to an agent: `aks_`.
    AgentSource,
    /// a webhook subscription: `wh_`.
    Webhook,
    /// a webhook delivery: `dlv_`.
    WebhookDelivery,
    /// a payment order's receipt: `rcpt_`.
    Receipt,
    /// a broadcast: `brd_`.
    Broadcast,
    /// a knowledge gap: `gap_`.
    KnowledgeGap,
    /// an appointment: `apt_`.
    Appointment,
    /// an evaluation: `ev_`.
    Evaluation,
    /// a knowledge group: `kbg_`.
    KbGroup,
}

impl Kind {
    /// The prefix of its ids, with the underscore (`deal_`).
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Account => "acc_",
            Self::LedgerEntry => "led_",
            Self::Job => "job_",
            Self::Event => "evt_",
            Self::Order => "order_",
            Self::Deal => "deal_",
            Self::CustomFunction => "fn_",
            Self::McpServer => "mcp_",
            Self::Faq => "faq_",
            Self::Agent => "agt_",
            Self::ChannelDefault => "cd_",
            Self::EntryPoint => "ep_",
            Self::Channel => "ch_",
            Self::WidgetKey => "wk_",
            Self::Task => "task_",
            Self::Message => "msg_",
            Self::Conversation => "cv_",
            Self::ChatSession => "cs_",
            Self::ApiKey => "key_",
            Self::Contact => "ct_",
            Self::KnowledgeSource => "kbs_",
            Self::KnowledgePage => "kbp_",
            Self::AgentSource => "aks_",
            Self::Webhook => "wh_",
            Self::WebhookDelivery => "dlv_",
            Self::Receipt => "rcpt_",
            Self::Broadcast => "brd_",
            Self::KnowledgeGap => "gap_",
            Self::Appointment => "apt_",
            Self::Evaluation => "ev_",
            Self::KbGroup => "kbg_",
        }
    }

    /// Random characters after the prefix: 16 (95 bits) for most kinds; more where ids are made in bulk or
    /// must not be guessed (events, deliveries, widget keys), fewer for the local payment provider's orders.
    fn random_len(self) -> usize {
        match self {
            Self::Order => 14,
            Self::Account
            | Self::LedgerEntry
            | Self::Job
            | Self::Deal
            | Self::CustomFunction
            | Self::McpServer
            | Self::Faq
            | Self::Agent
            | Self::ChannelDefault
            | Self::EntryPoint
            | Self::Task
            | Self::Message
            | Self::Conversation
            | Self::ChatSession
            | Self::ApiKey
            | Self::Contact
            | Self::KnowledgeSource
            | Self::KnowledgePage
            | Self::AgentSource
            | Self::Webhook
            | Self::Broadcast
            | Self::KnowledgeGap
            | Self::Appointment
            | Self::Evaluation
            | Self::KbGroup => 16,
            Self::Event | Self::Channel | Self::WebhookDelivery | Self::Receipt => 20,
            Self::WidgetKey => 24,
        }
    }
}

/// A new id of `kind`: its prefix and random base62 characters.
pub fn new_id(kind: Kind) -> String {
    format!("{}{}", kind.prefix(), base62(kind.random_len()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn base62_has_the_asked_length_and_alphabet() {
        let id = super::base62(14);
        assert_eq!(id.len(), 14);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(id, super::base62(14));
    }

    #[test]
    fn a_new_id_carries_its_kinds_prefix() {
        let id = super::new_id(super::Kind::Deal);
        assert!(id.starts_with("deal_") && id.len() == "deal_".len() + 16, "{id}");
        assert_ne!(id, super::new_id(super::Kind::Deal));
    }
}
