//! What the binaries say about themselves: the `--help` of `prosec`, `prosevm` and each of
//! their commands, read into the commands they list, the options each takes with the default
//! clap shows (`[default: X]`), and the exit-status table printed at the end.

use crate::support;
use std::collections::BTreeMap;

/// One option of a command, as its `--help` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opt {
    /// Its short form, if it has one (`o` for `-o`).
    pub short: Option<char>,
    /// The default clap shows, if any.
    pub default: Option<String>,
    /// The environment variable clap says stands for it, if any.
    pub env: Option<String>,
}

/// A command's `--help`, read.
#[derive(Clone, Debug, Default)]
pub struct Help {
    /// The commands it lists (without `help`).
    pub commands: Vec<String>,
    /// Its options by long name (without the hyphens).
    pub options: BTreeMap<String, Opt>,
    /// The exit-status table at its end: each status with its meaning, whitespace collapsed;
    /// `None` when there is no such table.
    pub exits: Option<Vec<(u32, String)>>,
}

/// Runs `bin ARGS... --help` and reads what it prints.
pub fn help(bin: &str, args: &[&str]) -> Help {
    let (code, out, err) = support::output(
        support::command(bin)
            .args(args)
            .arg("--help")
            .env("NO_COLOR", "1"),
    );
    assert_eq!(code, 0, "{bin} {} --help failed: {err}", args.join(" "));
    read(&out)
}

/// Every command of `bin`, as the words that name it (`["runs", "prune"]`), with its help;
/// the binary itself is `[]`.
pub fn every_command(bin: &str) -> Vec<(Vec<String>, Help)> {
    let mut all = Vec::new();
    let mut queue = vec![Vec::<String>::new()];
    while let Some(words) = queue.pop() {
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let h = help(bin, &args);
        for c in &h.commands {
            let mut next = words.clone();
            next.push(c.clone());
            queue.push(next);
        }
        all.push((words, h));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Collapses runs of whitespace to one space.
pub fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads a clap help text.
pub fn read(text: &str) -> Help {
    let mut help = Help::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut heading = "";
    let mut current: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        if !line.is_empty() && indent == 0 {
            heading = line.trim_end_matches(':');
            current = None;
            if heading == "Exit status" {
                let (exits, used) = read_exits(&lines[i + 1..]);
                help.exits = Some(exits);
                i += used;
            }
        } else if heading == "Commands" && indent == 2 {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                help.commands.push(name.to_string());
            }
        } else if heading == "Options"
            && (indent == 2 || indent == 6)
            && line[indent..].starts_with('-')
        {
            let spec = line.trim_start();
            let (short, rest) = match spec.strip_prefix('-') {
                Some(r) if !r.starts_with('-') => {
                    let c = r.chars().next();
                    (c, r.get(1..).unwrap_or("").trim_start_matches(", "))
                }
                _ => (None, spec),
            };
            if let Some(long) = rest.strip_prefix("--") {
                let name: String = long
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                help.options.insert(
                    name.clone(),
                    Opt {
                        short,
                        default: None,
                        env: None,
                    },
                );
                current = Some(name);
            }
        }
        // A default or a variable may follow the option's name on its line or come lines
        // below it.
        if let Some(o) = current.as_ref().and_then(|n| help.options.get_mut(n)) {
            if let Some(at) = line.find("[default: ") {
                let value = &line[at + "[default: ".len()..];
                o.default = value.split(']').next().map(str::to_string);
            }
            if let Some(at) = line.find("[env: ") {
                let value = &line[at + "[env: ".len()..];
                o.env = value.split([']', '=']).next().map(str::to_string);
            }
        }
        i += 1;
    }
    help
}

/// The exit table's entries from the lines after `Exit status:`, and how many lines they
/// took: a line `  N  meaning` starts an entry, a more deeply indented one goes on with it.
/// Backticks are dropped, as the docs' tables are compared without them.
fn read_exits(lines: &[&str]) -> (Vec<(u32, String)>, usize) {
    let mut exits: Vec<(u32, String)> = Vec::new();
    let mut used = 0;
    for line in lines {
        if line.trim().is_empty() || !line.starts_with(' ') {
            break;
        }
        let t = line.trim_start();
        let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
        match (digits.parse::<u32>(), exits.last_mut()) {
            (Ok(n), _) if t[digits.len()..].starts_with(' ') => {
                exits.push((n, collapse(&t[digits.len()..].replace('`', ""))));
            }
            (_, Some(last)) => {
                last.1 = collapse(&format!("{} {}", last.1, t.replace('`', "")));
            }
            _ => break,
        }
        used += 1;
    }
    (exits, used)
}

#[test]
fn a_help_text_is_read_into_commands_options_defaults_and_exits() {
    let text = "\
The VM

Usage: prosevm [OPTIONS] <COMMAND>

Commands:
  exec     Run a compiled `.pbc` artifact
  runs     List runs
  help     Print this message

Options:
  -o, --output <FILE>
          The file to write

      --max-iterations <MAX_ITERATIONS>
          Loop iterations allowed in the whole run

          [default: 1000000]

      --trace <TRACE>
          Possible values:
          - narrate: The narration protocol
          - json:    One JSON event per line

          [default: narrate]
      --quiet  Say nothing [default: false]
      --store <STORE>
          The store [env: PROSE_STORE=]

Exit status:
  0    success
  1    the program failed:
       compile errors
  130  interrupted
";
    let h = read(text);
    assert_eq!(h.commands, ["exec", "runs"]);
    assert_eq!(
        h.options.keys().collect::<Vec<_>>(),
        ["max-iterations", "output", "quiet", "store", "trace"]
    );
    assert_eq!(h.options["store"].env.as_deref(), Some("PROSE_STORE"));
    assert_eq!(h.options["quiet"].env, None);
    assert_eq!(h.options["output"].short, Some('o'));
    assert_eq!(h.options["output"].default, None);
    assert_eq!(
        h.options["max-iterations"].default.as_deref(),
        Some("1000000")
    );
    assert_eq!(h.options["trace"].default.as_deref(), Some("narrate"));
    assert_eq!(h.options["quiet"].default.as_deref(), Some("false"));
    assert_eq!(
        h.exits,
        Some(vec![
            (0, "success".to_string()),
            (1, "the program failed: compile errors".to_string()),
            (130, "interrupted".to_string()),
        ])
    );
}
