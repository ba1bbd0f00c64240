//! Diagnostics: one value per problem found, with a stable code, a labelled span and an
//! optional help line. Detection builds these values; [`render_text`] and [`render_json`]
//! turn them into rustc-style text or JSON.

pub mod explain;
mod json;
mod text;

pub use bytecode_spec::codes::{Code, CodeKind, Severity};
pub use bytecode_spec::suggest;
pub use bytecode_spec::suggest::closest;
pub use json::{render_json, JsonDiagnostic, JsonLabel};
pub use termcolor;
pub use text::render_text;

use crate::source::FileId;
use crate::span::Span;

/// A secondary location with a note, shown under the primary one.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// File the label points into.
    pub file: FileId,
    /// Bytes underlined.
    pub span: Span,
    /// Text printed beside the underline.
    pub message: String,
}

/// One problem in a source file.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// Error or warning (after `--strict` is applied).
    pub severity: Severity,
    /// The headline.
    pub message: String,
    /// File of the primary location.
    pub file: FileId,
    /// The primary location.
    pub span: Span,
    /// Text beside the primary underline.
    pub label: String,
    /// Further locations.
    pub secondary: Vec<Label>,
    /// A suggestion for fixing it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's default severity.
    pub fn new(code: Code, file: FileId, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.default_severity(),
            message: message.into(),
            file,
            span,
            label: String::new(),
            secondary: Vec::new(),
            help: None,
        }
    }

    /// Sets the text beside the primary underline.
    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    /// Adds a help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Adds a secondary location.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            file: self.file,
            span,
            message: message.into(),
        });
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by file and position, keeping insertion order for ties.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by_key(|d| (d.file, d.span.start, d.span.end));
}
