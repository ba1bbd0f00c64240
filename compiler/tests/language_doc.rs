//! `docs/language.md` is the language's guide, and its examples are programs: every
//! ```` ```prose ```` block in it is compiled here, so an example cannot drift from what
//! `prosec` accepts.
//!
//! A block is checked with every lint turned on. Words after `prose` on its fence say what it
//! must produce:
//!
//! - nothing: no diagnostic at all, and the program builds to an artifact that loads back;
//! - `warn=W108` (codes separated by commas, one per diagnostic expected): exactly those
//!   warnings, no error, and it builds;
//! - `error=E017`: exactly those codes, at least one of them an error (a counter-example);
//! - `file=lib/x.prose`: besides being checked, the block is saved under that path (beside
//!   the others) for the blocks that import it.
//!
//! [`CHECKLIST`] names every construct the guide must cover, with the anchor of its section
//! and pieces of syntax the section's examples must show, so a construct cannot lose its
//! example without this test failing.

use prosec::compile::{Compilation, Options};
use prosec::diagnostics::termcolor::NoColor;
use prosec::diagnostics::Code;
use prosec::lints::Level;
use std::path::{Path, PathBuf};

/// A construct the guide must cover: the anchor of the section about it (GitHub's, from the
/// heading) and pieces of syntax that the examples of that section (its subsections
/// included) must show between them.
struct Construct {
    anchor: &'static str,
    shows: &'static [&'static str],
}

const fn c(anchor: &'static str, shows: &'static [&'static str]) -> Construct {
    Construct { anchor, shows }
}

/// Every construct of the language, in the guide's order.
const CHECKLIST: &[Construct] = &[
    c(
        "a-first-program",
        &["input ", "agent ", "session", "output "],
    ),
    c("comments", &["# ", "   # "]),
    c("indentation-and-line-breaks", &["[\n", "for area in"]),
    c("strings", &["\\\"", "\\n", "src/**/*.ts", "\\{"]),
    c("multi-line-strings", &["session \"\"\"\n", "\"\"\"Review"]),
    c(
        "interpolation",
        &["{outline.parts[0]}", "{outline.title}", "{slug}"],
    ),
    c(
        "numbers-booleans-and-null",
        &["= 3", "= 0.8", "true", "null"],
    ),
    c(
        "lists-and-records",
        &["tags: [", "= {", "\"reading-time\":", "  title,"],
    ),
    c(
        "field-access-and-indexing",
        &["profile.langs[0]", "[-1]", "{profile.name}"],
    ),
    c("operators", &[" + ", " - ", " > ", " and ", "not ", " is "]),
    c(
        "text-read-as-structure",
        &["for step in steps", "repeat count", "if risky"],
    ),
    c("let", &["let research = session", "let summary = do:"]),
    c("const", &["const style"]),
    c("reassignment", &["draft = session", "total = session"]),
    c("names", &["market-trends", "let index", "let context"]),
    c("scope", &["else:\n  let sources"]),
    c("agents", &["agent reviewer:"]),
    c("model", &["model: haiku", "model: opus", "model: \""]),
    c("prompt", &["prompt: \"\"\"", "{audience}"]),
    c(
        "persist",
        &[
            "persist: true",
            "persist: project",
            "persist: user",
            "persist: \"",
        ],
    ),
    c("skills", &["skills: [\""]),
    c(
        "permissions",
        &["read: [", "write: [", "execute: [", "bash: ", "network: ["],
    ),
    c("tools", &["tools: none", "tools: all", "tools: ["]),
    c("context-on-an-agent", &["  context: charter"]),
    c("description", &["description: \""]),
    c("other-properties", &["retry: 3"]),
    c(
        "forms-of-a-session",
        &[
            "session \"",
            "session: analyst",
            "session landscape: analyst",
            "session\n  prompt:",
        ],
    ),
    c(
        "session-properties",
        &[
            "prompt: question",
            "model: opus",
            "permissions:",
            "retry: 2",
            "context: \"AI\" model: haiku",
            "context: answer -> session",
        ],
    ),
    c(
        "context",
        &[
            "context: [",
            "context: { summary: report",
            "context: style-guide",
            "file: \"",
            "context: []",
            "context: \"",
        ],
    ),
    c("inherited-context", &["context: []"]),
    c(
        "retry-and-backoff",
        &["retry: 3", "backoff: exponential", "backoff: \"linear\""],
    ),
    c(
        "persistent-agents-and-memory",
        &["persist: true", "resume: captain"],
    ),
    c(
        "resume",
        &["resume: captain", "session: captain", "resume: helper"],
    ),
    c("inputs", &["input repo: \"", "input focus: \"\"\""]),
    c("mid-program-inputs", &["input favourite: **"]),
    c(
        "outputs",
        &[
            "output summary =",
            "output upgrade-notes",
            "output draft = draft",
        ],
    ),
    c(
        "importing-skills",
        &["from \"github:", "from \"npm:", "from \"./"],
    ),
    c("using-programs", &["use \"./lib/research.prose\"\n"]),
    c(
        "invoking-a-program",
        &["as deep-dive", "deep-dive(topic:", "result.findings"],
    ),
    c("destructuring-outputs", &["let { findings, sources } ="]),
    c("programs-as-skills", &["skills: [\"research\"]"]),
    c("do", &["= do:"]),
    c("blocks", &["do checks", "block checks:"]),
    c(
        "block-parameters",
        &[
            "block review(topic, mode):",
            "do review(",
            "block announce():",
            "do announce()",
        ],
    ),
    c(
        "outputs-of-a-block",
        &[
            ": output text",
            "output session",
            "output grade-note =",
            "do summarize(halves[0]",
        ],
    ),
    c("inline-sequences", &[" -> "]),
    c("parallel-blocks", &["= parallel:"]),
    c("named-results", &["market = session", "context: { market"]),
    c(
        "join-strategies",
        &["(\"first\")", "(\"any\", count: 2)", "(all)"],
    ),
    c(
        "failure-policies",
        &[
            "on-fail: \"ignore\"",
            "(\"first\", on-fail: \"continue\")",
            "on-fail: continue",
        ],
    ),
    c("what-branches-share", &["notes = notes + ["]),
    c("repeat", &["repeat 3:", "as i:"]),
    c("for", &["for topic in [", "for chapter, n in"]),
    c(
        "parallel-for",
        &["parallel for city, i in", ") for city in"],
    ),
    c(
        "loop-loop-until-loop-while",
        &[
            "loop until **",
            "loop while **",
            "(max: 5)",
            "as attempt:",
            "loop until approved",
            "loop (max: 4):",
        ],
    ),
    c("loop-limits", &["loop until **every"]),
    c(
        "pipelines",
        &["| map:", "| filter:", "| reduce(", "| pmap:"],
    ),
    c("map", &["| map:"]),
    c("filter", &["| filter:"]),
    c("reduce", &["| reduce(doc, part):"]),
    c("pmap", &["| pmap:"]),
    c(
        "chaining",
        &["\n  | filter:", "\n  | map:", "\n  | reduce("],
    ),
    c("discretion-conditions", &["if **"]),
    c("multi-line-conditions", &["if ***\n", "***:"]),
    c("if-elif-else", &["= if **", "elif **", "else:"]),
    c("mixed-conditions", &["** or depth", "and not **"]),
    c("choice", &["choice **", "option \""]),
    c("try-catch-finally", &["= try:", "catch:", "finally:"]),
    c("catch-as", &["catch as err:", "{err.message}"]),
    c("throw", &["throw \"", "    throw\n"]),
    c(
        "assert",
        &["assert count == 0: \"", "assert summary != \"\":\n"],
    ),
    c("forms-from-published-programs", &["security = try:"]),
];

/// What a fence says its example must produce.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// No diagnostic; it builds.
    Clean,
    /// Exactly these warnings (sorted); it builds.
    Warnings(Vec<Code>),
    /// Exactly these codes (sorted), an error among them.
    Errors(Vec<Code>),
}

/// One ```` ```prose ```` block.
struct Example {
    /// The 1-based line of its opening fence.
    line: usize,
    text: String,
    expect: Expect,
    /// Where it is saved for other blocks to import.
    file: Option<String>,
}

/// One heading.
struct Heading {
    level: usize,
    anchor: String,
    line: usize,
}

/// What the checks read from a page.
struct Page {
    headings: Vec<Heading>,
    examples: Vec<Example>,
    /// In-page links (`](#anchor)`), with their lines.
    links: Vec<(usize, String)>,
    /// Fences that cannot be understood, as failure messages.
    problems: Vec<String>,
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// What the words after `prose` on a fence ask for, or why they cannot be understood.
fn fence_words(words: &[&str]) -> Result<(Expect, Option<String>), String> {
    let mut expect = Expect::Clean;
    let mut file = None;
    let codes = |list: &str| -> Result<Vec<Code>, String> {
        let mut codes = list
            .split(',')
            .map(|c| Code::parse(c).ok_or_else(|| format!("`{c}` is not a diagnostic code")))
            .collect::<Result<Vec<_>, _>>()?;
        codes.sort();
        Ok(codes)
    };
    for word in words {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| format!("`{word}` is not `key=value`"))?;
        let set = |expect: &mut Expect, new: Expect| {
            if *expect != Expect::Clean {
                return Err("a fence takes one `warn=` or `error=`".to_string());
            }
            *expect = new;
            Ok(())
        };
        match key {
            "warn" => set(&mut expect, Expect::Warnings(codes(value)?))?,
            "error" => set(&mut expect, Expect::Errors(codes(value)?))?,
            "file" => {
                let path = Path::new(value);
                let relative = path.is_relative()
                    && path
                        .components()
                        .all(|c| matches!(c, std::path::Component::Normal(_)));
                if !relative || !value.ends_with(".prose") {
                    return Err(format!(
                        "`file={value}` must be a relative `.prose` path without `..`"
                    ));
                }
                file = Some(value.to_string());
            }
            _ => return Err(format!("unknown fence word `{key}` (warn, error, file)")),
        }
    }
    Ok((expect, file))
}

/// Reads a Markdown page's headings, ```` ```prose ```` blocks and in-page links. Lines
/// inside any fenced block are neither headings nor links.
fn parse(markdown: &str) -> Page {
    let mut page = Page {
        headings: Vec::new(),
        examples: Vec::new(),
        links: Vec::new(),
        problems: Vec::new(),
    };
    let mut lines = markdown.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("```") {
            let fence = format!(
                "```{}",
                rest.chars().take_while(|&c| c == '`').collect::<String>()
            );
            let info: Vec<&str> = trimmed[fence.len()..].split_whitespace().collect();
            let indent = line.len() - trimmed.len();
            let mut text = String::new();
            let mut closed = false;
            for (_, body) in lines.by_ref() {
                let t = body.trim();
                if t.starts_with(&fence) && t.chars().all(|c| c == '`') {
                    closed = true;
                    break;
                }
                let strip = body.len() - body.trim_start_matches(' ').len();
                text.push_str(&body[strip.min(indent)..]);
                text.push('\n');
            }
            if !closed {
                page.problems
                    .push(format!("line {}: the fence is never closed", i + 1));
            }
            if info.first() == Some(&"prose") {
                match fence_words(&info[1..]) {
                    Ok((expect, file)) => page.examples.push(Example {
                        line: i + 1,
                        text,
                        expect,
                        file,
                    }),
                    Err(e) => page.problems.push(format!("line {}: {e}", i + 1)),
                }
            }
            continue;
        }
        let level = line.chars().take_while(|&c| c == '#').count();
        if level > 0 && line[level..].starts_with(' ') {
            page.headings.push(Heading {
                level,
                anchor: anchor(&line[level..]),
                line: i + 1,
            });
        }
        let mut rest = line;
        while let Some(at) = rest.find("](#") {
            let after = &rest[at + 3..];
            let end = after.find(')').unwrap_or(after.len());
            page.links.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    page
}

/// A compilation that reports every lint as a warning.
fn every_lint() -> Options {
    Options {
        lints: Code::ALL
            .iter()
            .filter(|c| c.is_lint())
            .map(|&c| (c, Level::Warn))
            .collect(),
        ..Options::default()
    }
}

/// Compiles every example of `markdown` in a fresh directory `dir` and returns a message for
/// each one that does not produce what its fence says. `doc` names the page in messages.
fn check_examples(markdown: &str, doc: &str, dir: &Path) -> Vec<String> {
    let page = parse(markdown);
    let mut failures: Vec<String> = page
        .problems
        .iter()
        .map(|p| format!("{doc}: {p}"))
        .collect();
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove the previous examples");
    }
    std::fs::create_dir_all(dir).expect("create the examples' directory");
    // The examples' own project, so that no `prose.toml` above changes what they report.
    std::fs::write(dir.join("prose.toml"), "# docs/language.md's examples\n")
        .expect("write prose.toml");
    let mut paths = Vec::with_capacity(page.examples.len());
    for ex in &page.examples {
        let path = match &ex.file {
            Some(f) => dir.join(f),
            None => dir.join(format!("line-{}.prose", ex.line)),
        };
        if path.exists() {
            failures.push(format!(
                "{doc}:{}: another example is already saved as {}",
                ex.line,
                path.display()
            ));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create the example's directory");
        }
        std::fs::write(&path, &ex.text).expect("write the example");
        paths.push(path);
    }
    for (ex, path) in page.examples.iter().zip(&paths) {
        if let Err(why) = check_one(ex, path) {
            failures.push(format!("{doc}:{}: {why}\n{}", ex.line, ex.text));
        }
    }
    failures
}

/// Compiles one saved example and compares what it reports with its fence.
fn check_one(ex: &Example, path: &Path) -> Result<(), String> {
    let mut c = Compilation::new(every_lint());
    let root = c
        .add_file(path)
        .map_err(|e| format!("cannot load the example: {e}"))?;
    let file = c.modules[root].file;
    let mut rendered = NoColor::new(Vec::new());
    prosec::diagnostics::render_text(&mut rendered, &c.sources, &c.diagnostics)
        .expect("rendering to memory cannot fail");
    let rendered = String::from_utf8_lossy(&rendered.into_inner()).into_owned();
    let mut codes: Vec<Code> = c
        .diagnostics
        .iter()
        .filter(|d| d.file == file)
        .map(|d| d.code)
        .collect();
    codes.sort();
    let own_errors = c
        .diagnostics
        .iter()
        .filter(|d| d.file == file && d.is_error())
        .count();
    if own_errors != c.error_count() {
        return Err(format!("a program it imports has errors\n{rendered}"));
    }
    let (expected, builds) = match &ex.expect {
        Expect::Clean => (Vec::new(), true),
        Expect::Warnings(w) => (w.clone(), true),
        Expect::Errors(e) => (e.clone(), false),
    };
    if codes != expected {
        return Err(format!(
            "expected {expected:?}, found {codes:?}\n{rendered}"
        ));
    }
    match (&ex.expect, own_errors) {
        (Expect::Errors(_), 0) => {
            return Err(format!(
                "marked `error=`, but it reports no error\n{rendered}"
            ))
        }
        (Expect::Warnings(_), n) if n > 0 => {
            return Err(format!("marked `warn=`, but it reports errors\n{rendered}"))
        }
        _ => {}
    }
    if builds {
        prosec::codegen::build_bytes(&c, root)
            .map_err(|e| format!("it checks, but does not build: {e}"))?;
    }
    Ok(())
}

/// Checks that `markdown`'s anchors are unique, its in-page links resolve, and every entry
/// of `checklist` has a section whose examples show all its pieces of syntax.
fn check_coverage(markdown: &str, doc: &str, checklist: &[Construct]) -> Vec<String> {
    let page = parse(markdown);
    let mut failures = Vec::new();
    for (i, h) in page.headings.iter().enumerate() {
        if let Some(first) = page.headings[..i].iter().find(|o| o.anchor == h.anchor) {
            failures.push(format!(
                "{doc}:{}: heading `#{}` repeats the one on line {}",
                h.line, h.anchor, first.line
            ));
        }
    }
    for (line, target) in &page.links {
        if !page.headings.iter().any(|h| &h.anchor == target) {
            failures.push(format!(
                "{doc}:{line}: link to `#{target}`, a heading that does not exist"
            ));
        }
    }
    for entry in checklist {
        let Some(i) = page.headings.iter().position(|h| h.anchor == entry.anchor) else {
            failures.push(format!(
                "{doc}: no section `#{}`: the construct has no documentation",
                entry.anchor
            ));
            continue;
        };
        let h = &page.headings[i];
        let end = page.headings[i + 1..]
            .iter()
            .find(|o| o.level <= h.level)
            .map_or(usize::MAX, |o| o.line);
        let examples: Vec<&Example> = page
            .examples
            .iter()
            .filter(|e| e.line > h.line && e.line < end)
            .collect();
        if examples.is_empty() {
            failures.push(format!(
                "{doc}:{}: section `#{}` has no example",
                h.line, entry.anchor
            ));
            continue;
        }
        for piece in entry.shows {
            if !examples.iter().any(|e| e.text.contains(piece)) {
                failures.push(format!(
                    "{doc}:{}: no example of section `#{}` shows {piece:?}",
                    h.line, entry.anchor
                ));
            }
        }
    }
    failures
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the compiler crate sits inside the workspace")
        .to_path_buf()
}

fn guide() -> String {
    let path = workspace().join("docs/language.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

#[test]
fn every_example_compiles_as_its_fence_says() {
    let text = guide();
    let count = parse(&text).examples.len();
    assert!(
        count >= CHECKLIST.len(),
        "only {count} examples in docs/language.md"
    );
    let failures = check_examples(&text, "docs/language.md", &scratch("language-doc"));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_construct_has_a_section_with_an_example() {
    let failures = check_coverage(&guide(), "docs/language.md", CHECKLIST);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_readme_points_at_the_guide() {
    let path = workspace().join("README.md");
    let readme = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        readme.contains("](docs/language.md)"),
        "README.md does not link to docs/language.md"
    );
    assert!(
        !readme.contains("../shared/spec"),
        "README.md points outside the repository for the language"
    );
}

/// The checks above can fail: a page whose examples and sections are wrong in each way
/// they look for is reported, line by line.
#[test]
fn a_wrong_page_is_reported() {
    let page = "# Guide\n\
                \n\
                ## Loops\n\
                \n\
                ```prose\n\
                session: nobody\n\
                ```\n\
                \n\
                ```prose warn=W108\n\
                session \"Fine\"\n\
                ```\n\
                \n\
                ```prose error=E104\n\
                session: nobody\n\
                ```\n\
                \n\
                ```prose strict=yes\n\
                session \"x\"\n\
                ```\n\
                \n\
                ```prose warn=W107\n\
                loop:\n  session \"Tick\"\n\
                ```\n\
                \n\
                ### `repeat`\n\
                \n\
                See [choices](#choice).\n\
                \n\
                ## Loops\n";
    let failures = check_examples(page, "page.md", &scratch("language-doc-self-test"));
    let at = |line: usize| {
        failures
            .iter()
            .filter(|f| f.starts_with(&format!("page.md:{line}:")))
            .count()
    };
    assert_eq!(at(5), 1, "an error in an unmarked example: {failures:#?}");
    assert_eq!(at(9), 1, "a missing warning: {failures:#?}");
    assert_eq!(at(13), 1, "the wrong error code: {failures:#?}");
    assert!(
        failures
            .iter()
            .any(|f| f.contains("line 17: unknown fence word `strict`")),
        "an unknown fence word: {failures:#?}"
    );
    assert_eq!(
        at(21),
        0,
        "an example that does what its fence says: {failures:#?}"
    );
    assert_eq!(failures.len(), 4, "{failures:#?}");

    let checklist = [
        c("repeat", &["repeat 3:"]),
        c("loops", &["loop:"]),
        c("parallel-blocks", &["parallel:"]),
    ];
    let failures = check_coverage(page, "page.md", &checklist);
    let expected = [
        "page.md:30: heading `#loops` repeats the one on line 3",
        "page.md:28: link to `#choice`, a heading that does not exist",
        "page.md:26: section `#repeat` has no example",
        "page.md: no section `#parallel-blocks`: the construct has no documentation",
    ];
    assert_eq!(failures, expected);
}

#[test]
fn anchors_are_github_s() {
    assert_eq!(
        anchor(" `loop`, `loop until`, `loop while`"),
        "loop-loop-until-loop-while"
    );
    assert_eq!(anchor(" `resume:`"), "resume");
    assert_eq!(
        anchor(" Numbers, booleans and null"),
        "numbers-booleans-and-null"
    );
    assert_eq!(anchor(" `context` on an agent"), "context-on-an-agent");
}
