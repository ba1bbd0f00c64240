//! The `[fmt]` table of `prose.toml`: the one layout choice users really differ on. Read
//! through the settings crate like every other table: the user's file, then the project's
//! over it.
//!
//! ```toml
//! [fmt]
//! indent-width = 4
//! ```

use prose_settings::{FmtSettings, IndentWidth, Settings};
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

impl FmtOptions {
    /// The options `[fmt]` sets, over the defaults.
    pub fn from_settings(fmt: &FmtSettings) -> FmtOptions {
        let defaults = FmtOptions::default();
        FmtOptions {
            indent_width: fmt
                .indent_width
                .map_or(defaults.indent_width, IndentWidth::get),
        }
    }

    /// The options for files in `dir`: from its project's `prose.toml` (the nearest in it or
    /// above) over the user's, else the defaults.
    pub fn for_dir(dir: &Path) -> Result<FmtOptions, String> {
        let settings = Settings::load(None, dir).map_err(|e| e.to_string())?;
        Ok(FmtOptions::from_settings(&settings.fmt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(text: &str) -> FmtOptions {
        FmtOptions::from_settings(&Settings::parse(text).expect("valid").fmt)
    }

    #[test]
    fn indent_width_from_the_fmt_table() {
        assert_eq!(options("driver = \"mock\"\n"), FmtOptions::default());
        assert_eq!(
            options("[fmt]\nindent-width = 4\n[lints]\nW108 = \"deny\"\n"),
            FmtOptions { indent_width: 4 }
        );
    }
}
