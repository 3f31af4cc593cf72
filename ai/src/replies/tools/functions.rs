//! An agent's custom functions as tools: the model's arguments go as JSON to the function's URL (the body of a
//! POST, PUT or PATCH; the query of a GET or DELETE) with its declared headers, through the client of the
//! outbound policy (the private-address guard is checked again when the name resolves), within 10 s; the
//! answer goes back to the model cut at 8 KiB, and a failure goes back as a tool error.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::{chat::ToolSpec, provider::ToolOutcome};
use crate::{
    integrations::{http::innermost_cause, outbound::OutboundPolicy},
    store::{entities::custom_functions, from_json_text},
};

/// The most of a function's answer the model reads.
pub const ANSWER_BYTES: usize = 8 * 1024;

/// One custom function, its headers opened.
pub struct Function {
    pub row: custom_functions::Model,
    pub headers: BTreeMap<String, String>,
}

impl Function {
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.row.name.clone(),
            description: self.row.description.clone(),
            parameters: from_json_text::<Value>(&self.row.parameters),
        }
    }

    pub async fn call(&self, policy: &OutboundPolicy, client: &reqwest::Client, arguments: &Value) -> ToolOutcome {
        // The client's resolver guards names; an address written in the URL is checked here.
        let literal = reqwest::Url::parse(&self.row.url)
            .map_err(|_| "is not a URL".to_owned())
            .and_then(|url| policy.refuse_literal(&url));
        if let Err(why) = literal {
            tracing::warn!(function = %self.row.name, %why, "a custom function's URL is refused");
            return ToolOutcome::Error(format!("the function's URL {why}"));
        }
        let method = reqwest::Method::from_bytes(self.row.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let in_query = matches!(method, reqwest::Method::GET | reqwest::Method::DELETE);
        let Ok(mut url) = reqwest::Url::parse(&self.row.url) else {
            return ToolOutcome::Error("the function's URL is not a URL".into());
        };
        if in_query {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in arguments.as_object().into_iter().flatten() {
                pairs.append_pair(name, &value.as_str().map_or_else(|| value.to_string(), str::to_owned));
            }
        }
        let mut request = client.request(method, url);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if !in_query {
            request = request
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(arguments.to_string());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                let why = if err.is_timeout() {
                    "did not answer within 10 s".to_owned()
                } else if err.is_connect() {
                    // The guard refuses a private address at connection time; the error says so.
                    format!("could not be reached: {}", innermost_cause(&err))
                } else {
                    "broke off its answer".to_owned()
                };
                tracing::warn!(function = %self.row.name, %why, "a custom function failed");
                return ToolOutcome::Error(format!("the function {why}"));
            }
        };
        let status = response.status();
        let body = match read_capped(response, ANSWER_BYTES).await {
            Ok(body) => body,
            Err(_) => return ToolOutcome::Error("the function broke off its answer".into()),
        };
        if status.is_success() {
            ToolOutcome::Answer(body)
        } else {
            tracing::warn!(function = %self.row.name, status = status.as_u16(), "a custom function answered an error");
            ToolOutcome::Error(format!("the function answered {}: {body}", status.as_u16()))
        }
    }
}

/// At most `cap` bytes of the answer (read no further), as text (`capped_text`).
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<String, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() >= cap {
            break;
        }
    }
    Ok(capped_text(body, cap))
}

/// The first `cap` bytes of `body` as text, cut where its valid UTF-8 ends.
pub(crate) fn capped_text(mut body: Vec<u8>, cap: usize) -> String {
    body.truncate(cap);
    match String::from_utf8(body) {
        Ok(text) => text,
        Err(err) => {
            let valid = err.utf8_error().valid_up_to();
            let mut bytes = err.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    }
}
