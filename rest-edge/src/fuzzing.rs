//! Entry points for the fuzz targets (`fuzz/`, built with `--cfg fuzzing`): a client's bytes handed to the
//! edge's parsers as a request hands them, with nothing between.

use std::sync::OnceLock;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, header};
use prost_reflect::DescriptorPool;

use crate::{
    bindings::{self, Binding},
    body::BodyError,
    multipart, request,
};

fn bindings() -> &'static [Binding] {
    static ALL: OnceLock<Vec<Binding>> = OnceLock::new();
    ALL.get_or_init(|| {
        let pool = DescriptorPool::decode(frontdesk_api::FILE_DESCRIPTOR_SET).expect("descriptor set");
        bindings::load(&pool).expect("bindings")
    })
}

/// `data` split at its first NUL: before it (empty without one), after it.
fn split(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&[][..], data),
    }
}

/// Each path parameter of the operation, with the same value.
fn path_params(binding: &Binding, value: &str) -> Vec<(String, String)> {
    binding
        .template
        .variables
        .iter()
        .map(|variable| (variable.param.clone(), value.to_owned()))
        .collect()
}

/// A JSON request to a published operation: its query string, then its body.
pub fn request(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let all = bindings();
    let binding = &all[usize::from(pick) % all.len()];
    let (query, body) = split(rest);
    let query = String::from_utf8_lossy(query);
    let _ = request::build(binding, &path_params(binding, "x"), Some(&query), body);
}

/// A `multipart/form-data` upload: its `Content-Type` header's parameters, then its body (in chunks of up to
/// 64 bytes, as a network delivers them), to an upload operation.
pub fn upload(data: &[u8]) {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let (parameters, body) = split(data);
    let Some(binding) = bindings().iter().find(|b| multipart::is_upload(b)) else {
        return;
    };
    let mut headers = HeaderMap::new();
    let content_type = format!("multipart/form-data; {}", String::from_utf8_lossy(parameters));
    let Ok(value) = HeaderValue::from_str(&content_type) else {
        return;
    };
    headers.insert(header::CONTENT_TYPE, value);
    let chunks: Vec<Result<Bytes, BodyError>> = body.chunks(64).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    let stream = futures_util::stream::iter(chunks).boxed();
    let runtime = RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("runtime"));
    let _ = runtime.block_on(multipart::build(
        binding,
        &path_params(binding, "x"),
        None,
        &headers,
        stream,
        64 * 1024,
    ));
}
