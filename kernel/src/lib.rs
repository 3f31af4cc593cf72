//! The Front Desk kernel: what every layer above stands on. Errors, ids and the tenant's type, time, settings
//! parsers, the store (entities, migrations, transactions), the job engine, the event outbox, accounts and
//! their credits, and the outbound URL rule. It knows no resource of the published API.

pub mod accounts;
pub mod clock;
pub mod env_values;
pub mod error;
pub mod events;
pub mod forwarded_answers;
pub mod ids;
pub mod integrations;
pub mod jobs;
pub mod key_counts;
pub mod paging;
pub mod plan;
pub mod resource_id;
pub mod retry;
pub mod secrets;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod tenant;
pub mod timestamps;
pub mod validate;
