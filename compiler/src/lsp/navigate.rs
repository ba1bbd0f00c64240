//! Definitions, references, highlights and rename, from the name index analysis records
//! as it binds names. The inputs and outputs of a program are named by the programs that
//! import it too: their references and renames reach those in the workspace.

use super::document::{path_uri, Document};
use super::workspace::Workspace;
use crate::lexer::{Lexer, Tok};
use crate::resolved::VarId;
use crate::sema::index::{ContractRef, ContractSide, Occurrence, Target};
use crate::sema::Analysis;
use crate::span::Span;
use bytecode_spec::BindingKind;
use lsp_types as lsp;
use std::collections::HashMap;
use std::path::PathBuf;

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
/// imported program the file it is, and for an input or output of an imported program
/// (`lib(topic: x)`, `r.summary`) its declaration there.
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
    contract_definition(doc, offset)
}

/// `lib(topic: x)` with the cursor on `topic`, or `r.summary` on `summary` where `r` is
/// what `lib` gave: the `input topic` (or `output summary`) of the imported program.
fn contract_definition(doc: &Document, offset: usize) -> Option<lsp::Location> {
    let r = doc.analysis().index.contract_ref_at(offset)?;
    let m = &doc.comp.modules[imported_module(doc, &r.program)?];
    let var = contract_var(&m.analysis, r.side, &r.name)?;
    let span = m.analysis.index.decl_of(&Target::Var(var))?;
    let src = &doc.comp.sources.get(m.file).text;
    let lines = super::document::Lines::new(src);
    Some(lsp::Location::new(
        path_uri(&m.path)?,
        lines.range(src, span),
    ))
}

/// The variable of a program's input or output `name`.
fn contract_var(a: &Analysis, side: ContractSide, name: &str) -> Option<VarId> {
    let (names, kind) = match side {
        ContractSide::Input => (&a.contract.inputs, BindingKind::Input),
        ContractSide::Output => (&a.contract.outputs, BindingKind::Output),
    };
    if !names.iter().any(|n| n == name) {
        return None;
    }
    let p = &a.program;
    p.vars
        .iter()
        .find(|(_, v)| v.owner == p.main && v.kind == kind && v.name.as_deref() == Some(name))
        .map(|(id, _)| id)
}

/// An input or output of a program, which the programs importing it name too.
struct ContractItem {
    /// The program's canonical path.
    file: PathBuf,
    side: ContractSide,
    name: String,
}

/// The input or output under the cursor: a program's own (`input topic`, or a use of it),
/// or an imported program's (`lib(topic: x)`, `r.summary`).
fn contract_item(doc: &Document, offset: usize) -> Option<ContractItem> {
    if let Some(occ) = at(doc, offset) {
        let Target::Var(v) = occ.target else {
            return None;
        };
        let a = doc.analysis();
        let var = &a.program.vars[v];
        let name = var.name.clone()?;
        let side = [ContractSide::Input, ContractSide::Output]
            .into_iter()
            .find(|&side| contract_var(a, side, &name) == Some(v))?;
        return Some(ContractItem {
            file: doc.canonical.clone(),
            side,
            name,
        });
    }
    let r = doc.analysis().index.contract_ref_at(offset)?;
    let m = imported_module(doc, &r.program)?;
    Some(ContractItem {
        file: doc.comp.modules[m].path.clone(),
        side: r.side,
        name: r.name.clone(),
    })
}

/// One place a contract item is written.
struct Place {
    uri: lsp::Uri,
    range: lsp::Range,
    /// Whether it is the declaration.
    decl: bool,
}

/// Every place `item` is written: in its program (declaration and uses), and in each
/// program of the workspace importing it. For a rename, `also` adds for each importer the
/// places to change with it (a variable destructured by the output's name), or refuses.
fn contract_places(
    ws: &Workspace,
    item: &ContractItem,
    mut also: impl FnMut(&Document, &ContractRef) -> Result<Vec<Span>, String>,
) -> Result<Vec<Place>, String> {
    let mut out = Vec::new();
    let program = ws
        .program(&item.file)
        .ok_or_else(|| format!("cannot read {}", item.file.display()))?;
    if let Some(var) = contract_var(program.analysis(), item.side, &item.name) {
        for o in program.analysis().index.of(&Target::Var(var)) {
            out.push(Place {
                uri: program.uri.clone(),
                range: program.range(o.span),
                decl: o.decl,
            });
        }
    }
    for importer in ws.importers(&item.file) {
        let mut spans = Vec::new();
        for r in &importer.analysis().index.contract_refs {
            let this = r.side == item.side
                && r.name == item.name
                && imported_module(&importer, &r.program)
                    .is_some_and(|m| importer.comp.modules[m].path == item.file);
            if this {
                spans.push(r.span);
                spans.extend(also(&importer, r)?);
            }
        }
        spans.sort_by_key(|s| s.start);
        spans.dedup();
        out.extend(spans.into_iter().map(|s| Place {
            uri: importer.uri.clone(),
            range: importer.range(s),
            decl: false,
        }));
    }
    Ok(out)
}

/// Every place the name under the cursor is written: for an input or output of a program,
/// in the programs of the workspace importing it too.
pub fn references(
    ws: &Workspace,
    doc: &Document,
    offset: usize,
    include_decl: bool,
) -> Vec<lsp::Location> {
    if let Some(item) = contract_item(doc, offset) {
        return contract_places(ws, &item, |_, _| Ok(Vec::new()))
            .unwrap_or_default()
            .into_iter()
            .filter(|p| include_decl || !p.decl)
            .map(|p| lsp::Location::new(p.uri, p.range))
            .collect();
    }
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
    if let Some(occ) = at(doc, offset) {
        renameable(doc, &occ.target)?;
        return Ok(doc.range(occ.span));
    }
    match doc.analysis().index.contract_ref_at(offset) {
        Some(r) if contract_item(doc, offset).is_some() => Ok(doc.range(r.span)),
        _ => Err("there is no name here to rename".into()),
    }
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

/// Whether `new` is one word that is not a keyword.
fn valid_name(new: &str) -> Result<(), String> {
    let toks = Lexer::new(new).run().tokens;
    let valid =
        matches!(toks.as_slice(), [(0, Tok::Ident(n), _), (_, Tok::Newline, _)] if n == new);
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{new}` is not a valid name (a keyword, or not one word)"
        ))
    }
}

// lsp-types keys edits by `Uri`, whose parsed parts are cached inside it: never mutated
// through a key here.
#[allow(clippy::mutable_key_type)]
/// The edits that rename the name under the cursor to `new`, or why it cannot be. An input
/// or output of a program is renamed in the programs of the workspace that import it too:
/// the named arguments that set the input, the reads of the output (and a variable
/// destructured by its name, with its uses).
pub fn rename(
    ws: &Workspace,
    doc: &Document,
    offset: usize,
    new: &str,
) -> Result<lsp::WorkspaceEdit, String> {
    valid_name(new)?;
    let mut changes: HashMap<lsp::Uri, Vec<lsp::TextEdit>> = HashMap::new();
    if let Some(item) = contract_item(doc, offset) {
        let program = ws
            .program(&item.file)
            .ok_or_else(|| format!("cannot read {}", item.file.display()))?;
        if let Some(var) = contract_var(program.analysis(), item.side, &item.name) {
            if let Some(why) = taken(&program, &Target::Var(var), new) {
                return Err(why);
            }
        }
        // `let {summary} = lib(...)`: the variable is named by the output; it is renamed
        // with it, where the new name is free.
        let destructured = |importer: &Document, r: &ContractRef| {
            let index = &importer.analysis().index;
            let Some(var) = index
                .occurrences
                .iter()
                .find(|o| o.decl && o.span == r.span)
                .map(|o| o.target.clone())
            else {
                return Ok(Vec::new());
            };
            if let Some(why) = taken(importer, &var, new) {
                return Err(format!("in {}: {why}", importer.path.display()));
            }
            Ok(index.of(&var).into_iter().map(|o| o.span).collect())
        };
        for p in contract_places(ws, &item, destructured)? {
            changes
                .entry(p.uri)
                .or_default()
                .push(lsp::TextEdit::new(p.range, new.to_string()));
        }
        return Ok(lsp::WorkspaceEdit::new(changes));
    }
    let occ = at(doc, offset).ok_or("there is no name here to rename")?;
    renameable(doc, &occ.target)?;
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
    changes.insert(doc.uri.clone(), edits);
    Ok(lsp::WorkspaceEdit::new(changes))
}
