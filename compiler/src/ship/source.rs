//! What an `import "NAME" from "SOURCE"` names: a directory beside the program, a GitHub
//! repository (a directory in it, a ref), or an npm package (a version, tag or range).

use bytecode_spec::bundle::is_bundle_path;

/// Where the skill GitHub repositories are fetched from (the user's git configuration may
/// rewrite it with `url.<base>.insteadOf`).
pub const GITHUB: &str = "https://github.com";

/// A parsed skill source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `./path` or `../path`, relative to the importing program's directory.
    Local(String),
    /// `github:OWNER/REPO[/SUBPATH][@REF]`.
    Github {
        /// The owner (user or organization).
        owner: String,
        /// The repository.
        repo: String,
        /// A directory inside the repository, if given.
        subpath: Option<String>,
        /// A branch, tag or commit, if given (else the default branch).
        reference: Option<String>,
    },
    /// `npm:PACKAGE[@VERSION]`.
    Npm {
        /// The package name, with its scope (`@scope/name`).
        package: String,
        /// An exact version, a dist-tag or a range, if given (else `latest`).
        version: Option<String>,
    },
}

impl Source {
    /// Parses a source as an import writes it.
    pub fn parse(text: &str) -> Result<Source, String> {
        if text.starts_with("./") || text.starts_with("../") {
            return Ok(Source::Local(text.to_string()));
        }
        if let Some(rest) = text.strip_prefix("github:") {
            return github(rest);
        }
        if let Some(rest) = text.strip_prefix("npm:") {
            return npm(rest);
        }
        Err("a skill source starts with `github:`, `npm:`, `./` or `../`".into())
    }

    /// What `prose.lock` pins for this source: the repository and ref (not the directory,
    /// so that skills from one repository and ref share one commit), or the package and the
    /// version asked for. `None` for local directories, which are not pinned.
    pub fn lock_key(&self) -> Option<String> {
        match self {
            Source::Local(_) => None,
            Source::Github {
                owner,
                repo,
                reference,
                ..
            } => Some(format!(
                "github:{owner}/{repo}@{}",
                reference.as_deref().unwrap_or("HEAD")
            )),
            Source::Npm { package, version } => Some(format!(
                "npm:{package}@{}",
                version.as_deref().unwrap_or("latest")
            )),
        }
    }
}

/// `OWNER/REPO[/SUBPATH][@REF]`.
fn github(rest: &str) -> Result<Source, String> {
    let (path, reference) = match rest.split_once('@') {
        Some((p, "")) => return Err(format!("`@` after `{p}` names no ref")),
        Some((p, r)) => (p, Some(r.to_string())),
        None => (rest, None),
    };
    let mut parts = path.splitn(3, '/');
    let owner = parts.next().unwrap_or_default();
    let repo = parts.next().unwrap_or_default();
    let subpath = parts.next().map(|s| s.trim_end_matches('/'));
    let plain = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if !plain(owner) || !plain(repo) {
        return Err(
            "write `github:OWNER/REPO`, optionally followed by `/DIRECTORY` and `@REF`".into(),
        );
    }
    if let Some(sub) = subpath {
        if !sub.is_empty() && !is_bundle_path(sub) {
            return Err(format!(
                "`{sub}` is not a directory inside the repository (no `..`, `.` or empty parts)"
            ));
        }
    }
    if let Some(r) = &reference {
        if r.starts_with('-') || r.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("`{r}` is not a git ref"));
        }
    }
    Ok(Source::Github {
        owner: owner.to_string(),
        repo: repo.to_string(),
        subpath: subpath.filter(|s| !s.is_empty()).map(str::to_string),
        reference,
    })
}

/// `PACKAGE[@VERSION]`, where the package may be scoped (`@scope/name`).
fn npm(rest: &str) -> Result<Source, String> {
    let (package, version) = match rest.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('@') {
            Some((p, v)) => (format!("@{p}"), Some(v)),
            None => (rest.to_string(), None),
        },
        None => match rest.split_once('@') {
            Some((p, v)) => (p.to_string(), Some(v)),
            None => (rest.to_string(), None),
        },
    };
    if !valid_package(&package) {
        return Err(format!("`{package}` is not an npm package name"));
    }
    let version = match version {
        Some("") => return Err(format!("`@` after `{package}` names no version")),
        Some(v) if v.chars().any(char::is_control) => {
            return Err(format!("`{v}` is not a version"))
        }
        v => v.map(str::to_string),
    };
    Ok(Source::Npm { package, version })
}

/// npm's rules for a package name: at most 214 characters, an optional `@scope/`, then a
/// name; neither starts with `.` or `_`; only URL-safe characters.
fn valid_package(name: &str) -> bool {
    let part = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && !s.starts_with('_')
            && s.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_' | '~')
            })
    };
    if name.len() > 214 {
        return false;
    }
    match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, n)) => part(scope) && part(n),
            None => false,
        },
        None => part(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_as_the_reference_writes_them() {
        assert_eq!(
            Source::parse("github:anthropic/skills"),
            Ok(Source::Github {
                owner: "anthropic".into(),
                repo: "skills".into(),
                subpath: None,
                reference: None
            })
        );
        assert_eq!(
            Source::parse("github:acme/tools/skills/pdf@v1.2"),
            Ok(Source::Github {
                owner: "acme".into(),
                repo: "tools".into(),
                subpath: Some("skills/pdf".into()),
                reference: Some("v1.2".into())
            })
        );
        assert_eq!(
            Source::parse("npm:@example/summarizer"),
            Ok(Source::Npm {
                package: "@example/summarizer".into(),
                version: None
            })
        );
        assert_eq!(
            Source::parse("npm:summarizer@^1.2"),
            Ok(Source::Npm {
                package: "summarizer".into(),
                version: Some("^1.2".into())
            })
        );
        assert_eq!(
            Source::parse("npm:@example/summarizer@2.0.0"),
            Ok(Source::Npm {
                package: "@example/summarizer".into(),
                version: Some("2.0.0".into())
            })
        );
        assert_eq!(
            Source::parse("./local-skills/file-reader"),
            Ok(Source::Local("./local-skills/file-reader".into()))
        );
    }

    #[test]
    fn malformed_sources_say_why() {
        for bad in [
            "github:",
            "github:owner",
            "github:../x",
            "github:a/b/../../etc",
            "github:a/b@",
            "github:a/b@--upload-pack=x",
            "npm:",
            "npm:Upper",
            "npm:@scope",
            "npm:x@",
            "https://example.com",
        ] {
            assert!(Source::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lock_keys_leave_out_the_directory() {
        let a = Source::parse("github:acme/tools/a@v1").unwrap();
        let b = Source::parse("github:acme/tools/b@v1").unwrap();
        assert_eq!(a.lock_key(), b.lock_key());
        assert_eq!(a.lock_key().as_deref(), Some("github:acme/tools@v1"));
        assert_eq!(
            Source::parse("npm:x").unwrap().lock_key().as_deref(),
            Some("npm:x@latest")
        );
        assert_eq!(Source::parse("./x").unwrap().lock_key(), None);
    }
}
