//! Programs as the commands take them: an artifact read and verified, or a `.prose` file
//! compiled in memory.

use super::fail;
use prose_runtime::program::Program;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Compiles `file` in memory (with its imports found through `lib_paths`).
pub fn compile(file: &Path, lib_paths: &[PathBuf]) -> Result<Program, ExitCode> {
    use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options {
        lib_paths: lib_paths.to_vec(),
        require_imports: true,
        ..Default::default()
    });
    let root = c.add_file(file).map_err(|e| fail(e, 2))?;
    if c.error_count() > 0 {
        let choice = if crate::COLOR.get().copied().unwrap_or(false) {
            ColorChoice::Always
        } else {
            ColorChoice::Never
        };
        let mut err = StandardStream::stderr(choice);
        let _ = prosec::diagnostics::render_text(&mut err, &c.sources, &c.diagnostics);
        return Err(fail(
            format!("{}: {} error(s)", file.display(), c.error_count()),
            1,
        ));
    }
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).map_err(|e| fail(e, 1))?;
    Program::from_bytes(bytes, file.to_path_buf()).map_err(|e| fail(e, 1))
}

/// Reads the artifact `file`.
pub fn load(file: &Path) -> Result<Program, ExitCode> {
    let bytes =
        std::fs::read(file).map_err(|e| fail(format!("cannot read {}: {e}", file.display()), 2))?;
    let origin = std::fs::canonicalize(file).unwrap_or(file.to_path_buf());
    Program::from_bytes(bytes, origin).map_err(|e| fail(format!("{}: {e}", file.display()), 1))
}

/// The directory `file` is in (where the search for `prose.toml` starts).
pub fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `file` starts like a `.pbc` artifact (whatever its name).
pub fn is_artifact(file: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == bytecode_spec::artifact::MAGIC)
}
