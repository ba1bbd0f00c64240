//! Lint levels per project: each file's levels come from the `prose.toml` settings of its
//! project (the nearest project file above it, over the user's file; each read once per
//! invocation) and the command line. A settings file's problems (E147) are reported once,
//! before the diagnostics of the first program that uses it.

use super::Compilation;
use crate::diagnostics::{Code, Diagnostic};
use crate::lints::{self, Levels};
use crate::span::Span;
use prose_settings::{Place, Settings};
use std::path::{Path, PathBuf};

/// What one project's settings give.
pub(super) struct Project {
    /// The levels.
    pub levels: Levels,
    /// Its settings files' problems, not yet reported.
    pending: Vec<Problem>,
}

/// A problem of a settings file.
enum Problem {
    /// A `[lints]` entry that names no lint (the entry is ignored).
    Lint(Place, String),
    /// A file the settings' schema cannot read (none of the project's settings apply).
    File(Place, String),
}

impl Compilation {
    /// The `prose.toml` that governs a file (by its canonical path), if any.
    pub(super) fn project_of(&mut self, file: Option<&Path>) -> Option<PathBuf> {
        let dir = file.and_then(Path::parent)?;
        self.configs
            .entry(dir.to_path_buf())
            .or_insert_with(|| prose_settings::files::project_file(dir))
            .clone()
    }

    /// The levels of project `config`, reading its settings the first time.
    pub(super) fn project(&mut self, config: &Option<PathBuf>) -> &Levels {
        if !self.projects.contains_key(config) {
            let mut levels = Levels::new(self.options.strict);
            let mut pending = Vec::new();
            match Settings::of_project(config.as_deref()) {
                Ok(settings) => {
                    let parsed = lints::config::levels(&settings.lints);
                    for (code, level) in parsed.levels {
                        levels.set(code, level);
                    }
                    let problems = parsed.problems.into_iter();
                    pending.extend(problems.map(|(at, why)| Problem::Lint(at, why)));
                }
                Err(e) => {
                    let at = Place {
                        file: e.file,
                        span: e.span.unwrap_or(0..0),
                    };
                    pending.push(Problem::File(at, e.message));
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

    /// Reports the problems of project `config`'s settings files, each file's the first time
    /// a program uses it.
    pub(super) fn report_project(&mut self, config: &Option<PathBuf>) {
        self.project(config);
        let Some(project) = self.projects.get_mut(config) else {
            return;
        };
        let mut fresh = rustc_hash::FxHashSet::default();
        for problem in std::mem::take(&mut project.pending) {
            let (Problem::Lint(at, _) | Problem::File(at, _)) = &problem;
            let Some(path) = at.file.clone() else {
                continue;
            };
            let id = match self.settings_files.get(&path) {
                // Reported with an earlier project.
                Some(_) if !fresh.contains(&path) => continue,
                Some(&id) => id,
                None => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let id = self.sources.add(path.display().to_string(), text);
                    self.settings_files.insert(path.clone(), id);
                    fresh.insert(path);
                    id
                }
            };
            let span = Span::new(at.span.start, at.span.end);
            self.diagnostics.push(match problem {
                Problem::Lint(_, why) => {
                    Diagnostic::new(Code::E147, id, span, format!("invalid lint setting: {why}"))
                        .with_help(
                            "write `CODE = \"allow\"`, `\"warn\"` or `\"deny\"` under `[lints]`, for a lint's code",
                        )
                }
                Problem::File(_, why) => Diagnostic::new(
                    Code::E147,
                    id,
                    span,
                    format!("invalid prose.toml: {why}"),
                )
                .with_help("prosec reads prose.toml with the schema prosevm reads it with: docs/settings.md lists its keys"),
            });
        }
    }
}
