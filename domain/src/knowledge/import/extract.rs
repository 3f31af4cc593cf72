//! A page's main text in sections. HTML is parsed by `scraper` (html5ever, the browsers' parsing algorithm);
//! the main content is `<main>`, `<article>` or `[role=main]` when the page marks one, else the body, without
//! scripts, styles, navigation, headers, footers, forms, asides and cookie or consent banners. A heading
//! starts a section; each section becomes one FAQ (heading as question, its text as answer), and a section
//! longer than `MAX_SECTION_CHARS` is split into parts at line, then word, boundaries. A section whose text
//! is mostly the text of links (a chapter's table of contents, a list of pages) is navigation that the page
//! did not mark as such, and is left out: as a FAQ it answers nothing and wins broad questions.

use scraper::{ElementRef, Html, Node, Selector};

pub const MAX_SECTION_CHARS: usize = 2000;
/// A section with at least this many links, holding more than this share of its visible characters, is
/// navigation. (One link that is the whole answer, "the downloads page", is an answer.)
const NAVIGATION_LINKS: usize = 3;
const NAVIGATION_LINK_SHARE: f64 = 0.6;
/// The longest question a FAQ takes.
const MAX_QUESTION_CHARS: usize = 1000;

/// Elements whose text is never main content.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe", "svg", "button",
    "select", "dialog",
];
/// ARIA roles of navigation, site banners and page footers.
const DROPPED_ROLES: &[&str] = &["navigation", "banner", "contentinfo", "dialog", "alertdialog", "search"];
/// Words in an id or class that mark a cookie or consent banner.
const BANNER_MARKS: &[&str] = &["cookie", "consent", "gdpr"];
/// Classes of the permalink anchors documentation generators put in headings (Sphinx and MkDocs
/// `headerlink`, Docusaurus `hash-link`), whose text (`¶`, `#`) is no part of the heading.
const PERMALINK_CLASSES: &[&str] = &["headerlink", "hash-link", "anchor-link"];
/// How deep the walk follows nested elements; deeper ones give their text flat. The walk recurses, and a
/// page of a million nested `<div>`s must not exhaust the stack.
const MAX_DEPTH: usize = 256;
/// Elements that break lines.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "li",
    "br",
    "tr",
    "td",
    "th",
    "section",
    "article",
    "main",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "hr",
    "address",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub question: String,
    pub answer: String,
}

/// The sections of a page and how many characters of text they hold (what is charged for).
#[derive(Debug, Default)]
pub struct Extracted {
    pub sections: Vec<Section>,
    pub characters: usize,
}

/// The sections of an HTML page; text before the first heading is answered under the page's title, or
/// `fallback_title` (its URL) without one.
pub fn html(page: &str, fallback_title: &str) -> Extracted {
    let document = Html::parse_document(page);
    let title = first(&document, "title")
        .map(|t| collapse(&t.text().collect::<String>()))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| fallback_title.to_owned());
    let root = first(&document, "main, article, [role=main]")
        .or_else(|| first(&document, "body"))
        .unwrap_or_else(|| document.root_element());
    let mut walk = Walk {
        raw: vec![(title, String::new())],
        linked: vec![Linked::default()],
    };
    walk.element(root, 0);
    let sections = walk
        .raw
        .into_iter()
        .zip(walk.linked)
        .filter(|((_, body), linked)| !is_navigation(body, *linked))
        .map(|(section, _)| section)
        .collect();
    finish(sections)
}

/// Whether a section's text is mostly links.
fn is_navigation(body: &str, linked: Linked) -> bool {
    let visible = visible_chars(body);
    linked.links >= NAVIGATION_LINKS && linked.chars as f64 > NAVIGATION_LINK_SHARE * visible as f64
}

fn visible_chars(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// Plain text: one section under `title`, split as any other.
pub fn plain(text: &str, title: &str) -> Extracted {
    finish(vec![(title.to_owned(), text.to_owned())])
}

fn first<'a>(document: &'a Html, selector: &str) -> Option<ElementRef<'a>> {
    let selector = Selector::parse(selector).ok()?;
    document.select(&selector).next()
}

/// Headings and raw text in document order, with how many of each section's visible characters are inside
/// links.
struct Walk {
    raw: Vec<(String, String)>,
    linked: Vec<Linked>,
}

/// The links of a section: how many, and how many visible characters they hold.
#[derive(Clone, Copy, Default)]
struct Linked {
    links: usize,
    chars: usize,
}

impl Walk {
    fn element(&mut self, element: ElementRef<'_>, depth: usize) {
        if depth >= MAX_DEPTH {
            // `text()` walks the subtree without recursing.
            let flat: String = element.text().collect();
            self.text(&flat);
            return;
        }
        for child in element.children() {
            match child.value() {
                Node::Text(text) => self.text(text),
                Node::Element(_) => {
                    if let Some(child) = ElementRef::wrap(child) {
                        self.child(child, depth + 1);
                    }
                }
                _ => {}
            }
        }
    }

    fn child(&mut self, element: ElementRef<'_>, depth: usize) {
        let value = element.value();
        let name = value.name();
        if is_dropped(element) {
            return;
        }
        if matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6") {
            let mut heading = String::new();
            visible_text(element, &mut heading, depth);
            let heading = collapse(&heading);
            if !heading.is_empty() {
                self.raw.push((heading, String::new()));
                self.linked.push(Linked::default());
            }
            return;
        }
        if name == "a" {
            let (section, before) = (self.raw.len(), self.raw.last().map_or(0, |(_, body)| body.len()));
            self.element(element, depth);
            // A heading inside the link started a section of its own: its text is no link text of this one.
            if self.raw.len() == section
                && let (Some((_, body)), Some(linked)) = (self.raw.last(), self.linked.last_mut())
            {
                linked.links += 1;
                linked.chars += visible_chars(&body[before..]);
            }
            return;
        }
        let block = BLOCKS.contains(&name);
        if block {
            self.text("\n");
        }
        self.element(element, depth);
        if block {
            self.text("\n");
        }
    }

    fn text(&mut self, text: &str) {
        if let Some((_, body)) = self.raw.last_mut() {
            body.push_str(text);
        }
    }
}

/// The text of `element` without that of its dropped descendants (a heading's permalink anchor).
/// Past `MAX_DEPTH`, all of the text.
fn visible_text(element: ElementRef<'_>, out: &mut String, depth: usize) {
    if depth >= MAX_DEPTH {
        out.extend(element.text());
        return;
    }
    for child in element.children() {
        match child.value() {
            Node::Text(text) => out.push_str(text),
            Node::Element(_) => {
                if let Some(child) = ElementRef::wrap(child).filter(|child| !is_dropped(*child)) {
                    visible_text(child, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

fn is_dropped(element: ElementRef<'_>) -> bool {
    let value = element.value();
    if DROPPED.contains(&value.name()) || value.attr("aria-hidden") == Some("true") {
        return true;
    }
    if value.attr("role").is_some_and(|role| DROPPED_ROLES.contains(&role)) {
        return true;
    }
    if value.name() == "a" && value.classes().any(|class| PERMALINK_CLASSES.contains(&class)) {
        return true;
    }
    let marks = format!(
        "{} {}",
        value.id().unwrap_or_default(),
        value.attr("class").unwrap_or_default()
    )
    .to_ascii_lowercase();
    BANNER_MARKS.iter().any(|mark| marks.contains(mark))
}

/// Raw sections as FAQs: whitespace collapsed within lines, empty lines dropped, empty sections skipped,
/// long ones split.
pub fn finish(raw: Vec<(String, String)>) -> Extracted {
    let mut extracted = Extracted::default();
    for (heading, body) in raw {
        let text = body
            .lines()
            .map(collapse)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if text.is_empty() {
            continue;
        }
        let question: String = heading.chars().take(MAX_QUESTION_CHARS).collect();
        extracted.characters += heading.chars().count() + text.chars().count();
        for (n, part) in parts(&text).into_iter().enumerate() {
            let question = if n == 0 {
                question.clone()
            } else {
                format!("{question} (part {})", n + 1)
            };
            extracted.sections.push(Section { question, answer: part });
        }
    }
    extracted
}

pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` in pieces of at most `MAX_SECTION_CHARS`, cut at the last line break, else the last space, else
/// anywhere, before the limit.
fn parts(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.chars().count() > MAX_SECTION_CHARS {
        let limit = rest
            .char_indices()
            .nth(MAX_SECTION_CHARS)
            .map_or(rest.len(), |(i, _)| i);
        let window = &rest[..limit];
        let cut = window
            .rfind('\n')
            .or_else(|| window.rfind(' '))
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        parts.push(rest[..cut].trim().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        parts.push(rest.to_owned());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_text_is_split_at_headings_without_noise() {
        let page = r#"<html><head><title>Acme help</title><style>p{}</style></head><body>
            <header><a href="/">Home</a></header><nav><a href="/a">About</a></nav>
            <div class="cookie-banner">We use cookies</div>
            <p>Welcome   to Acme.</p>
            <h2>Opening hours</h2><p>Nine to five.</p><ul><li>Closed Sundays</li></ul>
            <script>var x = "hidden";</script>
            <h2>Parking<a class="headerlink" href="/help#parking" title="Link to this heading">¶</a></h2>
            <p>Behind the building.</p>
            <footer>Copyright Acme</footer></body></html>"#;
        let extracted = html(page, "https://acme.test/");
        let got: Vec<(&str, &str)> = extracted
            .sections
            .iter()
            .map(|s| (s.question.as_str(), s.answer.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("Acme help", "Welcome to Acme."),
                ("Opening hours", "Nine to five.\nClosed Sundays"),
                ("Parking", "Behind the building."),
            ]
        );
    }

    #[test]
    fn a_section_of_links_is_navigation_and_left_out() {
        // As documentation generators write a chapter: its contents as links, then its sections.
        let page = r##"<html><head><title>FAQ</title></head><body>
            <h1>Chapter 6. The archives</h1>
            <div class="toc"><p><strong>Table of Contents</strong></p><dl>
            <dt><a href="#dists">6.1. How many distributions are there?</a></dt>
            <dt><a href="#sid">6.2. What about "sid"?</a></dt>
            <dt><a href="#pools">6.3. What's in the pool directory?</a></dt></dl></div>
            <h2>6.1. How many distributions are there?</h2>
            <p>Three: stable, testing and unstable (see <a href="#sid">Section 6.2</a> and
            <a href="#pools">the pool</a>; also <a href="#x">this</a>).</p>
            <h2>Where can I download it?</h2><p><a href="/downloads">On the downloads page</a></p>
            </body></html>"##;
        let questions: Vec<String> = html(page, "faq").sections.into_iter().map(|s| s.question).collect();
        assert_eq!(
            questions,
            ["6.1. How many distributions are there?", "Where can I download it?"]
        );
    }

    #[test]
    fn deeply_nested_pages_are_read_without_exhausting_the_stack() {
        let depth = 10_000;
        let page = format!(
            "<html><body><h2>Deep</h2>{}deep text{}</body></html>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        // A test thread's 2 MiB stack, like a worker's.
        let extracted = std::thread::spawn(move || html(&page, "https://deep.test/"))
            .join()
            .expect("no stack overflow");
        assert_eq!(extracted.sections.last().map(|s| s.answer.as_str()), Some("deep text"));
    }

    #[test]
    fn long_sections_are_split_under_the_limit() {
        let text = "word ".repeat(1000);
        let extracted = plain(&text, "Long");
        assert_eq!(extracted.sections.len(), 3);
        assert!(
            extracted
                .sections
                .iter()
                .all(|s| s.answer.chars().count() <= MAX_SECTION_CHARS)
        );
        assert_eq!(extracted.sections[1].question, "Long (part 2)");
    }
}
