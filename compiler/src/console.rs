//! What the command lines of `prosec` and `prosevm` share, defined once: the output format
//! (`--format text|json`), colour (`--color auto|always|never`), the exit statuses and their
//! table (printed at the end of every `--help`), and how a failure is said in each format.
//!
//! The format and colour are set once per process ([`Console::set`]) from the parsed command
//! line, so a failure anywhere is reported as the user asked: a `prog: message` line on
//! stderr, or one JSON object `{"error": {"message", "code", "exit"}}` on stdout, where a
//! tool reading the JSON result finds it.

use clap::ValueEnum;
use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::OnceLock;

/// How a command prints its result and its errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people: lines on stdout, diagnostics and errors on stderr.
    #[default]
    Text,
    /// For tools: one JSON document on stdout, errors included.
    Json,
}

/// When diagnostics and errors on stderr are coloured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Color {
    /// Only on a terminal, and not when NO_COLOR is set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl Color {
    /// Whether stderr gets colour.
    pub fn on_stderr(self) -> bool {
        use std::io::IsTerminal;
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::stderr().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// The exit statuses of both binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// It worked.
    Success = 0,
    /// The program or the run failed.
    Failed = 1,
    /// The command could not do its work.
    Unusable = 2,
    /// The run stopped to wait.
    Stopped = 3,
    /// Interrupted by Ctrl-C or SIGTERM.
    Interrupted = 130,
}

impl Exit {
    /// Every status, in the table's order.
    pub const ALL: [Exit; 5] = [
        Exit::Success,
        Exit::Failed,
        Exit::Unusable,
        Exit::Stopped,
        Exit::Interrupted,
    ];

    /// The status as a number.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// What the status means, for the table.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failed => {
                "the program or the run failed: compile errors (or warnings under \
                 --deny-warnings), an artifact that does not verify, a runtime error, \
                 `diff` found differences, `fmt --check` would change a file"
            }
            Exit::Unusable => {
                "the command could not do its work: a usage error, an unreadable file, an \
                 unreachable store, an untrusted artifact, a refused budget"
            }
            Exit::Stopped => {
                "the run stopped to wait: paused at its budget, or waiting for a person's input"
            }
            Exit::Interrupted => "interrupted (Ctrl-C or SIGTERM); the run can be resumed",
        }
    }

    /// The status for a number a library call gave (an unknown one is [`Exit::Failed`]).
    pub fn from_code(code: u8) -> Exit {
        Exit::ALL
            .into_iter()
            .find(|e| e.code() == code)
            .unwrap_or(Exit::Failed)
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The exit-status table at the end of every `--help` of both binaries.
pub fn exit_table() -> String {
    let mut table = String::from("Exit status:\n");
    for e in Exit::ALL {
        table.push_str(&format!("  {:<4} {}\n", e.code(), e.meaning()));
    }
    table
}

/// `cmd` with the exit-status table at the end of its help and of each of its subcommands'.
pub fn with_exit_table(cmd: clap::Command) -> clap::Command {
    fn add(cmd: clap::Command, table: &str) -> clap::Command {
        let table = table.to_string();
        cmd.after_help(table.clone())
            .mut_subcommands(move |s| add(s, &table))
    }
    add(cmd, &exit_table())
}

/// This process's output settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Console {
    /// `--format`.
    pub format: Format,
    /// Whether stderr is coloured (`--color` against the terminal).
    pub color: bool,
}

static CONSOLE: OnceLock<Console> = OnceLock::new();

impl Console {
    /// Sets this process's settings (once; later calls change nothing).
    pub fn set(format: Format, color: Color) {
        let _ = CONSOLE.set(Console {
            format,
            color: color.on_stderr(),
        });
    }

    /// This process's settings: before [`Console::set`], the defaults (text, no colour).
    pub fn get() -> Console {
        CONSOLE.get().copied().unwrap_or_default()
    }

    /// Whether JSON was asked for.
    pub fn json() -> bool {
        Console::get().format == Format::Json
    }
}

/// Whether a command line asks for JSON (`--format json`, `--format=json`, or the older
/// `--json`), read from the words themselves: for errors found before the line is parsed.
pub fn json_asked(args: &[OsString]) -> bool {
    let mut words = args.iter().filter_map(|a| a.to_str());
    while let Some(w) = words.next() {
        match w {
            "--json" | "--format=json" => return true,
            "--format" if words.next() == Some("json") => return true,
            _ => {}
        }
    }
    false
}

/// A failure as JSON: `{"error": {"message", "code", "exit"}}` (`code` only when there is
/// one, as `E201`).
pub fn error_json(message: &str, code: Option<&str>, exit: Exit) -> serde_json::Value {
    let mut error = serde_json::json!({ "message": message, "exit": exit.code() });
    if let Some(code) = code {
        error["code"] = code.into();
    }
    serde_json::json!({ "error": error })
}

/// Says a failure of `program` the way this process was asked to (see the module's
/// documentation), and gives its exit status.
pub fn fail(program: &str, message: impl std::fmt::Display, exit: Exit) -> ExitCode {
    fail_coded(program, message, None, exit)
}

/// [`fail`], with the failure's stable code (`E219`).
pub fn fail_coded(
    program: &str,
    message: impl std::fmt::Display,
    code: Option<&str>,
    exit: Exit,
) -> ExitCode {
    let message = message.to_string();
    if Console::json() {
        println!("{}", error_json(&message, code, exit));
    } else {
        eprintln!("{program}: {message}");
    }
    exit.into()
}

/// Reports a command-line error from clap in the format asked for (clap's own text, or its
/// message as a JSON error), and gives its status: help and version print as they are and
/// succeed.
pub fn usage_error(e: clap::Error, json: bool) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return Exit::Success.into();
    }
    if json {
        let text = e.render().to_string();
        let message = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        println!("{}", error_json(message, None, Exit::Unusable));
    } else {
        let _ = e.print();
    }
    Exit::Unusable.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_asked_for_by_each_spelling_and_not_by_a_value() {
        let words = |s: &str| -> Vec<OsString> { s.split(' ').map(OsString::from).collect() };
        assert!(json_asked(&words("prosevm runs --format json")));
        assert!(json_asked(&words("prosevm runs --format=json")));
        assert!(json_asked(&words("prosevm runs --json")));
        assert!(!json_asked(&words("prosevm runs --format text")));
        assert!(!json_asked(&words("prosevm run x.prose --input a=--json2")));
    }

    #[test]
    fn the_table_lists_every_status_once() {
        let table = exit_table();
        for e in Exit::ALL {
            assert_eq!(
                table
                    .lines()
                    .filter(|l| l.trim_start().starts_with(&format!("{} ", e.code())))
                    .count(),
                1,
                "{table}"
            );
            assert_eq!(Exit::from_code(e.code()), e);
        }
    }

    #[test]
    fn an_error_as_json_carries_its_code_only_when_it_has_one() {
        let with = error_json("no skill", Some("E219"), Exit::Unusable);
        assert_eq!(with["error"]["code"], "E219");
        assert_eq!(with["error"]["exit"], 2);
        let without = error_json("bad flag", None, Exit::Unusable);
        assert!(without["error"].get("code").is_none());
    }
}
