//! Code generation: lowering [resolved programs](crate::resolved) to bytecode and linking
//! every imported program into one self-contained [`Artifact`](bytecode_spec::Artifact).
//! Every name was bound by analysis: nothing here looks a name up.

mod calls;
mod control;
mod exprs;
mod forks;
mod func;
mod module;
mod sessions;
mod stmts;

use crate::compile::Compilation;
use crate::diagnostics::{Code, Diagnostic};
use crate::ship::Bundle;
use crate::span::Span;
use bytecode_spec::{artifact, Artifact};
use module::Lowerer;
use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};

/// Statistics about a build, for `prosec build` to report.
#[derive(Debug, Default)]
pub struct BuildStats {
    /// `(module name, function name, registers)` for every function.
    pub registers: Vec<(String, String, u32)>,
}

/// Why a checked program was not written as an artifact.
#[derive(Debug)]
pub enum BuildError {
    /// Parts of the program exceed what an artifact can hold (E148), each located, with its
    /// location as text (`file:line:column`).
    TooLarge(Vec<(Diagnostic, String)>),
    /// The artifact does not load back: a compiler bug, reported rather than written.
    Invalid(String),
}

impl BuildError {
    /// The located problems (none for [`BuildError::Invalid`]).
    pub fn diagnostics(&self) -> Vec<&Diagnostic> {
        match self {
            BuildError::TooLarge(ds) => ds.iter().map(|(d, _)| d).collect(),
            BuildError::Invalid(_) => Vec::new(),
        }
    }
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::TooLarge(ds) => {
                for (i, (d, at)) in ds.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{at}: error[{}]: {}", d.code, d.message)?;
                }
                Ok(())
            }
            BuildError::Invalid(e) => write!(
                f,
                "the compiled artifact does not load ({e}); this is a compiler bug, please report it"
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// Lowers module `root` of a checked compilation (which must have no errors) and every
/// program it imports into one artifact. The artifact holds every function even when one
/// is too large to run: [`build_bytes`] refuses those, with where they grew too large.
pub fn build(c: &Compilation, root: usize) -> (Artifact, BuildStats) {
    let (artifact, stats, _) = lower_all(c, root, &Bundle::default());
    (artifact, stats)
}

/// Lowers every module, with the skills of `bundle` (each module's imports pointing at
/// them); also returns where functions grew too large to run.
fn lower_all(
    c: &Compilation,
    root: usize,
    bundle: &Bundle,
) -> (Artifact, BuildStats, Vec<Diagnostic>) {
    let order = c.reachable(root);
    let index: FxHashMap<usize, u32> = order
        .iter()
        .enumerate()
        .map(|(i, &m)| (m, i as u32))
        .collect();
    let mut modules = Vec::with_capacity(order.len());
    let mut too_large = Vec::new();
    for &mi in &order {
        let module = &c.modules[mi];
        let program = &module.analysis.program;
        // The artifact module of each import, by its `use` path.
        let imports: Vec<u32> = program
            .imports
            .values()
            .map(|i| module.imports.get(&i.path).map_or(0, |dep| index[dep]))
            .collect();
        let src = c.sources.get(module.file);
        let name = module
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "program".into());
        let import_path = if mi == root {
            String::new()
        } else {
            // How the first importer wrote it.
            c.modules
                .iter()
                .flat_map(|m| m.imports.iter())
                .find(|(_, &dep)| dep == mi)
                .map(|(p, _)| p.clone())
                .unwrap_or_default()
        };
        let (mut m, problems) = Lowerer::lower(&name, &import_path, program, src, &imports);
        for (skill_name, skill) in bundle.imports.get(&mi).into_iter().flatten() {
            let existing = m
                .strings
                .iter()
                .find(|(_, s)| *s == skill_name)
                .map(|(id, _)| id);
            let name = existing.unwrap_or_else(|| m.strings.push(skill_name.clone()));
            m.skills.push(bytecode_spec::bundle::SkillImport {
                name,
                skill: *skill,
            });
        }
        modules.push(m);
        too_large.extend(
            problems
                .into_iter()
                .map(|(span, message)| Diagnostic::new(Code::E148, module.file, span, message)
                    .with_help("split the construct: build a long list from several shorter ones, or a record from smaller records")),
        );
    }
    let mut stats = BuildStats::default();
    for m in &modules {
        for f in m.funcs.values() {
            stats
                .registers
                .push((m.name.clone(), m.strings[f.name].clone(), f.nregs));
        }
    }
    (
        Artifact {
            modules,
            skills: bundle.skills.clone(),
        },
        stats,
        too_large,
    )
}

/// The artifact header for a program whose main source is `source`.
pub fn header(source: &str) -> artifact::Header {
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&Sha256::digest(source.as_bytes()));
    artifact::Header {
        compiler_version: crate::COMPILER_VERSION.to_string(),
        source_hash: hash,
    }
}

/// Builds and frames the artifact bytes for module `root`, and loads them back the way the
/// VM will (framing, decoding, verification), so that what is written is what runs.
pub fn build_bytes(c: &Compilation, root: usize) -> Result<(Vec<u8>, BuildStats), BuildError> {
    build_bytes_bundled(c, root, &Bundle::default())
}

/// [`build_bytes`], with the skills of `bundle` carried in the artifact
/// ([`crate::compile::Compilation::bundle`] makes it).
pub fn build_bytes_bundled(
    c: &Compilation,
    root: usize,
    bundle: &Bundle,
) -> Result<(Vec<u8>, BuildStats), BuildError> {
    let (a, stats, too_large) = lower_all(c, root, bundle);
    let located = |d: Diagnostic| {
        let file = c.sources.get(d.file);
        let at = file.line_col(d.span.start as usize);
        let text = format!("{}:{}:{}", file.path, at.line, at.column);
        (d, text)
    };
    if !too_large.is_empty() {
        return Err(BuildError::TooLarge(
            too_large.into_iter().map(located).collect(),
        ));
    }
    let header = header(&a.modules[0].source);
    let bytes = match artifact::write(&a, &header) {
        Ok(bytes) => bytes,
        Err(e) => {
            let file = c.modules[root].file;
            let d = Diagnostic::new(Code::E148, file, Span::default(), e.to_string())
                .with_help("split the program into smaller programs that import one another");
            return Err(BuildError::TooLarge(vec![located(d)]));
        }
    };
    match artifact::load(&bytes) {
        Ok(_) => Ok((bytes, stats)),
        // What the framing accepts but the loader cannot decode within its memory cap.
        Err(e @ artifact::LoadError::Malformed(_)) => {
            let file = c.modules[root].file;
            let d = Diagnostic::new(
                Code::E148,
                file,
                Span::default(),
                format!("the compiled program is too large to load back ({e})"),
            )
            .with_help("split the program into smaller programs that import one another");
            Err(BuildError::TooLarge(vec![located(d)]))
        }
        Err(e) => Err(BuildError::Invalid(e.to_string())),
    }
}
