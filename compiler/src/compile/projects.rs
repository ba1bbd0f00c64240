//! Lint levels per project: each file's levels come from the nearest `prose.toml` above it
//! (read once per invocation) and the command line. A `prose.toml`'s problems (E147) are
//! reported once, before the diagnostics of the first program that uses it.

use super::Compilation;
use crate::diagnostics::{Code, Diagnostic};
use crate::lints::{self, Levels};
use crate::span::Span;
use std::path::{Path, PathBuf};

/// What one `prose.toml` (or none) gives.
pub(super) struct Project {
    /// The levels.
    pub levels: Levels,
    /// The file's problems, not yet reported.
    pending: Option<Problems>,
}

/// A `prose.toml` with problems: its path, its text, and each problem with where.
type Problems = (PathBuf, String, Vec<(Span, String)>);

impl Compilation {
    /// The `prose.toml` that governs a file (by its canonical path), if any.
    pub(super) fn project_of(&mut self, file: Option<&Path>) -> Option<PathBuf> {
        let dir = file.and_then(Path::parent)?;
        self.configs
            .entry(dir.to_path_buf())
            .or_insert_with(|| prose_settings::files::project_file(dir))
            .clone()
    }

    /// The levels of project `config`, reading it the first time.
    pub(super) fn project(&mut self, config: &Option<PathBuf>) -> &Levels {
        if !self.projects.contains_key(config) {
            let mut levels = Levels::new(self.options.strict);
            let mut pending = None;
            if let Some(path) = config {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let parsed = lints::config::parse(&text);
                for (code, level) in parsed.levels {
                    levels.set(code, level);
                }
                if !parsed.problems.is_empty() {
                    pending = Some((path.clone(), text, parsed.problems));
                }
            }
            for &(code, level) in &self.options.lints {
                levels.set(code, level);
            }
            self.projects
                .insert(config.clone(), Project { levels, pending });
        }
        &self.projects[config].levels
    }

    /// Reports project `config`'s own problems, the first time a program uses it.
    pub(super) fn report_project(&mut self, config: &Option<PathBuf>) {
        self.project(config);
        let Some((path, text, problems)) =
            self.projects.get_mut(config).and_then(|p| p.pending.take())
        else {
            return;
        };
        let id = self.sources.add(path.display().to_string(), text);
        for (span, why) in problems {
            self.diagnostics.push(
                Diagnostic::new(Code::E147, id, span, format!("invalid lint setting: {why}"))
                    .with_help(
                        "write `CODE = \"allow\"`, `\"warn\"` or `\"deny\"` under `[lints]`",
                    ),
            );
        }
    }
}
