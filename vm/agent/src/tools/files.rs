//! `read_file`, `write_file` and `edit_file`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, BuiltIn, ToolContext};
use futures_util::future::BoxFuture;
use prose_machine::protocol::ToolOutput;

/// Lines `read_file` returns when no `limit` is given, and the most it returns at once.
pub const MAX_READ_LINES: usize = 2000;

/// Characters of one line `read_file` shows; the rest of a longer line is cut.
pub const MAX_LINE_CHARS: usize = 2000;

/// Bytes of output `read_file` returns at most; the reader is told where to continue.
pub const MAX_READ_BYTES: usize = 256 * 1024;

/// How far into a file `read_file` and `edit_file` look for a NUL byte to call it binary.
const BINARY_PROBE: usize = 8192;

/// `read_file {path, offset?, limit?}`: a text file's lines, numbered like `cat -n`.
pub struct ReadFile;

/// `read_file`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    path: String,
    #[schemars(skip)]
    offset: Option<u64>,
    #[schemars(skip)]
    limit: Option<u64>,
}

impl BuiltIn for ReadFile {
    type Args = ReadArgs;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file (numbered lines).";
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, args: ReadArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let result = async {
                let path = cx.read_path(&args.path)?;
                let offset = args.offset.unwrap_or(1).max(1);
                let limit = match args.limit {
                    Some(0) => return Err("`limit` must be at least 1".to_string()),
                    Some(n) => n.min(MAX_READ_LINES as u64) as usize,
                    None => MAX_READ_LINES,
                };
                blocking(move || read_lines(&path, offset, limit)).await
            }
            .await;
            result.into()
        })
    }
}

fn read_lines(
    path: &crate::permissions::CheckedPath,
    offset: u64,
    limit: usize,
) -> Result<String, String> {
    let shown = path.display();
    let (file, meta) = path.open_read()?;
    if meta.is_dir() {
        return Err(format!(
            "`{shown}` is a directory; use list_files to see what it holds"
        ));
    }
    let mut reader = BufReader::new(file);
    if reader
        .fill_buf()
        .map_err(|e| io_error(shown, &e))?
        .iter()
        .take(BINARY_PROBE)
        .any(|&b| b == 0)
    {
        return Err(format!(
            "`{shown}` is a binary file ({} bytes); read_file shows text only",
            meta.len()
        ));
    }
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number: u64 = 0;
    let mut shown_lines = 0usize;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error(shown, &e))?;
        if n == 0 {
            break;
        }
        number += 1;
        if number < offset {
            continue;
        }
        if shown_lines == limit || out.len() >= MAX_READ_BYTES {
            let _ = write!(out, "\n(more lines follow; continue with offset={number})");
            path.note_read(&meta);
            return Ok(out);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                let _ = writeln!(out, "{number:>6}\t{}… [line cut]", &text[..cut]);
            }
            None => {
                let _ = writeln!(out, "{number:>6}\t{text}");
            }
        }
        shown_lines += 1;
    }
    if number == 0 {
        return Ok(format!("`{shown}` is empty."));
    }
    if shown_lines == 0 {
        return Err(format!(
            "`{shown}` has {number} lines; offset {offset} is past its end"
        ));
    }
    path.note_read(&meta);
    Ok(out)
}

fn io_error(shown: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("`{shown}` does not exist"),
        _ => format!("`{shown}`: {e}"),
    }
}

/// `write_file {path, content}`: creates or replaces a file, creating its parent directories.
pub struct WriteFile;

/// `write_file`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    path: String,
    content: String,
}

impl BuiltIn for WriteFile {
    type Args = WriteArgs;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create or overwrite a file.";
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, args: WriteArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let result = async {
                let path = cx.write_path(&args.path)?;
                blocking(move || {
                    let shown = path.display();
                    let existed = path.write(args.content.as_bytes())?;
                    Ok(format!(
                        "{} `{shown}`: {} bytes, {} lines.",
                        if existed { "Replaced" } else { "Created" },
                        args.content.len(),
                        args.content.lines().count()
                    ))
                })
                .await
            }
            .await;
            result.into()
        })
    }
}

/// `edit_file {path, old_string, new_string, replace_all?}`: replaces exact text in a file.
pub struct EditFile;

/// `edit_file`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    #[schemars(skip)]
    replace_all: bool,
}

impl BuiltIn for EditFile {
    type Args = EditArgs;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str =
        "Replace old_string, which must be unique, with new_string in a file.";
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, args: EditArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let result = async {
                if args.old_string.is_empty() {
                    return Err(
                        "`old_string` is empty; to create or replace a whole file use \
                                write_file"
                            .to_string(),
                    );
                }
                if args.old_string == args.new_string {
                    return Err(
                        "`old_string` and `new_string` are the same; nothing would change".into(),
                    );
                }
                let path = cx.write_path(&args.path)?;
                blocking(move || edit(&path, &args)).await
            }
            .await;
            result.into()
        })
    }
}

fn edit(path: &crate::permissions::CheckedPath, args: &EditArgs) -> Result<String, String> {
    let shown = path.display();
    let (mut file, _) = path.open_edit()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error(shown, &e))?;
    if bytes.iter().take(BINARY_PROBE).any(|&b| b == 0) {
        return Err(format!("`{shown}` is a binary file; edit_file edits text"));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("`{shown}` is not UTF-8 text; edit_file edits text"))?;
    let count = text.matches(&args.old_string).count();
    if count == 0 {
        return Err(format!(
            "`old_string` was not found in `{shown}`; copy it exactly as it is in the file \
             (whitespace included, without read_file's line numbers)"
        ));
    }
    if count > 1 && !args.replace_all {
        return Err(format!(
            "`old_string` occurs {count} times in `{shown}`; include more surrounding text to \
             make it unique, or set `replace_all` to replace every occurrence"
        ));
    }
    let first_line = text[..text.find(&args.old_string).unwrap_or(0)]
        .matches('\n')
        .count()
        + 1;
    let new_text = if args.replace_all {
        text.replace(&args.old_string, &args.new_string)
    } else {
        text.replacen(&args.old_string, &args.new_string, 1)
    };
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(new_text.as_bytes()))
        .map_err(|e| io_error(shown, &e))?;
    Ok(if count == 1 {
        format!("Replaced 1 occurrence in `{shown}` (at line {first_line}).")
    } else {
        format!("Replaced {count} occurrences in `{shown}` (the first at line {first_line}).")
    })
}
