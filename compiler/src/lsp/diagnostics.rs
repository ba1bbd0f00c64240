//! The compiler's diagnostics in the editor's terms: the same codes, ranges, related
//! locations and help as `prosec check`, with a link to each code's documentation.

use super::document::{path_uri, Document, Lines};
use crate::diagnostics::{Diagnostic, Severity};
use lsp_types as lsp;

/// The diagnostics of the document's own file.
pub fn of(doc: &Document, docs_url: Option<&str>) -> Vec<lsp::Diagnostic> {
    let file = doc.file();
    doc.comp
        .diagnostics
        .iter()
        .filter(|d| d.file == file)
        .map(|d| convert(doc, d, docs_url))
        .collect()
}

fn convert(doc: &Document, d: &Diagnostic, docs_url: Option<&str>) -> lsp::Diagnostic {
    let related: Vec<lsp::DiagnosticRelatedInformation> = d
        .secondary
        .iter()
        .filter_map(|l| {
            let (uri, range) = if l.file == d.file {
                (doc.uri.clone(), doc.range(l.span))
            } else {
                let src = doc.comp.sources.get(l.file);
                let module = doc.comp.modules.iter().find(|m| m.file == l.file)?;
                let lines = Lines::new(&src.text);
                (path_uri(&module.path)?, lines.range(&src.text, l.span))
            };
            Some(lsp::DiagnosticRelatedInformation {
                location: lsp::Location::new(uri, range),
                message: l.message.clone(),
            })
        })
        .collect();
    let mut message = d.message.clone();
    if let Some(h) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(h);
    }
    lsp::Diagnostic {
        range: doc.range(d.span),
        severity: Some(match d.severity {
            Severity::Error => lsp::DiagnosticSeverity::ERROR,
            Severity::Warning => lsp::DiagnosticSeverity::WARNING,
        }),
        code: Some(lsp::NumberOrString::String(d.code.as_str().to_string())),
        code_description: docs_url.and_then(|base| {
            format!("{base}#{}", d.code.as_str().to_ascii_lowercase())
                .parse()
                .ok()
                .map(|href| lsp::CodeDescription { href })
        }),
        source: Some("prosec".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    }
}
