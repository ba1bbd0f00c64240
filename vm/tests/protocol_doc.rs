//! `docs/stdio-protocol.md` against the protocol's one definition: the table of request kinds
//! lists exactly the kinds `prose_machine::protocol` defines, and the example exchange, replayed
//! against the real VM, is what the VM writes line for line.

use crate::support;

use prose_machine::protocol::Kind;
use std::io::Write;
use std::process::Stdio;

fn doc() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/stdio-protocol.md"
    ))
    .expect("the protocol page")
}

/// The lines of section `heading` of the page.
fn section<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    doc.lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect()
}

#[test]
fn the_table_of_kinds_lists_every_kind_defined() {
    let doc = doc();
    let mut documented: Vec<String> = section(&doc, "## Request kinds")
        .iter()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(k, _)| k.to_string()))
        .collect();
    documented.sort();
    let mut defined: Vec<String> = Kind::ALL.iter().map(|k| k.as_str().to_string()).collect();
    defined.sort();
    assert_eq!(documented, defined);
}

#[test]
fn the_example_exchange_is_what_the_vm_does() {
    let doc = doc();
    let example = section(&doc, "## An example");
    // The fenced blocks of the section, in order: the program, then the exchange.
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut open = false;
    for l in &example {
        if l.starts_with("```") {
            open = !open;
            if open {
                blocks.push(Vec::new());
            }
        } else if open {
            blocks.last_mut().expect("a block").push(l);
        }
    }
    let [program, exchange] = &blocks[..] else {
        panic!("want a program and an exchange: {blocks:?}")
    };
    let program = program.join("\n") + "\n";
    let host: String = exchange
        .iter()
        .filter_map(|l| l.strip_prefix("< "))
        .map(|l| format!("{l}\n"))
        .collect();
    let vm_lines: Vec<serde_json::Value> = exchange
        .iter()
        .filter_map(|l| l.strip_prefix("> "))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(vm_lines.len() >= 3 && !host.is_empty(), "{exchange:?}");

    let dir = support::scratch("protocol-doc");
    std::fs::write(dir.join("t.prose"), program).expect("program");
    let mut child = support::prosevm()
        .current_dir(&dir)
        .args(["run", "t.prose", "--driver", "stdio", "--trace", "quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(host.as_bytes()).expect("write");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
        .collect();
    // The run id differs from run to run.
    let mut want = vm_lines;
    for lines in [&mut got, &mut want] {
        if let Some(last) = lines.last_mut() {
            last["run"] = "RUN".into();
        }
    }
    assert_eq!(got, want);
    // Each run keeps the replies in the journal in the form the host sent them.
    let runs = dir.join(".prose").join("runs");
    let run = std::fs::read_dir(&runs)
        .expect("runs")
        .flatten()
        .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .expect("a run directory");
    let journal = std::fs::read_to_string(run.path().join("journal.log")).expect("journal");
    let journaled: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l.split_once(' ').expect("crc body").1).expect("JSON"))
        .collect();
    let sent: Vec<serde_json::Value> = host
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(journaled, sent);
}
