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
use bytecode_spec::{artifact, Artifact};
use module::Lowerer;
use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};

/// The compiler version written into artifacts.
pub const COMPILER_VERSION: &str = concat!("prosec ", env!("CARGO_PKG_VERSION"));

/// Statistics about a build, for `prosec build` to report.
#[derive(Debug, Default)]
pub struct BuildStats {
    /// `(module name, function name, registers)` for every function.
    pub registers: Vec<(String, String, u32)>,
}

/// Lowers module `root` of a checked compilation (which must have no errors) and every
/// program it imports into one artifact.
pub fn build(c: &Compilation, root: usize) -> (Artifact, BuildStats) {
    // Artifact order: the root first, then imports depth first, each once.
    let mut order = vec![root];
    let mut index: FxHashMap<usize, u32> = FxHashMap::default();
    index.insert(root, 0);
    let mut i = 0;
    while i < order.len() {
        let mut deps: Vec<usize> = c.modules[order[i]].imports.values().copied().collect();
        deps.sort_unstable();
        for d in deps {
            if let std::collections::hash_map::Entry::Vacant(e) = index.entry(d) {
                e.insert(order.len() as u32);
                order.push(d);
            }
        }
        i += 1;
    }
    let mut modules = Vec::with_capacity(order.len());
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
        modules.push(Lowerer::lower(&name, &import_path, program, src, &imports));
    }
    let mut stats = BuildStats::default();
    for m in &modules {
        for f in m.funcs.values() {
            stats
                .registers
                .push((m.name.clone(), m.strings[f.name].clone(), f.nregs));
        }
    }
    (Artifact { modules }, stats)
}

/// The artifact header for a program whose main source is `source`.
pub fn header(source: &str) -> artifact::Header {
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&Sha256::digest(source.as_bytes()));
    artifact::Header {
        compiler_version: COMPILER_VERSION.to_string(),
        source_hash: hash,
    }
}

/// Builds and frames the artifact bytes for module `root`.
pub fn build_bytes(
    c: &Compilation,
    root: usize,
) -> Result<(Vec<u8>, BuildStats), artifact::WriteError> {
    let (a, stats) = build(c, root);
    let header = header(&a.modules[0].source);
    Ok((artifact::write(&a, &header)?, stats))
}
