//! Where `prose.toml` files are and the parts of them both tools read. A project's file is
//! the nearest one in the program's directory or above it (as Cargo finds `Cargo.toml`);
//! the user's is `$XDG_CONFIG_HOME/prose/prose.toml`, else `~/.config/prose/prose.toml`.
//! The project's settings win over the user's. `prosec` reads lint levels and pricing from
//! them, `prosevm` driver settings; each keeps its own keys but finds the files here.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The settings file's name.
pub const FILE_NAME: &str = "prose.toml";

/// The nearest `prose.toml` in `dir` or a directory above it (`dir` as given: callers that
/// want symbolic links resolved canonicalise it first).
pub fn project_file(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// The user's `prose.toml` (which may not exist).
pub fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("prose").join(FILE_NAME))
}

/// The `[models]` table: the model id each alias is sent as, for every driver, and in
/// `[models.openai]` or `[models.anthropic]` for that driver only (over the former).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelAliases {
    /// `model: sonnet`.
    pub sonnet: Option<String>,
    /// `model: opus`.
    pub opus: Option<String>,
    /// `model: haiku`.
    pub haiku: Option<String>,
    /// For the `openai` driver.
    #[serde(default)]
    pub openai: ProviderAliases,
    /// For the `anthropic` driver.
    #[serde(default)]
    pub anthropic: ProviderAliases,
}

/// A provider's own `[models.<driver>]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderAliases {
    /// `model: sonnet`.
    pub sonnet: Option<String>,
    /// `model: opus`.
    pub opus: Option<String>,
    /// `model: haiku`.
    pub haiku: Option<String>,
}

impl ProviderAliases {
    fn under(self, over: ProviderAliases) -> ProviderAliases {
        ProviderAliases {
            sonnet: over.sonnet.or(self.sonnet),
            opus: over.opus.or(self.opus),
            haiku: over.haiku.or(self.haiku),
        }
    }
}

impl ModelAliases {
    /// These aliases with `over`'s where it has them.
    pub fn under(self, over: ModelAliases) -> ModelAliases {
        ModelAliases {
            sonnet: over.sonnet.or(self.sonnet),
            opus: over.opus.or(self.opus),
            haiku: over.haiku.or(self.haiku),
            openai: self.openai.under(over.openai),
            anthropic: self.anthropic.under(over.anthropic),
        }
    }

    /// Each alias with the id it maps to for `driver`, where one is set: the driver's own
    /// table first, then the shared one.
    pub fn for_driver(&self, driver: &str) -> impl Iterator<Item = (&'static str, &str)> {
        fn pick<'a>(
            shared: &'a Option<String>,
            own: Option<&'a Option<String>>,
        ) -> Option<&'a str> {
            own.and_then(|o| o.as_deref()).or(shared.as_deref())
        }
        let own = match driver {
            "openai" => Some(&self.openai),
            "anthropic" => Some(&self.anthropic),
            _ => None,
        };
        [
            ("sonnet", pick(&self.sonnet, own.map(|o| &o.sonnet))),
            ("opus", pick(&self.opus, own.map(|o| &o.opus))),
            ("haiku", pick(&self.haiku, own.map(|o| &o.haiku))),
        ]
        .into_iter()
        .filter_map(|(alias, id)| id.map(|id| (alias, id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_file_above_is_the_projects() {
        let dir = std::env::temp_dir().join(format!("prosec-settings-{}", std::process::id()));
        let deep = dir.join("a/b");
        std::fs::create_dir_all(&deep).expect("dirs");
        std::fs::write(dir.join(FILE_NAME), "").expect("outer");
        assert_eq!(project_file(&deep), Some(dir.join(FILE_NAME)));
        std::fs::write(dir.join("a").join(FILE_NAME), "").expect("inner");
        assert_eq!(project_file(&deep), Some(dir.join("a").join(FILE_NAME)));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn aliases_merge_key_by_key() {
        let user: ModelAliases =
            toml::from_str("sonnet = \"s1\"\nopus = \"o1\"\n[anthropic]\nhaiku = \"h-a\"\n")
                .expect("user");
        let project: ModelAliases =
            toml::from_str("opus = \"o2\"\n[openai]\nsonnet = \"s-o\"\n").expect("project");
        let merged = user.under(project);
        assert_eq!(
            merged.for_driver("openai").collect::<Vec<_>>(),
            [("sonnet", "s-o"), ("opus", "o2")]
        );
        assert_eq!(
            merged.for_driver("anthropic").collect::<Vec<_>>(),
            [("sonnet", "s1"), ("opus", "o2"), ("haiku", "h-a")]
        );
        assert!(toml::from_str::<ModelAliases>("[gemini]\nsonnet = \"x\"\n").is_err());
    }
}
