//! The widget's script and the demo page, compiled into the binary: no CDN and no build step at run time.
//! Both are cacheable by content (`ETag`), so a visitor's browser asks again only to revalidate.

use std::sync::LazyLock;

use axum::{
    extract::Query,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

const WIDGET: &str = include_str!("../../assets/webchat/widget.js");
const DEMO: &str = include_str!("../../assets/webchat/demo.html");
/// Where the demo page loads the widget from: this server, whatever host name the browser used.
const WIDGET_PATH: &str = "/webchat/widget.js";

/// The widget's entity tag: a hash of its text, so a new build's widget is fetched anew.
static WIDGET_ETAG: LazyLock<HeaderValue> = LazyLock::new(|| {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    WIDGET.hash(&mut hasher);
    HeaderValue::from_str(&format!("\"{:016x}\"", hasher.finish())).unwrap_or(HeaderValue::from_static("\"0\""))
});

pub async fn widget(headers: HeaderMap) -> Response {
    let etag = WIDGET_ETAG.clone();
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|tags| tags.split(','))
        .any(|tag| tag.trim().as_bytes() == etag.as_bytes());
    let cache = [
        (header::ETAG, etag),
        // Short: a site picks up a new widget within minutes of an upgrade.
        (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300")),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    let content_type = (
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/javascript; charset=utf-8"),
    );
    (cache, [content_type], WIDGET).into_response()
}

#[derive(serde::Deserialize)]
pub struct DemoQuery {
    #[serde(default)]
    key: String,
}

/// `GET /webchat/demo?key=wk_...`: a plain page embedding the widget for that key. The key is checked for
/// its shape only (it goes into the page); the widget itself says when the channel does not exist.
pub async fn demo(Query(query): Query<DemoQuery>) -> Response {
    if !is_widget_key(&query.key) {
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "key: must be a web chat channel's widget key (wk_ and 24 letters or digits)\n",
        )
            .into_response();
    }
    let page = DEMO
        .replace("{{WIDGET_KEY}}", &query.key)
        .replace("{{SCRIPT_URL}}", WIDGET_PATH);
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

/// `wk_` + 24 base62: nothing in it needs escaping in HTML.
fn is_widget_key(key: &str) -> bool {
    key.strip_prefix("wk_")
        .is_some_and(|rest| rest.len() == 24 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_widget_keys_reach_the_page() {
        assert!(super::is_widget_key("wk_abcdefghijklmnopqrstuvwx"));
        for bad in [
            "",
            "wk_short",
            "wk_abcdefghijklmnopqrstuv\"x",
            "xx_abcdefghijklmnopqrstuvwx",
            "wk_abcdefghijklmnopqrstuvw<",
        ] {
            assert!(!super::is_widget_key(bad), "{bad}");
        }
    }
}
