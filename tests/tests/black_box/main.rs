//! The black-box suite: the real `frontdesk` binary over REST, gRPC, web chat sockets and provider hooks, on
//! SQLite and PostgreSQL. One test binary with a module per resource, so the whole stack is linked once
//! (`cargo test -p frontdesk-tests --test black_box MODULE::` runs one resource's tests).

mod agent_knowledge;
mod agent_tools;
mod agents;
mod ai_replies;
mod api_conformance;
mod bench_smoke;
mod broadcast_sending;
mod broadcasts_campaigns;
mod contacts;
mod conversations;
mod database_drill;
mod deals;
mod deployment;
mod evaluations;
mod generated_clients;
mod isolation;
mod job_engine;
mod jobs;
mod kb_files;
mod kb_groups;
mod kb_imports;
mod key_revocation;
mod knowledge_gaps;
mod messaging;
mod meta_channels;
mod model_spend;
mod models;
mod pacing;
mod platform_access;
mod razorpay_provider;
mod routing;
mod search;
mod semantic_search;
mod site_grpc;
mod site_http;
mod summaries;
mod tasks;
mod time_limits;
mod traces;
mod webchat;
mod webchat_browser;
mod webchat_security;
mod webhook_reliability;
mod webhooks;
