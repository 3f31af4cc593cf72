//! The Front Desk wire contract, generated from `proto/`: message types, gRPC clients and servers, and the
//! encoded descriptor set (with `google.api.http` options and comments) that drives REST transcoding,
//! server reflection and the OpenAPI document.

/// Encoded `google.protobuf.FileDescriptorSet` of every proto file, imports included.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/frontdesk_descriptor.bin"));

pub mod codec;
pub mod http_error;
pub mod json_out;
pub mod reason;
pub mod request_id;

pub mod google {
    pub mod api {
        tonic::include_proto!("google.api");
    }
}

/// Generated code, nested as its proto packages are (`frontdesk.v1` is `frontdesk::v1`), so that references
/// across packages (`google.api.HttpBody`) resolve.
pub mod frontdesk {
    /// Platform API v1.
    pub mod v1 {
        tonic::include_proto!("frontdesk.v1");
    }

    /// Operator API (gRPC only).
    pub mod admin {
        pub mod v1 {
            tonic::include_proto!("frontdesk.admin.v1");
        }
    }

    pub mod site {
        pub mod v0 {
            tonic::include_proto!("frontdesk.site.v0");
        }
    }

    /// Plain HTTP requests carried over gRPC, for the routes the edge forwards unread (internal).
    pub mod raw {
        pub mod v1 {
            tonic::include_proto!("frontdesk.raw.v1");
        }
    }

    /// Provider callbacks, forwarded by the edge as they arrived (internal).
    pub mod hooks {
        pub mod v1 {
            tonic::include_proto!("frontdesk.hooks.v1");
        }
    }

    /// The web chat visitor API and live sockets, served to the edge (internal).
    pub mod webchat {
        pub mod v1 {
            tonic::include_proto!("frontdesk.webchat.v1");
        }
    }
}

pub use frontdesk::{admin, hooks, raw, site, v1, webchat};

/// Conventions between the gRPC core and the REST edge that the proto files cannot express.
pub mod wire {
    /// Domain of every `google.rpc.ErrorInfo` the service emits.
    pub const ERROR_DOMAIN: &str = "frontdesk";
    /// Largest gRPC answer the core sends and the edge reads (tonic's default is 4 MiB both ways). Answers
    /// stay far below it: list pages end before their items pass 4,000,000 bytes, and one resource is at
    /// most what a request (4 MiB) could store.
    pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
    /// The first buffer of a call's message encoder or decoder, grown as a message needs. Most messages are
    /// small, and a stream keeps its buffers as long as it lasts: ten thousand web chat sockets each hold
    /// one on both sides, where tonic's default (8 KiB) would cost them more than everything else together.
    pub const CODEC_BUFFER_BYTES: usize = 1024;
    /// Encoded bytes after which a streaming answer is handed on (tonic's default).
    pub const CODEC_YIELD_BYTES: usize = 32 * 1024;
    /// Response metadata: the HTTP status the edge answers with for a successful call (e.g. `503` for a
    /// degraded health check), as in grpc-gateway's `x-http-code` convention.
    pub const HTTP_CODE: &str = "x-http-code";
    /// Request and response metadata: the request id, echoed as the `X-Request-Id` header.
    pub const REQUEST_ID: &str = "x-request-id";
    /// Request metadata: an API key given as header `X-API-Key` (REST) or directly (gRPC).
    pub const API_KEY: &str = "x-api-key";
    /// Request metadata: an API key the REST edge took from the `apiKey` query parameter.
    pub const API_KEY_QUERY: &str = "x-api-key-query";
    /// Request metadata: the sub-account an agency key acts on (REST: `sub_account_id` in query or body).
    pub const SUB_ACCOUNT: &str = "x-sub-account-id";
    /// Request metadata: the edge could not parse the request and asks only whether the credentials pass,
    /// so that 401/403/429 come before its own 400/413 (the documented check order of errors).
    pub const PREFLIGHT: &str = "x-frontdesk-preflight";
    /// Request metadata: the edge asks, before it reads a body that may be large, only whether the
    /// credentials are known and may call the method (401/403); nothing is counted against the rate limit,
    /// which the call itself counts.
    pub const CREDENTIALS_ONLY: &str = "x-frontdesk-credentials-only";
    /// `ErrorInfo` reason of a preflight whose credentials passed every check.
    pub const PREFLIGHT_PASSED: &str = "PREFLIGHT_PASSED";
    /// HTTP request headers the edge passes to the core as metadata of the same name.
    pub const FORWARDED_REQUEST_HEADERS: &[&str] = &["authorization", API_KEY, IDEMPOTENCY_KEY, TRACEPARENT];
    /// Request metadata (and HTTP header): the caller's W3C trace context, which the call's trace continues.
    pub const TRACEPARENT: &str = "traceparent";
    /// Request metadata: the `Idempotency-Key` header of a send.
    pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
    /// Response metadata the edge copies to HTTP response headers under the same name.
    pub const FORWARDED_HEADERS: &[&str] = &[
        "ratelimit",
        "ratelimit-policy",
        "retry-after",
        "deprecation",
        "sunset",
        "link",
        "www-authenticate",
    ];
}
