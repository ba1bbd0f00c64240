//! Facts the pages state that the code decides: the README's length and its quick start, the
//! programs and `prose.toml` files shown, the crate graph of design.md, the keys of
//! settings.md, and the requests of service.md.

use crate::markdown::{plain, root, user_pages, Page};
use crate::support;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn the_readme_takes_five_minutes() {
    let readme = Page::load("README.md");
    let lines = readme.text.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines; at most 250");
    assert!(
        readme.text.contains("](docs/language.md)"),
        "README.md does not link to the language"
    );
}

/// The quick start's commands work as written: the run prints what the README shows, and the
/// test command is the one CI runs.
#[test]
fn the_quick_start_works_as_the_readme_says() {
    let readme = Page::load("README.md");
    let start = readme
        .blocks
        .iter()
        .find(|b| b.info == "sh")
        .expect("README.md's quick start");
    let lines: Vec<&str> = start.code.lines().collect();
    assert_eq!(lines.len(), 2, "the quick start is two commands: {lines:?}");
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    assert!(
        lines[1].starts_with("cargo test") && ci.lines().any(|l| l.trim() == lines[1]),
        "README.md's test command `{}` is not what .ci/run runs",
        lines[1]
    );
    let args = lines[0]
        .strip_prefix("cargo run --release -p prosevm -- ")
        .expect("the first command runs prosevm");
    let state = support::scratch("docs-quick-start");
    let (code, out, err) = support::output(
        support::command("prosevm")
            .args(args.split_whitespace())
            .arg("--state-dir")
            .arg(&state)
            .current_dir(root()),
    );
    assert_eq!(code, 0, "{}: {err}", lines[0]);
    let shown = readme
        .blocks
        .iter()
        .find(|b| b.info.is_empty() && b.code.contains("[Summary]"))
        .expect("the run's end, shown");
    let last = shown.code.lines().last().expect("a line");
    assert_eq!(out.trim_end(), last, "the output the README shows");
    assert!(err.contains("[Summary] finished in"), "{err}");
}

/// The programs the README shows check clean.
#[test]
fn the_readmes_programs_check() {
    let readme = Page::load("README.md");
    let dir = support::scratch("docs-readme-programs");
    let mut n = 0;
    for b in readme.blocks.iter().filter(|b| b.info == "prose") {
        n += 1;
        let file = dir.join(format!("readme-{n}.prose"));
        std::fs::write(&file, &b.code).expect("write");
        let (code, _, err) = support::output(support::command("prosec").arg("check").arg(&file));
        assert_eq!(code, 0, "README.md:{}: {err}", b.line);
        assert!(
            err.contains("0 error(s), 0 warning(s)"),
            "README.md:{}: {err}",
            b.line
        );
    }
    assert!(n >= 1, "README.md shows no program");
}

/// Every `toml` block of the pages (not marked as another file, as Helix's
/// `toml languages.toml` is) is a `prose.toml` the schema reads.
#[test]
fn every_prose_toml_shown_is_read_by_the_schema() {
    let mut n = 0;
    let mut failures = Vec::new();
    for page in user_pages() {
        for b in page.blocks.iter().filter(|b| b.info == "toml") {
            n += 1;
            if let Err(e) = prose_settings::Settings::parse(&b.code) {
                failures.push(format!("{}:{}: {e}", page.path.display(), b.line));
            }
        }
    }
    assert!(n >= 5, "only {n} prose.toml examples");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every test or eval file a page shows (a `toml` block marked `NAME.test.toml` or
/// `NAME.eval.toml`) reads as one, as `prosevm test` and `prosevm eval` read them.
#[test]
fn every_test_and_eval_file_shown_reads() {
    let mut n = 0;
    let mut failures = Vec::new();
    for page in user_pages() {
        for b in &page.blocks {
            let read = if b.info.starts_with("toml ") && b.info.ends_with(".test.toml") {
                prosec::suite::spec::parse(&b.code).err().map(|(e, _)| e)
            } else if b.info.starts_with("toml ") && b.info.ends_with(".eval.toml") {
                prosec::suite::eval::parse(&b.code).err().map(|(e, _)| e)
            } else {
                continue;
            };
            n += 1;
            if let Some(e) = read {
                failures.push(format!("{}:{}: {e}", page.path.display(), b.line));
            }
        }
    }
    assert!(n >= 4, "only {n} test and eval files shown");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fields a derived `Deserialize` asks for, caught by a deserializer that only listens.
fn fields_of<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{Error, Visitor};
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Error::custom("listened"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

#[test]
fn settings_md_lists_exactly_the_keys_of_the_schema() {
    let page = Page::load("docs/settings.md");
    let table = page
        .tables_headed(&["key"])
        .next()
        .expect("settings.md's table of keys");
    let documented: BTreeSet<String> = table.rows.iter().map(|r| plain(&r[0])).collect();
    let schema: BTreeSet<String> = fields_of::<prose_settings::Settings>()
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert!(schema.len() > 20, "the schema's fields: {schema:?}");
    assert_eq!(
        documented, schema,
        "docs/settings.md's keys against settings/src/schema.rs"
    );
}

/// Dependencies that do I/O, which design.md says prose-machine never has, directly or
/// through another crate.
pub const IO_CRATES: [&str; 17] = [
    "tokio",
    "mio",
    "socket2",
    "hyper",
    "reqwest",
    "libc",
    "rusqlite",
    "tokio-postgres",
    "deadpool-postgres",
    "axum",
    "rmcp",
    "process-wrap",
    "indicatif",
    "ignore",
    "rustls",
    "opentelemetry-otlp",
    "sse-stream",
];

/// The names in backticks in a cell.
fn names(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// A manifest's dependencies of every kind, by name.
fn dependencies(manifest: &toml::Table) -> BTreeSet<String> {
    ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .filter_map(|k| manifest.get(*k).and_then(toml::Value::as_table))
        .flat_map(|t| t.keys().cloned())
        .collect()
}

fn manifest(dir: &str) -> toml::Table {
    let path = root().join(dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.parse().expect("a manifest")
}

#[test]
fn design_md_draws_the_crate_graph_the_manifests_have() {
    let page = Page::load("docs/design.md");
    let table = page
        .tables_headed(&["crate", "directory"])
        .next()
        .expect("design.md's table of crates");
    // Each crate's directory and documented dependencies.
    let mut crates: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for r in &table.rows {
        let name = plain(&r[0]);
        let dir = plain(&r[1]).trim_end_matches('/').to_string();
        crates.insert(name, (dir, names(&r[3])));
    }
    let ours: BTreeSet<String> = crates.keys().cloned().collect();
    let mut failures = Vec::new();
    for (name, (dir, documented)) in &crates {
        let m = manifest(dir);
        let package = m
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str);
        if package != Some(name.as_str()) {
            failures.push(format!("{dir}/Cargo.toml names {package:?}, not {name}"));
        }
        let deps = dependencies(&m);
        let actual: BTreeSet<String> = deps.intersection(&ours).cloned().collect();
        if &actual != documented {
            failures.push(format!(
                "{name}: design.md says it depends on {documented:?}, {dir}/Cargo.toml on {actual:?}"
            ));
        }
        if name == "prose-machine" {
            for io in IO_CRATES.iter().filter(|c| deps.contains(**c)) {
                failures.push(format!(
                    "prose-machine depends on {io}, which does I/O: design.md says it never does"
                ));
            }
        }
    }
    let workspace = manifest(".");
    let list = |key: &str| -> BTreeSet<String> {
        workspace["workspace"]
            .get(key)
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let dirs: BTreeSet<String> = crates.values().map(|(d, _)| d.clone()).collect();
    let members = list("members");
    let outside: BTreeSet<String> = dirs.difference(&members).cloned().collect();
    if outside != list("exclude") {
        failures.push(format!(
            "design.md's crates outside the workspace are {outside:?}; Cargo.toml excludes {:?}",
            list("exclude")
        ));
    }
    for m in members.difference(&dirs) {
        failures.push(format!("workspace member {m} is not in design.md's table"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn service_md_lists_exactly_the_apis_requests() {
    let page = Page::load("docs/service.md");
    let documented: BTreeSet<(String, String)> = page
        .tables_headed(&["request"])
        .flat_map(|t| &t.rows)
        .filter_map(|r| {
            let (method, path) = plain(&r[0])
                .split_once(' ')
                .map(|(m, p)| (m.to_string(), p.to_string()))?;
            Some((method, path))
        })
        .collect();
    let api: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/openapi.json")).expect("openapi.json"),
    )
    .expect("JSON");
    let mut served = BTreeSet::new();
    for (path, item) in api["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("methods").keys() {
            served.insert((method.to_uppercase(), path.clone()));
        }
    }
    assert!(served.len() > 10, "{served:?}");
    assert_eq!(
        documented, served,
        "docs/service.md's requests against docs/openapi.json"
    );
}
