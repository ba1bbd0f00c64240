//! Resolving `use` paths: relative ones against the importing file, registry ones through
//! the library paths; loading each imported program once, and refusing import cycles.

use super::file::{Front, PENDING};
use super::{Compilation, Ready};
use crate::diagnostics::{Code, Diagnostic};
use crate::sema::ImportStatus;
use crate::span::Span;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

enum Resolved {
    Path(PathBuf),
    /// Fetched from the program registry into the cache.
    Fetched(PathBuf),
    NotFound(String),
    NoLibPath,
    /// The registry could not give it.
    FetchFailed(crate::ship::FetchError),
}

impl Compilation {
    /// Loads every program `front` imports; returns what was found for each `use` path, the
    /// module of each one loaded, and the problems (against [`PENDING`]).
    pub(super) fn resolve_imports(
        &mut self,
        front: &Front,
    ) -> (
        HashMap<String, ImportStatus>,
        HashMap<String, usize>,
        Vec<Diagnostic>,
    ) {
        let mut statuses = HashMap::new();
        let mut imports = HashMap::new();
        let mut diags = Vec::new();
        let uses = front.uses();
        if uses.is_empty() {
            return (statuses, imports, diags);
        }
        self.loading.push(front.canonical.clone());
        for (text, span) in uses {
            let found = match self.resolve(&front.canonical, &text) {
                Resolved::Path(p) => Ok((p.display().to_string(), p)),
                Resolved::Fetched(p) => Ok((text.clone(), p)),
                other => Err(other),
            };
            let status = match found {
                Ok((display, p)) => match self.import(&p, display, span, &mut diags) {
                    Some(m) => {
                        imports.insert(text.clone(), m);
                        ImportStatus::Resolved(self.modules[m].analysis.contract.clone())
                    }
                    None => ImportStatus::Failed,
                },
                Err(Resolved::FetchFailed(e)) => {
                    let mut d =
                        e.diagnostic(PENDING, span, &format!("cannot fetch program `{text}`"));
                    if e.kind == crate::ship::Failure::NotFound {
                        d.code = Code::E138;
                    }
                    diags.push(d);
                    ImportStatus::Failed
                }
                Err(Resolved::Path(_) | Resolved::Fetched(_)) => unreachable!("taken above"),
                Err(Resolved::NotFound(tried)) => {
                    diags.push(
                        Diagnostic::new(
                            Code::E138,
                            PENDING,
                            span,
                            format!("cannot find program `{text}`"),
                        )
                        .with_help(format!("looked for {tried}")),
                    );
                    ImportStatus::Failed
                }
                Err(Resolved::NoLibPath) if self.options.require_imports => {
                    diags.push(
                        Diagnostic::new(
                            Code::E138,
                            PENDING,
                            span,
                            format!("cannot find program `{text}`"),
                        )
                        .with_help("pass --lib-path DIR with DIR/@handle/slug.prose"),
                    );
                    ImportStatus::Failed
                }
                Err(Resolved::NoLibPath) => {
                    diags.push(
                        Diagnostic::new(
                            Code::W119,
                            PENDING,
                            span,
                            format!(
                                "`{text}` is not resolved: its inputs and outputs are not checked"
                            ),
                        )
                        .with_help("pass --lib-path DIR with DIR/@handle/slug.prose to check it"),
                    );
                    ImportStatus::Unresolved
                }
            };
            statuses.insert(text, status);
        }
        self.loading.pop();
        (statuses, imports, diags)
    }

    /// Loads the program at `path`, shown as `display` in diagnostics.
    fn import(
        &mut self,
        path: &Path,
        display: String,
        span: Span,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<usize> {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.loading.contains(&canonical) {
            diags.push(
                Diagnostic::new(
                    Code::E139,
                    PENDING,
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
        // A file given on the command line too may be read (or checked) already; it is shown
        // as the import names it, as if read here.
        if let Some(mut ready) = self.ready.remove(&canonical) {
            match &mut ready {
                Ready::Parsed(front) => front.display = display,
                Ready::Finished(f, _) => f.source.path = display,
            }
            return Some(self.add_ready(ready));
        }
        if let Some(text) = self.overlay.get(&canonical) {
            let on_disk = path.is_file();
            let front = Front::from_text(display, canonical, on_disk, text.clone());
            return Some(self.add_front(front));
        }
        match std::fs::read(path) {
            Ok(bytes) => {
                let front = Front::from_bytes(display, canonical, true, bytes);
                Some(self.add_front(front))
            }
            Err(e) => {
                diags.push(Diagnostic::new(
                    Code::E138,
                    PENDING,
                    span,
                    format!("cannot read `{}`: {e}", path.display()),
                ));
                None
            }
        }
    }

    fn resolve(&mut self, importer: &Path, use_path: &str) -> Resolved {
        if use_path.starts_with('@') {
            let mut tried = Vec::new();
            for dir in &self.options.lib_paths {
                let p = dir.join(format!("{use_path}.prose"));
                if p.is_file() || self.overlay.contains_key(&p) {
                    return Resolved::Path(p);
                }
                tried.push(p.display().to_string());
            }
            // Not under a library path: the registry's, through the lock and the cache.
            if let Some(fetcher) = self.fetcher.as_mut() {
                return match fetcher.program(use_path) {
                    Ok(p) => Resolved::Fetched(p),
                    Err(e) => Resolved::FetchFailed(e),
                };
            }
            if tried.is_empty() {
                return Resolved::NoLibPath;
            }
            Resolved::NotFound(tried.join(", "))
        } else {
            let base = importer.parent().unwrap_or(Path::new("."));
            let mut p = base.join(use_path);
            if p.extension().is_none() {
                p.set_extension("prose");
            }
            if p.is_file() || self.overlay.contains_key(&p) {
                Resolved::Path(p)
            } else {
                Resolved::NotFound(p.display().to_string())
            }
        }
    }
}
