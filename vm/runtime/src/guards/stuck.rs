//! An agent loop that goes nowhere. Small models fall into patterns a session must not pay
//! for until its turn limit: calling a tool that does not exist, making the same call again
//! when nothing has changed since (the same file written twice with the same content, the
//! same failing command run again), or failing every call turn after turn. [`Stuck`]
//! watches the calls of each turn and says when the loop is stuck, and what the model kept
//! doing; the loop then asks once for a plain answer without tools, and fails the session if
//! that does not help.

use prose_machine::protocol::{ToolCall, ToolOutput};
use std::collections::HashMap;

/// Calls of a tool that does not exist before the loop is stuck (the first gets a
/// corrective reply).
const UNKNOWN_CALLS: u32 = 2;

/// Times one call (same tool, same arguments) may be made in a session, changes between
/// them or not, before the loop is stuck.
const SAME_CALLS: u32 = 5;

/// Turns in a row whose calls all fail before the loop is stuck.
const FAILING_TURNS: u32 = 3;

/// One call as the loop remembers it.
#[derive(Debug)]
struct Seen {
    /// How often it was made.
    times: u32,
    /// The count of changes when it was last made (after it ran).
    changes: u64,
}

/// What the loop has seen of a session's tool calls.
#[derive(Debug, Default)]
pub struct Stuck {
    /// Calls by tool and arguments.
    calls: HashMap<(String, String), Seen>,
    /// Successful calls of tools that change something, so far.
    changes: u64,
    unknown: u32,
    failing_turns: u32,
}

impl Stuck {
    /// Takes one turn's calls with their outputs; `known` says whether a tool exists for
    /// this session (offered, or withheld by its permissions), `changes` whether it may
    /// change something (it is not read-only). Returns what the model keeps doing, if the
    /// loop is stuck.
    pub fn turn(
        &mut self,
        calls: &[(&ToolCall, &ToolOutput)],
        known: impl Fn(&str) -> bool,
        changes: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let mut stuck = None;
        let mut all_failed = !calls.is_empty();
        for (call, out) in calls {
            all_failed &= out.is_error;
            if !known(&call.name) {
                self.unknown += 1;
                if self.unknown >= UNKNOWN_CALLS {
                    stuck.get_or_insert(format!(
                        "it kept calling `{}`, a tool it does not have",
                        call.name
                    ));
                }
                continue;
            }
            let before = self.changes;
            if !out.is_error && changes(&call.name) {
                self.changes += 1;
            }
            let key = (call.name.clone(), call.arguments.to_string());
            match self.calls.get_mut(&key) {
                Some(seen) => {
                    seen.times += 1;
                    if seen.changes == before {
                        let how = if out.is_error {
                            format!(", and it failed again: {}", first_line(&out.content))
                        } else {
                            String::new()
                        };
                        stuck.get_or_insert(format!(
                            "it called `{}` with the same arguments again although nothing had changed{how}",
                            call.name
                        ));
                    } else if seen.times >= SAME_CALLS {
                        stuck.get_or_insert(format!(
                            "it called `{}` with the same arguments {} times",
                            call.name, seen.times
                        ));
                    }
                    seen.changes = self.changes;
                }
                None => {
                    self.calls.insert(
                        key,
                        Seen {
                            times: 1,
                            changes: self.changes,
                        },
                    );
                }
            }
        }
        self.failing_turns = if all_failed {
            self.failing_turns + 1
        } else {
            0
        };
        if self.failing_turns >= FAILING_TURNS {
            let last = calls
                .last()
                .map(|(c, o)| format!(" (the last: `{}`: {})", c.name, first_line(&o.content)));
            stuck.get_or_insert(format!(
                "its tool calls failed {} turns in a row{}",
                self.failing_turns,
                last.unwrap_or_default()
            ));
        }
        stuck
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() > 120 {
        format!("{}...", line.chars().take(117).collect::<String>())
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        }
    }

    fn known(name: &str) -> bool {
        matches!(name, "read_file" | "write_file" | "edit_file" | "bash")
    }

    fn changes(name: &str) -> bool {
        name != "read_file"
    }

    #[test]
    fn a_made_up_tool_gets_one_correction() {
        let mut s = Stuck::default();
        let greet = call("greet_first_openprose", json!({"message": "Welcome"}));
        let err = ToolOutput::error("no such tool");
        assert_eq!(
            s.turn(&[(&greet, &err)], known, changes),
            None,
            "one correction"
        );
        let why = s.turn(&[(&greet, &err)], known, changes).expect("stuck");
        assert!(why.contains("greet_first_openprose"), "{why}");
    }

    #[test]
    fn the_same_call_with_nothing_changed_since_is_stuck() {
        // The README's hello program on a 1.5B model: the same file written twice.
        let mut s = Stuck::default();
        let write = call(
            "write_file",
            json!({"path": "greeting.txt", "content": "Hello"}),
        );
        let ok = ToolOutput::ok("wrote 5 bytes");
        assert_eq!(s.turn(&[(&write, &ok)], known, changes), None);
        let why = s.turn(&[(&write, &ok)], known, changes).expect("stuck");
        assert!(why.contains("nothing had changed"), "{why}");

        let mut s = Stuck::default();
        let read = call("read_file", json!({"path": "nope.md"}));
        let err = ToolOutput::error("not found: nope.md");
        assert_eq!(s.turn(&[(&read, &err)], known, changes), None);
        let why = s
            .turn(&[(&read, &err)], known, changes)
            .expect("the same failure");
        assert!(why.contains("failed again: not found: nope.md"), "{why}");
    }

    #[test]
    fn the_same_call_after_a_change_is_progress() {
        // Edit, run the tests; edit again, run the tests again.
        let mut s = Stuck::default();
        let test = call("bash", json!({"command": "cargo test"}));
        let failing = ToolOutput::error("1 test failed");
        for i in 0..4 {
            let edit = call(
                "edit_file",
                json!({"path": "a.rs", "old_string": i.to_string(), "new_string": "x"}),
            );
            let ok = ToolOutput::ok("edited");
            assert_eq!(
                s.turn(&[(&edit, &ok), (&test, &failing)], known, changes),
                None,
                "turn {i}"
            );
        }
        let edit = call(
            "edit_file",
            json!({"path": "a.rs", "old_string": "9", "new_string": "x"}),
        );
        let ok = ToolOutput::ok("edited");
        let why = s
            .turn(&[(&edit, &ok), (&test, &failing)], known, changes)
            .expect("five times is enough");
        assert!(why.contains("5 times"), "{why}");
    }

    #[test]
    fn failing_turns_in_a_row_are_stuck_and_a_success_resets_them() {
        let mut s = Stuck::default();
        let err = ToolOutput::error("exit status 1");
        let ok = ToolOutput::ok("done");
        for (i, cmd) in ["a", "b"].iter().enumerate() {
            let c = call("bash", json!({"command": cmd}));
            assert_eq!(s.turn(&[(&c, &err)], known, changes), None, "turn {i}");
        }
        let fine = call("bash", json!({"command": "ok"}));
        assert_eq!(s.turn(&[(&fine, &ok)], known, changes), None);
        for cmd in ["c", "d"] {
            let c = call("bash", json!({"command": cmd}));
            assert_eq!(s.turn(&[(&c, &err)], known, changes), None);
        }
        let c = call("bash", json!({"command": "e"}));
        let why = s
            .turn(&[(&c, &err)], known, changes)
            .expect("three failing turns");
        assert!(why.contains("failed 3 turns in a row"), "{why}");
    }
}
