//! Diagnostics as JSON (`--format json`).

use super::{Diagnostic, Severity};
use crate::source::SourceMap;
use serde::Serialize;

/// The JSON shape of one diagnostic (`--format json`).
#[derive(Debug, Serialize)]
pub struct JsonDiagnostic<'a> {
    /// The stable code, e.g. `"E007"`.
    pub code: &'a str,
    /// `"error"` or `"warning"`.
    pub severity: Severity,
    /// The headline.
    pub message: &'a str,
    /// Path of the file.
    pub file: &'a str,
    /// 1-based line of the primary span's start.
    pub line: u32,
    /// 1-based column (characters) of the primary span's start.
    pub column: u32,
    /// 1-based line of the primary span's end.
    pub end_line: u32,
    /// 1-based column of the primary span's end.
    pub end_column: u32,
    /// Byte offsets of the primary span.
    pub span: [u32; 2],
    /// Text beside the underline.
    pub label: &'a str,
    /// Help line, if any.
    pub help: Option<&'a str>,
    /// Secondary locations.
    pub related: Vec<JsonLabel<'a>>,
}

/// A secondary location in JSON output.
#[derive(Debug, Serialize)]
pub struct JsonLabel<'a> {
    /// Path of the file.
    pub file: &'a str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// Text beside the underline.
    pub message: &'a str,
}

/// Converts diagnostics to their JSON shape.
pub fn render_json<'a>(sources: &'a SourceMap, diags: &'a [Diagnostic]) -> Vec<JsonDiagnostic<'a>> {
    diags
        .iter()
        .map(|d| {
            let file = sources.get(d.file);
            let start = file.line_col(d.span.start as usize);
            let end = file.line_col(d.span.end as usize);
            JsonDiagnostic {
                code: d.code.as_str(),
                severity: d.severity,
                message: &d.message,
                file: &file.path,
                line: start.line,
                column: start.column,
                end_line: end.line,
                end_column: end.column,
                span: [d.span.start, d.span.end],
                label: &d.label,
                help: d.help.as_deref(),
                related: d
                    .secondary
                    .iter()
                    .map(|l| {
                        let f = sources.get(l.file);
                        let p = f.line_col(l.span.start as usize);
                        JsonLabel {
                            file: &f.path,
                            line: p.line,
                            column: p.column,
                            message: &l.message,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}
