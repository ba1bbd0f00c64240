//! Files a session's task asks it to write. A small model asked to read one file and write
//! another often reads, then answers that it is done without writing; told which file is
//! still missing, it writes it. The task names such a file after a verb that writes
//! (`write the count to count.txt`, `save it as out.json`, `create notes.md`); a file only
//! mentioned (`read notes.txt`, `a poem about config.yml`) is not one.

/// Verbs that put something in a file.
const WRITES: &[&str] = &[
    "write", "writes", "save", "saves", "store", "stores", "put", "puts", "create", "creates",
    "record", "records", "output", "append", "appends", "dump",
];

/// Words that lead from a writing verb to the file it writes.
const INTO: &[&str] = &["to", "into", "in", "as", "named", "called", "file"];

/// Whether `word` looks like a file name: a stem, a dot and an extension of one to eight
/// letters or digits, with no more than path characters.
fn is_file(word: &str) -> bool {
    let Some((stem, ext)) = word.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && (1..=8).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
        && stem
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

/// The files `task` asks to be written, in the order it names them.
pub fn files(task: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for sentence in task.split_inclusive(['\n', '!', '?', ';']) {
        // A sentence ends at a full stop followed by a space (not inside `count.txt`).
        for clause in sentence.split(". ") {
            let mut writing = false;
            // The last word (articles aside) was a writing verb or leads to a file.
            let mut linked = false;
            for raw in clause.split_whitespace() {
                let word = raw.trim_matches(|c: char| {
                    matches!(
                        c,
                        '`' | '"' | '\'' | ',' | ':' | '(' | ')' | '.' | '!' | '?' | ';'
                    )
                });
                let lower = word.to_ascii_lowercase();
                let verb = WRITES.contains(&lower.as_str());
                writing |= verb;
                if writing && linked && is_file(word) && !out.iter().any(|f| f == word) {
                    out.push(word.to_string());
                }
                if !matches!(lower.as_str(), "the" | "a" | "new") {
                    linked = verb || INTO.contains(&lower.as_str());
                }
            }
        }
    }
    out
}

/// Of the files `task` asks for, those no path in `touched` (what the session's successful
/// tool calls named) is.
pub fn missing(task: &str, touched: &[String]) -> Vec<String> {
    let same = |file: &str, path: &str| {
        let path = path.trim_start_matches("./");
        path == file || path.ends_with(&format!("/{file}")) || file.ends_with(&format!("/{path}"))
    };
    files(task)
        .into_iter()
        .filter(|f| !touched.iter().any(|p| same(f, p)))
        .collect()
}

/// What the VM tells a model that answered while files its task asks for are missing.
pub fn reminder(missing: &[String]) -> String {
    let names = missing
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(" and ");
    let (does, it) = if missing.len() == 1 {
        ("does", "it")
    } else {
        ("do", "them")
    };
    format!(
        "{names} {does} not exist yet, and the task asks for {it}. Write {it} now with a write_file call (path and content), then reply with your answer."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_after_a_writing_verb_are_asked_for_and_others_are_not() {
        assert_eq!(
            files("Read the file notes.txt, count its lines, and write the count to count.txt. Then reply DONE."),
            ["count.txt"]
        );
        assert_eq!(
            files("Save the summary as `out/summary.md`."),
            ["out/summary.md"]
        );
        assert_eq!(
            files("Create notes.md and write report.json"),
            ["notes.md", "report.json"]
        );
        assert_eq!(
            files("Write a new file named plan.md with the steps."),
            ["plan.md"]
        );
        for task in [
            "Read notes.txt and tell me how many lines it has.",
            "Write a poem about config.yml.",
            "Write a haiku. Then read data.csv",
            "Write the total to the screen, not to 3.5 anything",
            "Summarise report.pdf in three lines",
        ] {
            assert_eq!(files(task), Vec::<String>::new(), "{task}");
        }
    }

    #[test]
    fn a_file_is_missing_until_a_call_names_its_path() {
        let task = "Read notes.txt and write the count to count.txt.";
        assert_eq!(missing(task, &["notes.txt".into()]), ["count.txt"]);
        assert!(missing(task, &["./count.txt".into()]).is_empty());
        assert!(missing(task, &["/work/dir/count.txt".into()]).is_empty());
        assert_eq!(
            reminder(&["count.txt".into()]),
            "`count.txt` does not exist yet, and the task asks for it. Write it now with a write_file call (path and content), then reply with your answer."
        );
        assert!(reminder(&["a.md".into(), "b.md".into()]).starts_with("`a.md` and `b.md` do not"));
    }
}
