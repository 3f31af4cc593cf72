//! The gRPC server: every service of the core, gRPC health and reflection, behind one tracing layer. The same
//! `Routes` value serves the network listener and the in-process edge, so both see identical behaviour.

mod deadline;
mod trace;

use std::sync::Arc;

use frontdesk_api::{
    FILE_DESCRIPTOR_SET,
    admin::v1::admin_server::AdminServer,
    hooks::v1::channel_hooks_server::ChannelHooksServer,
    site::v0::{payments_server::PaymentsServer, site_server::SiteServer},
    v1::{
        agents_server::AgentsServer, api_keys_server::ApiKeysServer, broadcasts_server::BroadcastsServer,
        campaigns_server::CampaignsServer, channels_server::ChannelsServer, chat_sessions_server::ChatSessionsServer,
        contacts_server::ContactsServer, conversations_server::ConversationsServer, credits_server::CreditsServer,
        deals_server::DealsServer, entry_points_server::EntryPointsServer, evaluations_server::EvaluationsServer,
        kb_groups_server::KbGroupsServer, kb_sources_server::KbSourcesServer,
        knowledge_gaps_server::KnowledgeGapsServer, messages_server::MessagesServer,
        model_providers_server::ModelProvidersServer, pipelines_server::PipelinesServer,
        summaries_server::SummariesServer, tasks_server::TasksServer, webhooks_server::WebhooksServer,
    },
    webchat::v1::web_chat_server::WebChatServer,
    wire,
};
use tonic::service::{Routes, interceptor::InterceptedService};

use crate::{
    access::{guard::Guard, service::ApiKeysService},
    agents::service::AgentsService,
    broadcasts::BroadcastsService,
    campaigns::{
        CampaignsService,
        sunset::{self, Sunset},
    },
    contacts::service::ContactsService,
    conversations::service::ConversationsService,
    credit_ledger::CreditsService,
    deals::{pipelines::PipelinesService, service::DealsService},
    kb_groups::KbGroupsService,
    knowledge::service::KbSourcesService,
    messaging::service::MessagesService,
    operator_api::{AdminService, AdminToken},
    provider_callbacks::ChannelHooksService,
    replies::{
        evaluations::service::EvaluationsService, gaps::service::KnowledgeGapsService,
        own_provider::ModelProvidersService,
    },
    routing::{channels::ChannelsService, entry_points::EntryPointsService},
    site::{health::HealthService, payments::PaymentsService},
    summaries::service::SummariesService,
    tasks::service::TasksService,
    webchat::service::{ChatSessionsService, WebChatService},
    webhooks::service::WebhooksService,
};

/// The services the core exposes, and the guard in front of the platform ones.
pub struct Services {
    pub health: HealthService,
    pub payments: PaymentsService,
    pub api_keys: ApiKeysService,
    pub credits: CreditsService,
    pub model_providers: ModelProvidersService,
    pub deals: DealsService,
    pub summaries: SummariesService,
    pub evaluations: EvaluationsService,
    pub knowledge_gaps: KnowledgeGapsService,
    pub tasks: TasksService,
    pub pipelines: PipelinesService,
    pub webhooks: WebhooksService,
    pub agents: AgentsService,
    pub channels: ChannelsService,
    pub entry_points: EntryPointsService,
    pub kb_groups: KbGroupsService,
    pub kb_sources: KbSourcesService,
    pub broadcasts: BroadcastsService,
    pub campaigns: CampaignsService,
    pub contacts: ContactsService,
    pub messages: MessagesService,
    pub conversations: ConversationsService,
    pub hooks: ChannelHooksService,
    pub webchat: WebChatService,
    pub chat_sessions: ChatSessionsService,
    pub admin: AdminService,
    pub admin_token: AdminToken,
    pub guard: Arc<Guard>,
    pub sunset: Arc<Sunset>,
}

pub async fn routes(services: Services) -> anyhow::Result<Routes> {
    let (reporter, grpc_health) = tonic_health::server::health_reporter();
    reporter.set_serving::<SiteServer<HealthService>>().await;
    reporter.set_serving::<PaymentsServer<PaymentsService>>().await;
    reporter.set_serving::<ApiKeysServer<ApiKeysService>>().await;
    reporter.set_serving::<CreditsServer<CreditsService>>().await;
    reporter
        .set_serving::<ModelProvidersServer<ModelProvidersService>>()
        .await;
    reporter.set_serving::<DealsServer<DealsService>>().await;
    reporter.set_serving::<SummariesServer<SummariesService>>().await;
    reporter.set_serving::<EvaluationsServer<EvaluationsService>>().await;
    reporter
        .set_serving::<KnowledgeGapsServer<KnowledgeGapsService>>()
        .await;
    reporter.set_serving::<TasksServer<TasksService>>().await;
    reporter.set_serving::<PipelinesServer<PipelinesService>>().await;
    reporter.set_serving::<WebhooksServer<WebhooksService>>().await;
    reporter.set_serving::<AgentsServer<AgentsService>>().await;
    reporter.set_serving::<ChannelsServer<ChannelsService>>().await;
    reporter.set_serving::<EntryPointsServer<EntryPointsService>>().await;
    reporter.set_serving::<KbGroupsServer<KbGroupsService>>().await;
    reporter.set_serving::<KbSourcesServer<KbSourcesService>>().await;
    reporter.set_serving::<BroadcastsServer<BroadcastsService>>().await;
    reporter.set_serving::<CampaignsServer<CampaignsService>>().await;
    reporter.set_serving::<ContactsServer<ContactsService>>().await;
    reporter.set_serving::<MessagesServer<MessagesService>>().await;
    reporter
        .set_serving::<ConversationsServer<ConversationsService>>()
        .await;
    reporter.set_serving::<ChannelHooksServer<ChannelHooksService>>().await;
    reporter.set_serving::<WebChatServer<WebChatService>>().await;
    reporter.set_serving::<ChatSessionsServer<ChatSessionsService>>().await;
    // Both reflection versions: grpcurl and most tools ask v1, older clients v1alpha.
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;
    let admin_token = services.admin_token;
    // Every service answers up to the contract's message size, which the edge reads (tonic's default is
    // 4 MiB); requests keep tonic's 4 MiB.
    macro_rules! sized {
        ($server:expr) => {
            $server.max_encoding_message_size(wire::MAX_MESSAGE_BYTES)
        };
    }
    let admin = sized!(AdminServer::new(services.admin));
    // Knowledge sources take uploads: requests up to the upload limit.
    let kb_request_bytes = services.kb_sources.max_request_bytes();
    let routes = Routes::new(sized!(SiteServer::new(services.health)))
        .add_service(sized!(PaymentsServer::new(services.payments)))
        .add_service(sized!(ApiKeysServer::new(services.api_keys)))
        .add_service(sized!(CreditsServer::new(services.credits)))
        .add_service(sized!(ModelProvidersServer::new(services.model_providers)))
        .add_service(sized!(DealsServer::new(services.deals)))
        .add_service(sized!(SummariesServer::new(services.summaries)))
        .add_service(sized!(EvaluationsServer::new(services.evaluations)))
        .add_service(sized!(KnowledgeGapsServer::new(services.knowledge_gaps)))
        .add_service(sized!(TasksServer::new(services.tasks)))
        .add_service(sized!(PipelinesServer::new(services.pipelines)))
        .add_service(sized!(WebhooksServer::new(services.webhooks)))
        .add_service(sized!(AgentsServer::new(services.agents)))
        .add_service(sized!(ChannelsServer::new(services.channels)))
        .add_service(sized!(EntryPointsServer::new(services.entry_points)))
        .add_service(sized!(KbGroupsServer::new(services.kb_groups)))
        .add_service(sized!(KbSourcesServer::new(services.kb_sources)).max_decoding_message_size(kb_request_bytes))
        .add_service(sized!(BroadcastsServer::new(services.broadcasts)))
        .add_service(sized!(CampaignsServer::new(services.campaigns)))
        .add_service(sized!(ContactsServer::new(services.contacts)))
        .add_service(sized!(MessagesServer::new(services.messages)))
        .add_service(sized!(ConversationsServer::new(services.conversations)))
        .add_service(sized!(ChannelHooksServer::new(services.hooks)))
        .add_service(sized!(WebChatServer::new(services.webchat)))
        .add_service(sized!(ChatSessionsServer::new(services.chat_sessions)))
        .add_service(InterceptedService::new(admin, move |request| {
            admin_token.check(request)
        }))
        .add_service(grpc_health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    let guard = services.guard;
    let sunset = services.sunset;
    // One layer runs the call's policy outside-in: trace first (so refusals are traced with their request
    // id), then the caller's deadline (the guard's own work, which may wait on Redis or the database,
    // included), then the campaigns' deprecation (so the guard's refusals carry it too), then the guard.
    // One layer rather than four: each axum layer boxes and clones the service below it on every call.
    let router = routes.into_axum_router().layer(axum::middleware::from_fn(
        move |request, next: axum::middleware::Next| {
            let (guard, sunset) = (guard.clone(), sunset.clone());
            trace::trace_call(request, move |request| {
                deadline::enforce(request, move |request| {
                    sunset::sunset(sunset, request, move |request| {
                        crate::access::guard::guard(guard, request, move |request| next.run(request))
                    })
                })
            })
        },
    ));
    Ok(Routes::from(router))
}

fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}
