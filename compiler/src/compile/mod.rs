//! The compilation driver: loads files and every program they import (once each), parses
//! and analyses them, and collects all diagnostics at their lint levels.
//!
//! Each file's own work ([`file`]) needs nothing from other files but the contracts of
//! the programs it imports, so [`Compilation::add_files`] reads and parses every file, and
//! analyses those that import nothing, on all cores; files are then added in the order
//! given (each after the programs it imports), so the diagnostics come out in the same
//! order as one file at a time.

mod bundle;
mod file;
mod imports;
mod projects;

use crate::diagnostics::{Code, Diagnostic};
use crate::lints::Level;
use crate::sema::Analysis;
use crate::source::{FileId, SourceMap};
use file::{Finished, Front, PENDING};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The `use` paths a program's text imports: the valid ones, each once, in order (the order
/// of the programs its artifact module links).
pub fn use_paths(text: &str) -> Vec<String> {
    file::Front::from_text(String::new(), PathBuf::new(), false, text.to_string())
        .uses()
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

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
    /// Keep only what checking needs (diagnostics and contracts), not each module's resolved
    /// program, which only code generation uses.
    pub check_only: bool,
}

/// One loaded program.
#[derive(Debug)]
pub struct Module {
    /// Its file in the source map.
    pub file: FileId,
    /// Canonical path (or the name given for in-memory sources).
    pub path: PathBuf,
    /// Its analysis: contract and resolved program.
    pub analysis: Analysis,
    /// For each `use` path: the module it resolved to.
    pub imports: HashMap<String, usize>,
}

/// Everything loaded by one invocation: sources, modules and diagnostics.
#[derive(Default)]
pub struct Compilation {
    /// All source files read.
    pub sources: SourceMap,
    /// All modules, dependencies before dependents.
    pub modules: Vec<Module>,
    /// All diagnostics, with their final severities.
    pub diagnostics: Vec<Diagnostic>,
    options: Options,
    by_path: FxHashMap<PathBuf, usize>,
    /// The files being loaded, outermost first (an import of one of them is a cycle).
    loading: Vec<PathBuf>,
    /// The nearest `prose.toml` of each directory looked up.
    configs: FxHashMap<PathBuf, Option<PathBuf>>,
    /// What each project's `prose.toml` (or none), over the user's, gives.
    projects: FxHashMap<Option<PathBuf>, projects::Project>,
    /// The settings files whose problems have been reported, as sources.
    settings_files: FxHashMap<PathBuf, crate::source::FileId>,
    /// Files of [`Compilation::add_files`] read (or analysed) ahead, by canonical path.
    ready: FxHashMap<PathBuf, Ready>,
    /// Texts that stand for files when they are imported (an editor's unsaved buffers), by
    /// canonical path.
    overlay: FxHashMap<PathBuf, String>,
    /// Fetches registry programs not under a library path (none: such imports are
    /// unresolved, or not found when imports are required).
    fetcher: Option<crate::ship::Fetcher>,
}

impl std::fmt::Debug for Compilation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compilation")
            .field("modules", &self.modules)
            .field("diagnostics", &self.diagnostics)
            .finish_non_exhaustive()
    }
}

/// A file prepared ahead of its turn.
enum Ready {
    /// Parsed; it imports programs, so its analysis waits for theirs.
    Parsed(Front),
    /// Analysed (it imports nothing), under the project it belongs to.
    Finished(Box<Finished>, Option<PathBuf>),
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

    /// A new, empty compilation in which the program imported from each path of `overlay`
    /// is the text given there rather than the file's (an editor's unsaved buffers). Paths
    /// are canonical, or as given for files that do not exist.
    pub fn with_overlay(options: Options, overlay: FxHashMap<PathBuf, String>) -> Compilation {
        Compilation {
            overlay,
            ..Compilation::new(options)
        }
    }

    /// Module `root` and every program it imports (transitively), each once: the root
    /// first, then imports breadth first, each module's in the order of their indices. This
    /// is the order of the artifact's modules.
    pub fn reachable(&self, root: usize) -> Vec<usize> {
        let mut order = vec![root];
        let mut seen: FxHashSet<usize> = FxHashSet::default();
        seen.insert(root);
        let mut i = 0;
        while i < order.len() {
            let mut deps: Vec<usize> = self.modules[order[i]].imports.values().copied().collect();
            deps.sort_unstable();
            for d in deps {
                if seen.insert(d) {
                    order.push(d);
                }
            }
            i += 1;
        }
        order
    }

    /// A new, empty compilation that fetches registry programs found under no library path
    /// with `fetcher` (pinned in its `prose.lock`, kept in its cache).
    pub fn with_fetcher(options: Options, fetcher: crate::ship::Fetcher) -> Compilation {
        Compilation {
            fetcher: Some(fetcher),
            ..Compilation::new(options)
        }
    }

    /// The fetcher given to [`Compilation::with_fetcher`], if any.
    pub fn fetcher_mut(&mut self) -> Option<&mut crate::ship::Fetcher> {
        self.fetcher.as_mut()
    }

    /// Gives the fetcher back (to bundle skills, and write the lock).
    pub fn take_fetcher(&mut self) -> Option<crate::ship::Fetcher> {
        self.fetcher.take()
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
        let front = Front::from_bytes(path.display().to_string(), canonical, true, bytes);
        Ok(self.add_front(front))
    }

    /// Loads files (and their imports), reading, parsing and analysing them on all cores,
    /// with the same modules and diagnostics, in the same order, as [`Compilation::add_file`]
    /// on each in turn. Returns their module indices; fails on the first file that cannot
    /// be read.
    pub fn add_files(&mut self, paths: &[PathBuf]) -> Result<Vec<usize>, LoadError> {
        // Canonical paths: each directory resolved once; a file that is a link, on its own.
        let mut dirs: FxHashMap<&Path, Option<PathBuf>> = FxHashMap::default();
        let canonical: Vec<PathBuf> = paths
            .iter()
            .map(|p| {
                let link =
                    std::fs::symlink_metadata(p).map_or(true, |m| m.file_type().is_symlink());
                let (Some(dir), Some(name), false) = (p.parent(), p.file_name(), link) else {
                    return std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                };
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                match dirs
                    .entry(dir)
                    .or_insert_with(|| std::fs::canonicalize(dir).ok())
                {
                    Some(d) => d.join(name),
                    None => p.to_path_buf(),
                }
            })
            .collect();
        // Each file once, with its project's lint levels (looked up once per directory).
        let mut jobs = Vec::with_capacity(paths.len());
        let mut seen = FxHashSet::default();
        for (path, canonical) in paths.iter().zip(&canonical) {
            if self.by_path.contains_key(canonical) || !seen.insert(canonical) {
                continue;
            }
            let project = self.project_of(Some(canonical));
            let levels = self.project(&project).clone();
            jobs.push((path, canonical.clone(), project, levels));
        }
        // Read and parse every file, and analyse those that import nothing, side by side.
        let check_only = self.options.check_only;
        let none = HashMap::new();
        type Job<'a> = (&'a PathBuf, PathBuf, Option<PathBuf>, crate::lints::Levels);
        let load = |(path, canonical, project, levels): Job| {
            let bytes = std::fs::read(path).map_err(|e| LoadError::Io(path.to_path_buf(), e))?;
            let front = Front::from_bytes(path.display().to_string(), canonical, true, bytes);
            Ok(if front.uses().is_empty() {
                let f = file::finish(front, &none, Vec::new(), &levels, check_only);
                Ready::Finished(Box::new(f), project)
            } else {
                Ready::Parsed(front)
            })
        };
        // One file is read on this thread: starting the pool would cost more than it saves.
        let ready: Vec<Result<Ready, LoadError>> = if jobs.len() > 1 {
            crate::threads::pool().install(|| jobs.into_par_iter().map(load).collect())
        } else {
            jobs.into_iter().map(load).collect()
        };
        for r in ready {
            let r = r?;
            let canonical = match &r {
                Ready::Parsed(front) => front.canonical.clone(),
                Ready::Finished(f, _) => f.canonical.clone(),
            };
            self.ready.insert(canonical, r);
        }
        // Then each takes its place in order, after the programs it imports.
        Ok(canonical
            .into_iter()
            .map(|canonical| match self.by_path.get(&canonical) {
                Some(&m) => m,
                None => match self.ready.remove(&canonical) {
                    Some(ready) => self.add_ready(ready),
                    // Loaded as an import of an earlier file.
                    None => self.by_path[&canonical],
                },
            })
            .collect())
    }

    /// Compiles in-memory source; relative imports resolve against `path`'s directory. When
    /// `path` names an existing file (an editor buffer, say), the source stands for that file,
    /// so an import of it is recognized as a cycle, and its project's `prose.toml` counts.
    pub fn add_source(&mut self, path: &Path, text: &str) -> usize {
        let on_disk = path.is_file();
        // The canonical path only matters to a program that imports others (cycles, relative
        // paths) or to one on disk; skip the file-system lookup for the rest.
        let canonical = if text.contains("use") || on_disk {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        } else {
            path.to_path_buf()
        };
        let front = Front::from_text(
            path.display().to_string(),
            canonical,
            on_disk,
            text.to_string(),
        );
        self.add_front(front)
    }

    fn add_ready(&mut self, ready: Ready) -> usize {
        match ready {
            Ready::Parsed(front) => self.add_front(front),
            Ready::Finished(f, project) => self.add_finished(*f, HashMap::new(), &project),
        }
    }

    /// Loads a parsed file's imports, then analyses it and adds it.
    fn add_front(&mut self, front: Front) -> usize {
        let (statuses, imports, diags) = self.resolve_imports(&front);
        let project = if front.on_disk {
            self.project_of(Some(&front.canonical))
        } else {
            None
        };
        let levels = self.project(&project).clone();
        let finished = file::finish(front, &statuses, diags, &levels, self.options.check_only);
        self.add_finished(finished, imports, &project)
    }

    /// Gives an analysed file its place: its id in the source map, its diagnostics (after
    /// its project's own problems), its module.
    fn add_finished(
        &mut self,
        f: Finished,
        imports: HashMap<String, usize>,
        project: &Option<PathBuf>,
    ) -> usize {
        self.report_project(project);
        let Finished {
            canonical,
            source,
            analysis,
            diagnostics,
        } = f;
        let file = self.sources.push(source);
        self.diagnostics
            .extend(diagnostics.into_iter().map(|mut d| {
                d.file = file;
                for l in &mut d.secondary {
                    if l.file == PENDING {
                        l.file = file;
                    }
                }
                d
            }));
        self.modules.push(Module {
            file,
            path: canonical.clone(),
            analysis,
            imports,
        });
        let index = self.modules.len() - 1;
        self.by_path.insert(canonical, index);
        index
    }
}
