//! Markdown pages as the checks read them, parsed by pulldown-cmark with GitHub's tables:
//! headings with the anchors GitHub gives them, links, tables (each with the headings it sits
//! under) and fenced code blocks. A cell's or heading's text keeps inline code in backticks,
//! so a check can tell `--flag` from prose.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository's root: the directory above this crate's.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// A heading: its text as written (inline code in backticks) and its level.
#[derive(Clone, Debug)]
pub struct Heading {
    /// 1 for `#`, 2 for `##`, ...
    pub level: usize,
    /// The text, inline code kept in backticks.
    pub text: String,
}

/// A link or image, with the headings it sits under.
#[derive(Clone, Debug)]
pub struct Link {
    /// Where it points, as written.
    pub dest: String,
    /// Its line in the page (from 1).
    pub line: usize,
    /// The headings above it, outermost first.
    pub section: Vec<Heading>,
}

/// A table: its header cells and rows, with the headings it sits under.
#[derive(Clone, Debug)]
pub struct Table {
    /// Its line in the page (from 1).
    pub line: usize,
    /// The headings above it, outermost first.
    pub section: Vec<Heading>,
    /// The header row's cells.
    pub header: Vec<String>,
    /// The body rows' cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Whether this table sits under a heading whose text is `text`.
    pub fn under(&self, text: &str) -> bool {
        self.section.iter().any(|h| h.text == text)
    }
}

/// A fenced code block.
#[derive(Clone, Debug)]
pub struct Block {
    /// The fence's info string (`sh`, `prose warn=W108`, ...).
    pub info: String,
    /// Its text.
    pub code: String,
    /// The fence's line (from 1).
    pub line: usize,
}

/// One page, read.
#[derive(Clone, Debug)]
pub struct Page {
    /// The page's path relative to the repository's root (`docs/cli.md`).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// Its headings, in order.
    pub headings: Vec<Heading>,
    /// The anchors a link may name: GitHub's slugs of the headings, and `id`/`name`
    /// attributes of HTML in the page.
    pub anchors: BTreeSet<String>,
    /// Its links and images.
    pub links: Vec<Link>,
    /// Its tables.
    pub tables: Vec<Table>,
    /// Its fenced code blocks.
    pub blocks: Vec<Block>,
}

/// The anchor GitHub gives a heading whose text (inline code without its backticks) is
/// `text`: lower case, every character but letters, digits, spaces, `-` and `_` dropped,
/// spaces made hyphens. Repeats are told apart by [`Slugs`].
pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A page's anchors as GitHub makes them: a heading whose slug was taken already gets `-1`,
/// then `-2`, ...
#[derive(Default)]
pub struct Slugs(BTreeMap<String, usize>);

impl Slugs {
    /// The anchor of the next heading whose text is `text`.
    pub fn next(&mut self, text: &str) -> String {
        let base = slug(text);
        let n = self.0.entry(base.clone()).or_insert(0);
        let anchor = if *n == 0 { base } else { format!("{base}-{n}") };
        *n += 1;
        anchor
    }
}

/// The text without inline code's backticks.
pub fn plain(text: &str) -> String {
    text.replace('`', "")
}

/// The values of `id="..."` and `name="..."` attributes in a piece of HTML.
fn html_ids(html: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for attr in ["id=\"", "name=\""] {
        let mut rest = html;
        while let Some(at) = rest.find(attr) {
            let after = &rest[at + attr.len()..];
            if let Some(end) = after.find('"') {
                ids.push(after[..end].to_string());
            }
            rest = after;
        }
    }
    ids
}

impl Page {
    /// Reads and parses the page at `path` (relative to the repository's root).
    pub fn load(path: &str) -> Page {
        let full = root().join(path);
        let text = std::fs::read_to_string(&full)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()));
        Page::parse(PathBuf::from(path), text)
    }

    /// Parses `text` as the page at `path`.
    pub fn parse(path: PathBuf, text: String) -> Page {
        let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
        let mut page = Page {
            path,
            text: text.clone(),
            headings: Vec::new(),
            anchors: BTreeSet::new(),
            links: Vec::new(),
            tables: Vec::new(),
            blocks: Vec::new(),
        };
        let mut slugs = Slugs::default();
        let mut section: Vec<Heading> = Vec::new();
        // What is being gathered: a heading's text, a table's cells, a code block's text.
        let mut heading: Option<(usize, String)> = None;
        let mut table: Option<Table> = None;
        let mut row: Vec<String> = Vec::new();
        let mut cell: Option<String> = None;
        let mut block: Option<Block> = None;
        let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
        for (event, range) in Parser::new_ext(&text, options).into_offset_iter() {
            // Text of inline elements goes to whatever is being gathered.
            let mut gather = |s: &str| {
                if let Some(c) = cell.as_mut() {
                    c.push_str(s);
                } else if let Some((_, h)) = heading.as_mut() {
                    h.push_str(s);
                }
            };
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    heading = Some((level as usize, String::new()));
                }
                Event::End(TagEnd::Heading(_)) => {
                    let (level, text) = heading.take().expect("a heading ends after it starts");
                    let text = text.trim().to_string();
                    page.anchors.insert(slugs.next(&plain(&text)));
                    section.retain(|h| h.level < level);
                    let h = Heading { level, text };
                    section.push(h.clone());
                    page.headings.push(h);
                }
                Event::Start(Tag::Table(_)) => {
                    table = Some(Table {
                        line: line_of(range.start),
                        section: section.clone(),
                        header: Vec::new(),
                        rows: Vec::new(),
                    });
                }
                Event::End(TagEnd::Table) => {
                    page.tables.extend(table.take());
                }
                Event::Start(Tag::TableCell) => cell = Some(String::new()),
                Event::End(TagEnd::TableCell) => {
                    row.push(cell.take().unwrap_or_default().trim().to_string());
                }
                Event::End(TagEnd::TableHead) => {
                    if let Some(t) = table.as_mut() {
                        t.header = std::mem::take(&mut row);
                    }
                }
                Event::End(TagEnd::TableRow) => {
                    if let Some(t) = table.as_mut() {
                        t.rows.push(std::mem::take(&mut row));
                    }
                }
                Event::Start(Tag::CodeBlock(kind)) => {
                    let info = match kind {
                        CodeBlockKind::Fenced(info) => info.to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    block = Some(Block {
                        info,
                        code: String::new(),
                        line: line_of(range.start),
                    });
                }
                Event::End(TagEnd::CodeBlock) => page.blocks.extend(block.take()),
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                    page.links.push(Link {
                        dest: dest_url.to_string(),
                        line: line_of(range.start),
                        section: section.clone(),
                    });
                }
                Event::Text(s) => match block.as_mut() {
                    Some(b) => b.code.push_str(&s),
                    None => gather(&s),
                },
                Event::Code(s) => gather(&format!("`{s}`")),
                Event::SoftBreak | Event::HardBreak => gather(" "),
                Event::Html(s) | Event::InlineHtml(s) => page.anchors.extend(html_ids(&s)),
                _ => {}
            }
        }
        page
    }

    /// The tables whose header starts with these cells.
    pub fn tables_headed<'a>(&'a self, first: &'a [&str]) -> impl Iterator<Item = &'a Table> {
        self.tables.iter().filter(move |t| {
            t.header.len() >= first.len() && t.header.iter().zip(first).all(|(h, f)| h == f)
        })
    }
}

/// The user's pages: README.md and every page under docs/.
pub fn user_pages() -> Vec<Page> {
    let mut paths = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths.iter().map(|p| Page::load(p)).collect()
}

/// The words of `text` that are flags: `--name` (letters, digits and hyphens after two
/// hyphens that start a word), without the hyphens.
pub fn flags_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut flags = Vec::new();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let word_start = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric());
        let name: String = text[start + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if word_start && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            flags.push(name.trim_end_matches('-').to_string());
        }
        i = start + 2 + name.len();
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_githubs() {
        assert_eq!(
            slug("loop, loop until, loop while"),
            "loop-loop-until-loop-while"
        );
        assert_eq!(slug("1. Build"), "1-build");
        assert_eq!(
            slug("What a session's model sees"),
            "what-a-sessions-model-sees"
        );
        assert_eq!(slug("Settings: prose.toml"), "settings-prosetoml");
        assert_eq!(
            slug("E149: imported skill not found"),
            "e149-imported-skill-not-found"
        );
        let mut slugs = Slugs::default();
        assert_eq!(slugs.next("Limits"), "limits");
        assert_eq!(slugs.next("Limits"), "limits-1");
        assert_eq!(slugs.next("Limits"), "limits-2");
    }

    #[test]
    fn a_page_is_read_into_headings_tables_links_and_blocks() {
        let page = Page::parse(
            PathBuf::from("x.md"),
            "# Top\n\n## `prosec check`\n\n| option | default |\n|---|---|\n| `--format text\\|json` | `text` |\n\n\
             See [there](other.md#a-b) and ![img](p.png).\n\n```toml x\nk = 1\n```\n\n<a id=\"e001\"></a>\n"
                .to_string(),
        );
        assert_eq!(page.headings.len(), 2);
        assert!(page.anchors.contains("prosec-check"), "{:?}", page.anchors);
        assert!(page.anchors.contains("e001"));
        let t = &page.tables[0];
        assert!(t.under("`prosec check`"));
        assert_eq!(t.header, ["option", "default"]);
        assert_eq!(t.rows, [["`--format text|json`", "`text`"]]);
        let dests: Vec<&str> = page.links.iter().map(|l| l.dest.as_str()).collect();
        assert_eq!(dests, ["other.md#a-b", "p.png"]);
        assert_eq!(page.blocks[0].info, "toml x");
        assert_eq!(page.blocks[0].code, "k = 1\n");
        assert_eq!(
            flags_in("`-o FILE`, `--output FILE`; `--max-value-size` not a--b"),
            ["output", "max-value-size"]
        );
    }
}
