//! One small program per diagnostic code: each must produce exactly its code (plus any extra
//! codes its row accepts explicitly) at an exact line and column, with the right severity with
//! and without `--strict`. Every code the compiler checks must have a row, so a new code cannot
//! land without a test. The codes of fetching and bundling (E149-E155) have cases of their
//! own, built with a fetcher that reaches only local directories, a bare repository and the
//! cache. `docs/diagnostics.md` explains each code.

use prosec::compile::{Compilation, Options};
use prosec::diagnostics::{Code, CodeKind, Diagnostic, Severity};
use prosec::lints::Level;
use std::path::{Path, PathBuf};

/// A program that triggers `code` at `line`:`column` (1-based, in the root file).
struct Case {
    code: Code,
    source: Vec<u8>,
    line: u32,
    column: u32,
    /// Codes that necessarily accompany `code` in this program.
    also: &'static [Code],
    /// Other files next to the root (`t.prose`), for imports.
    files: &'static [(&'static str, &'static str)],
    /// The file the diagnostic is in, when it is not the root.
    located_in: Option<&'static str>,
}

fn case(code: Code, source: &str, line: u32, column: u32) -> Case {
    Case {
        code,
        source: source.as_bytes().to_vec(),
        line,
        column,
        also: &[],
        files: &[],
        located_in: None,
    }
}

impl Case {
    fn also(mut self, codes: &'static [Code]) -> Case {
        self.also = codes;
        self
    }

    fn files(mut self, files: &'static [(&'static str, &'static str)]) -> Case {
        self.files = files;
        self
    }

    fn located_in(mut self, file: &'static str) -> Case {
        self.located_in = Some(file);
        self
    }
}

/// A program with one input, `topic`, and one output, `summary`.
const LIB: (&str, &str) = (
    "lib.prose",
    "input topic: \"What to summarize\"\noutput summary = session \"Summarize {topic}\"\n",
);
/// Two programs without inputs whose default import name is `x`.
const X: (&str, &str) = ("x.prose", "session \"Say hello\"\n");
const SUB_X: (&str, &str) = ("sub/x.prose", "session \"Say goodbye\"\n");

fn cases() -> Vec<Case> {
    use Code::*;
    vec![
        // ---- lexical
        case(E001, "session \"unfinished\n", 1, 9),
        // The text of an unterminated string is not checked for interpolations.
        case(E001, "session \"Summarize {notes}\n", 1, 9),
        case(E002, "session \"a\\qb\"\n", 1, 11),
        case(E132, "do:\n\tsession \"x\"\n", 2, 1),
        case(E133, "if **abc:\n  session \"x\"\n", 1, 4),
        case(E134, "session \"x\" $\n", 1, 13),
        Case {
            source: b"let x = \xff\n".to_vec(),
            ..case(E135, "", 1, 9)
        },
        // The lexer reads an oversized number as 0: no "repeat count must be positive".
        case(E136, "repeat 99999999999999999999:\n  session \"x\"\n", 1, 8),
        case(E145, &format!("let x = {}{}\n", "[".repeat(65), "]".repeat(65)), 1, 73),
        // ---- syntax
        case(E004, "let x = = 1\n", 1, 9),
        // The agent whose definition failed to parse is not reported as undefined.
        case(
            E004,
            "agent writer:\n  model: sonnet\n  prompt \"x\"\nsession: writer\n",
            3,
            10,
        ),
        // The unclosed bracket continues the line: no second error at `do`.
        case(E004, "block f(a:\n  session \"x\"\ndo f\n", 1, 10),
        case(E005, "agent a:\n  model: sonnet\n    prompt: \"x\"\n", 3, 5),
        case(E005, "let x =\n", 1, 8),
        case(E129, "elif **ready now**:\n  session \"x\"\n", 1, 1),
        case(
            E129,
            "if **ready now**:\n  session \"x\"\nelse:\n  session \"y\"\nelif **later**:\n  session \"z\"\n",
            5,
            1,
        ),
        case(E130, "else:\n  session \"x\"\n", 1, 1),
        case(E130, "do:\n  else:\n    session \"y\"\n", 2, 3),
        case(
            E131,
            "if **ready now**:\n  session \"x\"\nelse:\n  session \"y\"\nelse:\n  session \"z\"\n",
            5,
            1,
        ),
        case(
            E131,
            "do:\n  if **ready now**:\n    session \"x\"\n  else:\n    if **inner**:\n      session \"a\"\n    else:\n      session \"b\"\n  else:\n    session \"z\"\n",
            9,
            3,
        ),
        case(E137, "let x = 1\n  model: sonnet\n", 2, 3),
        // ---- imports
        case(E010, "use \"./x\"\nuse \"./x\"\n", 2, 5).files(&[X]),
        case(E011, "use \"\"\n", 1, 5),
        case(E012, "use \"foo\"\n", 1, 5),
        case(E101, "use \"./x\"\nuse \"./sub/x\"\n", 2, 5).files(&[X, SUB_X]),
        case(E138, "use \"./missing\"\n", 1, 5),
        case(E139, "use \"./t\"\n", 1, 5),
        case(W006, "import \"s\" from \"http://x\"\n", 1, 17),
        case(W119, "use \"@alice/summarize\"\n", 1, 5),
        // ---- program inputs, outputs and invocations
        case(E020, "input: \"desc\"\n", 1, 1),
        case(E021, "input a: \"x\"\ninput a: \"y\"\n", 2, 7),
        case(E022, "session \"x\"\ninput a: \"y\"\n", 2, 7),
        case(E023, "output = 1\n", 1, 1),
        case(E024, "output a = 1\noutput a = 2\n", 2, 8),
        case(E025, "let r = foo(x: 1)\n", 1, 9),
        case(E026, "use \"./lib\"\nlet r = lib()\n", 2, 9).files(&[LIB]),
        case(E027, "use \"./lib\"\nlet r = lib(topic: \"a\", depth: 2)\n", 2, 25).files(&[LIB]),
        case(E028, "use \"./lib\"\nlet r = lib(topic: \"a\")\nlet s = r.nope\n", 3, 11).files(&[LIB]),
        case(E028, "use \"./lib\"\nlet {nope} = lib(topic: \"a\")\n", 2, 6).files(&[LIB]),
        case(E102, "let a = 1\noutput a = 2\n", 2, 8),
        case(E141, "block f:\n  session \"x\"\nlet x = f(a: 1)\n", 3, 9),
        case(E143, "use \"./x\"\nlet r = x(1)\n", 2, 11).files(&[X]),
        case(W101, "input a\n", 1, 7),
        // ---- agents, sessions and properties
        case(E003, "session\n  model: sonnet\n", 1, 1),
        case(E006, "agent a:\n  model: sonnet\nagent a:\n  model: opus\n", 3, 7),
        case(E007, "session: nobody\n", 1, 10),
        case(E008, "agent a:\n  model: gpt\n", 2, 3),
        case(E009, "agent a:\n  model: sonnet\n  model: opus\n", 3, 3),
        case(E013, "agent a:\n  skills: \"s\"\n", 2, 3),
        case(E014, "agent a:\n  skills: [1]\n", 2, 12),
        case(E015, "agent a:\n  permissions: \"x\"\n", 2, 3),
        case(E016, "agent a:\n  permissions:\n    read: [1]\n", 3, 12),
        case(E017, "agent a:\n  model: sonnet\nresume: a\n", 3, 9),
        case(E103, "agent a:\n  persist: 5\n", 2, 3),
        case(E107, "session \"x\"\n  context: 5\n", 2, 12),
        case(E125, "session \"a\"\n  retry: 0\n", 2, 3),
        case(E126, "session \"a\"\n  retry: 1.5\n", 2, 3),
        case(E127, "session \"a\"\n  backoff: bogus\n", 2, 3),
        case(E140, "session \"hello {nobody}\"\n", 1, 16),
        case(E144, "agent a:\n  prompt: 5\n", 2, 3),
        case(W001, "session \"\"\n", 1, 9),
        case(W002, "session \"   \"\n", 1, 9),
        case(W003, &format!("session \"{}\"\n", "a".repeat(10_001)), 1, 9),
        case(W004, "agent a:\n  prompt: \"\"\n", 2, 3),
        case(W005, "agent a:\n  colour: red\n", 2, 3),
        case(E156, "agent a:\n  permisions:\n    bash: deny\n", 2, 3),
        case(W007, "agent a:\n  skills: [\"s\"]\n", 2, 12),
        case(W008, "agent a:\n  permissions:\n    fly: allow\n", 3, 5),
        case(E156, "agent a:\n  permissions:\n    bahs: deny\n", 3, 5),
        case(E156, "agent a:\n  tols: none\n", 2, 3),
        case(W009, "agent a:\n  permissions:\n    read: maybe\n", 3, 11),
        case(W010, "agent a:\n  skills: []\n", 2, 3),
        case(W102, "agent a:\n  retry: 3\n", 2, 3),
        case(W113, "session \"a\"\n  retry: 11\n", 2, 3),
        case(W118, "agent a:\n  model: \"gpt-4\"\n", 2, 3),
        // An agent's `write` list naming a variable a session answered.
        case(
            W121,
            "let dir = session \"Pick a directory\"\nagent a:\n  permissions:\n    write: [dir]\nsession: a\n  prompt: \"Go\"\n",
            4,
            13,
        ),
        // A session's pattern that begins with one.
        case(
            W121,
            "let dir = session \"Pick a directory\"\nsession \"Write it\"\n  permissions:\n    write: [\"{dir}/notes\"]\n",
            4,
            13,
        ),
        // ---- variables
        case(E019, "let x = 1\nlet x = 2\n", 2, 5),
        case(E104, "const a = 1\na = 2\n", 2, 1),
        // Redeclaring a const is also an assignment to it, which stays an error when E019
        // is only a warning.
        case(E104, "const a = 1\nlet a = 2\n", 2, 5).also(&[E019]),
        case(E105, "let a = b\n", 1, 9),
        // A lint setting in `prose.toml` that names no code (located in that file).
        case(E147, "session \"x\"\n", 2, 1)
            .files(&[("prose.toml", "[lints]\nE999 = \"allow\"\n")])
            .located_in("prose.toml"),
        // An allow comment the checker cannot read.
        case(W120, "# prose: alow(E140)\nsession \"x\"\n", 1, 1),
        case(W122, "let draft = session \"d\"\nsession \"Polish {draf}\"\n", 2, 18),
        case(
            W123,
            "let post = {title: \"t\", body: \"b\"}\nsession \"Proofread {post.titel}\"\n",
            2,
            26,
        ),
        // A variable of a block (here a parallel branch's named result) read by the caller.
        case(
            E146,
            "block sweep(t):\n  parallel:\n    docs = session \"Docs for {t}\"\ndo sweep(\"x\")\nsession \"Use\"\n  context: docs\n",
            6,
            12,
        ),
        case(E106, "agent a:\n  model: sonnet\nlet a = 1\n", 3, 5),
        case(W117, "x = 1\n", 1, 1),
        // ---- blocks
        case(E108, "do nope\n", 1, 4),
        case(E109, "block f:\n  session \"x\"\nblock f:\n  session \"y\"\n", 3, 7),
        case(E110, "agent f:\n  model: sonnet\nblock f:\n  session \"y\"\n", 3, 7),
        case(E111, "block:\n  session \"x\"\n", 1, 1),
        case(E142, "block f(a, a):\n  session \"x\"\n", 1, 12),
        case(W103, "block f(a):\n  session \"x\"\ndo f\n", 3, 1),
        case(W104, "let a = 1\nblock f(a):\n  session \"x\"\ndo f(a)\n", 2, 9),
        // ---- parallel
        case(E112, "parallel (\"bogus\"):\n  session \"x\"\n", 1, 11),
        case(E113, "parallel (on-fail: \"x\"):\n  session \"x\"\n", 1, 20),
        case(E114, "parallel (count: 1):\n  session \"x\"\n", 1, 18),
        case(E115, "parallel (\"any\", count: 0):\n  session \"x\"\n", 1, 25),
        case(E116, "parallel (foo: 1):\n  session \"x\"\n", 1, 11),
        case(
            W105,
            "parallel (\"any\", count: 3):\n  session \"a\"\n  session \"b\"\n",
            1,
            25,
        ),
        // ---- loops and conditions
        case(E117, "repeat 0:\n  session \"x\"\n", 1, 8),
        case(E118, "repeat 1.5:\n  session \"x\"\n", 1, 8),
        case(E119, "loop (max: 0):\n  session \"x\"\n", 1, 12),
        case(E120, "loop (max: 1.5):\n  session \"x\"\n", 1, 12),
        case(E121, "if ** **:\n  session \"x\"\n", 1, 4),
        case(W106, "let x = 1\nfor x in [1]:\n  session \"a\"\n", 2, 5),
        case(W107, "loop:\n  session \"a\"\n", 1, 1),
        case(W108, "loop until **done now**:\n  session \"a\"\n", 1, 1),
        case(W109, "if **ok**:\n  session \"a\"\n", 1, 4),
        case(W116, "do:\nsession \"x\"\n", 1, 4),
        case(E157, "if **the tests pass**:\nsession \"Deploy\"\n", 1, 23),
        case(
            E157,
            "if **a b c**:\n  session \"x\"\nelse:\nsession \"y\"\n",
            3,
            6,
        ),
        // ---- pipelines
        case(E122, "let xs = [1]\nlet r = xs | bogus:\n  session \"x\"\n", 2, 14),
        case(E123, "let xs = [1]\nlet r = xs | reduce:\n  session \"x\"\n", 2, 14),
        case(W110, "let item = 1\nlet xs = [1]\nlet r = xs | map:\n  session \"a\"\n", 3, 14),
        // ---- error handling
        case(E124, "try:\n  session \"x\"\n", 1, 1),
        case(
            W111,
            "let e = 1\ntry:\n  session \"a\"\ncatch as e:\n  session \"b\"\n",
            4,
            10,
        ),
        case(W112, "throw \"\"\n", 1, 7),
        // ---- choice
        case(E128, "choice **which one**:\nsession \"x\"\n", 1, 1),
        case(
            W114,
            "choice **pick one**:\n  option \"a\":\n    session \"x\"\n  option \"a\":\n    session \"y\"\n",
            4,
            10,
        ),
        case(
            W115,
            "choice **pick one**:\n  option \"a\":\n  option \"b\":\n    session \"y\"\n",
            2,
            10,
        ),
    ]
}

/// Compiles a case in its own scratch directory (the root is `t.prose` there, on disk too so
/// imports of it resolve), through `add_source`, or `add_file` for bytes that are not UTF-8.
fn compile(c: &Case, index: usize, strict: bool, test: &str) -> (Compilation, usize) {
    let dir = scratch_dir(c, index, strict, test);
    for (name, text) in c.files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("file in a directory")).expect("mkdir");
        std::fs::write(path, text).expect("write imported file");
    }
    let root = dir.join("t.prose");
    std::fs::write(&root, &c.source).expect("write root file");
    // Codes allowed by default are reported here too: as warnings, or (relaxed ones) as
    // the errors `--strict` makes them.
    let lints = Code::ALL
        .iter()
        .filter(|c| c.allowed_by_default())
        .map(|&c| match (strict, c.kind()) {
            (true, CodeKind::Relaxed) => (c, Level::Deny),
            _ => (c, Level::Warn),
        })
        .collect();
    let mut comp = Compilation::new(Options {
        strict,
        lints,
        ..Default::default()
    });
    let module = match std::str::from_utf8(&c.source) {
        Ok(text) => comp.add_source(&root, text),
        Err(_) => comp.add_file(&root).expect("root file is readable"),
    };
    let file = comp.modules[module].file;
    (comp, file)
}

/// A fresh directory per test, case and mode (tests run in parallel).
fn scratch_dir(c: &Case, index: usize, strict: bool, test: &str) -> PathBuf {
    let mode = if strict { "strict" } else { "default" };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("diagnostic_codes")
        .join(test)
        .join(format!("{index:03}-{}-{mode}", c.code));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

fn describe(comp: &Compilation, diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| {
            let f = comp.sources.get(d.file);
            let at = f.line_col(d.span.start as usize);
            format!(
                "{} {:?} {}:{}:{} {}",
                d.code, d.severity, f.path, at.line, at.column, d.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Checks one case; returns the severity of its diagnostic.
fn check(c: &Case, index: usize, strict: bool, test: &str) -> Result<Severity, String> {
    let (comp, file) = compile(c, index, strict, test);
    let all = describe(&comp, &comp.diagnostics);
    let found: Vec<&Diagnostic> = comp
        .diagnostics
        .iter()
        .filter(|d| d.code == c.code)
        .collect();
    let [d] = found.as_slice() else {
        return Err(format!("expected one {}, got:\n  {all}", c.code));
    };
    let at = comp.sources.get(d.file).line_col(d.span.start as usize);
    let in_expected_file = match c.located_in {
        Some(name) => comp.sources.get(d.file).path.ends_with(name),
        None => d.file == file,
    };
    if !in_expected_file || (at.line, at.column) != (c.line, c.column) {
        return Err(format!(
            "expected {} at {}:{}, got:\n  {all}",
            c.code, c.line, c.column
        ));
    }
    if let Some(extra) = comp
        .diagnostics
        .iter()
        .find(|d| d.code != c.code && !c.also.contains(&d.code))
    {
        return Err(format!(
            "{} comes with an unexpected {}:\n  {all}",
            c.code, extra.code
        ));
    }
    Ok(d.severity)
}

#[test]
fn every_case_produces_exactly_its_code_at_its_position() {
    let failures: Vec<String> = cases()
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            check(c, i, false, "exact")
                .err()
                .map(|e| format!("case {i} ({}): {e}", c.code))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_compiler_code_has_a_case() {
    let cases = cases();
    let missing: Vec<Code> = Code::ALL
        .iter()
        .copied()
        // Runtime codes are the VM's; build codes have their own cases (E148 in `build.rs`,
        // the fetching codes in `every_fetching_code_is_located_at_the_import`).
        .filter(|&code| {
            !matches!(
                code.kind(),
                CodeKind::Runtime | CodeKind::Build | CodeKind::Suite
            )
        })
        .filter(|&code| !cases.iter().any(|c| c.code == code))
        .collect();
    assert!(missing.is_empty(), "no case for {missing:?}");
    let runtime: Vec<Code> = cases
        .iter()
        .map(|c| c.code)
        .filter(|code| code.kind() == CodeKind::Runtime)
        .collect();
    assert!(
        runtime.is_empty(),
        "{runtime:?} are only reported by the VM"
    );
}

#[test]
fn relaxed_codes_are_warnings_unless_strict() {
    let cases = cases();
    assert!(cases.iter().any(|c| c.code.kind() == CodeKind::Relaxed));
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let expected = |strict: bool| match c.code.kind() {
            CodeKind::Relaxed if !strict => Severity::Warning,
            _ => c.code.default_severity(),
        };
        for strict in [false, true] {
            match check(c, i, strict, "severity") {
                Ok(severity) if severity == expected(strict) => {}
                Ok(severity) => failures.push(format!(
                    "case {i} ({}): {severity:?} with strict = {strict}",
                    c.code
                )),
                Err(e) => failures.push(format!("case {i} ({}), strict = {strict}: {e}", c.code)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A fetching code's case: a program in its own directory, with `files` beside it, built
/// with `options` (a cache of its own added); the code at `line`:`column` of the program.
struct FetchCase {
    code: Code,
    source: &'static str,
    line: u32,
    column: u32,
    files: Vec<(&'static str, String)>,
    options: prosec::ship::FetchOptions,
}

/// A bare repository `acme/skills` with one commit and a git configuration whose
/// `insteadOf` sends `https://github.com/` to it; the configuration's path.
fn local_github(dir: &Path) -> PathBuf {
    let git = |cwd: &Path, args: &[&str]| {
        let ok = std::process::Command::new("git")
            .current_dir(cwd)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .expect("git")
            .success();
        assert!(ok, "git {args:?}");
    };
    let work = dir.join("work");
    std::fs::create_dir_all(work.join("skills/notes")).expect("mkdir");
    std::fs::write(
        work.join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Notes\n---\nTake notes.\n",
    )
    .expect("write");
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    let bare = dir.join("github/acme/skills.git");
    std::fs::create_dir_all(&bare).expect("mkdir");
    git(&bare, &["init", "-q", "--bare", "-b", "main"]);
    git(
        &work,
        &["push", "-q", bare.to_str().expect("utf-8"), "main"],
    );
    let config = dir.join("gitconfig");
    std::fs::write(
        &config,
        format!(
            "[url \"file://{}/\"]\n\tinsteadOf = https://github.com/\n",
            dir.join("github").display()
        ),
    )
    .expect("write");
    config
}

fn fetch_cases() -> Vec<FetchCase> {
    use prosec::ship::FetchOptions;
    let case = |code, source, line, column| FetchCase {
        code,
        source,
        line,
        column,
        files: Vec::new(),
        options: FetchOptions::default(),
    };
    let offline = FetchOptions {
        offline: true,
        ..FetchOptions::default()
    };
    let locked = FetchOptions {
        locked: true,
        ..FetchOptions::default()
    };
    let github = "import \"notes\" from \"github:acme/skills\"\nsession \"go\"\n";
    vec![
        case(
            Code::E149,
            "import \"notes\" from \"./nowhere\"\nsession \"go\"\n",
            1,
            21,
        ),
        case(
            Code::E150,
            "session \"go\"\nimport \"notes\" from \"github:acme/skills@v9\"\n",
            2,
            21,
        ),
        FetchCase {
            files: vec![(
                "prose.lock",
                "version = 1\n[[npm]]\nsource = \"npm:notes@latest\"\nversion = \"1.0.0\"\ntarball = \"http://127.0.0.1:9/notes.tgz\"\nintegrity = \"sha512-damaged\"\n".into(),
            )],
            options: offline.clone(),
            ..case(
                Code::E151,
                "import \"notes\" from \"npm:notes\"\nsession \"go\"\n",
                1,
                21,
            )
        },
        FetchCase {
            options: offline,
            ..case(Code::E152, github, 1, 21)
        },
        FetchCase {
            options: locked,
            ..case(Code::E153, github, 1, 21)
        },
        FetchCase {
            files: vec![("skills/notes/SKILL.md", "Take notes.\n".into())],
            ..case(
                Code::E154,
                "import \"notes\" from \"./skills\"\nsession \"go\"\n",
                1,
                21,
            )
        },
        FetchCase {
            files: vec![("prose.lock", "this is not a lock\n".into())],
            ..case(Code::E155, github, 1, 21)
        },
    ]
}

#[test]
fn every_fetching_code_is_located_at_the_import() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("diagnostic_codes/fetch");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("mkdir");
    // Git child processes read this: `github:acme/...` is a bare repository on disk.
    std::env::set_var("GIT_CONFIG_GLOBAL", local_github(&base));
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let cases = fetch_cases();
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let dir = base.join(format!("{i:02}-{}", c.code));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for (name, text) in &c.files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        let root = dir.join("t.prose");
        std::fs::write(&root, c.source).expect("write");
        let options = prosec::ship::FetchOptions {
            cache_dir: Some(dir.join("cache")),
            ..c.options.clone()
        };
        let fetcher = prosec::ship::Fetcher::new(&root, options);
        let mut comp = Compilation::with_fetcher(
            Options {
                require_imports: true,
                ..Default::default()
            },
            fetcher,
        );
        let module = comp.add_file(&root).expect("readable");
        let mut fetcher = comp.take_fetcher().expect("given");
        let (_, diags) = comp.bundle(module, &mut fetcher);
        let all: Vec<&Diagnostic> = comp.diagnostics.iter().chain(&diags).collect();
        let text = describe(&comp, &all.iter().map(|d| (*d).clone()).collect::<Vec<_>>());
        let [d] = all.as_slice() else {
            failures.push(format!(
                "case {i} ({}): expected one diagnostic, got:\n  {text}",
                c.code
            ));
            continue;
        };
        let at = comp.sources.get(d.file).line_col(d.span.start as usize);
        if d.code != c.code || (at.line, at.column) != (c.line, c.column) {
            failures.push(format!(
                "case {i}: expected {} at {}:{}, got:\n  {text}",
                c.code, c.line, c.column
            ));
        }
        if d.severity != Severity::Error || !d.message.contains("cannot import skill `notes`") {
            failures.push(format!("case {i} ({}): {text}", c.code));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every build code has a case: here, or E148 in `build.rs`.
    let missing: Vec<Code> = Code::ALL
        .iter()
        .copied()
        .filter(|&code| code.kind() == CodeKind::Build && code != Code::E148)
        .filter(|&code| !cases.iter().any(|c| c.code == code))
        .collect();
    assert!(missing.is_empty(), "no fetching case for {missing:?}");
}

/// A test or eval file (`name`, with `text`) beside `prog.prose` (`PROGRAM`) and a dataset,
/// and the one diagnostic each must give, at a line and column of the file named.
#[test]
fn every_suite_code_is_located_in_its_file() {
    const PROGRAM: &str =
        "input topic: \"What to write about\"\noutput poem = session \"Write about {topic}\"\n";
    let cases: [(Code, &str, &str, &str, u32, u32); 6] = [
        (Code::E158, "prog.test.toml", "[[test]]\nname = \"a\"\ninputs = { topik = \"x\" }\n", "prog.test.toml", 3, 12),
        (Code::E159, "prog.test.toml", "[[test]]\nname = \"a\"\ninputs = { topic = \"x\" }\n[test.expect]\noutputs.poemm = \"x\"\n", "prog.test.toml", 5, 9),
        (Code::E160, "prog.test.toml", "[[test]]\nname = \"a\"\n[test.expect]\noutputs.poem = { contain = \"x\" }\n", "prog.test.toml", 4, 16),
        (Code::E160, "prog.test.toml", "[[test]]\nnaem = \"a\"\n", "prog.test.toml", 2, 1),
        (Code::E158, "prog.eval.toml", "dataset = \"rows.jsonl\"\n", "rows.jsonl", 2, 1),
        (Code::E160, "prog.eval.toml", "dataset = \"bad.jsonl\"\n", "bad.jsonl", 2, 1),
    ];
    let mut failures = Vec::new();
    for (i, (code, name, text, located, line, column)) in cases.into_iter().enumerate() {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("diagnostic_codes/suite")
            .join(i.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("prog.prose"), PROGRAM).unwrap();
        std::fs::write(
            dir.join("rows.jsonl"),
            "{\"topic\": \"a\"}\n{\"topc\": \"b\"}\n",
        )
        .unwrap();
        std::fs::write(dir.join("bad.jsonl"), "{\"topic\": \"a\"}\n[1]\n").unwrap();
        std::fs::write(dir.join(name), text).unwrap();
        let mut c = Compilation::new(Options::default());
        prosec::suite::static_check::check_file(&mut c, &dir.join(name)).expect("reads");
        let found: Vec<String> = c
            .diagnostics
            .iter()
            .map(|d| {
                let f = c.sources.get(d.file);
                let at = f.line_col(d.span.start as usize);
                format!(
                    "{} {}:{}:{} {}",
                    d.code, f.path, at.line, at.column, d.message
                )
            })
            .collect();
        let d = match c.diagnostics.as_slice() {
            [d] => d,
            _ => {
                failures.push(format!(
                    "case {i} ({code}): expected one diagnostic, got {found:?}"
                ));
                continue;
            }
        };
        let f = c.sources.get(d.file);
        let at = f.line_col(d.span.start as usize);
        if d.code != code
            || !f.path.ends_with(located)
            || (at.line, at.column) != (line, column)
            || d.severity != Severity::Error
        {
            failures.push(format!(
                "case {i}: expected {code} at {located}:{line}:{column}, got {found:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let missing: Vec<Code> = Code::ALL
        .iter()
        .copied()
        .filter(|c| c.kind() == CodeKind::Suite)
        .filter(|c| !cases.iter().any(|(k, ..)| k == c))
        .collect();
    assert!(missing.is_empty(), "no suite case for {missing:?}");
}
