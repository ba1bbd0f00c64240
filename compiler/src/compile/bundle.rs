//! Bundling: the skills a build's modules import, fetched (or found) once each.

use super::Compilation;
use crate::diagnostics::Diagnostic;
use crate::ship::{Bundle, Fetcher};

impl Compilation {
    /// Fetches (or finds) every skill that module `root` and the programs it imports import,
    /// as [`Bundle`]; each failure is a diagnostic at the import's source.
    pub fn bundle(&self, root: usize, fetcher: &mut Fetcher) -> (Bundle, Vec<Diagnostic>) {
        let mut out = Bundle::default();
        let mut diags = Vec::new();
        for mi in self.reachable(root) {
            let module = &self.modules[mi];
            let mut imports = Vec::new();
            for import in &module.analysis.program.skills {
                match fetcher.skill(&module.path, &import.name, &import.source) {
                    Ok(skill) => {
                        let digest = skill.digest();
                        let at = out.skills.iter().position(|s| {
                            s.name == skill.name && s.source == skill.source && s.digest() == digest
                        });
                        let index = at.unwrap_or_else(|| {
                            out.skills.push(skill);
                            out.skills.len() - 1
                        });
                        imports.push((import.name.clone(), index as u32));
                    }
                    Err(e) => diags.push(e.diagnostic(
                        module.file,
                        import.span,
                        &format!(
                            "cannot import skill `{}` from \"{}\"",
                            import.name, import.source
                        ),
                    )),
                }
            }
            if !imports.is_empty() {
                out.imports.insert(mi, imports);
            }
        }
        (out, diags)
    }
}
