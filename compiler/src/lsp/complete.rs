//! Completion: agents after `session:`, blocks after `do`, variables (also inside `{...}` in
//! strings), property keys, models, keywords, and snippets for the common statements.

use super::document::Document;
use crate::sema::index::Target;
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

/// The variables declared before `offset`, each name once.
fn variables(doc: &Document, offset: usize) -> Vec<CompletionItem> {
    let a = doc.analysis();
    let mut names: Vec<&str> = a
        .index
        .occurrences
        .iter()
        .filter(|o| o.decl && (o.span.end as usize) <= offset)
        .filter_map(|o| match o.target {
            Target::Var(v) => a.program.vars[v].name.as_deref(),
            _ => None,
        })
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
    let word_start = before
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .map_or(0, |i| i + 1);
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
