//! Code actions for the diagnostics in a range: the did-you-mean fix, `# prose: allow(CODE)`
//! for a lint, and declaring a missing agent.

use super::document::Document;
use crate::diagnostics::Code;
use lsp_types as lsp;
use std::collections::HashMap;

// lsp-types keys edits by `Uri`, whose parsed parts are cached inside it: never mutated
// through a key here.
#[allow(clippy::mutable_key_type)]
fn edit(doc: &Document, edits: Vec<lsp::TextEdit>) -> lsp::WorkspaceEdit {
    let mut changes = HashMap::new();
    changes.insert(doc.uri.clone(), edits);
    lsp::WorkspaceEdit::new(changes)
}

fn action(
    title: String,
    diag: &lsp::Diagnostic,
    we: lsp::WorkspaceEdit,
    preferred: bool,
) -> lsp::CodeActionOrCommand {
    lsp::CodeActionOrCommand::CodeAction(lsp::CodeAction {
        title,
        kind: Some(lsp::CodeActionKind::QUICKFIX),
        diagnostics: Some(vec![diag.clone()]),
        edit: Some(we),
        is_preferred: Some(preferred),
        ..lsp::CodeAction::default()
    })
}

/// The suggestion of a `did you mean `x`?` help line.
pub fn did_you_mean(message: &str) -> Option<&str> {
    let rest = &message[message.find("did you mean `")? + "did you mean `".len()..];
    Some(&rest[..rest.find('`')?])
}

/// The actions for the diagnostics the client sends back (those under the cursor).
pub fn code_actions(doc: &Document, diags: &[lsp::Diagnostic]) -> Vec<lsp::CodeActionOrCommand> {
    let mut out = Vec::new();
    for d in diags {
        let Some(lsp::NumberOrString::String(code)) = &d.code else {
            continue;
        };
        let Some(code) = Code::parse(code) else {
            continue;
        };
        if let Some(s) = did_you_mean(&d.message) {
            let we = edit(doc, vec![lsp::TextEdit::new(d.range, s.to_string())]);
            out.push(action(format!("Change to `{s}`"), d, we, true));
        }
        if code.is_lint() {
            let line = d.range.start.line;
            let start = doc.offset(lsp::Position::new(line, 0));
            let indent: String = doc.text[start..]
                .chars()
                .take_while(|c| *c == ' ')
                .collect();
            let text = format!("{indent}# prose: allow({code})\n");
            let we = edit(
                doc,
                vec![lsp::TextEdit::new(
                    lsp::Range::new(lsp::Position::new(line, 0), lsp::Position::new(line, 0)),
                    text,
                )],
            );
            out.push(action(format!("Allow {code} here"), d, we, false));
        }
        if code == Code::E007 {
            let start = doc.offset(d.range.start);
            let end = doc.offset(d.range.end);
            let name = &doc.text[start..end];
            // Before the first statement that is not an import or an input.
            let at = doc
                .ast
                .stmts
                .iter()
                .find(|s| {
                    !matches!(
                        s.kind,
                        crate::ast::StmtKind::Use { .. }
                            | crate::ast::StmtKind::Import { .. }
                            | crate::ast::StmtKind::Input { .. }
                    )
                })
                .map_or(doc.text.len(), |s| s.span.start as usize);
            let pos = doc.lines.position(&doc.text, at);
            let line_start = lsp::Position::new(pos.line, 0);
            let text = format!("agent {name}:\n  model: sonnet\n  prompt: \"\"\n\n");
            let we = edit(
                doc,
                vec![lsp::TextEdit::new(
                    lsp::Range::new(line_start, line_start),
                    text,
                )],
            );
            out.push(action(format!("Declare agent `{name}`"), d, we, false));
        }
    }
    out
}
