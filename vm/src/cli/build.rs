//! Programs as the commands take them: an artifact read and verified, or a `.prose` file
//! compiled in memory.

use super::args::RunArgs;
use super::fail;
use prose_runtime::program::Program;
use prosec::console::{Console, Exit};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Compiles `file` in memory (with its imports found through `lib_paths`) as `prosec build`
/// would: registry programs and skills fetched (or found in the cache) and pinned in
/// `prose.lock`, the skills carried in the artifact. For a `dry` run (the mock driver, which
/// never reads a skill) skills are only taken from where they are without the network, and
/// one that cannot be is left for the run to warn about.
///
/// What `warnings` says is done with the compiler's warnings: shown on stderr once, before
/// the run starts, as `prosec build` shows them (and under `--deny-warnings`, refused as
/// errors are), or kept quiet (a resumed run's program compiled only to compare it).
pub fn compile(
    file: &Path,
    lib_paths: &[PathBuf],
    dry: bool,
    warnings: Warnings,
) -> Result<Program, ExitCode> {
    use prosevm::source::NotCompiled;
    let allow = |c: &prosec::compile::Compilation| {
        if c.warning_count() == 0 {
            return true;
        }
        match warnings {
            Warnings::Quiet => true,
            Warnings::Show => {
                show_warnings(c);
                true
            }
            Warnings::Deny => false,
        }
    };
    match prosevm::source::compile(file, lib_paths, dry, allow) {
        Ok(compiled) => {
            if let Some(lock) = &compiled.lock_updated {
                eprintln!("updated {}", lock.display());
            }
            Ok(compiled.program)
        }
        Err(NotCompiled::Unusable(e)) => Err(fail(e, Exit::Unusable)),
        Err(NotCompiled::Failed(e)) => Err(fail(e, Exit::Failed)),
        Err(NotCompiled::Refused(c)) => Err(refused(&c, file)),
    }
}

/// What a command that runs a program it compiles does with the compiler's warnings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Warnings {
    /// Shown on stderr before the run starts.
    Show,
    /// Refused as errors are (`--deny-warnings`): the program does not run.
    Deny,
    /// Not shown: the program is compiled for another reason than to run it.
    Quiet,
}

/// Shows the warnings of `c`, which has no errors, on stderr: rustc's text, or one
/// `warning` line of the JSON trace each (so stderr stays JSON under `--trace json`).
fn show_warnings(c: &prosec::compile::Compilation) {
    if super::tracing_json() {
        let mut env = prosevm::observe::envelope::Envelope::unstarted();
        for d in prosec::diagnostics::render_json(&c.sources, &c.diagnostics) {
            let text = format!(
                "{}:{}:{}: warning[{}]: {}",
                d.file, d.line, d.column, d.code, d.message
            );
            eprintln!("{}", env.warning(&text));
        }
    } else {
        render_text(c);
        eprintln!(
            "prosevm: {} warning(s); running anyway (`--deny-warnings` refuses to)",
            c.warning_count()
        );
    }
}

/// Writes the diagnostics of `c` on stderr, rustc's way, coloured as `--color` says.
fn render_text(c: &prosec::compile::Compilation) {
    use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};
    let choice = if Console::get().color {
        ColorChoice::Always
    } else {
        ColorChoice::Never
    };
    let mut err = StandardStream::stderr(choice);
    let _ = prosec::diagnostics::render_text(&mut err, &c.sources, &c.diagnostics);
}

/// Reports the diagnostics that stop `c` from running, as `--format` and `--trace` ask:
/// rustc's text on stderr, a JSON document on stdout (`prosec check --format json`'s, with
/// the error), or one `error` line of the JSON trace each.
fn refused(c: &prosec::compile::Compilation, file: &Path) -> ExitCode {
    let message = match c.error_count() {
        0 => format!(
            "{}: {} warning(s), refused under --deny-warnings",
            file.display(),
            c.warning_count()
        ),
        n => format!("{}: {n} error(s)", file.display()),
    };
    let diagnostics = prosec::diagnostics::render_json(&c.sources, &c.diagnostics);
    if Console::json() {
        let mut doc = prosec::console::error_json(&message, None, Exit::Failed);
        doc["diagnostics"] = serde_json::json!(diagnostics);
        println!("{doc}");
        return Exit::Failed.into();
    }
    if super::tracing_json() {
        let denied = c.error_count() == 0;
        for d in diagnostics
            .iter()
            .filter(|d| denied || d.severity == prosec::diagnostics::Severity::Error)
        {
            let text = format!("{}:{}:{}: {}", d.file, d.line, d.column, d.message);
            super::fail_coded(text, bytecode_spec::Code::parse(d.code), Exit::Failed);
        }
    } else {
        render_text(c);
    }
    fail(message, Exit::Failed)
}

/// Reads the artifact `file`, for flags `args`: when they trust keys, its signature is
/// checked before anything else (an altered artifact is called that, not corrupt), and a
/// `.prose` file, which compiles to an unsigned artifact, is refused uncompiled.
pub fn load(file: &Path, args: &RunArgs) -> Result<Program, ExitCode> {
    let keys = args.trusted_keys().map_err(|e| fail(e, Exit::Unusable))?;
    let untrusted = |why: String| super::run_error(prosevm::run::RunError::Untrusted(why));
    if !keys.is_empty() && !is_artifact(file) && file.is_file() {
        return Err(untrusted(format!(
            "{} is source, and a program compiled here is not signed; run the signed .pbc \
             built from it",
            file.display()
        )));
    }
    let bytes = bytecode_spec::artifact::read_file(file).map_err(|e| {
        fail(
            format!("cannot read {}: {e}", file.display()),
            Exit::Unusable,
        )
    })?;
    if !keys.is_empty() {
        match bytecode_spec::signature::check(&bytes, &keys) {
            Ok(t) if t.is_trusted() => {}
            Ok(t) => return Err(untrusted(t.to_string())),
            Err(e) => return Err(untrusted(format!("{}: {e}", file.display()))),
        }
    }
    let origin = std::fs::canonicalize(file).unwrap_or(file.to_path_buf());
    Program::from_bytes(bytes, origin)
        .map_err(|e| fail(format!("{}: {e}", file.display()), Exit::Failed))
}

/// The directory `file` is in (where the search for `prose.toml` starts).
pub fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `file` is a regular file that starts like a `.pbc` artifact (whatever its name).
/// Opened as [`bytecode_spec::bounded::open`] opens, so a FIFO does not block.
pub fn is_artifact(file: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    bytecode_spec::bounded::open(file)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == bytecode_spec::artifact::MAGIC)
}
