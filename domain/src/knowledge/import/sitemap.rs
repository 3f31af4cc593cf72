//! The pages of an XML sitemap (`<urlset><url><loc>`), parsed with `roxmltree`, in the sitemap's order.

/// The first `max` page URLs of `xml`, or why it is not a sitemap.
pub fn pages(xml: &str, max: usize) -> Result<Vec<String>, String> {
    let document = roxmltree::Document::parse(xml).map_err(|e| format!("not XML: {e}"))?;
    if document.root_element().tag_name().name() != "urlset" {
        return Err("not a sitemap of pages (<urlset>)".to_owned());
    }
    Ok(document
        .descendants()
        .filter(|n| n.tag_name().name() == "loc")
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .take(max)
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn locations_are_read_in_order() {
        let xml = r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <url><loc> https://a.test/1 </loc></url><url><loc>https://a.test/2</loc></url>
            <url><loc>https://a.test/3</loc></url></urlset>"#;
        assert_eq!(super::pages(xml, 2).unwrap(), ["https://a.test/1", "https://a.test/2"]);
        assert!(super::pages("<html/>", 2).is_err());
    }
}
