//! Completion: agents after `session:`, blocks after `do`, variables (also inside `{...}` in
//! strings), property keys, models, keywords, and snippets for the common statements.

use super::document::Document;
use crate::ast::{walk_stmts, Stmt, StmtKind};
use crate::sema::index::WHOLE_FILE;
use crate::span::Span;
use lsp_types::{CompletionItem, CompletionItemKind, InsertTextFormat};

/// The models a `model:` property names.
pub const MODELS: [&str; 3] = ["sonnet", "opus", "haiku"];

/// Agent property keys.
const AGENT_PROPS: [&str; 7] = [
    "model",
    "prompt",
    "persist",
    "skills",
    "permissions",
    "retry",
    "backoff",
];

/// Session property keys.
const SESSION_PROPS: [&str; 7] = [
    "prompt",
    "context",
    "model",
    "retry",
    "backoff",
    "permissions",
    "skills",
];

/// Keywords that start statements.
const KEYWORDS: [&str; 22] = [
    "agent", "session", "resume", "let", "const", "output", "input", "use", "import", "block",
    "do", "parallel", "for", "repeat", "loop", "try", "catch", "finally", "if", "elif", "else",
    "choice",
];

/// Snippets for the common statements.
const SNIPPETS: [(&str, &str); 7] = [
    (
        "agent",
        "agent ${1:name}:\n  model: ${2|sonnet,opus,haiku|}\n  prompt: \"${3}\"\n",
    ),
    ("session", "session: ${1:agent}\n  prompt: \"${2}\"\n"),
    ("let session", "let ${1:name} = session \"${2}\"\n"),
    (
        "parallel",
        "parallel:\n  ${1:a} = session \"${2}\"\n  ${3:b} = session \"${4}\"\n",
    ),
    ("for", "for ${1:item} in ${2:items}:\n  session \"${3}\"\n"),
    (
        "loop until",
        "loop until **${1:done}** (max: ${2:5}):\n  session \"${3}\"\n",
    ),
    ("try", "try:\n  ${1}\ncatch as ${2:err}:\n  ${3}\n"),
];

fn item(label: &str, kind: CompletionItemKind, detail: &str) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: Some(detail.to_string()),
        ..CompletionItem::default()
    }
}

/// The indentation of the line holding `offset`, up to `offset` (a cursor on an empty line
/// is as deep as its column).
fn indent_at(text: &str, offset: usize) -> usize {
    let line_start = text[..offset].rfind('\n').map_or(0, |n| n + 1);
    text[line_start..offset]
        .bytes()
        .take_while(|b| *b == b' ')
        .count()
}

/// Whether `offset` is in the body `region` (its statements, first to last): inside it, or
/// after its last statement with only blank space between, on that line or on a line
/// indented at least as deep as the body (where a statement would belong to it).
fn in_region(text: &str, region: Span, offset: usize) -> bool {
    let start = region.start as usize;
    if offset < start {
        return false;
    }
    let end = (region.end as usize).min(text.len());
    let last = start + text[start..end.max(start)].trim_end().len();
    if offset <= last {
        return true;
    }
    // Blank lines and comments may come between.
    let gap = &text[last..offset.min(text.len())];
    let blank = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    if !gap.lines().all(blank) {
        return false;
    }
    let body_indent = indent_at(text, start);
    !gap.contains('\n') || indent_at(text, offset) >= body_indent
}

/// Whether `offset` is inside an agent's definition (at any depth of block definitions).
fn in_agent(stmts: &[Stmt], offset: usize) -> bool {
    let mut found = false;
    walk_stmts(stmts, &mut |s| match &s.kind {
        StmtKind::Agent(_) => {
            found |= (s.span.start as usize) <= offset && offset <= s.span.end as usize;
        }
        StmtKind::BlockDef(b) => found |= in_agent(&b.body.stmts, offset),
        _ => {}
    });
    found
}

/// The variables that can be named at `offset`, each name once: those whose namespace holds
/// the cursor and that are declared before it (in a block's body, the program's own
/// variables wherever they are declared; in an agent's definition, whose prompt is filled in
/// where a session uses the agent, every variable of the program).
fn variables(doc: &Document, offset: usize) -> Vec<CompletionItem> {
    let a = doc.analysis();
    let text = doc.text.as_str();
    let in_block = a
        .index
        .block_bodies
        .iter()
        .any(|b| in_region(text, *b, offset));
    let anywhere = in_agent(&doc.ast.stmts, offset);
    let mut names: Vec<&str> = a
        .index
        .visible
        .iter()
        .filter(|v| {
            let global = in_block && v.region == WHOLE_FILE;
            anywhere || (global || v.from as usize <= offset) && in_region(text, v.region, offset)
        })
        .filter_map(|v| a.program.vars[v.var].name.as_deref())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|n| item(n, CompletionItemKind::VARIABLE, "variable"))
        .collect()
}

fn agents(doc: &Document) -> Vec<CompletionItem> {
    doc.analysis()
        .program
        .agents
        .values()
        .map(|a| {
            let mut i = item(&a.name, CompletionItemKind::CLASS, "agent");
            i.documentation = Some(lsp_types::Documentation::MarkupContent(
                lsp_types::MarkupContent {
                    kind: lsp_types::MarkupKind::Markdown,
                    value: super::hover::agent_text(a),
                },
            ));
            i
        })
        .collect()
}

fn blocks(doc: &Document) -> Vec<CompletionItem> {
    doc.analysis()
        .program
        .blocks
        .values()
        .map(|b| item(&b.name, CompletionItemKind::FUNCTION, "block"))
        .collect()
}

/// Whether `before` (a line up to the cursor) ends inside a string, in an open `{`.
fn in_interpolation(doc: &Document, offset: usize) -> bool {
    let inside_string = doc.tokens.iter().any(|(s, t, e)| {
        matches!(
            t,
            crate::lexer::Tok::Str(_) | crate::lexer::Tok::Discretion(_)
        ) && *s < offset
            && offset < *e
    });
    if !inside_string {
        // An unterminated string on this line: no token covers it.
        let line_start = doc.text[..offset].rfind('\n').map_or(0, |n| n + 1);
        let before = &doc.text[line_start..offset];
        if before.matches('"').count().is_multiple_of(2) {
            return false;
        }
    }
    let before = &doc.text[..offset];
    matches!((before.rfind('{'), before.rfind('}')), (Some(o), c) if c.is_none_or(|c| c < o))
}

/// The indentation-enclosing line of the cursor's line (the nearest line above with less
/// indentation), trimmed.
fn enclosing_line(doc: &Document, line_start: usize) -> &str {
    let indent = doc.text[line_start..]
        .bytes()
        .take_while(|b| *b == b' ')
        .count();
    doc.text[..line_start]
        .lines()
        .rev()
        .find(|l| {
            let t = l.trim_start();
            !t.is_empty() && !t.starts_with('#') && l.len() - t.len() < indent
        })
        .map_or("", str::trim)
}

/// The completions at `offset`.
pub fn complete(doc: &Document, offset: usize) -> Vec<CompletionItem> {
    let offset = offset.min(doc.text.len());
    if in_interpolation(doc, offset) {
        return variables(doc, offset);
    }
    let line_start = doc.text[..offset].rfind('\n').map_or(0, |n| n + 1);
    let before = doc.text[line_start..offset].trim_start();
    // Just after the last character that cannot be part of a word, however wide it is.
    let word_start = before
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let head = before[..word_start].trim_end();
    let words: Vec<&str> = head.trim_end_matches(':').split_whitespace().collect();
    let after_session = matches!(
        words.as_slice(),
        [.., "session" | "resume"] | [.., "session", _]
    );
    if head.ends_with(':') && after_session {
        return agents(doc);
    }
    if head.ends_with("model:") {
        return MODELS
            .iter()
            .map(|m| item(m, CompletionItemKind::ENUM_MEMBER, "model"))
            .collect();
    }
    if head == "do" || head.ends_with(" do") || head.ends_with("= do") {
        return blocks(doc);
    }
    if head.is_empty() {
        let parent = enclosing_line(doc, line_start);
        if parent.starts_with("agent ") {
            return AGENT_PROPS
                .iter()
                .map(|p| item(p, CompletionItemKind::PROPERTY, "agent property"))
                .collect();
        }
        let mut out: Vec<CompletionItem> = Vec::new();
        if parent.contains("session") && !parent.ends_with(':') || parent.ends_with("session") {
            out.extend(
                SESSION_PROPS
                    .iter()
                    .map(|p| item(p, CompletionItemKind::PROPERTY, "session property")),
            );
        }
        out.extend(
            KEYWORDS
                .iter()
                .map(|k| item(k, CompletionItemKind::KEYWORD, "keyword")),
        );
        out.extend(SNIPPETS.iter().map(|(label, body)| CompletionItem {
            label: (*label).to_string(),
            kind: Some(CompletionItemKind::SNIPPET),
            detail: Some("snippet".into()),
            insert_text: Some((*body).to_string()),
            insert_text_format: Some(InsertTextFormat::SNIPPET),
            ..CompletionItem::default()
        }));
        out.extend(variables(doc, offset));
        return out;
    }
    // In an expression: variables, and the words that can start one.
    let mut out = variables(doc, offset);
    out.extend(
        ["session", "do", "parallel", "true", "false", "null", "not"]
            .iter()
            .map(|k| item(k, CompletionItemKind::KEYWORD, "keyword")),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::{complete, in_region};
    use crate::lsp::document::Document;
    use crate::span::Span;

    // Found by the `lsp` fuzz target: a word after a wide character that cannot be part of
    // one cut that character in two.
    #[test]
    fn completing_after_a_wide_non_word_character_does_not_split_it() {
        for text in [
            "\u{fffa}\u{fffa}E",
            "let x = session \"a\"\n  model:\u{3000}so",
            "\u{1f600}",
        ] {
            let uri: lsp_types::Uri = "file:///fuzz/prog.prose".parse().expect("uri");
            let doc = Document::new(uri, "/fuzz/prog.prose".into(), text.to_string());
            for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
                let _ = complete(&doc, offset);
            }
        }
    }

    #[test]
    fn a_body_reaches_blank_lines_as_deep_as_it() {
        let text = "for x in xs:\n  session \"a\"\n  # done\n\n  \nsession \"b\"\n";
        let start = text.find("session").expect("body");
        let end = text.find("  # done").expect("end");
        let body = Span::new(start, end);
        let at = |needle: &str, skip: usize| text.find(needle).expect("needle") + skip;
        assert!(in_region(text, body, at("\"a\"", 1)));
        // The end of its last line, and a blank line indented like it after a comment.
        assert!(in_region(text, body, at("\"a\"", 3)));
        assert!(in_region(text, body, at("\n  \n", 3)));
        // A blank line less indented, and the statement after the loop.
        assert!(!in_region(text, body, at("\n\n", 1)));
        assert!(!in_region(text, body, at("\"b\"", 1)));
        // Before the body.
        assert!(!in_region(text, body, 2));
    }
}
