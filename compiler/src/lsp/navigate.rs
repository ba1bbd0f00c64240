//! Definitions, references, highlights and rename, from the name index analysis records
//! as it binds names.

use super::document::{path_uri, Document};
use crate::ast::{visit_exprs, ExprKind};
use crate::lexer::{Lexer, Tok};
use crate::sema::index::{Occurrence, Target};
use crate::span::Span;
use lsp_types as lsp;
use std::collections::HashMap;

/// The occurrence under the cursor.
pub fn at(doc: &Document, offset: usize) -> Option<&Occurrence> {
    doc.analysis().index.at(offset)
}

/// The module an imported program's alias links to.
fn imported_module(doc: &Document, alias: &str) -> Option<usize> {
    let import = doc
        .analysis()
        .program
        .imports
        .values()
        .find(|i| i.alias == alias)?;
    doc.comp.modules[doc.module]
        .imports
        .get(&import.path)
        .copied()
}

/// Where the thing under the cursor is defined: a declaration in this file, or for an
/// imported program the file it is, and for a named argument of a call the input it sets.
pub fn definition(doc: &Document, offset: usize) -> Option<lsp::Location> {
    if let Some(occ) = at(doc, offset) {
        if let Target::Program(alias) = &occ.target {
            if occ.decl {
                let m = imported_module(doc, alias)?;
                let uri = path_uri(&doc.comp.modules[m].path)?;
                return Some(lsp::Location::new(uri, lsp::Range::default()));
            }
        }
        let decl = doc.analysis().index.decl_of(&occ.target)?;
        return Some(lsp::Location::new(doc.uri.clone(), doc.range(decl)));
    }
    named_argument_input(doc, offset)
}

/// `lib(topic: x)` with the cursor on `topic`: the `input topic` of the imported program.
fn named_argument_input(doc: &Document, offset: usize) -> Option<lsp::Location> {
    let mut found = None;
    visit_exprs(&doc.ast.stmts, &mut |e| {
        if let ExprKind::Call(callee, args) = &e.kind {
            if let ExprKind::Name(program) = &callee.kind {
                for a in args {
                    if let Some(n) = &a.name {
                        if (n.span.start as usize) <= offset && offset <= n.span.end as usize {
                            found = Some((program.text.clone(), n.text.clone()));
                        }
                    }
                }
            }
        }
    });
    let (program, input) = found?;
    let m = &doc.comp.modules[imported_module(doc, &program)?];
    let analysis = &m.analysis;
    let span = analysis
        .index
        .occurrences
        .iter()
        .find_map(|o| match o.target {
            Target::Var(v)
                if o.decl
                    && analysis.program.vars[v].name.as_deref() == Some(input.as_str())
                    && analysis.program.vars[v].kind == bytecode_spec::BindingKind::Input =>
            {
                Some(o.span)
            }
            _ => None,
        })?;
    let src = &doc.comp.sources.get(m.file).text;
    let lines = super::document::Lines::new(src);
    Some(lsp::Location::new(
        path_uri(&m.path)?,
        lines.range(src, span),
    ))
}

/// Every place the name under the cursor is written.
pub fn references(doc: &Document, offset: usize, include_decl: bool) -> Vec<lsp::Location> {
    let Some(occ) = at(doc, offset) else {
        return Vec::new();
    };
    doc.analysis()
        .index
        .of(&occ.target)
        .into_iter()
        .filter(|o| include_decl || !o.decl)
        .map(|o| lsp::Location::new(doc.uri.clone(), doc.range(o.span)))
        .collect()
}

/// The occurrences of the name under the cursor, declarations marked as writes.
pub fn highlights(doc: &Document, offset: usize) -> Vec<lsp::DocumentHighlight> {
    let Some(occ) = at(doc, offset) else {
        return Vec::new();
    };
    doc.analysis()
        .index
        .of(&occ.target)
        .into_iter()
        .map(|o| lsp::DocumentHighlight {
            range: doc.range(o.span),
            kind: Some(if o.decl {
                lsp::DocumentHighlightKind::WRITE
            } else {
                lsp::DocumentHighlightKind::READ
            }),
        })
        .collect()
}

/// The name under the cursor, if it can be renamed.
pub fn prepare_rename(doc: &Document, offset: usize) -> Result<lsp::Range, String> {
    let occ = at(doc, offset).ok_or("there is no name here to rename")?;
    renameable(doc, &occ.target)?;
    Ok(doc.range(occ.span))
}

fn renameable(doc: &Document, target: &Target) -> Result<(), String> {
    if let Target::Program(alias) = target {
        let decl = doc.analysis().index.decl_of(target).unwrap_or_default();
        if doc.text.get(decl.range()) != Some(alias.as_str()) {
            return Err(format!(
                "`{alias}` is named by its path; give it an alias (`use \"...\" as {alias}`) to rename it"
            ));
        }
    }
    Ok(())
}

/// The names in use for each kind of thing, to refuse a rename that would clash.
fn taken(doc: &Document, target: &Target, new: &str) -> Option<String> {
    let p = &doc.analysis().program;
    let var = p
        .vars
        .iter()
        .any(|(id, v)| v.name.as_deref() == Some(new) && *target != Target::Var(id));
    let agent = p
        .agents
        .iter()
        .any(|(id, a)| a.name == new && *target != Target::Agent(id));
    let block = p
        .blocks
        .iter()
        .any(|(id, b)| b.name == new && *target != Target::Block(id));
    let program = doc
        .analysis()
        .index
        .occurrences
        .iter()
        .any(|o| matches!(&o.target, Target::Program(a) if a == new));
    let clash = match target {
        Target::Var(_) => [
            (var, "variable"),
            (agent, "agent"),
            (program, "imported program"),
        ]
        .into_iter()
        .find(|c| c.0),
        Target::Agent(_) => [(agent, "agent"), (block, "block"), (var, "variable")]
            .into_iter()
            .find(|c| c.0),
        Target::Block(_) => [(block, "block"), (agent, "agent")]
            .into_iter()
            .find(|c| c.0),
        Target::Program(_) => [(program, "imported program"), (var, "variable")]
            .into_iter()
            .find(|c| c.0),
    };
    clash.map(|(_, what)| format!("a {what} is already named `{new}`"))
}

// lsp-types keys edits by `Uri`, whose parsed parts are cached inside it: never mutated
// through a key here.
#[allow(clippy::mutable_key_type)]
/// The edits that rename the name under the cursor to `new`, or why it cannot be.
pub fn rename(doc: &Document, offset: usize, new: &str) -> Result<lsp::WorkspaceEdit, String> {
    let occ = at(doc, offset).ok_or("there is no name here to rename")?;
    renameable(doc, &occ.target)?;
    let toks = Lexer::new(new).run().tokens;
    let valid =
        matches!(toks.as_slice(), [(0, Tok::Ident(n), _), (_, Tok::Newline, _)] if n == new);
    if !valid {
        return Err(format!(
            "`{new}` is not a valid name (a keyword, or not one word)"
        ));
    }
    if let Some(why) = taken(doc, &occ.target, new) {
        return Err(why);
    }
    let mut spans: Vec<Span> = doc
        .analysis()
        .index
        .of(&occ.target)
        .into_iter()
        .map(|o| o.span)
        .collect();
    spans.sort_by_key(|s| s.start);
    spans.dedup();
    let edits = spans
        .into_iter()
        .map(|s| lsp::TextEdit::new(doc.range(s), new.to_string()))
        .collect();
    let mut changes = HashMap::new();
    changes.insert(doc.uri.clone(), edits);
    Ok(lsp::WorkspaceEdit::new(changes))
}
