//! docs/cli.md against the binaries: every command has a section, every flag `--help` lists
//! is documented and no documented flag is missing from `--help`, every default the option
//! tables state is the one clap shows or the code's constant, and the exit-status table is
//! the one both binaries print at the end of every `--help`. Defaults stated in the other
//! pages' tables are held to the same sources.

use crate::help::{collapse, every_command, Help};
use crate::markdown::{flags_in, plain, user_pages, Page, Table};
use crate::support;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// Every command of both binaries with its help, by its full name (`prosevm runs prune`).
fn helps() -> &'static BTreeMap<String, Help> {
    static HELPS: OnceLock<BTreeMap<String, Help>> = OnceLock::new();
    HELPS.get_or_init(|| {
        let mut all = BTreeMap::new();
        for bin in ["prosec", "prosevm"] {
            for (words, help) in every_command(bin) {
                let name = std::iter::once(bin.to_string())
                    .chain(words)
                    .collect::<Vec<_>>()
                    .join(" ");
                all.insert(name, help);
            }
        }
        all
    })
}

/// The default a flag has in the code, where clap does not show one: flags whose default
/// comes after `prose.toml`'s, so the flag itself has none.
fn code_default(flag: &str) -> Option<String> {
    use prose_runtime::driver::settings::{
        DEFAULT_HTTP_RETRIES, DEFAULT_IDLE_S, DEFAULT_TIMEOUT_S,
    };
    let exec = prose_runtime::record::ExecOptions::default();
    Some(match flag {
        "max-concurrency" => prose_runtime::runner::RunConfig::default()
            .max_concurrency
            .to_string(),
        "request-timeout" => DEFAULT_TIMEOUT_S.to_string(),
        "http-retries" => DEFAULT_HTTP_RETRIES.to_string(),
        "idle-timeout" => DEFAULT_IDLE_S.to_string(),
        "max-turns" => prose_agent::workshop::DEFAULT_MAX_TURNS.to_string(),
        "max-value-size" => exec.max_value_size.to_string(),
        "max-frame-memory" => exec.max_frame_memory.to_string(),
        "max-branches" => exec.max_branches.to_string(),
        "state-dir" => prose_agent::protected::STATE_DIR.to_string(),
        "tools" => {
            let v = serde_json::to_value(prose_agent::workshop::ToolDefault::default())
                .expect("serialises");
            v.as_str().expect("a name").to_string()
        }
        _ => return None,
    })
}

/// A number as the docs write it (`1,000,000`, `256M`, `0.5`), in the units the code uses
/// (bytes for sizes, which count in powers of 1,024).
fn number(s: &str) -> Option<f64> {
    let t: String = s.chars().filter(|c| *c != ',' && *c != '_').collect();
    let (digits, unit) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1024.0),
        Some('M') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('G') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t.as_str(), 1.0),
    };
    digits.parse::<f64>().ok().map(|n| n * unit)
}

/// Whether the docs' `doc` is the code's `actual`: the same number, or the same word.
fn same_default(doc: &str, actual: &str) -> bool {
    match (number(doc), number(actual)) {
        (Some(a), Some(b)) => a == b,
        _ => doc == actual,
    }
}

/// The single literal a default cell gives (`` `8` ``), or `None` for prose.
fn literal(cell: &str) -> Option<&str> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.contains('`')).then_some(inner)
}

/// The command a table of cli.md documents: the innermost heading naming one.
fn command_of(table: &Table) -> Option<String> {
    table.section.iter().rev().find_map(|h| {
        let name = plain(&h.text);
        (name.starts_with("prosec ") || name.starts_with("prosevm ")).then_some(name)
    })
}

/// A row of an option table: the flags its first cell names, and its default cell.
struct Row {
    flags: Vec<String>,
    short: Option<char>,
    default: String,
    line: usize,
}

fn rows(t: &Table) -> Vec<Row> {
    let default_col = t.header.iter().position(|h| h == "default");
    t.rows
        .iter()
        .map(|r| {
            let first = plain(&r[0]);
            let short = first
                .strip_prefix('-')
                .filter(|s| !s.starts_with('-'))
                .and_then(|s| s.chars().next());
            Row {
                flags: flags_in(&r[0]),
                short,
                default: default_col.map(|c| r[c].clone()).unwrap_or_default(),
                line: t.line,
            }
        })
        .collect()
}

/// What cli.md documents.
struct Reference {
    page: Page,
    /// Each command's own option rows.
    commands: BTreeMap<String, Vec<Row>>,
    /// The options every command takes.
    global: Vec<Row>,
    /// The run options.
    run: Vec<Row>,
    /// The commands that take the run options (their sections link to them).
    with_run: BTreeSet<String>,
    /// The exit-status table.
    exits: Vec<(u32, String)>,
}

fn exit_rows(t: &Table) -> Vec<(u32, String)> {
    t.rows
        .iter()
        .map(|r| {
            let n = r[0]
                .parse()
                .unwrap_or_else(|_| panic!("exit status {:?}", r[0]));
            (n, collapse(&plain(&r[1])))
        })
        .collect()
}

fn reference() -> Reference {
    let page = Page::load("docs/cli.md");
    let mut r = Reference {
        page: page.clone(),
        commands: BTreeMap::new(),
        global: Vec::new(),
        run: Vec::new(),
        with_run: BTreeSet::new(),
        exits: Vec::new(),
    };
    for t in &page.tables {
        if t.header.first().is_some_and(|h| h == "status") {
            r.exits = exit_rows(t);
        } else if t.header.first().is_none_or(|h| h != "option") {
            continue;
        } else if t.under("Global options") {
            r.global.extend(rows(t));
        } else if t.under("Run options") {
            r.run.extend(rows(t));
        } else if let Some(c) = command_of(t) {
            r.commands.entry(c).or_default().extend(rows(t));
        } else {
            panic!("docs/cli.md:{}: an option table under no command", t.line);
        }
    }
    for l in &page.links {
        if l.dest == "#run-options" {
            let under = l
                .section
                .iter()
                .rev()
                .map(|h| plain(&h.text))
                .find(|n| n.starts_with("prosec ") || n.starts_with("prosevm "));
            r.with_run.extend(under);
        }
    }
    r
}

#[test]
fn every_command_has_a_section_and_a_place_in_the_readme_tour() {
    let r = reference();
    let readme = Page::load("README.md").text;
    let sections: BTreeSet<String> = r.page.headings.iter().map(|h| plain(&h.text)).collect();
    let mut failures = Vec::new();
    for name in helps().keys() {
        if !name.contains(' ') {
            continue;
        }
        if !sections.contains(name) {
            failures.push(format!("docs/cli.md has no section `{name}`"));
        }
        let short = name.split_once(' ').map_or("", |(_, rest)| rest);
        if !readme.contains(&format!("`{name}")) && !readme.contains(&format!("`{short}`")) {
            failures.push(format!("README.md's tour does not name `{name}`"));
        }
    }
    for name in r.commands.keys() {
        if !helps().contains_key(name) {
            failures.push(format!(
                "docs/cli.md documents `{name}`, which no --help lists"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_flag_is_documented_and_every_documented_flag_exists() {
    let r = reference();
    let global: BTreeSet<&String> = r.global.iter().flat_map(|row| &row.flags).collect();
    let run: BTreeSet<&String> = r.run.iter().flat_map(|row| &row.flags).collect();
    let mut failures = Vec::new();
    for (name, help) in helps() {
        let own: BTreeSet<&String> = r
            .commands
            .get(name)
            .into_iter()
            .flatten()
            .flat_map(|row| &row.flags)
            .collect();
        for flag in help.options.keys() {
            let documented = own.contains(flag)
                || global.contains(flag)
                || (r.with_run.contains(name) && run.contains(flag))
                || ["help", "version"].contains(&flag.as_str());
            if !documented {
                failures.push(format!(
                    "`{name} --{flag}` is in --help but not in docs/cli.md"
                ));
            }
        }
        for flag in &global {
            if !help.options.contains_key(*flag) {
                failures.push(format!(
                    "docs/cli.md says every command takes --{flag}; `{name} --help` does not list it"
                ));
            }
        }
        for row in r.commands.get(name).into_iter().flatten() {
            for flag in &row.flags {
                match help.options.get(flag) {
                    None => failures.push(format!(
                        "docs/cli.md:{}: `{name} --{flag}` is not in its --help",
                        row.line
                    )),
                    Some(o) if row.short.is_some() && o.short != row.short => {
                        failures.push(format!(
                            "docs/cli.md:{}: `{name} --{flag}` is -{} there, -{} in --help",
                            row.line,
                            row.short.unwrap_or(' '),
                            o.short.unwrap_or(' ')
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    for flag in &run {
        let somewhere = r.with_run.iter().any(|c| {
            helps()
                .get(c)
                .is_some_and(|h| h.options.contains_key(*flag))
        });
        if !somewhere {
            failures.push(format!(
                "docs/cli.md's run options list --{flag}, which no command taking them has"
            ));
        }
    }
    for c in &r.with_run {
        if !helps().contains_key(c) {
            failures.push(format!(
                "docs/cli.md: `{c}` takes the run options but has no --help"
            ));
        }
    }
    assert!(
        r.with_run.len() >= 6,
        "only {:?} link to the run options",
        r.with_run
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Checks `doc`, the default the docs state for `flag` in `commands`, against each one's
/// `--help` (what clap shows) and the code's constant; says what is wrong, if anything.
fn check_default(flag: &str, doc: &str, commands: &[&String]) -> Result<(), String> {
    let mut sources = Vec::new();
    for c in commands {
        if let Some(d) = helps()
            .get(*c)
            .and_then(|h| h.options.get(flag))
            .and_then(|o| o.default.clone())
        {
            sources.push((format!("`{c} --help`"), d));
        }
    }
    if let Some(d) = code_default(flag) {
        sources.push(("the code".to_string(), d));
    }
    if sources.is_empty() {
        return Err(format!(
            "--{flag}: the docs say its default is {doc}, which neither --help nor the code's constants give"
        ));
    }
    let wrong: Vec<String> = sources
        .iter()
        .filter(|(_, actual)| !same_default(doc, actual))
        .map(|(src, actual)| format!("{actual} in {src}"))
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--{flag}: the docs say its default is {doc}, but it is {}",
            wrong.join(", ")
        ))
    }
}

#[test]
fn every_default_in_the_option_tables_is_the_codes() {
    let r = reference();
    let tops: Vec<&String> = helps().keys().filter(|n| !n.contains(' ')).collect();
    let runs: Vec<&String> = r.with_run.iter().collect();
    let mut checked = 0;
    let mut failures = Vec::new();
    let groups = r
        .commands
        .iter()
        .map(|(c, rows)| (vec![c], rows))
        .chain([(tops, &r.global), (runs, &r.run)]);
    for (commands, rows) in groups {
        for row in rows {
            let Some(doc) = literal(&row.default) else {
                continue;
            };
            for flag in &row.flags {
                let having: Vec<&String> = commands
                    .iter()
                    .copied()
                    .filter(|c| {
                        helps()
                            .get(*c)
                            .is_some_and(|h| h.options.contains_key(flag))
                    })
                    .collect();
                checked += 1;
                if let Err(e) = check_default(flag, doc, &having) {
                    failures.push(format!("docs/cli.md:{}: {e}", row.line));
                }
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} defaults checked in docs/cli.md"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The default a table row of prose states, if any: a number after `default`
/// (`default 8`, `default: 8`, `defaults to 8`) or before `by default` (`120 s by default`).
fn stated_default(text: &str) -> Option<String> {
    let words: Vec<String> = plain(text)
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| "();:.".contains(c))
                .trim_end_matches(',')
                .to_string()
        })
        .collect();
    let is_number = |w: &str| w.starts_with(|c: char| c.is_ascii_digit()) && number(w).is_some();
    for (i, w) in words.iter().enumerate() {
        if w == "default" || w == "defaults" {
            let mut j = i + 1;
            if words.get(j).is_some_and(|w| w == "to" || w == "is") {
                j += 1;
            }
            if let Some(n) = words.get(j).filter(|w| is_number(w)) {
                return Some(n.clone());
            }
            if i >= 1 && words[i - 1] == "by" {
                let mut k = i - 1;
                if k >= 1 && ["s", "ms", "seconds"].contains(&words[k - 1].as_str()) {
                    k -= 1;
                }
                if let Some(n) = k
                    .checked_sub(1)
                    .and_then(|k| words.get(k))
                    .filter(|w| is_number(w))
                {
                    return Some(n.clone());
                }
            }
        }
    }
    None
}

#[test]
fn defaults_stated_in_the_other_pages_tables_are_the_codes() {
    let all: Vec<&String> = helps().keys().collect();
    let mut checked = 0;
    let mut failures = Vec::new();
    for page in user_pages() {
        if page.path.ends_with("cli.md") {
            continue;
        }
        for t in &page.tables {
            for row in &t.rows {
                let text = row.join(" | ");
                let flags: BTreeSet<String> = flags_in(&text).into_iter().collect();
                let (Some(flag), 1) = (flags.first(), flags.len()) else {
                    continue;
                };
                let Some(doc) = stated_default(&text) else {
                    continue;
                };
                let having: Vec<&String> = all
                    .iter()
                    .copied()
                    .filter(|c| helps()[*c].options.contains_key(flag))
                    .collect();
                checked += 1;
                let at = format!("{}:{}", page.path.display(), t.line);
                if having.is_empty() {
                    failures.push(format!("{at}: --{flag} is in no command's --help"));
                } else if let Err(e) = check_default(flag, &doc, &having) {
                    failures.push(format!("{at}: {e}"));
                }
            }
        }
    }
    assert!(
        checked >= 2,
        "only {checked} defaults found in the pages' tables"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_exit_status_table_is_the_one_every_help_prints() {
    let r = reference();
    assert_eq!(
        r.exits.iter().map(|e| e.0).collect::<Vec<_>>(),
        [0, 1, 2, 3, 130],
        "docs/cli.md's exit-status table"
    );
    let mut failures = Vec::new();
    for page in user_pages() {
        for t in page.tables_headed(&["status", "meaning"]) {
            if exit_rows(t) != r.exits {
                failures.push(format!(
                    "{}:{}: an exit-status table other than docs/cli.md's",
                    page.path.display(),
                    t.line
                ));
            }
        }
    }
    for (name, help) in helps() {
        match &help.exits {
            None => failures.push(format!("`{name} --help` prints no `Exit status:` table")),
            Some(e) if *e != r.exits => failures.push(format!(
                "`{name} --help` prints the exit statuses as {e:#?}, docs/cli.md as {:#?}",
                r.exits
            )),
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn defaults_compare_as_the_docs_write_them() {
    assert!(same_default("1,000,000", "1000000"));
    assert!(same_default("256M", "268435456"));
    assert!(same_default("30", "30"));
    assert!(same_default("0.5", "0.5"));
    assert!(same_default("after:1", "after:1"));
    assert!(same_default(".prose", ".prose"));
    assert!(!same_default("8", "4"));
    assert!(!same_default("512M", "268435456"));
    assert!(!same_default("narrate", "json"));
    assert_eq!(literal("`8`"), Some("8"));
    assert_eq!(literal("`prose.toml`'s, else `mock`"), None);
    assert_eq!(literal(""), None);
    assert_eq!(
        stated_default("`--idle-timeout SECONDS` or `idle_timeout`; 120 s by default, long"),
        Some("120".into())
    );
    assert_eq!(
        stated_default("requests in flight (default 8)"),
        Some("8".into())
    );
    assert_eq!(
        stated_default("bytes (`4096`, `64K`; default 256M): a text"),
        Some("256M".into())
    );
    assert_eq!(stated_default("the default driver"), None);
}

/// A wrong default is caught whichever source has it.
#[test]
fn a_wrong_default_is_reported() {
    let run: Vec<&String> = helps()
        .keys()
        .filter(|c| c.as_str() == "prosevm run")
        .collect();
    assert!(check_default("max-iterations", "1,000,000", &run).is_ok());
    let e = check_default("max-iterations", "1,000", &run).expect_err("wrong");
    assert!(e.contains("1000000 in `prosevm run --help`"), "{e}");
    assert!(check_default("max-turns", "40", &run).is_ok());
    let e = check_default("max-turns", "50", &run).expect_err("wrong");
    assert!(e.contains("in the code"), "{e}");
    assert!(check_default("no-such-flag", "1", &run).is_err());
}

/// The environment table's `PROSE_STORE` row names exactly the commands whose `--store`
/// clap reads from it.
#[test]
fn prose_store_stands_for_store_where_the_table_says() {
    let r = reference();
    let row = r
        .page
        .tables_headed(&["variable"])
        .flat_map(|t| &t.rows)
        .find(|row| row[0] == "`PROSE_STORE`")
        .expect("docs/cli.md's PROSE_STORE row");
    let documented: BTreeSet<String> = row[2]
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.starts_with('-'))
        .map(str::to_string)
        .collect();
    let actual: BTreeSet<String> = helps()
        .iter()
        .filter(|(_, h)| {
            h.options
                .get("store")
                .is_some_and(|o| o.env.as_deref() == Some("PROSE_STORE"))
        })
        .filter_map(|(name, _)| name.split(' ').nth(1).map(str::to_string))
        .collect();
    assert!(!actual.is_empty(), "no --store reads PROSE_STORE");
    assert_eq!(
        documented, actual,
        "the commands PROSE_STORE stands for --store on"
    );
}

/// The command lines a page shows: its inline code spans and the lines of its code blocks
/// that start with `prosec` or `prosevm` (after a `$ ` prompt), each cut at a pipe, `&&`,
/// `;`, a redirection or a comment into the commands it runs; synopses are left out.
fn command_lines(page: &Page) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in page.text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('`') else { break };
            found.push((i + 1, after[..end].to_string()));
            rest = &after[end + 1..];
        }
    }
    for b in &page.blocks {
        if !matches!(b.info.as_str(), "" | "sh" | "console" | "bash") {
            continue;
        }
        // A line ending in `\` goes on on the next.
        let mut pending: Option<(usize, String)> = None;
        for (i, l) in b.code.lines().enumerate() {
            let l = l.trim_start_matches("$ ");
            let (at, mut text) = pending.take().unwrap_or((b.line + 1 + i, String::new()));
            match l.trim_end().strip_suffix('\\') {
                Some(head) => {
                    text.push_str(head);
                    text.push(' ');
                    pending = Some((at, text));
                }
                None => {
                    text.push_str(l);
                    found.push((at, text));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (line, text) in found {
        let text = text.split(" #").next().unwrap_or_default();
        // Optional parts (`[-o FILE]`) are left out.
        let mut text = text.to_string();
        while let (Some(a), Some(b)) = (text.find('['), text.find(']')) {
            if b < a {
                break;
            }
            text.replace_range(a..=b, "");
        }
        for part in text.split(['|', ';', '>']).flat_map(|p| p.split("&&")) {
            let part = part.trim();
            // A synopsis (`prosevm runs [OPTIONS]`) names placeholders, not values.
            let synopsis = part.contains("[OPTIONS]");
            if !synopsis && (part.starts_with("prosec ") || part.starts_with("prosevm ")) {
                out.push((line, part.to_string()));
            }
        }
    }
    out
}

/// `line` in words, as a shell splits it (double and single quotes, no expansion).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

#[test]
fn every_command_line_in_the_docs_parses_with_the_binaries() {
    // Each example is given to its binary with `--help` after it: clap reads every word
    // before it (an unknown flag or a value it refuses is an error), then prints the help.
    let mut lines = Vec::new();
    for page in user_pages() {
        let name = page
            .path
            .strip_prefix(crate::markdown::root())
            .unwrap_or(&page.path)
            .display()
            .to_string();
        lines.extend(
            command_lines(&page)
                .into_iter()
                .map(|(l, t)| (format!("{name}:{l}"), t)),
        );
    }
    assert!(lines.len() > 100, "too few examples found: {lines:?}");
    let mut wrong = Vec::new();
    for (line, text) in &lines {
        let words = shell_words(text);
        // Not a command: a crate (`prosevm (vm/)`), or what one printed (`prosevm serve: ...`).
        let printed = words
            .get(1)
            .is_some_and(|w| w.starts_with('(') || w.ends_with(':'));
        if printed || words.iter().any(|w| w.ends_with("...")) {
            continue;
        }
        let (code, _, err) = support::output(
            support::command(&words[0])
                .args(&words[1..])
                .arg("--help")
                .env("NO_COLOR", "1"),
        );
        // A placeholder for a number (`--max-cost USD`), or a flag named in a sentence
        // (`prosec build --sign`), is not a wrong command.
        let placeholder = err.contains("invalid value '")
            && err
                .split('\'')
                .nth(1)
                .is_some_and(|v| v.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
        let named =
            err.contains("a value is required") && words.last().is_some_and(|w| w.starts_with('-'));
        if code != 0 && !placeholder && !named {
            wrong.push(format!(
                "{line}: `{text}`: {}",
                err.lines().next().unwrap_or_default()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "command lines the binaries refuse:\n{}",
        wrong.join("\n")
    );
}
