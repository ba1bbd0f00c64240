//! Every relative link of README.md and docs/*.md leads somewhere: to a file or directory of
//! the repository and, with `#anchor`, to a heading (or an HTML anchor) of that page, by
//! GitHub's anchor rules.

use crate::markdown::{root, user_pages, Page};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// `path` with `.` and `..` taken out (no file system access: a link to a missing file must
/// be reported, not followed).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// What is wrong with the links of `pages`, under the repository at `root`: one line each.
/// Pages other than `pages` that a link names with an anchor are read from `root`.
pub fn broken_links(root: &Path, pages: &[Page]) -> Vec<String> {
    let mut known: BTreeMap<PathBuf, Page> =
        pages.iter().map(|p| (p.path.clone(), p.clone())).collect();
    let mut failures = Vec::new();
    for page in pages {
        let dir = page.path.parent().unwrap_or(Path::new(""));
        for link in &page.links {
            let dest = link.dest.as_str();
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let at = format!("{}:{}: `{dest}`", page.path.display(), link.line);
            let (file, anchor) = match dest.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (dest, None),
            };
            let target = if file.is_empty() {
                page.path.clone()
            } else {
                normal(&dir.join(file))
            };
            let here = file.is_empty();
            if !here && (target.starts_with("..") || !root.join(&target).exists()) {
                failures.push(format!("{at}: {} does not exist", target.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if target.extension().is_none_or(|x| x != "md") {
                failures.push(format!("{at}: an anchor into a file that is not Markdown"));
                continue;
            }
            let page = known.entry(target.clone()).or_insert_with(|| {
                let text = std::fs::read_to_string(root.join(&target)).unwrap_or_default();
                Page::parse(target.clone(), text)
            });
            if !page.anchors.contains(anchor) {
                failures.push(format!(
                    "{at}: {} has no heading or anchor `#{anchor}`",
                    target.display()
                ));
            }
        }
    }
    failures
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let pages = user_pages();
    let count: usize = pages.iter().map(|p| p.links.len()).sum();
    assert!(
        count > 100,
        "only {count} links found in README.md and docs/"
    );
    let failures = broken_links(&root(), &pages);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The check can fail: a missing file, a missing anchor, an anchor into a page it has not
/// read yet, and a link out of the repository are each reported; good links are not.
#[test]
fn broken_links_are_reported() {
    let dir = support_dir();
    std::fs::create_dir_all(dir.join("docs")).expect("docs");
    std::fs::write(dir.join("other.md"), "# Other page\n\n## `run` options\n").expect("other");
    std::fs::write(dir.join("docs/a.md"), "# A\n").expect("a");
    let readme = Page::parse(
        PathBuf::from("README.md"),
        "# Top\n\n## Part two\n\n[a](docs/a.md) [b](docs/b.md) [c](other.md#run-options) \
         [d](other.md#nope) [e](#part-two) [f](#part-three) [g](../outside.md) \
         [h](https://example.org/x.md#y)\n"
            .to_string(),
    );
    let failures = broken_links(&dir, &[readme]);
    assert_eq!(failures.len(), 4, "{failures:#?}");
    assert!(failures[0].contains("`docs/b.md`: docs/b.md does not exist"));
    assert!(failures[1].contains("other.md has no heading or anchor `#nope`"));
    assert!(failures[2].contains("README.md has no heading or anchor `#part-three`"));
    assert!(failures[3].contains("`../outside.md`"));
}

fn support_dir() -> PathBuf {
    crate::support::scratch("docs-links")
}
