//! A fetched body as text: the charset named by the `Content-Type` header, else by the page's own
//! `<meta charset>` (looked for in its first 1,024 bytes, as browsers do), else UTF-8; a byte-order mark
//! wins over both. Decoding is `encoding_rs`'s (the WHATWG encodings).

use encoding_rs::{Encoding, UTF_8};

/// How far into an HTML page its charset declaration is looked for.
const PRESCAN_BYTES: usize = 1024;

pub fn text(body: &[u8], content_type: &str) -> String {
    let encoding = charset_param(content_type)
        .or_else(|| is_html(content_type).then(|| declared_in_page(body)).flatten())
        .unwrap_or(UTF_8);
    encoding.decode(body).0.into_owned()
}

pub fn is_html(content_type: &str) -> bool {
    let essence = essence(content_type);
    essence.is_empty() || essence == "text/html" || essence == "application/xhtml+xml"
}

/// A content type without its parameters, lower case (`text/html; charset=utf-8` is `text/html`).
pub fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn charset_param(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        (name.trim().eq_ignore_ascii_case("charset")).then(|| label(value.trim().trim_matches('"')))?
    })
}

/// The label after the first `charset=` in the page's head (`<meta charset="...">` or the http-equiv form).
fn declared_in_page(body: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&body[..body.len().min(PRESCAN_BYTES)]).to_ascii_lowercase();
    let after = &head[head.find("charset=")? + "charset=".len()..];
    let value = after.trim_start_matches(['"', '\'']);
    let end = value
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')))
        .unwrap_or(value.len());
    label(&value[..end])
}

fn label(name: &str) -> Option<&'static Encoding> {
    Encoding::for_label(name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsets_come_from_the_header_then_the_page() {
        let latin1 = b"<p>caf\xe9</p>";
        assert_eq!(text(latin1, "text/html; charset=ISO-8859-1"), "<p>café</p>");
        let page = b"<html><head><meta charset=\"windows-1252\"></head><p>caf\xe9 \x80</p>";
        assert!(text(page, "text/html").ends_with("<p>café €</p>"));
        assert_eq!(text("naïve".as_bytes(), "text/plain"), "naïve");
    }
}
