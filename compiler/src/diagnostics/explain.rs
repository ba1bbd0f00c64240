//! `prosec check --explain CODE`: a code's page from `docs/diagnostics.md`, which is built
//! into the compiler so the two never disagree.

use super::Code;

/// The diagnostics documentation.
const DOCS: &str = include_str!("../../../docs/diagnostics.md");

/// The documentation of `code`: its section of `docs/diagnostics.md`.
pub fn explain(code: Code) -> Option<&'static str> {
    let anchor = format!("<a id=\"{}\"></a>", code.as_str().to_ascii_lowercase());
    let start = DOCS.find(&anchor)? + anchor.len();
    let rest = &DOCS[start..];
    let end = [rest.find("<a id=\""), rest.find("\n## ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    Some(rest[..end].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_page() {
        for &code in Code::ALL {
            let page = explain(code).unwrap_or_else(|| panic!("{code} has no page"));
            assert!(page.starts_with(&format!("### {code}: ")), "{page}");
        }
    }
}
