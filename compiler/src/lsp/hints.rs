//! Inlay hints: each loop's and fan-out's session bounds at the end of its header line.

use super::document::Document;
use super::hover::{construct_bounds, sessions_text};
use lsp_types as lsp;

/// The hints whose header line lies in `range`.
pub fn inlay_hints(doc: &Document, range: lsp::Range) -> Vec<lsp::InlayHint> {
    construct_bounds(doc)
        .into_iter()
        .filter_map(|c| {
            let start = c.span.start as usize;
            let line_end = doc.text[start..].find('\n').map_or(doc.text.len(), |n| start + n);
            let line_end = doc.text[..line_end].trim_end().len();
            let pos = doc.lines.position(&doc.text, line_end);
            (pos.line >= range.start.line && pos.line <= range.end.line).then(|| lsp::InlayHint {
                position: pos,
                label: lsp::InlayHintLabel::String(format!(
                    "{} session(s)",
                    sessions_text(&c.sessions)
                )),
                kind: None,
                text_edits: None,
                tooltip: Some(lsp::InlayHintTooltip::String(
                    "static bounds on the sessions this construct runs, as `prosec cost` counts them".into(),
                )),
                padding_left: Some(true),
                padding_right: None,
                data: None,
            })
        })
        .collect()
}
