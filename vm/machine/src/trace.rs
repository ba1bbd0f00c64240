//! Trace events: the narration protocol for people following a run, JSON lines for tools.

use crate::protocol::{RequestId, Usage};
use bytecode_spec::Code;
use serde::Serialize;

/// Whether an execution id is the program's top level (0).
fn at_top_level(exec: &u32) -> bool {
    *exec == 0
}

/// Something that happened during a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The program starts.
    ProgramStart {
        /// Its name.
        name: String,
    },
    /// A session starts (a request goes to the driver).
    Session {
        /// The request's id.
        id: RequestId,
        /// The module it is in (0: the program run).
        module: u32,
        /// Its source line.
        line: u32,
        /// Its label or prompt.
        text: String,
        /// The agent it runs, if it names one.
        agent: Option<String>,
        /// The model it asks for, if it names one (`sonnet`, or a provider id).
        model: Option<String>,
        /// The execution id of the block call or program invocation it is in (0, and left
        /// out of the JSON: the program's top level).
        #[serde(skip_serializing_if = "at_top_level")]
        exec: u32,
    },
    /// A named variable was bound.
    Binding {
        /// The variable.
        name: String,
        /// What declared it.
        kind: bytecode_spec::BindingKind,
        /// Its new value, as text.
        value: String,
        /// The module (0: the program run; others: imported programs).
        module: u32,
        /// The assigning statement's line.
        line: u32,
        /// The execution id of the block invocation it belongs to (0: the top level).
        scope: u32,
        /// The execution id of the program invocation it belongs to (0: the program run).
        instance: u32,
    },
    /// A persistent agent's memory changed with a session's answer.
    Memory {
        /// The module the agent is declared in.
        module: u32,
        /// The agent.
        agent: String,
        /// The session's request.
        id: RequestId,
        /// The memory after the session.
        memory: String,
        /// The session's answer.
        answer: String,
    },
    /// A session answered.
    Answer {
        /// The request.
        id: RequestId,
        /// The answer.
        text: String,
        /// The program keeps it under a name (otherwise it is an anonymous binding).
        bound: bool,
    },
    /// Text was read as a structure (a person's input turned into the list, record, number
    /// or truth value the program declares), by the model or the driver that answered.
    Converted {
        /// The request.
        id: RequestId,
        /// The shape asked for: `list`, `record`, `integer` or `boolean`.
        shape: String,
        /// What it became, as JSON.
        value: String,
    },
    /// A discretion condition is being judged.
    Evaluate {
        /// The condition.
        condition: String,
    },
    /// A judgement came back.
    Flow {
        /// The request.
        id: RequestId,
        /// The verdict.
        result: bool,
    },
    /// A choice was made.
    Chose {
        /// The request.
        id: RequestId,
        /// The option taken (0-based).
        index: usize,
        /// Its label.
        option: String,
    },
    /// A fork starts.
    Parallel {
        /// How many branches.
        branches: usize,
        /// Its join strategy.
        strategy: &'static str,
    },
    /// A fork joined.
    Joined {
        /// Branches that succeeded.
        succeeded: usize,
        /// Branches in all.
        branches: usize,
    },
    /// A loop iteration starts.
    LoopIteration {
        /// 1-based.
        iteration: u64,
        /// The loop's max, if any.
        max: Option<i64>,
    },
    /// A loop ended.
    LoopExit {
        /// Iterations run.
        iterations: u64,
        /// Why.
        reason: &'static str,
    },
    /// A protected region starts.
    TryEnter,
    /// An error was caught.
    Catch {
        /// Its message.
        message: String,
    },
    /// A block call.
    FramePush {
        /// The block.
        block: String,
        /// Stack depth before the call.
        depth: usize,
    },
    /// A block returned.
    FramePop {
        /// Stack depth after the return.
        depth: usize,
    },
    /// An imported program starts.
    Import {
        /// Its name.
        program: String,
        /// Its module.
        module: u32,
        /// The invocation's execution id.
        exec: u32,
        /// The execution id of the invocation that invokes it (0: the program run).
        parent: u32,
    },
    /// An imported program finished.
    ImportDone {
        /// Its name.
        program: String,
    },
    /// What a request cost: its latency over all attempts and, when the provider reports
    /// them, the tokens used.
    Usage {
        /// The request.
        id: RequestId,
        /// Milliseconds from the first attempt to the reply.
        ms: u64,
        /// Milliseconds from the first attempt to the answer's first token, when it streamed
        /// (for a session run as an agent loop, its first turn's first token).
        #[serde(skip_serializing_if = "Option::is_none")]
        first_token_ms: Option<u64>,
        /// The tokens (cached input apart), what they cost when the model's price is known,
        /// and the memo's part, when the driver reports them.
        #[serde(flatten)]
        used: Option<Usage>,
    },
    /// A model turn of a session's agent loop answered.
    Turn {
        /// The turn's id (the session's, with `#tN`).
        id: RequestId,
        /// How many tools it calls.
        tool_calls: usize,
        /// Milliseconds it took.
        ms: u64,
        /// Milliseconds to its first token, when it streamed.
        #[serde(skip_serializing_if = "Option::is_none")]
        first_token_ms: Option<u64>,
        /// The tokens (cached input apart) and their cost, or that the memo answered, when
        /// the driver reports them.
        #[serde(flatten)]
        used: Option<Usage>,
    },
    /// A tool call of a session's agent loop ran (or was refused).
    ToolCall {
        /// The call's id (the session's, with `#tNcM`).
        id: RequestId,
        /// The tool.
        tool: String,
        /// Its arguments, shortened.
        arguments: String,
        /// Why a permission check refused it, if one did.
        refused: Option<String>,
        /// Whether the model reads an error.
        is_error: bool,
        /// Milliseconds it took.
        ms: u64,
        /// Bytes of output.
        bytes: usize,
    },
    /// A piece of a model's answer as it streams (shown live, never journaled: the finished
    /// answer is).
    Delta {
        /// The request (a turn's id for a session run as an agent loop).
        id: RequestId,
        /// The new text.
        text: String,
        /// What was streamed before under this id is abandoned (the attempt was cut off or
        /// stalled and is asked again): `text` starts afresh.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        restart: bool,
    },
    /// How the run's commands are confined, said once, at its first `bash` call.
    Sandbox {
        /// The confinement: `bwrap`, `landlock`, or `none`.
        confinement: String,
        /// What that means here, or why commands run without one or are refused.
        detail: String,
    },
    /// A session's agent loop went nowhere; the model is asked for a plain answer without
    /// tools.
    Nudge {
        /// The session.
        id: RequestId,
        /// What the model kept doing.
        why: String,
    },
    /// A failed session is tried again.
    Retry {
        /// The request.
        id: RequestId,
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        /// Why the previous attempt failed.
        error: String,
    },
    /// A mid-program input no one can give now: the run goes on with what does not need it,
    /// then stops, waiting, until someone answers (`prosevm answer`, the server's API).
    Waiting {
        /// The request.
        id: RequestId,
        /// The input's name.
        name: String,
        /// Its question.
        question: String,
    },
    /// A tool call its agent's permissions say `prompt` for, with no one here to ask: it
    /// has not run, and the run goes on with what does not need it, then stops, waiting,
    /// until someone approves or denies it (`prosevm answer`, the server's API and page).
    Approval {
        /// The tool call (`0:3#t2c0`).
        id: RequestId,
        /// How it is answered (`prosevm answer RUN --approve APPROVAL`).
        approval: String,
        /// The agent, when the session runs one.
        agent: Option<String>,
        /// The tool.
        tool: String,
        /// The command or URL asked about.
        detail: String,
        /// When it is refused if no one answers (UTC, ISO 8601), if ever.
        #[serde(skip_serializing_if = "Option::is_none")]
        expires: Option<String>,
    },
    /// A request failed for good.
    RequestFailed {
        /// The request.
        id: RequestId,
        /// Why.
        error: String,
    },
    /// A relaxed rule was broken, or something deserves a look; the run goes on.
    Warning {
        /// Its code.
        code: Code,
        /// Where (`program:line`).
        site: String,
        /// What.
        message: String,
    },
    /// A program output was bound.
    Output {
        /// The output.
        name: String,
        /// Its value.
        value: String,
    },
}

/// What `u` spent, for narration: tokens in (with the cache's part) and out, the cost, and
/// the memo's answers.
fn spent(u: &Usage) -> String {
    let mut parts = Vec::new();
    if u.input_tokens() > 0 || u.output_tokens > 0 || u.from_memo == 0 {
        let mut input = format!("{} tokens in", u.input_tokens());
        let cache: Vec<String> = [
            (u.cache_read_tokens, "read from the cache"),
            (u.cache_write_tokens, "written to it"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !cache.is_empty() {
            input.push_str(&format!(" ({})", cache.join(", ")));
        }
        parts.push(input);
        parts.push(format!("{} out", u.output_tokens));
    }
    if let Some(c) = u.cost {
        parts.push(format!("${c:.4}"));
    }
    if u.from_memo > 0 {
        parts.push(format!("{} answer(s) from the memo", u.from_memo));
    }
    parts.join(", ")
}

fn short(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() > 70 {
        format!("{}...", line.chars().take(67).collect::<String>())
    } else {
        line.to_string()
    }
}

impl Event {
    /// What request `id` cost: `ms` milliseconds over all its attempts, the first token
    /// after `first_token_ms` when it streamed, and `used`.
    pub fn usage(
        id: &RequestId,
        ms: u64,
        first_token_ms: Option<u64>,
        used: Option<Usage>,
    ) -> Event {
        Event::Usage {
            id: id.clone(),
            ms,
            first_token_ms,
            used,
        }
    }

    /// The event as a narration line, if it has one (streamed pieces are for the live
    /// display and JSON traces, not for narration).
    pub fn narrate(&self) -> Option<String> {
        Some(match self {
            Event::Delta { .. } => return None,
            Event::ProgramStart { name } => format!("[Program] Program start: {name}"),
            Event::Session { line, text, .. } => {
                format!("[Position] line {line}: session \"{}\"", short(text))
            }
            Event::Binding { name, value, .. } => {
                format!("[Binding] {name} = \"{}\"", short(value))
            }
            Event::Answer { id, text, .. } => format!("[Success] {id}: \"{}\"", short(text)),
            Event::Converted { id, shape, value } => {
                format!("[Convert] {id}: read as {shape}: {}", short(value))
            }
            Event::Evaluate { condition } => format!("[Loop] Evaluating: **{}**", short(condition)),
            Event::Chose { index, option, .. } => {
                format!("[Choice] option {index}: \"{}\"", short(option))
            }
            Event::Flow { result, .. } => {
                format!(
                    "[Flow] {}",
                    if *result {
                        "Satisfied"
                    } else {
                        "Not satisfied"
                    }
                )
            }
            Event::Parallel { branches, strategy } => {
                format!("[Parallel] Entering parallel block ({branches} branches, strategy: {strategy})")
            }
            Event::Joined {
                succeeded,
                branches,
            } => {
                format!(
                    "[Parallel] Parallel complete: {succeeded} of {branches} branches succeeded"
                )
            }
            Event::LoopIteration { iteration, max } => match max {
                Some(m) => format!("[Loop] Iteration {iteration} of max {m}"),
                None => format!("[Loop] Iteration {iteration}"),
            },
            Event::LoopExit { iterations, reason } => {
                format!("[Loop] Loop exited after {iterations} iteration(s): {reason}")
            }
            Event::Waiting { name, question, .. } => {
                format!("[Input] Waiting for `{name}`: {}", short(question))
            }
            Event::Approval {
                id,
                approval,
                tool,
                detail,
                ..
            } => format!(
                "[Approval] {id}: {tool} `{}` waits for a person's approval ({approval})",
                short(detail)
            ),
            Event::TryEnter => "[Try] Entering try block".into(),
            Event::Catch { message } => format!("[Try] Caught: {}", short(message)),
            Event::FramePush { block, depth } => {
                format!("[Frame+] Entering block: {block} (depth {})", depth + 1)
            }
            Event::FramePop { depth } => format!("[Frame-] Exiting block (depth {})", depth + 1),
            Event::Usage {
                id, ms, used: None, ..
            } => format!("[Usage] {id}: {ms} ms"),
            Event::Usage {
                id,
                ms,
                used: Some(u),
                ..
            } => format!("[Usage] {id}: {ms} ms, {}", spent(u)),
            Event::Import { program, .. } => format!("[Import] Invoking: {program}"),
            Event::Memory { agent, id, .. } => format!("[Memory] {agent}: memory updated by {id}"),
            Event::ImportDone { program } => format!("[Import] Import complete: {program}"),
            Event::Turn {
                id,
                tool_calls,
                ms,
                used,
                ..
            } => {
                let memo = match used {
                    Some(u) if u.from_memo > 0 => ", from the memo",
                    _ => "",
                };
                match tool_calls {
                    0 => format!("[Turn] {id}: answered ({ms} ms{memo})"),
                    n => format!("[Turn] {id}: {n} tool call(s) ({ms} ms{memo})"),
                }
            }
            Event::ToolCall {
                id,
                tool,
                arguments,
                refused,
                is_error,
                ms,
                bytes,
            } => match refused {
                Some(why) => format!(
                    "[Tool] {id}: {tool} {} REFUSED: {}",
                    short(arguments),
                    short(why)
                ),
                None => format!(
                    "[Tool] {id}: {tool} {} -> {}{bytes} bytes ({ms} ms)",
                    short(arguments),
                    if *is_error { "error, " } else { "" }
                ),
            },
            Event::Nudge { id, why } => {
                format!("[Warning] {id}: {why}; asking for an answer without tools")
            }
            Event::Sandbox { detail, .. } => format!("[Sandbox] {detail}"),
            Event::Retry { id, attempt, error } => format!(
                "[Warning] {id} failed ({}); attempt {attempt}",
                short(error)
            ),
            Event::RequestFailed { id, error } => {
                format!("[Warning] {id} failed: {}", short(error))
            }
            Event::Warning {
                code,
                site,
                message,
            } => format!("[Warning] {site}: [{code}] {message}"),
            Event::Output { name, value } => {
                format!("[Output] output {name} = \"{}\"", short(value))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Lineage, Step};

    #[test]
    fn usage_events_keep_cached_input_apart_and_say_what_the_memo_answered() {
        let id = RequestId::new(Lineage::root(), 3);
        let cached = Usage {
            cache_read_tokens: 2_400,
            cache_write_tokens: 100,
            cost: Some(0.0012),
            ..Usage::plain(20, 5)
        };
        let e = Event::usage(&id, 7, None, Some(cached));
        let json = serde_json::to_value(&e).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"event": "usage", "id": "0:3", "ms": 7, "input_tokens": 20,
                "output_tokens": 5, "cache_read_tokens": 2400, "cache_write_tokens": 100,
                "cost": 0.0012})
        );
        assert_eq!(
            e.narrate().as_deref(),
            Some("[Usage] 0:3: 7 ms, 2520 tokens in (2400 read from the cache, 100 written to it), 5 out, $0.0012")
        );
        let memo = Usage {
            from_memo: 1,
            ..Usage::default()
        };
        let e = Event::Turn {
            id: id.step(Step::Turn(0)),
            tool_calls: 1,
            ms: 0,
            first_token_ms: None,
            used: Some(memo),
        };
        assert_eq!(serde_json::to_value(&e).expect("json")["from_memo"], 1);
        assert_eq!(
            e.narrate().as_deref(),
            Some("[Turn] 0:3#t0: 1 tool call(s) (0 ms, from the memo)")
        );
        let e = Event::usage(&id, 0, None, Some(memo));
        assert_eq!(
            e.narrate().as_deref(),
            Some("[Usage] 0:3: 0 ms, 1 answer(s) from the memo")
        );
        // Nothing reported: no token fields at all.
        let e = Event::usage(&id, 4, None, None);
        assert!(serde_json::to_value(&e).expect("json")["input_tokens"].is_null());
        assert_eq!(e.narrate().as_deref(), Some("[Usage] 0:3: 4 ms"));
    }
}
