//! A `.prose` program compiled in memory, as `prosec build` compiles it: what `prosevm run`,
//! `prosevm test` and `prosevm eval` run when given source rather than an artifact.

use prose_runtime::program::Program;
use prosec::compile::Compilation;
use std::path::{Path, PathBuf};

/// Why a program could not be compiled.
pub enum NotCompiled {
    /// It could not be read, or its `prose.lock` written: the message.
    Unusable(String),
    /// The compiler refused it: the compilation, for its diagnostics.
    Refused(Box<Compilation>),
    /// It checked but could not be compiled to bytecode: the message.
    Failed(String),
}

/// A program compiled, with the compilation (its warnings, and the sources to show them).
pub struct Compiled {
    /// The program.
    pub program: Program,
    /// The compilation it came from.
    pub compilation: Compilation,
    /// Whether `prose.lock` was written (a fetched import pinned), and where.
    pub lock_updated: Option<PathBuf>,
}

/// Compiles `file` in memory (with its imports found through `lib_paths`) as `prosec build`
/// would: registry programs and skills fetched (or found in the cache) and pinned in
/// `prose.lock`, the skills carried in the artifact. For a `dry` run (the mock driver or a
/// tape, which never read a skill) skills are only taken from where they are without the
/// network, and one that cannot be is left for the run to warn about. `allow` says whether
/// the compilation may go on to bytecode given its warnings (errors always stop it).
pub fn compile(
    file: &Path,
    lib_paths: &[PathBuf],
    dry: bool,
    allow: impl FnOnce(&Compilation) -> bool,
) -> Result<Compiled, NotCompiled> {
    let fetcher = prosec::ship::Fetcher::new(
        file,
        prosec::ship::FetchOptions {
            offline: dry,
            ..Default::default()
        },
    );
    let mut c = Compilation::with_fetcher(
        prosec::compile::Options {
            lib_paths: lib_paths.to_vec(),
            require_imports: true,
            ..Default::default()
        },
        fetcher,
    );
    let root = c
        .add_file(file)
        .map_err(|e| NotCompiled::Unusable(e.to_string()))?;
    let Some(mut fetcher) = c.take_fetcher() else {
        return Err(NotCompiled::Failed(
            "the compilation lost its fetcher".into(),
        ));
    };
    if c.error_count() > 0 {
        return Err(NotCompiled::Refused(Box::new(c)));
    }
    let (bundle, problems) = c.bundle(root, &mut fetcher);
    if !dry {
        c.diagnostics.extend(problems);
    }
    if c.error_count() > 0 || !allow(&c) {
        return Err(NotCompiled::Refused(Box::new(c)));
    }
    let (bytes, _) = prosec::codegen::build_bytes_bundled(&c, root, &bundle)
        .map_err(|e| NotCompiled::Failed(e.to_string()))?;
    let lock_updated = match fetcher.save_lock() {
        Ok(true) => Some(fetcher.lock_path().to_path_buf()),
        Ok(false) => None,
        Err(e) => {
            return Err(NotCompiled::Unusable(format!(
                "cannot write {}: {e}",
                fetcher.lock_path().display()
            )))
        }
    };
    let program = Program::from_bytes(bytes, file.to_path_buf())
        .map_err(|e| NotCompiled::Failed(e.to_string()))?;
    Ok(Compiled {
        program,
        compilation: c,
        lock_updated,
    })
}
