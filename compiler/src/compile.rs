//! The compilation driver: loads a file and every program it imports (once each), parses
//! and analyses them, and collects all diagnostics with `--strict` applied.

use crate::ast::{Program, StmtKind};
use crate::diagnostics::{self, Code, Diagnostic};
use crate::lints::{self, Level, Levels};
use crate::parser;
use crate::sema::{self, Analysis, ImportStatus};
use crate::source::{FileId, SourceMap};
use crate::span::Span;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Options shared by `check` and `build`.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Relaxed rules are errors again (unless a lint level says otherwise).
    pub strict: bool,
    /// Lint levels from the command line, in the order given (later ones win); they
    /// override `prose.toml`.
    pub lints: Vec<(Code, Level)>,
    /// Directories searched for registry imports (`@handle/slug` -> `DIR/@handle/slug.prose`).
    pub lib_paths: Vec<PathBuf>,
    /// A registry import that cannot be found is an error (for `build`, which must link it)
    /// rather than a warning.
    pub require_imports: bool,
}

/// One loaded program.
#[derive(Debug)]
pub struct Module {
    /// Its file in the source map.
    pub file: FileId,
    /// Canonical path (or the name given for in-memory sources).
    pub path: PathBuf,
    /// The syntax tree.
    pub program: Program,
    /// Its analysis (contract and resolutions).
    pub analysis: Analysis,
    /// For each `use` path: the module it resolved to.
    pub imports: HashMap<String, usize>,
}

/// Everything loaded by one invocation: sources, modules and diagnostics.
#[derive(Debug, Default)]
pub struct Compilation {
    /// All source files read.
    pub sources: SourceMap,
    /// All modules, dependencies before dependents.
    pub modules: Vec<Module>,
    /// All diagnostics, with severities after `--strict`.
    pub diagnostics: Vec<Diagnostic>,
    options: Options,
    by_path: HashMap<PathBuf, usize>,
    loading: Vec<PathBuf>,
    /// The nearest `prose.toml` of each directory looked up.
    configs: HashMap<PathBuf, Option<PathBuf>>,
    /// The lint levels each `prose.toml` (or none) gives.
    levels: HashMap<Option<PathBuf>, Levels>,
}

/// Why a root file could not be compiled at all.
#[derive(Debug)]
pub enum LoadError {
    /// The file could not be read.
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Io(p, e) => write!(f, "cannot read {}: {e}", p.display()),
        }
    }
}

impl Compilation {
    /// A new, empty compilation.
    pub fn new(options: Options) -> Compilation {
        Compilation {
            options,
            ..Compilation::default()
        }
    }

    /// Number of error diagnostics.
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warning diagnostics.
    pub fn warning_count(&self) -> usize {
        self.diagnostics.len() - self.error_count()
    }

    /// Loads, parses and analyses a file and its imports. Returns the module index.
    pub fn add_file(&mut self, path: &Path) -> Result<usize, LoadError> {
        let bytes = std::fs::read(path).map_err(|e| LoadError::Io(path.to_path_buf(), e))?;
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(&m) = self.by_path.get(&canonical) {
            return Ok(m);
        }
        Ok(self.add_bytes(path.display().to_string(), canonical, bytes))
    }

    /// Compiles in-memory source; relative imports resolve against `path`'s directory. When
    /// `path` names an existing file (an editor buffer, say), the source stands for that file,
    /// so an import of it is recognized as a cycle.
    pub fn add_source(&mut self, path: &Path, text: &str) -> usize {
        // The canonical path only matters to a program that imports others (cycles, relative
        // paths); skip the file-system lookup for the rest.
        let canonical = if text.contains("use") || path.is_file() {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        } else {
            path.to_path_buf()
        };
        // Only a source standing for a file on disk has a project whose `prose.toml` counts.
        let project = path.is_file().then(|| canonical.clone());
        self.add_text(
            path.display().to_string(),
            canonical,
            text.to_string(),
            None,
            project.as_deref(),
        )
    }

    fn add_bytes(&mut self, display: String, canonical: PathBuf, bytes: Vec<u8>) -> usize {
        let (text, utf8_error) = match crate::decode_source(bytes) {
            Ok(t) => (t, None),
            Err((at, msg, lossy)) => (lossy, Some((at, msg))),
        };
        let project = canonical.clone();
        self.add_text(display, canonical, text, utf8_error, Some(&project))
    }

    /// The lint levels for a file: the defaults, then the nearest `prose.toml` above
    /// `file` (if given), then the command line. A `prose.toml` is read once, and its
    /// problems are reported against it (E147).
    fn levels_for(&mut self, file: Option<&Path>) -> Levels {
        let config = file.and_then(Path::parent).and_then(|dir| {
            self.configs
                .entry(dir.to_path_buf())
                .or_insert_with(|| lints::config::find(dir))
                .clone()
        });
        if let Some(levels) = self.levels.get(&config) {
            return levels.clone();
        }
        let mut levels = Levels::new(self.options.strict);
        if let Some(path) = &config {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let parsed = lints::config::parse(&text);
            let id = self.sources.add(path.display().to_string(), text);
            for (span, why) in parsed.problems {
                self.diagnostics.push(
                    Diagnostic::new(Code::E147, id, span, format!("invalid lint setting: {why}"))
                        .with_help(
                            "write `CODE = \"allow\"`, `\"warn\"` or `\"deny\"` under `[lints]`",
                        ),
                );
            }
            for (code, level) in parsed.levels {
                levels.set(code, level);
            }
        }
        for &(code, level) in &self.options.lints {
            levels.set(code, level);
        }
        self.levels.insert(config, levels.clone());
        levels
    }

    fn add_text(
        &mut self,
        display: String,
        canonical: PathBuf,
        text: String,
        utf8_error: Option<(usize, String)>,
        project: Option<&Path>,
    ) -> usize {
        // Reserve the file's id; its text is stored once analysis no longer borrows it.
        let file = self.sources.add(display, String::new());
        if let Some((at, msg)) = utf8_error {
            // A file that is not text is not checked further: one error, at the first bad
            // byte (the stored text has `?` for each bad byte, so offsets are the file's).
            self.diagnostics.push(
                Diagnostic::new(Code::E135, file, Span::new(at, at + 1), msg)
                    .with_help("save the file as UTF-8; nothing else in it was checked"),
            );
            let span = Span::new(0, text.len());
            self.sources.set_text(file, text);
            return self.push_module(
                file,
                canonical,
                Program {
                    stmts: Vec::new(),
                    span,
                },
                Analysis::default(),
                HashMap::new(),
            );
        }
        let mut diags = Vec::new();
        let parsed = parser::parse(file, &text);
        // Text already reported as malformed (an oversized number read as 0, an unterminated
        // string): semantic checks that look inside it only see the lexer's stand-in.
        let malformed: Vec<Span> = parsed
            .diagnostics
            .iter()
            .map(|d| d.span)
            .filter(|s| s.start < s.end)
            .chain(parsed.cascades.iter().copied())
            .collect();
        diags.extend(parsed.diagnostics);
        self.loading.push(canonical.clone());
        let mut statuses = HashMap::new();
        let mut imports = HashMap::new();
        for stmt in &parsed.program.stmts {
            let StmtKind::Use { path, .. } = &stmt.kind else {
                continue;
            };
            let text = path.raw_text();
            if !sema::valid_use_path(&text) || statuses.contains_key(&text) {
                continue;
            }
            let status = match self.resolve(&canonical, &text) {
                Resolved::Path(p) => match self.import(&p, file, path.span, &mut diags) {
                    Some(m) => {
                        imports.insert(text.clone(), m);
                        ImportStatus::Resolved(self.modules[m].analysis.contract.clone())
                    }
                    None => ImportStatus::Failed,
                },
                Resolved::NotFound(tried) => {
                    diags.push(
                        Diagnostic::new(
                            Code::E138,
                            file,
                            path.span,
                            format!("cannot find program `{text}`"),
                        )
                        .with_help(format!("looked for {tried}")),
                    );
                    ImportStatus::Failed
                }
                Resolved::NoLibPath => {
                    if self.options.require_imports {
                        diags.push(
                            Diagnostic::new(
                                Code::E138,
                                file,
                                path.span,
                                format!("cannot find program `{text}`"),
                            )
                            .with_help("pass --lib-path DIR with DIR/@handle/slug.prose"),
                        );
                        ImportStatus::Failed
                    } else {
                        diags.push(
                            Diagnostic::new(Code::W119, file, path.span, format!("`{text}` is not resolved: its inputs and outputs are not checked"))
                                .with_help("pass --lib-path DIR with DIR/@handle/slug.prose to check it"),
                        );
                        ImportStatus::Unresolved
                    }
                }
            };
            statuses.insert(text, status);
        }
        self.loading.pop();
        let analysis = sema::analyze(file, &parsed.program, &statuses);
        // A name reported as undefined may be declared by a statement that failed to parse.
        let unparsed: Vec<&str> = sema::unparsed_spans(&parsed.program)
            .into_iter()
            .filter_map(|s| text.get(s.range()))
            .collect();
        diags.extend(
            analysis
                .diagnostics
                .iter()
                .filter(|d| {
                    !malformed
                        .iter()
                        .any(|m| m.start <= d.span.start && d.span.end <= m.end)
                })
                .filter(|d| {
                    !matches!(
                        d.code,
                        Code::E007 | Code::E025 | Code::E105 | Code::E108 | Code::E140
                    ) || !text
                        .get(d.span.range())
                        // `{name.path}` of E140: the variable is `name`.
                        .map(|t| {
                            t.trim_start_matches('{')
                                .split(['.', '[', '}'])
                                .next()
                                .unwrap_or(t)
                        })
                        .is_some_and(|name| unparsed.iter().any(|u| mentions(u, name)))
                })
                .cloned(),
        );
        let levels = self.levels_for(project);
        let (allows, bad) = lints::inline::Allows::new(&text, &parsed.directives, &parsed.program);
        for (span, why) in bad {
            diags.push(
                Diagnostic::new(
                    Code::W120,
                    file,
                    span,
                    "this lint comment is not understood",
                )
                .with_help(why),
            );
        }
        diags.retain_mut(|d| {
            if d.code.is_lint() && allows.allows(d.code, d.span.start) {
                return false;
            }
            match levels.severity(d.code) {
                Some(severity) => {
                    d.severity = severity;
                    true
                }
                None => false,
            }
        });
        diagnostics::sort(&mut diags);
        self.diagnostics.extend(diags);
        let analysis = Analysis {
            diagnostics: Vec::new(),
            ..analysis
        };
        self.sources.set_text(file, text);
        self.push_module(file, canonical, parsed.program, analysis, imports)
    }

    fn push_module(
        &mut self,
        file: FileId,
        path: PathBuf,
        program: Program,
        analysis: Analysis,
        imports: HashMap<String, usize>,
    ) -> usize {
        self.modules.push(Module {
            file,
            path: path.clone(),
            program,
            analysis,
            imports,
        });
        let index = self.modules.len() - 1;
        self.by_path.insert(path, index);
        index
    }

    fn import(
        &mut self,
        path: &Path,
        from: FileId,
        span: Span,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<usize> {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.loading.contains(&canonical) {
            diags.push(
                Diagnostic::new(
                    Code::E139,
                    from,
                    span,
                    format!(
                        "`{}` imports itself (directly or through other programs)",
                        canonical.display()
                    ),
                )
                .with_help("programs must form a tree of imports"),
            );
            return None;
        }
        if let Some(&m) = self.by_path.get(&canonical) {
            return Some(m);
        }
        match std::fs::read(path) {
            Ok(bytes) => Some(self.add_bytes(path.display().to_string(), canonical, bytes)),
            Err(e) => {
                diags.push(Diagnostic::new(
                    Code::E138,
                    from,
                    span,
                    format!("cannot read `{}`: {e}", path.display()),
                ));
                None
            }
        }
    }

    fn resolve(&self, importer: &Path, use_path: &str) -> Resolved {
        if use_path.starts_with('@') {
            if self.options.lib_paths.is_empty() {
                return Resolved::NoLibPath;
            }
            let mut tried = Vec::new();
            for dir in &self.options.lib_paths {
                let p = dir.join(format!("{use_path}.prose"));
                if p.is_file() {
                    return Resolved::Path(p);
                }
                tried.push(p.display().to_string());
            }
            Resolved::NotFound(tried.join(", "))
        } else {
            let base = importer.parent().unwrap_or(Path::new("."));
            let mut p = base.join(use_path);
            if p.extension().is_none() {
                p.set_extension("prose");
            }
            if p.is_file() {
                Resolved::Path(p)
            } else {
                Resolved::NotFound(p.display().to_string())
            }
        }
    }
}

/// Whether `text` contains `name` as a whole word (names may contain `-` and `_`).
fn mentions(text: &str, name: &str) -> bool {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    !name.is_empty()
        && text.match_indices(name).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
        })
}

enum Resolved {
    Path(PathBuf),
    NotFound(String),
    NoLibPath,
}
