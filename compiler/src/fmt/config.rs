//! The `[fmt]` table of `prose.toml`: the one layout choice users really differ on.
//!
//! ```toml
//! [fmt]
//! indent-width = 4
//! ```

use serde::Deserialize;
use std::path::Path;

/// How `prosec fmt` lays a file out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FmtOptions {
    /// Spaces per indentation level (1 to 8; 2 by default).
    pub indent_width: usize,
}

impl Default for FmtOptions {
    fn default() -> FmtOptions {
        FmtOptions { indent_width: 2 }
    }
}

/// The `[fmt]` table alone, of a file whose other tables are other commands' business.
#[derive(Deserialize)]
struct File {
    #[serde(default)]
    fmt: Option<prose_settings::FmtSettings>,
}

impl FmtOptions {
    /// The options in a `prose.toml`'s text (other tables are skipped).
    pub fn parse(text: &str) -> Result<FmtOptions, String> {
        let file: File = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let mut options = FmtOptions::default();
        if let Some(width) = file.fmt.and_then(|t| t.indent_width) {
            if !(1..=8).contains(&width) {
                return Err(format!(
                    "[fmt] indent-width must be between 1 and 8, not {width}"
                ));
            }
            options.indent_width = width as usize;
        }
        Ok(options)
    }

    /// The options for files in `dir`: from the nearest `prose.toml` in it or above, else
    /// the defaults.
    pub fn for_dir(dir: &Path) -> Result<FmtOptions, String> {
        match prose_settings::files::project_file(dir) {
            None => Ok(FmtOptions::default()),
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                FmtOptions::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indent_width_from_the_fmt_table() {
        assert_eq!(
            FmtOptions::parse("driver = \"mock\"\n"),
            Ok(FmtOptions::default())
        );
        assert_eq!(
            FmtOptions::parse("[fmt]\nindent-width = 4\n[lints]\nW108 = \"deny\"\n"),
            Ok(FmtOptions { indent_width: 4 })
        );
        assert!(FmtOptions::parse("[fmt]\nindent-width = 0\n").is_err());
        assert!(FmtOptions::parse("[fmt]\nline-width = 80\n").is_err());
    }
}
