//! Narrowing: a structured session ([`crate::driver::chat::dialect::openai::structured`]) whose loop went
//! nowhere ([`super::stuck`]) keeps only the tools that act. Small models read and search
//! the same file over and over instead of acting on what they found; withdrawing the tools
//! that only look leaves the schema of the next step no way to look again.

use prose_machine::protocol::ToolSpec;

/// The tools of `tools` that act (write, edit, run): those `read_only` does not say only
/// look.
pub fn acting(tools: &[ToolSpec], read_only: impl Fn(&str) -> bool) -> Vec<ToolSpec> {
    tools
        .iter()
        .filter(|t| !read_only(&t.name))
        .cloned()
        .collect()
}

/// What a structured session whose loop went nowhere (small models read and search the
/// same file over and over instead of acting on it) is told when the tools that only look
/// are withdrawn: it has looked, what it found is above, and the next step acts with one of
/// `acting` or answers. Its task comes last, since small models answer what they read last.
pub fn message(acting: &[ToolSpec], task: &str) -> String {
    let names: Vec<&str> = acting.iter().map(|t| t.name.as_str()).collect();
    format!(
        "You have looked enough: what the tools returned is above. The tools that only look are withdrawn; the next step uses {} with what you found, or gives your answer.\n\nYour task: {task}",
        names.join(" or ")
    )
}
