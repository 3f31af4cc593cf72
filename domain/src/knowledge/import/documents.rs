//! Uploaded documents in sections, each read by a maintained library: HTML by the page extractor
//! (`extract::html`), Markdown by `pulldown-cmark` (sections at headings), PDF text by `pdf-extract`, DOCX by
//! `zip` and `quick-xml` (`word/document.xml`; headings from paragraph styles), CSV by `csv` (a question and
//! an answer column become FAQs row by row; any other table is read as text), plain text as it is.
//!
//! A document is untrusted input, so extraction is bounded and isolated. It runs in a child process (this
//! same binary, `frontdesk extract-document`, fed the document on stdin, answering JSON on stdout) with a
//! deadline (killed past it), caps on its memory (`RLIMIT_DATA`) and CPU time, and at most one child per
//! CPU at once: a parser that panics, recurses until its stack overflows (a PDF form that draws itself does
//! that to `pdf-extract`), loops or allocates without end fails that document (`unreadable`, `timeout`)
//! while the service goes on. Within it, a DOCX is read with a cap on its entries and on the bytes each part
//! inflates to (a zip bomb stops at the cap), and the text extracted is capped. The upload itself is capped
//! by FRONTDESK_MAX_UPLOAD_MB before any of this.

use std::{
    io::{Cursor, Read},
    time::Duration,
};

use pulldown_cmark::{CowStr, Event, Parser, Tag, TagEnd};
use quick_xml::events::Event as XmlEvent;

use super::{
    decode,
    extract::{self, Extracted},
    fetch::PageError,
};

/// The longest a document's extraction may take.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// Most characters of text one document may yield (about 1,000 FAQs).
pub const MAX_TEXT_CHARS: usize = 2_000_000;
/// Most entries a DOCX (a zip archive) may hold.
const MAX_ZIP_ENTRIES: usize = 5_000;
/// Most bytes one part of a DOCX may inflate to.
const MAX_XML_BYTES: u64 = 32 * 1024 * 1024;

/// The document types an upload may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Text,
    Markdown,
    Pdf,
    Docx,
    Csv,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Html => "html",
            Self::Text => "text",
            Self::Markdown => "markdown",
            Self::Pdf => "pdf",
            Self::Docx => "docx",
            Self::Csv => "csv",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [Self::Html, Self::Text, Self::Markdown, Self::Pdf, Self::Docx, Self::Csv]
            .into_iter()
            .find(|f| f.as_str() == name)
    }

    /// The format of an upload: by its content type when that names one, else by its file name's
    /// extension; the message naming the type when neither is supported.
    pub fn of(file_name: &str, content_type: &str) -> Result<Self, String> {
        let essence = decode::essence(content_type);
        let by_type = match essence.as_str() {
            "text/html" | "application/xhtml+xml" => Some(Self::Html),
            "text/plain" => Some(Self::Text),
            "text/markdown" | "text/x-markdown" => Some(Self::Markdown),
            "application/pdf" => Some(Self::Pdf),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => Some(Self::Docx),
            "text/csv" | "application/csv" => Some(Self::Csv),
            _ => None,
        };
        let extension = file_name
            .rsplit_once('.')
            .map(|(_, ext)| ext.to_ascii_lowercase())
            .unwrap_or_default();
        let by_name = match extension.as_str() {
            "html" | "htm" | "xhtml" => Some(Self::Html),
            "txt" | "text" => Some(Self::Text),
            "md" | "markdown" => Some(Self::Markdown),
            "pdf" => Some(Self::Pdf),
            "docx" => Some(Self::Docx),
            "csv" => Some(Self::Csv),
            _ => None,
        };
        // A generic type (`application/octet-stream`, or none) says nothing: the name decides. So does a
        // `text/plain` given to a Markdown or CSV file, which is what many clients send for them.
        let generic = matches!(
            essence.as_str(),
            "" | "application/octet-stream" | "binary/octet-stream"
        );
        match (by_type, by_name) {
            (Some(Self::Text), Some(named)) => Ok(named),
            (Some(format), _) => Ok(format),
            (None, Some(format)) if generic => Ok(format),
            _ => Err(unsupported(file_name, &essence, &extension, generic)),
        }
    }
}

fn unsupported(file_name: &str, essence: &str, extension: &str, generic: bool) -> String {
    let named = if !generic {
        essence.to_owned()
    } else if !extension.is_empty() {
        format!(".{extension}")
    } else if !file_name.is_empty() {
        format!("{file_name} (no extension, no content type)")
    } else {
        "a file without a name or content type".to_owned()
    };
    format!("unsupported file type {named}: send HTML, plain text, Markdown, PDF, DOCX or CSV")
}

/// The subcommand of the binary that extracts one document (see `child_main`).
pub const SUBCOMMAND: &str = "extract-document";
/// Memory the child may use beyond its document.
const CHILD_MEMORY_BYTES: u64 = 1024 * 1024 * 1024;

/// What the child answers on stdout.
#[derive(serde::Serialize, serde::Deserialize)]
enum ChildAnswer {
    Sections {
        sections: Vec<(String, String)>,
        characters: usize,
    },
    Failed {
        reason: String,
        message: String,
    },
}

/// The document's sections, read by a child process of this binary within `DEADLINE`; sections before
/// the first heading are answered under `title` (the file name).
pub async fn extract(format: Format, data: Vec<u8>, title: String) -> Result<Extracted, PageError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let program = std::env::current_exe()
        .map_err(|e| PageError::new("internal", format!("the service cannot find its own binary: {e}")))?;
    let unreadable = || PageError::new("unreadable", "the document could not be read");
    // At most one child per CPU at once: each may take its memory cap.
    let _slot = extractors()
        .acquire()
        .await
        .map_err(|_| PageError::new("internal", "the extractors are closed"))?;
    let memory = CHILD_MEMORY_BYTES.saturating_add(data.len() as u64 * 4);
    let mut child = child_command(&program, format, &title, memory)
        .spawn()
        .map_err(|e| PageError::new("internal", format!("the extractor did not start: {e}")))?;
    let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(unreadable());
    };
    let work = async {
        let feed = async move {
            // A child that stops reading (it failed) is seen by its answer, not here.
            let _ = stdin.write_all(&data).await;
            drop(stdin);
        };
        let mut answer = Vec::new();
        let mut limited = (&mut stdout).take(MAX_ANSWER_BYTES);
        let ((), read) = tokio::join!(feed, limited.read_to_end(&mut answer));
        let status = child.wait().await;
        (read, status, answer)
    };
    let Ok((read, status, answer)) = tokio::time::timeout(DEADLINE, work).await else {
        // The child is killed when dropped (kill_on_drop).
        return Err(PageError::new(
            "timeout",
            format!("reading the document took longer than {} s", DEADLINE.as_secs()),
        ));
    };
    let parsed = match (read, status) {
        (Ok(_), Ok(status)) if status.success() => serde_json::from_slice::<ChildAnswer>(&answer).ok(),
        (_, status) => {
            tracing::warn!(format = format.as_str(), status = ?status.ok(), "a document's extraction died");
            None
        }
    };
    match parsed {
        Some(ChildAnswer::Sections { sections, characters }) => Ok(Extracted {
            sections: sections
                .into_iter()
                .map(|(question, answer)| extract::Section { question, answer })
                .collect(),
            characters,
        }),
        Some(ChildAnswer::Failed { reason, message }) => Err(PageError::new(static_reason(&reason), message)),
        None => Err(unreadable()),
    }
}

/// The extractor's command line: `program extract-document FORMAT MEMORY_BYTES -- TITLE`. The title (an
/// uploader's file name) comes after `--`, so a name that starts with `-` is a name, not a flag; and the
/// child gets an empty environment, so a parser that is made to misbehave finds no secret
/// (`FRONTDESK_SECRET_KEY`, `DATABASE_URL`) to leak.
fn child_command(program: &std::path::Path, format: Format, title: &str, memory: u64) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command
        .arg(SUBCOMMAND)
        .arg(format.as_str())
        .arg(memory.to_string())
        .arg("--")
        .arg(title)
        .env_clear()
        // mimalloc commits the arenas it reserves at once when the system overcommits, and RLIMIT_DATA counts
        // committed private memory: a reservation could then exceed the cap with little in use, and a
        // document within its caps failed as "out of memory" (3 to 5 of 20 runs of the zip bomb, release
        // builds). Committed on use, the cap counts what the extraction really holds.
        .env("MIMALLOC_ARENA_EAGER_COMMIT", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

/// The slots of the child processes of this process, one per CPU.
fn extractors() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::sync::Semaphore::new(cpus)
    })
}

/// Largest answer read from the child: the capped text, with its JSON framing.
const MAX_ANSWER_BYTES: u64 = (MAX_TEXT_CHARS as u64) * 8 + 1024 * 1024;

fn static_reason(reason: &str) -> &'static str {
    ["no_text", "too_large", "timeout", "unsupported_content_type"]
        .into_iter()
        .find(|r| *r == reason)
        .unwrap_or("unreadable")
}

/// `frontdesk extract-document FORMAT MEMORY_BYTES -- TITLE`: reads a document on stdin and writes its
/// sections (or why not) as JSON on stdout, under limits on its own memory and CPU time.
pub fn child_main(format: &str, title: &str, memory_bytes: u64) -> std::process::ExitCode {
    limit_self(memory_bytes, DEADLINE.as_secs() + 5);
    let mut data = Vec::new();
    let answer = match (Format::parse(format), std::io::stdin().read_to_end(&mut data)) {
        (Some(format), Ok(_)) => match sections(format, &data, title) {
            Ok(extracted) => ChildAnswer::Sections {
                sections: extracted.sections.into_iter().map(|s| (s.question, s.answer)).collect(),
                characters: extracted.characters,
            },
            Err(error) => ChildAnswer::Failed {
                reason: error.reason.to_owned(),
                message: error.message,
            },
        },
        _ => ChildAnswer::Failed {
            reason: "unreadable".to_owned(),
            message: "no document".to_owned(),
        },
    };
    match serde_json::to_writer(std::io::stdout().lock(), &answer) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::FAILURE,
    }
}

/// Caps this process's data segment (heap and anonymous mappings) and CPU seconds: past them an allocation
/// fails (the process aborts) or the kernel ends it.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn limit_self(memory_bytes: u64, cpu_seconds: u64) {
    for (resource, value) in [(libc::RLIMIT_DATA, memory_bytes), (libc::RLIMIT_CPU, cpu_seconds)] {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct it is given and changes only this process's limits.
        unsafe {
            libc::setrlimit(resource, &limit);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn limit_self(_memory_bytes: u64, _cpu_seconds: u64) {}

/// The sections of a document, on the calling thread.
pub fn sections(format: Format, data: &[u8], title: &str) -> Result<Extracted, PageError> {
    let extracted = match format {
        Format::Html => extract::html(&decode::text(data, "text/html"), title),
        Format::Text => extract::plain(&decode::text(data, "text/plain"), title),
        Format::Markdown => markdown(&decode::text(data, "text/plain"), title),
        Format::Csv => csv(data, title)?,
        Format::Pdf => pdf(data, title)?,
        Format::Docx => docx(data, title)?,
    };
    if extracted.characters > MAX_TEXT_CHARS {
        return Err(PageError::new(
            "too_large",
            format!("the document holds more than {MAX_TEXT_CHARS} characters of text"),
        ));
    }
    if extracted.sections.is_empty() {
        return Err(PageError::new("no_text", "the document has no text to import"));
    }
    Ok(extracted)
}

/// Markdown: a heading starts a section; blocks end lines.
fn markdown(text: &str, title: &str) -> Extracted {
    let mut raw = vec![(title.to_owned(), String::new())];
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        let piece = match event {
            Event::Start(Tag::Heading { .. }) => {
                heading = Some(String::new());
                continue;
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(heading) = heading.take().filter(|h| !h.trim().is_empty()) {
                    raw.push((extract::collapse(&heading), String::new()));
                }
                continue;
            }
            Event::Text(text) | Event::Code(text) => text,
            Event::SoftBreak | Event::End(TagEnd::TableCell) => CowStr::Borrowed(" "),
            Event::HardBreak
            | Event::End(
                TagEnd::Paragraph
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::TableRow
                | TagEnd::TableHead
                | TagEnd::BlockQuote(_),
            ) => CowStr::Borrowed("\n"),
            _ => continue,
        };
        match (heading.as_mut(), raw.last_mut()) {
            (Some(heading), _) => heading.push_str(&piece),
            (None, Some((_, body))) => body.push_str(&piece),
            (None, None) => {}
        }
    }
    extract::finish(raw)
}

/// Header names of a question column and of an answer column.
const QUESTION_HEADERS: &[&str] = &["question", "questions", "q", "faq", "query"];
const ANSWER_HEADERS: &[&str] = &["answer", "answers", "a", "response", "reply"];

/// CSV: with a question and an answer column (by header name), one FAQ per row; else the rows as text.
fn csv(data: &[u8], title: &str) -> Result<Extracted, PageError> {
    let text = decode::text(data, "text/csv");
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(true)
        .from_reader(text.as_bytes());
    let unreadable = |e: csv::Error| PageError::new("unreadable", format!("the CSV could not be read: {e}"));
    let headers = reader.headers().map_err(unreadable)?.clone();
    let column = |names: &[&str]| {
        headers
            .iter()
            .position(|h| names.contains(&h.trim().to_ascii_lowercase().as_str()))
    };
    if let (Some(q), Some(a)) = (column(QUESTION_HEADERS), column(ANSWER_HEADERS)) {
        let mut raw = Vec::new();
        for record in reader.records() {
            let record = record.map_err(unreadable)?;
            let (question, answer) = (record.get(q).unwrap_or_default(), record.get(a).unwrap_or_default());
            if !question.trim().is_empty() {
                raw.push((extract::collapse(question), answer.to_owned()));
            }
        }
        return Ok(extract::finish(raw));
    }
    let mut lines = vec![headers.iter().collect::<Vec<_>>().join(", ")];
    for record in reader.records() {
        lines.push(record.map_err(unreadable)?.iter().collect::<Vec<_>>().join(", "));
    }
    Ok(extract::plain(&lines.join("\n"), title))
}

/// PDF: its text, page after page, under the title (a PDF's text carries no heading marks).
fn pdf(data: &[u8], title: &str) -> Result<Extracted, PageError> {
    let text = pdf_extract::extract_text_from_mem(data)
        .map_err(|e| PageError::new("unreadable", format!("the PDF could not be read: {e}")))?;
    Ok(extract::plain(&text, title))
}

/// DOCX: the paragraphs of `word/document.xml`; a paragraph whose style is a heading (or the title)
/// starts a section.
fn docx(data: &[u8], title: &str) -> Result<Extracted, PageError> {
    let unreadable = |what: String| PageError::new("unreadable", format!("the DOCX could not be read: {what}"));
    let mut archive = zip::ZipArchive::new(Cursor::new(data)).map_err(|e| unreadable(e.to_string()))?;
    if archive.len() > MAX_ZIP_ENTRIES {
        return Err(unreadable(format!("it holds more than {MAX_ZIP_ENTRIES} entries")));
    }
    let headings = match part(&mut archive, "word/styles.xml") {
        Ok(styles) => heading_styles(&styles),
        Err(PartError::Missing) => Vec::new(),
        Err(e) => return Err(e.into_page_error()),
    };
    let document = part(&mut archive, "word/document.xml").map_err(PartError::into_page_error)?;
    let mut raw = vec![(title.to_owned(), String::new())];
    let mut reader = quick_xml::Reader::from_reader(document.as_slice());
    let mut buf = Vec::new();
    let mut paragraph = String::new();
    let mut style: Option<String> = None;
    let mut in_text = false;
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| unreadable(format!("word/document.xml: {e}")))?;
        match event {
            XmlEvent::Start(e) | XmlEvent::Empty(e) => match e.local_name().as_ref() {
                b"p" => {
                    paragraph.clear();
                    style = None;
                }
                b"pStyle" => style = attribute(&e, b"val"),
                b"t" => in_text = true,
                b"tab" => paragraph.push('\t'),
                b"br" | b"cr" => paragraph.push('\n'),
                _ => {}
            },
            XmlEvent::End(e) => match e.local_name().as_ref() {
                b"t" => in_text = false,
                b"p" => {
                    let is_heading = style.as_deref().is_some_and(|s| is_heading_style(s, &headings));
                    if is_heading && !paragraph.trim().is_empty() {
                        raw.push((extract::collapse(&paragraph), String::new()));
                    } else if let Some((_, body)) = raw.last_mut() {
                        body.push_str(&paragraph);
                        body.push('\n');
                    }
                    paragraph.clear();
                }
                _ => {}
            },
            XmlEvent::Text(t) if in_text => {
                paragraph.push_str(&t.decode().map_err(|e| unreadable(e.to_string()))?);
            }
            XmlEvent::CData(t) if in_text => paragraph.push_str(&String::from_utf8_lossy(&t)),
            XmlEvent::GeneralRef(r) if in_text => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    paragraph.push(c);
                } else if let Some(text) = r
                    .decode()
                    .ok()
                    .and_then(|name| quick_xml::escape::resolve_predefined_entity(&name))
                {
                    paragraph.push_str(text);
                }
            }
            XmlEvent::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(extract::finish(raw))
}

/// Why a part of a DOCX was not read.
enum PartError {
    Missing,
    Unreadable(String),
    TooLarge(String),
}

impl PartError {
    fn into_page_error(self) -> PageError {
        match self {
            Self::Missing => PageError::new("unreadable", "the DOCX has no word/document.xml"),
            Self::Unreadable(what) => PageError::new("unreadable", format!("the DOCX could not be read: {what}")),
            Self::TooLarge(name) => PageError::new(
                "too_large",
                format!("{name} inflates to more than {MAX_XML_BYTES} bytes"),
            ),
        }
    }
}

/// One part of the archive, inflated up to `MAX_XML_BYTES` (what its header claims is not trusted).
fn part(archive: &mut zip::ZipArchive<Cursor<&[u8]>>, name: &str) -> Result<Vec<u8>, PartError> {
    let file = match archive.by_name(name) {
        Ok(file) => file,
        Err(zip::result::ZipError::FileNotFound) => return Err(PartError::Missing),
        Err(e) => return Err(PartError::Unreadable(e.to_string())),
    };
    let mut data = Vec::new();
    file.take(MAX_XML_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| PartError::Unreadable(format!("{name}: {e}")))?;
    if data.len() as u64 > MAX_XML_BYTES {
        return Err(PartError::TooLarge(name.to_owned()));
    }
    Ok(data)
}

/// The ids of the styles named `heading N` or `title` in `word/styles.xml` (ids differ by language:
/// `Heading1`, `berschrift1`, ...; names do not).
fn heading_styles(styles: &[u8]) -> Vec<String> {
    let mut reader = quick_xml::Reader::from_reader(styles);
    let mut buf = Vec::new();
    let mut current: Option<String> = None;
    let mut ids = Vec::new();
    while let Ok(event) = reader.read_event_into(&mut buf) {
        match event {
            XmlEvent::Start(e) | XmlEvent::Empty(e) => match e.local_name().as_ref() {
                b"style" => current = attribute(&e, b"styleId"),
                b"name" => {
                    let name = attribute(&e, b"val").unwrap_or_default().to_ascii_lowercase();
                    if (name.starts_with("heading") || name == "title")
                        && let Some(id) = current.clone()
                    {
                        ids.push(id);
                    }
                }
                _ => {}
            },
            XmlEvent::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    ids
}

fn is_heading_style(style: &str, headings: &[String]) -> bool {
    let lower = style.to_ascii_lowercase();
    headings.iter().any(|h| h == style) || lower.starts_with("heading") || lower == "title"
}

/// An attribute's value by local name (`w:val` is `val`).
fn attribute(element: &quick_xml::events::BytesStart<'_>, name: &[u8]) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == name)
        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(extracted: &Extracted) -> Vec<(&str, &str)> {
        extracted
            .sections
            .iter()
            .map(|s| (s.question.as_str(), s.answer.as_str()))
            .collect()
    }

    #[test]
    fn formats_come_from_the_content_type_then_the_name() {
        assert_eq!(Format::of("a.pdf", "application/pdf"), Ok(Format::Pdf));
        assert_eq!(Format::of("notes.md", "application/octet-stream"), Ok(Format::Markdown));
        assert_eq!(Format::of("faq.csv", "text/plain"), Ok(Format::Csv));
        assert_eq!(Format::of("page", "text/html; charset=utf-8"), Ok(Format::Html));
        let refused = Format::of("logo.png", "image/png").unwrap_err();
        assert!(refused.contains("image/png"), "{refused}");
        let refused = Format::of("archive.zip", "").unwrap_err();
        assert!(refused.contains(".zip"), "{refused}");
    }

    #[test]
    fn markdown_is_split_at_headings() {
        let text =
            "Intro line\nsame paragraph.\n\n# Hours\n\nNine to *five*.\n\n- Closed `Sundays`\n\n## Parking\nBehind.";
        let extracted = markdown(text, "notes.md");
        assert_eq!(
            pairs(&extracted),
            [
                ("notes.md", "Intro line same paragraph."),
                ("Hours", "Nine to five.\nClosed Sundays"),
                ("Parking", "Behind."),
            ]
        );
    }

    #[test]
    fn a_csv_with_question_and_answer_columns_is_faqs() {
        let data = b"Category,Q,A\nshop,When do you open?,At nine.\nshop,,skipped\nshop,Parking?,\"Behind, free.\"\n";
        let extracted = csv(data, "faq.csv").unwrap();
        assert_eq!(
            pairs(&extracted),
            [("When do you open?", "At nine."), ("Parking?", "Behind, free.")]
        );
        let other = csv(b"name,price\ntea,2\n", "prices.csv").unwrap();
        assert_eq!(pairs(&other), [("prices.csv", "name, price\ntea, 2")]);
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/../tests/fixtures/kb/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    async fn read(format: Format, name: &str) -> Result<Extracted, PageError> {
        sections(format, &fixture(name), name)
    }

    #[tokio::test]
    async fn real_documents_are_read() {
        let pdf = read(Format::Pdf, "returns.pdf").await.unwrap();
        let text = &pdf.sections[0].answer;
        assert!(text.contains("thirty days for a full refund"), "{pdf:?}");
        let docx = read(Format::Docx, "shipping.docx").await.unwrap();
        assert_eq!(
            pairs(&docx),
            [
                (
                    "Delivery",
                    "We deliver Monday to Saturday between eight and six.\nOrders placed before noon leave the same day."
                ),
                ("Gift wrapping", "Gift wrapping costs two euros & comes with a card."),
            ]
        );
    }

    #[tokio::test]
    async fn empty_documents_and_zip_bombs_fail_cleanly() {
        let reason = |r: Result<Extracted, PageError>| r.map(|e| format!("{e:?}")).unwrap_err().reason;
        assert_eq!(reason(read(Format::Pdf, "scanned.pdf").await), "no_text");
        assert_eq!(reason(read(Format::Docx, "bomb.docx").await), "too_large");
        // lopdf sees the cycle in the page tree: a document without pages, so without text.
        assert_eq!(reason(read(Format::Pdf, "loop-pages.pdf").await), "no_text");
        // `loop-form.pdf` overflows pdf-extract's stack, which kills a process: the black-box tests read it
        // through the binary's child process.
    }

    /// The extractor started as `child_command` starts it, with a stand-in program that prints its arguments
    /// and its environment.
    #[cfg(unix)]
    #[tokio::test]
    async fn the_extractor_gets_no_environment_and_the_title_as_a_name() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("frontdesk-extractor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("show");
        std::fs::write(&program, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n/usr/bin/env\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let output = child_command(&program, Format::Text, "-rf notes.txt", 7)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let shown = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[..5], [SUBCOMMAND, "text", "7", "--", "-rf notes.txt"], "{shown}");
        let environment: Vec<&str> = lines[5..]
            .iter()
            .copied()
            .filter(|line| !["PWD=", "SHLVL=", "_="].iter().any(|shell| line.starts_with(shell)))
            .collect();
        assert_eq!(environment, ["MIMALLOC_ARENA_EAGER_COMMIT=0"], "{shown}");
    }
}
