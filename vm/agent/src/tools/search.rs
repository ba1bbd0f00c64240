//! `list_files` and `grep`. Both walk the working directory the way ripgrep does (honouring
//! `.gitignore` and `.ignore` files, never entering `.git/` or `.prose/`, not following
//! symbolic links to directories) and show only files the agent may read.

use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, truncate_at, BuiltIn, ToolContext};
use crate::permissions::{PatternSet, Sandbox, STATE_DIR};
use crate::protected::GIT_DIR;
use futures_util::future::BoxFuture;
use prose_machine::protocol::ToolOutput;

/// Paths `list_files` returns at most.
pub const MAX_LIST_FILES: usize = 1000;

/// Matching lines `grep` returns at most.
pub const MAX_GREP_MATCHES: usize = 500;

/// Characters of a matching line `grep` shows.
pub const MAX_GREP_LINE_CHARS: usize = 500;

/// Bytes of output `grep` returns at most.
pub const MAX_GREP_BYTES: usize = 64 * 1024;

/// A walk of `root` with ripgrep's ignore rules, hidden files included, `.git/`, `.prose/`
/// (directly under the working directory) and the state directory skipped, sorted by name
/// at each level.
fn walk(root: &Path, sandbox: &Sandbox) -> ignore::Walk {
    let mut skipped = vec![sandbox.workdir().join(STATE_DIR)];
    skipped.extend(sandbox.protected().hidden().iter().cloned());
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |e| e.file_name() != GIT_DIR && !skipped.iter().any(|s| e.path() == s))
        .build()
}

/// Whether a walked entry is a file (or a symbolic link to one).
fn is_file(entry: &ignore::DirEntry) -> bool {
    match entry.file_type() {
        Some(t) if t.is_file() => true,
        Some(t) if t.is_symlink() => entry.path().is_file(),
        _ => false,
    }
}

/// `list_files {pattern}`: the files matching a glob, relative to the working directory.
pub struct ListFiles;

/// `list_files`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    pattern: String,
}

impl BuiltIn for ListFiles {
    type Args = ListArgs;
    const NAME: &'static str = "list_files";
    const DESCRIPTION: &'static str = "List files matching a glob, such as **/*.md.";
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, args: ListArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let result = async {
                let sandbox = cx.sandbox().clone();
                blocking(move || list(&sandbox, &args.pattern)).await
            }
            .await;
            result.into()
        })
    }
}

/// The first `max` files of the working directory that `sandbox` may read, relative to it,
/// in the order of a walk sorted by name, and whether there are more.
pub fn listing(sandbox: &Sandbox, max: usize) -> (Vec<String>, bool) {
    let workdir = sandbox.workdir();
    let mut found = Vec::new();
    for entry in walk(workdir, sandbox).flatten() {
        let Ok(rel) = entry.path().strip_prefix(workdir) else {
            continue;
        };
        if !is_file(&entry) || sandbox.check_read_path(rel).is_err() {
            continue;
        }
        if found.len() == max {
            return (found, true);
        }
        found.push(rel.to_string_lossy().into_owned());
    }
    (found, false)
}

/// The pattern relative to the working directory, or why it cannot be.
fn relative_pattern(sandbox: &Sandbox, pattern: &str) -> Result<String, String> {
    let trimmed = pattern.trim();
    if trimmed.is_empty() {
        return Err("`pattern` is empty".into());
    }
    let mut p = trimmed;
    if Path::new(p).is_absolute() {
        p = Path::new(p)
            .strip_prefix(sandbox.workdir())
            .ok()
            .and_then(|r| r.to_str())
            .ok_or_else(|| {
                format!(
                    "`{trimmed}` is outside the working directory `{}`; patterns are relative \
                     to it",
                    sandbox.workdir().display()
                )
            })?;
    }
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    if p.split('/').any(|c| c == "..") {
        return Err(
            "`..` is not allowed in patterns; they are relative to the working directory".into(),
        );
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() || p == "." {
        return Ok("**".into());
    }
    let has_meta = p.contains(['*', '?', '[', '{']);
    if !has_meta && sandbox.workdir().join(p).is_dir() {
        return Ok(format!("{p}/**"));
    }
    Ok(p.to_string())
}

fn list(sandbox: &Sandbox, pattern: &str) -> Result<String, String> {
    let glob = relative_pattern(sandbox, pattern)?;
    let matcher = GlobBuilder::new(&glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| format!("bad glob `{pattern}`: {}", e.kind()))?
        .compile_matcher();
    // Walk only below the pattern's literal leading directories.
    let literal: PathBuf = glob
        .split('/')
        .take_while(|c| !c.contains(['*', '?', '[', '{']))
        .collect();
    let workdir = sandbox.workdir();
    let mut start = workdir.join(&literal);
    while !start.is_dir() {
        match start.parent() {
            Some(p) if p.starts_with(workdir) => start = p.to_path_buf(),
            _ => start = workdir.to_path_buf(),
        }
    }
    let mut found = Vec::new();
    let mut total = 0usize;
    for entry in walk(&start, sandbox).flatten() {
        if !is_file(&entry) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(workdir) else {
            continue;
        };
        if !matcher.is_match(rel) || sandbox.check_read_path(rel).is_err() {
            continue;
        }
        total += 1;
        if found.len() < MAX_LIST_FILES {
            found.push(rel.to_string_lossy().into_owned());
        }
    }
    if found.is_empty() {
        return Ok(format!("No files match `{pattern}`."));
    }
    found.sort();
    let mut out = found.join("\n");
    if total > found.len() {
        out.push_str(&format!(
            "\n({} more files match; narrow the pattern)",
            total - found.len()
        ));
    }
    Ok(out)
}

/// `grep {pattern, path?, glob?}`: lines matching a regular expression, as `path:line:text`.
pub struct Grep;

/// `grep`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    pattern: String,
    path: Option<String>,
    #[schemars(skip)]
    glob: Option<String>,
}

impl BuiltIn for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search files for a regex; prints path:line:text.";
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, args: GrepArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let result = async {
                let matcher = RegexMatcherBuilder::new()
                    .build(&args.pattern)
                    .map_err(|e| format!("bad regular expression `{}`: {e}", args.pattern))?;
                let filter = match &args.glob {
                    Some(g) => Some(PatternSet::new(&[g.as_str()]).map_err(|e| e.to_string())?),
                    None => None,
                };
                let root = cx.search_path(args.path.as_deref().unwrap_or("."))?;
                let sandbox = cx.sandbox().clone();
                blocking(move || {
                    grep(
                        &sandbox,
                        root.path(),
                        &matcher,
                        filter.as_ref(),
                        &args.pattern,
                    )
                })
                .await
            }
            .await;
            result.into()
        })
    }
}

fn grep(
    sandbox: &Sandbox,
    root: &Path,
    matcher: &grep_regex::RegexMatcher,
    filter: Option<&PatternSet>,
    pattern: &str,
) -> Result<String, String> {
    let workdir = sandbox.workdir();
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut lines: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut full = false;
    let single = !root.is_dir();
    let files: Box<dyn Iterator<Item = PathBuf>> = if !single {
        Box::new(
            walk(root, sandbox)
                .flatten()
                .filter(is_file)
                .map(|e| e.into_path()),
        )
    } else {
        Box::new(std::iter::once(root.to_path_buf()))
    };
    for file in files {
        if full {
            break;
        }
        let rel = file
            .strip_prefix(workdir)
            .or_else(|_| file.strip_prefix(root))
            .unwrap_or(&file)
            .to_path_buf();
        if let Some(filter) = filter {
            if root.is_dir() && !filter.is_match(&rel) {
                continue;
            }
        }
        let Ok(checked) = sandbox.check_read_path(&file) else {
            continue;
        };
        // A file that cannot be read (removed meanwhile, no permission, several hard links)
        // is skipped, unless it is the one file to search.
        let opened = match checked.open_read() {
            Ok((f, meta)) if meta.is_file() => f,
            Ok(_) => continue,
            Err(e) if single => return Err(e),
            Err(_) => continue,
        };
        let shown = checked.display().to_string();
        let _ = searcher.search_file(
            matcher,
            &opened,
            Lossy(|number, text| {
                let text = text.trim_end_matches(['\n', '\r']);
                let text = match text.char_indices().nth(MAX_GREP_LINE_CHARS) {
                    Some((cut, _)) => format!("{}…", &text[..cut]),
                    None => text.to_string(),
                };
                let line = format!("{shown}:{number}:{text}");
                bytes += line.len() + 1;
                lines.push(line);
                if lines.len() >= MAX_GREP_MATCHES || bytes >= MAX_GREP_BYTES {
                    full = true;
                    return Ok(false);
                }
                Ok(true)
            }),
        );
    }
    if lines.is_empty() {
        return Ok(format!("No matches for `{pattern}`."));
    }
    let mut out = lines.join("\n");
    out = truncate_at(&out, MAX_GREP_BYTES).to_string();
    if full {
        out.push_str(&format!(
            "\n(stopped after {} matching lines; narrow the pattern, path or glob)",
            lines.len()
        ));
    }
    Ok(out)
}
