//! An MCP server built with the official SDK's server side (`rmcp`), over Streamable HTTP behind HTTPS on
//! loopback: one tool, `order_status {order_id}`, that answers from a fixed table. It records the
//! `Authorization` header of every request, and can be told to answer garbage instead. `McpServer::catalog`
//! starts one that lists tools page after page without end (`Catalog`), counting the pages asked for.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use axum::{
    Router,
    extract::Request,
    http::StatusCode,
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool},
    schemars,
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct OrderQuery {
    #[schemars(description = "the order number, such as A-1001")]
    pub order_id: String,
}

#[derive(Clone)]
struct Orders {
    #[allow(dead_code)] // read by the code `tool_handler` generates
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Orders {
    #[tool(description = "Where a customer's order is")]
    fn order_status(&self, Parameters(OrderQuery { order_id }): Parameters<OrderQuery>) -> String {
        match order_id.as_str() {
            "A-1001" => "order A-1001: shipped on Monday, arriving Thursday".to_owned(),
            other => format!("order {other}: not found"),
        }
    }
}

#[tool_handler]
impl ServerHandler for Orders {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// A server's endless tool list: each page holds `page_size` tools (`tool_N`, with a description of
/// `description_bytes`) and names a next page.
#[derive(Clone)]
pub struct Catalog {
    pub page_size: usize,
    pub description_bytes: usize,
    pages_listed: Arc<AtomicUsize>,
}

impl ServerHandler for Catalog {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let page: usize = request.and_then(|r| r.cursor).and_then(|c| c.parse().ok()).unwrap_or(0);
        self.pages_listed.fetch_add(1, Ordering::SeqCst);
        let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let tools = (0..self.page_size)
            .map(|n| {
                Tool::new(
                    format!("tool_{}", page * self.page_size + n),
                    "d".repeat(self.description_bytes),
                    Arc::new(schema.as_object().cloned().unwrap_or_default()),
                )
            })
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = Some((page + 1).to_string());
        Ok(result)
    }
}

#[derive(Clone, Default)]
struct Shared {
    authorizations: Arc<Mutex<Vec<String>>>,
    garbage: Arc<AtomicBool>,
}

pub struct McpServer {
    /// `https://127.0.0.1:PORT/mcp`.
    pub url: String,
    shared: Shared,
}

impl McpServer {
    pub async fn start() -> Self {
        Self::serve(|| {
            Ok(Orders {
                tool_router: Orders::tool_router(),
            })
        })
        .await
    }

    /// A server whose tool list pages on without end, `page_size` tools a page; and the count of pages it
    /// was asked for.
    pub async fn catalog(page_size: usize, description_bytes: usize) -> (Self, Arc<AtomicUsize>) {
        let pages_listed = Arc::new(AtomicUsize::new(0));
        let catalog = Catalog {
            page_size,
            description_bytes,
            pages_listed: pages_listed.clone(),
        };
        (Self::serve(move || Ok(catalog.clone())).await, pages_listed)
    }

    /// Serves the handlers `make` makes at `/mcp`, recording each request.
    async fn serve<H: ServerHandler>(make: impl Fn() -> Result<H, std::io::Error> + Send + Sync + 'static) -> Self {
        let shared = Shared::default();
        let service = StreamableHttpService::new(
            make,
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let app = Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn_with_state(shared.clone(), record));
        let base = crate::tls::serve(app).await;
        Self {
            url: format!("{base}/mcp"),
            shared,
        }
    }

    /// The `Authorization` headers received, in order.
    pub fn authorizations(&self) -> Vec<String> {
        self.shared.authorizations.lock().unwrap().clone()
    }

    /// From now on every request is answered with a body that is no protocol.
    pub fn answer_garbage(&self) {
        self.shared.garbage.store(true, Ordering::SeqCst);
    }
}

async fn record(axum::extract::State(shared): axum::extract::State<Shared>, request: Request, next: Next) -> Response {
    if let Some(value) = request.headers().get("authorization") {
        shared
            .authorizations
            .lock()
            .unwrap()
            .push(value.to_str().unwrap_or_default().to_owned());
    }
    if shared.garbage.load(Ordering::SeqCst) {
        return (
            StatusCode::OK,
            [("content-type", "application/json")],
            "{\"not\": \"json-rpc\"",
        )
            .into_response();
    }
    next.run(request).await
}
