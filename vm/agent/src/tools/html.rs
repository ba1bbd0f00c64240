//! HTML to text for `web_fetch`, bounded in depth and time.
//!
//! The HTML parser and layout (html2text, on html5ever) take time quadratic in how deeply
//! elements nest: a page of 100,000 nested `<div>`s kept a CPU busy for minutes after the
//! fetch had timed out, and the process could not exit meanwhile. So:
//!
//! - a linear scan estimates the nesting first (`nesting_depth`); a page nesting deeper
//!   than [`MAX_DEPTH`] is not laid out at all: its text is taken out between the tags
//!   (`strip_tags`, linear), and the reader is told;
//! - otherwise the page is parsed from a reader that fails once the deadline has passed or
//!   the call was cancelled, so parsing stops within one chunk of input;
//! - elements that still nest deeper than [`MAX_DEPTH`] after parsing (the estimate is not
//!   the parser) are flattened to their text before layout, which is then bounded by the
//!   depth and the body's size cap.
//!
//! [`convert`] runs all of it on a thread of its own: the call returns at its deadline or
//! when dropped, and an unfinished conversion never holds up the process's exit.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use html2text::{Comment, Document, Element, Handle, RcDom};

/// Elements nested deeper than this are not laid out.
pub const MAX_DEPTH: usize = 256;

/// What [`convert`] made of a page.
#[derive(Debug, PartialEq, Eq)]
pub struct Converted {
    /// The text.
    pub text: String,
    /// A note for the reader when the page was simplified.
    pub note: Option<String>,
}

/// Converts `html` to text laid out to `width` columns, giving up at `deadline`. Runs on a
/// thread of its own, which is told to stop (and stops within one chunk of parsing, or once
/// its bounded layout ends) if this future is dropped or the deadline passes.
pub async fn convert(html: Vec<u8>, width: usize, deadline: Instant) -> Result<Converted, String> {
    let cancel = Arc::new(AtomicBool::new(false));
    let (send, receive) = tokio::sync::oneshot::channel();
    let flag = cancel.clone();
    std::thread::Builder::new()
        .name("web_fetch-html".into())
        .spawn(move || {
            let _ = send.send(to_text(&html, width, deadline, &flag));
        })
        .map_err(|e| format!("could not start the HTML conversion: {e}"))?;
    /// Tells the conversion to stop when the call ends, however it ends.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop = StopOnDrop(cancel);
    let wait = tokio::time::Instant::from_std(deadline);
    match tokio::time::timeout_at(wait, receive).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("the HTML conversion failed unexpectedly".into()),
        Err(_) => Err(stopped()),
    }
}

fn stopped() -> String {
    "converting the HTML to text took too long and was stopped".into()
}

/// [`convert`]'s work, on the calling thread.
fn to_text(
    html: &[u8],
    width: usize,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<Converted, String> {
    let depth = nesting_depth(html);
    if depth > MAX_DEPTH {
        return Ok(Converted {
            text: strip_tags(html),
            note: Some(format!(
                "[the page nests elements about {depth} deep, more than {MAX_DEPTH}: its text \
                 is shown without layout]"
            )),
        });
    }
    let config = html2text::config::plain();
    let reader = Bounded {
        inner: html,
        deadline,
        cancel,
    };
    let dom = config.parse_html(reader).map_err(|e| match e {
        html2text::Error::IoError(e) if e.kind() == io::ErrorKind::TimedOut => stopped(),
        e => format!("the HTML could not be converted to text: {e}"),
    })?;
    let flattened = flatten_below(&dom, MAX_DEPTH);
    let tree = config
        .dom_to_render_tree(&dom)
        .map_err(|e| format!("the HTML could not be converted to text: {e}"))?;
    let text = config
        .render_to_string(tree, width)
        .map_err(|e| format!("the HTML could not be converted to text: {e}"))?;
    Ok(Converted {
        text,
        note: (flattened > 0)
            .then(|| format!("[elements nested deeper than {MAX_DEPTH} are shown as plain text]")),
    })
}

/// Reads `inner`, failing with `TimedOut` once `deadline` has passed or `cancel` is set.
struct Bounded<'a> {
    inner: &'a [u8],
    deadline: Instant,
    cancel: &'a AtomicBool,
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "stopped"));
        }
        // Small reads, so that the checks come often.
        let n = buf.len().min(self.inner.len()).min(16 * 1024);
        buf[..n].copy_from_slice(&self.inner[..n]);
        self.inner = &self.inner[n..];
        Ok(n)
    }
}

/// Elements whose content is text up to their end tag.
const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "textarea",
    "title",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
];

/// Elements without content or end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements a start tag of the same name closes.
const SELF_CLOSING_SIBLINGS: &[&str] = &["p", "li", "dt", "dd", "option", "tr", "td", "th"];

/// One tag of a linear scan.
enum Tag {
    Start(String),
    End(String),
}

/// Scans `html` tag by tag (comments and declarations skipped, raw text elements jumped
/// over), calling `on` for each tag and `text` for the text between.
fn scan(html: &[u8], mut on: impl FnMut(Tag), mut text: impl FnMut(&[u8])) {
    let mut i = 0;
    let len = html.len();
    let find = |from: usize, needle: &[u8]| {
        memchr::memmem::find(&html[from.min(len)..], needle).map(|p| from + p)
    };
    while i < len {
        let Some(lt) = memchr::memchr(b'<', &html[i..]).map(|p| i + p) else {
            text(&html[i..]);
            break;
        };
        text(&html[i..lt]);
        let rest = &html[lt + 1..];
        if rest.starts_with(b"!--") {
            i = find(lt + 4, b"-->").map_or(len, |p| p + 3);
            continue;
        }
        let (end, name_at) = match rest.first() {
            Some(b'/') => (true, lt + 2),
            Some(c) if c.is_ascii_alphabetic() => (false, lt + 1),
            Some(b'!' | b'?') => {
                i = find(lt + 1, b">").map_or(len, |p| p + 1);
                continue;
            }
            _ => {
                text(b"<");
                i = lt + 1;
                continue;
            }
        };
        let name_end = html[name_at..]
            .iter()
            .position(|c| !c.is_ascii_alphanumeric() && *c != b'-')
            .map_or(len, |p| name_at + p);
        let name = String::from_utf8_lossy(&html[name_at..name_end]).to_ascii_lowercase();
        // The tag's end: the first `>` outside a quoted attribute value.
        let mut j = name_end;
        let mut quote = None;
        while j < len {
            match (quote, html[j]) {
                (None, b'>') => break,
                (None, q @ (b'"' | b'\'')) => quote = Some(q),
                (Some(q), c) if c == q => quote = None,
                _ => {}
            }
            j += 1;
        }
        i = (j + 1).min(len);
        if end {
            on(Tag::End(name));
        } else {
            let raw = RAW_TEXT.contains(&name.as_str());
            on(Tag::Start(name.clone()));
            if raw {
                let close = format!("</{name}");
                let stop = memchr::memmem::find_iter(&html[i..], close.as_bytes())
                    .map(|p| i + p)
                    .next()
                    .unwrap_or(len);
                i = find(stop, b">").map_or(len, |p| p + 1);
                on(Tag::End(name));
            }
        }
    }
}

/// How deeply `html`'s elements nest, as a linear scan sees it: a start tag opens an element
/// (unless void), an end tag closes the most recent open element of its name and those opened
/// after it, and a `p`, `li`, `dt`, `dd`, `option`, `tr`, `td` or `th` closes an open one of
/// the same name directly before it.
fn nesting_depth(html: &[u8]) -> usize {
    let mut open: Vec<String> = Vec::new();
    let mut deepest = 0;
    scan(
        html,
        |tag| match tag {
            Tag::Start(name) => {
                if VOID.contains(&name.as_str()) {
                    return;
                }
                if SELF_CLOSING_SIBLINGS.contains(&name.as_str()) && open.last() == Some(&name) {
                    open.pop();
                }
                open.push(name);
                deepest = deepest.max(open.len());
            }
            Tag::End(name) => {
                if let Some(at) = open.iter().rposition(|n| *n == name) {
                    open.truncate(at);
                }
            }
        },
        |_| {},
    );
    deepest
}

/// The text between `html`'s tags, the content of scripts and styles left out, a few
/// entities decoded, runs of white space collapsed, and a line break at each block-level tag.
fn strip_tags(html: &[u8]) -> String {
    const BLOCKS: &[&str] = &[
        "p",
        "div",
        "br",
        "li",
        "tr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "ul",
        "ol",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "pre",
        "blockquote",
    ];
    struct State {
        out: String,
        /// Inside a script, style or the like.
        skipping: bool,
        /// White space seen since the last word.
        space: bool,
    }
    let state = std::cell::RefCell::new(State {
        out: String::new(),
        skipping: false,
        space: false,
    });
    scan(
        html,
        |tag| {
            let s = &mut *state.borrow_mut();
            let (name, start) = match &tag {
                Tag::Start(n) => (n.as_str(), true),
                Tag::End(n) => (n.as_str(), false),
            };
            if matches!(name, "script" | "style" | "noscript" | "template" | "head") {
                s.skipping = start;
            }
            if BLOCKS.contains(&name) && !s.out.is_empty() && !s.out.ends_with('\n') {
                s.out.push('\n');
            }
        },
        |text| {
            let s = &mut *state.borrow_mut();
            if s.skipping {
                return;
            }
            let text = decode_entities(&String::from_utf8_lossy(text));
            if text.starts_with(char::is_whitespace) {
                s.space = true;
            }
            for word in text.split_whitespace() {
                if s.space && !s.out.is_empty() && !s.out.ends_with('\n') {
                    s.out.push(' ');
                }
                s.out.push_str(word);
                s.space = true;
            }
            s.space = text.ends_with(char::is_whitespace);
        },
    );
    state.into_inner().out.trim().to_string()
}

/// The text with the common named entities and numeric character references decoded.
fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest[..rest.len().min(12)].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Replaces the content of every element at depth `max` by the text nodes beneath it (left
/// out: scripts, styles, comments); returns how many elements were flattened. Iterative:
/// the tree may be deep.
fn flatten_below(dom: &RcDom, max: usize) -> usize {
    let mut flattened = 0;
    let mut stack: Vec<(Handle, usize)> = vec![(dom.document.clone(), 0)];
    while let Some((node, depth)) = stack.pop() {
        if depth < max {
            for child in node.children.borrow().iter() {
                stack.push((child.clone(), depth + 1));
            }
            continue;
        }
        let mut below: Vec<Handle> = std::mem::take(&mut *node.children.borrow_mut());
        if below.is_empty() {
            continue;
        }
        flattened += 1;
        below.reverse();
        let mut texts = Vec::new();
        while let Some(n) = below.pop() {
            match &n.data {
                Element { name, .. } => {
                    if matches!(&*name.local, "script" | "style" | "template" | "head") {
                        continue;
                    }
                    let mut children = std::mem::take(&mut *n.children.borrow_mut());
                    children.reverse();
                    below.extend(children);
                }
                Comment { .. } | Document => {}
                // Text (doctypes and processing instructions never sit this deep).
                _ => texts.push(n.clone()),
            }
        }
        *node.children.borrow_mut() = texts;
    }
    flattened
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn depth_is_estimated_in_one_pass() {
        assert_eq!(
            nesting_depth(b"<html><body><p>a<p>b<br><img src=x></body></html>"),
            3
        );
        assert_eq!(nesting_depth(b"<ul><li>a<li>b<li>c</ul>"), 2);
        assert_eq!(
            nesting_depth(b"<div title='a > b'><script>if (a < b) { '<div><div>' }</script></div>"),
            2
        );
        assert_eq!(nesting_depth(b"<!-- <div><div><div> --><div></div>"), 1);
        let deep = format!("{}x{}", "<div>".repeat(5000), "</div>".repeat(5000));
        assert_eq!(nesting_depth(deep.as_bytes()), 5000);
        assert_eq!(nesting_depth(b"a < b and c<d"), 1);
    }

    #[test]
    fn a_page_too_deep_for_layout_gives_its_text_at_once() {
        let html = format!(
            "<html><head><style>p {{}}</style></head><body>{}deep &amp; inside{}<p>after</p></body></html>",
            "<div><span>".repeat(100_000),
            "</span></div>".repeat(100_000)
        );
        let c = to_text(html.as_bytes(), 100, later(), &AtomicBool::new(false)).unwrap();
        assert_eq!(c.text, "deep & inside\nafter");
        assert!(c.note.unwrap().contains("more than 256"));
    }

    #[test]
    fn ordinary_pages_are_laid_out() {
        let c = to_text(
            b"<h1>Notes</h1><p>Version <b>2.0</b> is out.</p><ul><li>faster</li></ul>",
            100,
            later(),
            &AtomicBool::new(false),
        )
        .unwrap();
        assert!(
            c.text.contains("Notes") && c.text.contains("* faster"),
            "{}",
            c.text
        );
        assert_eq!(c.note, None);
    }

    /// The depth of the deepest node under `node`, walked without recursion.
    fn depth(node: &Handle) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(node.clone(), 0)];
        while let Some((n, d)) = stack.pop() {
            deepest = deepest.max(d);
            stack.extend(n.children.borrow().iter().map(|c| (c.clone(), d + 1)));
        }
        deepest
    }

    #[test]
    fn elements_deeper_than_the_limit_after_parsing_are_flattened() {
        // What the parser builds can nest deeper than the scan estimates; the tree is cut
        // down to the limit before layout, keeping the text.
        let html = format!(
            "{}deep <script>no</script>text{}",
            "<div><i>".repeat(300),
            "</i></div>".repeat(300)
        );
        let config = html2text::config::plain();
        let dom = config.parse_html(html.as_bytes()).unwrap();
        assert!(depth(&dom.document) > 600);
        assert_eq!(flatten_below(&dom, MAX_DEPTH), 1);
        assert_eq!(depth(&dom.document), MAX_DEPTH + 1);
        let tree = config.dom_to_render_tree(&dom).unwrap();
        let text = config.render_to_string(tree, 2000).unwrap();
        assert_eq!(text.trim(), "deep text");
    }

    #[tokio::test]
    async fn the_converting_thread_is_left_at_the_deadline() {
        let html = "<p>x</p>".repeat(200_000).into_bytes();
        assert_eq!(
            convert(html, 100, Instant::now()).await.unwrap_err(),
            stopped()
        );
        let c = convert(b"<p>fine</p>".to_vec(), 100, later())
            .await
            .unwrap();
        assert_eq!(c.text.trim(), "fine");
    }

    #[test]
    fn a_cancelled_or_late_conversion_stops() {
        let html = "<p>x</p>".repeat(100_000);
        let cancelled = AtomicBool::new(true);
        assert_eq!(
            to_text(html.as_bytes(), 100, later(), &cancelled).unwrap_err(),
            stopped()
        );
        let past = Instant::now();
        assert_eq!(
            to_text(html.as_bytes(), 100, past, &AtomicBool::new(false)).unwrap_err(),
            stopped()
        );
    }
}
