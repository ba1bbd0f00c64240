//! The shape of a document: symbols for the outline, folding ranges, and semantic tokens.

use super::document::Document;
use crate::ast::{Stmt, StmtKind, Target as BindTarget};
use crate::lexer::Tok;
use crate::sema::index::Target;
use lsp_types as lsp;

#[allow(deprecated)]
fn symbol(
    doc: &Document,
    name: &str,
    kind: lsp::SymbolKind,
    full: crate::span::Span,
    sel: crate::span::Span,
    children: Vec<lsp::DocumentSymbol>,
) -> lsp::DocumentSymbol {
    lsp::DocumentSymbol {
        name: name.to_string(),
        detail: None,
        kind,
        tags: None,
        deprecated: None,
        range: doc.range(full),
        selection_range: doc.range(sel),
        children: (!children.is_empty()).then_some(children),
    }
}

fn stmt_symbols(doc: &Document, stmts: &[Stmt]) -> Vec<lsp::DocumentSymbol> {
    let mut out = Vec::new();
    for s in stmts {
        match &s.kind {
            StmtKind::Agent(a) => out.push(symbol(
                doc,
                &a.name.text,
                lsp::SymbolKind::CLASS,
                s.span,
                a.name.span,
                Vec::new(),
            )),
            StmtKind::BlockDef(b) => {
                if let Some(n) = &b.name {
                    let children = stmt_symbols(doc, &b.body.stmts);
                    out.push(symbol(
                        doc,
                        &n.text,
                        lsp::SymbolKind::FUNCTION,
                        s.span,
                        n.span,
                        children,
                    ));
                }
            }
            StmtKind::Input { name: Some(n), .. } => out.push(symbol(
                doc,
                &n.text,
                lsp::SymbolKind::FIELD,
                s.span,
                n.span,
                Vec::new(),
            )),
            StmtKind::Output { name: Some(n), .. } if !n.text.is_empty() => out.push(symbol(
                doc,
                &n.text,
                lsp::SymbolKind::PROPERTY,
                s.span,
                n.span,
                Vec::new(),
            )),
            StmtKind::Use { path, alias } => {
                let name = alias
                    .as_ref()
                    .map_or_else(|| path.raw_text(), |a| a.text.clone());
                out.push(symbol(
                    doc,
                    &name,
                    lsp::SymbolKind::MODULE,
                    s.span,
                    path.span,
                    Vec::new(),
                ));
            }
            StmtKind::Bind {
                target: BindTarget::Name(n),
                kind,
                ..
            } if *kind != crate::ast::BindKind::Assign => {
                let k = if *kind == crate::ast::BindKind::Const {
                    lsp::SymbolKind::CONSTANT
                } else {
                    lsp::SymbolKind::VARIABLE
                };
                out.push(symbol(doc, &n.text, k, s.span, n.span, Vec::new()));
            }
            _ => {}
        }
    }
    out
}

/// The outline: agents, blocks, inputs, outputs, imports and top-level variables.
pub fn document_symbols(doc: &Document) -> Vec<lsp::DocumentSymbol> {
    stmt_symbols(doc, &doc.ast.stmts)
}

/// One folding range per indented block (from the line that opens it to its last line),
/// per multi-line string, and per run of comment lines.
pub fn folding_ranges(doc: &Document) -> Vec<lsp::FoldingRange> {
    let mut out = Vec::new();
    let mut open: Vec<u32> = Vec::new();
    let mut last_real_end = 0usize;
    for (s, t, e) in &doc.tokens {
        match t {
            Tok::Indent => open.push(doc.lines.position(&doc.text, last_real_end).line),
            Tok::Dedent => {
                if let Some(start) = open.pop() {
                    let end = doc.lines.position(&doc.text, last_real_end).line;
                    if end > start {
                        out.push(lsp::FoldingRange {
                            start_line: start,
                            end_line: end,
                            ..lsp::FoldingRange::default()
                        });
                    }
                }
            }
            Tok::Newline => {}
            Tok::Str(_) | Tok::Discretion(_) => {
                let (a, b) = (
                    doc.lines.position(&doc.text, *s).line,
                    doc.lines.position(&doc.text, *e).line,
                );
                if b > a {
                    out.push(lsp::FoldingRange {
                        start_line: a,
                        end_line: b,
                        ..lsp::FoldingRange::default()
                    });
                }
                last_real_end = *e;
            }
            _ => last_real_end = *e,
        }
    }
    let mut run: Option<(u32, u32)> = None;
    for (i, line) in doc.text.lines().enumerate() {
        let i = i as u32;
        if line.trim_start().starts_with('#') {
            run = Some(run.map_or((i, i), |(a, _)| (a, i)));
        } else if let Some((a, b)) = run.take() {
            if b > a {
                out.push(lsp::FoldingRange {
                    start_line: a,
                    end_line: b,
                    kind: Some(lsp::FoldingRangeKind::Comment),
                    ..lsp::FoldingRange::default()
                });
            }
        }
    }
    out
}

/// The semantic token types, in the legend's order.
pub const TOKEN_TYPES: [lsp::SemanticTokenType; 9] = [
    lsp::SemanticTokenType::KEYWORD,
    lsp::SemanticTokenType::STRING,
    lsp::SemanticTokenType::NUMBER,
    lsp::SemanticTokenType::VARIABLE,
    lsp::SemanticTokenType::CLASS,
    lsp::SemanticTokenType::FUNCTION,
    lsp::SemanticTokenType::NAMESPACE,
    lsp::SemanticTokenType::PROPERTY,
    lsp::SemanticTokenType::OPERATOR,
];

/// The semantic token modifiers, in the legend's order.
pub const TOKEN_MODIFIERS: [lsp::SemanticTokenModifier; 1] =
    [lsp::SemanticTokenModifier::DECLARATION];

/// Semantic tokens for the whole document: keywords, strings, numbers, and names by what
/// analysis bound them to (variables, agents, blocks, programs; property keys otherwise).
pub fn semantic_tokens(doc: &Document) -> Vec<lsp::SemanticToken> {
    let index = &doc.analysis().index;
    let mut names = rustc_hash::FxHashMap::default();
    for o in &index.occurrences {
        let ty = match o.target {
            Target::Var(_) => 3,
            Target::Agent(_) => 4,
            Target::Block(_) => 5,
            Target::Program(_) => 6,
        };
        names.insert(o.span.start as usize, (ty, u32::from(o.decl)));
    }
    let mut raw: Vec<(usize, usize, u32, u32)> = Vec::new();
    for (i, (s, t, e)) in doc.tokens.iter().enumerate() {
        let ty = match t {
            Tok::Newline | Tok::Indent | Tok::Dedent => continue,
            Tok::Str(lit) | Tok::Discretion(lit) => {
                // The string, with each bound interpolation as a variable.
                let mut at = *s;
                for part in &lit.parts {
                    if let crate::ast::StrPart::Interp(ip) = part {
                        let root = ip.span.start as usize + 1;
                        if let Some((ty, m)) = names.get(&root) {
                            raw.push((at, ip.span.start as usize - at, 1, 0));
                            raw.push((root, ip.root.len(), *ty, *m));
                            at = root + ip.root.len();
                        }
                    }
                }
                raw.push((at, e - at, 1, 0));
                continue;
            }
            Tok::Int(_) | Tok::Float(_) => 2,
            Tok::Ident(_) => match names.get(s) {
                Some((ty, m)) => {
                    raw.push((*s, e - s, *ty, *m));
                    continue;
                }
                None if matches!(doc.tokens.get(i + 1), Some((_, Tok::Colon, _))) => 7,
                None => 3,
            },
            Tok::Arrow
            | Tok::Pipe
            | Tok::Assign
            | Tok::EqEq
            | Tok::NotEq
            | Tok::Lt
            | Tok::Le
            | Tok::Gt
            | Tok::Ge
            | Tok::Plus
            | Tok::Minus => 8,
            t if !t.text().is_empty() && t.text().chars().all(char::is_alphabetic) => 0,
            _ => continue,
        };
        raw.push((*s, e - s, ty, 0));
    }
    // Multi-line tokens are split per line, as clients expect.
    let mut out = Vec::with_capacity(raw.len());
    let (mut prev_line, mut prev_col) = (0u32, 0u32);
    for (start, len, ty, m) in raw {
        let text = &doc.text[start..start + len];
        let mut piece_start = start;
        for piece in text.split_inclusive('\n') {
            let trimmed = piece.trim_end_matches(['\n', '\r']);
            let width: usize = trimmed.chars().map(char::len_utf16).sum();
            if width > 0 {
                let pos = doc.lines.position(&doc.text, piece_start);
                let delta_line = pos.line - prev_line;
                let delta_start = if delta_line == 0 {
                    pos.character - prev_col
                } else {
                    pos.character
                };
                out.push(lsp::SemanticToken {
                    delta_line,
                    delta_start,
                    length: width as u32,
                    token_type: ty,
                    token_modifiers_bitset: m,
                });
                prev_line = pos.line;
                prev_col = pos.character;
            }
            piece_start += piece.len();
        }
    }
    out
}
