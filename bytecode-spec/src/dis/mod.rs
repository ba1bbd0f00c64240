//! The disassembler: a readable listing of an artifact.
//!
//! The listing is deterministic (tables in index order, no addresses, no hash-map order), so
//! it can serve as a golden file. It never panics, even on an artifact the verifier would
//! reject: an index that points nowhere is shown as `<bad s99>`, `<bad sess7>` and so on.
//!
//! Layout (two spaces of indentation per level):
//!
//! ```text
//! artifact
//!   format    3
//!   compiler  0.1.0
//!   source    sha256 abababababababababababababababababababababababababababababababab
//!   modules   1
//!
//! module 0 hello (main program)
//!   entry f0 main
//!   sessions:
//!     sess0 session, line 2
//!       prompt: t1 "Say hello to {name}"
//!   inputs:
//!     in0 name parameter t0 "Who to greet"
//!   templates:
//!     t0 "Who to greet"
//!     t1 "Say hello to {name}"  [name=r0]
//!
//!   function f0 main (main, params 0, registers 3)
//!        0  load_input r0, in0 name           ; line 1: input name: "Who to greet"
//!        1  make_list r2, []                  ; line 2: session "Say hello to {name}"
//!        2  session r1, sess0 "Say hello to {name}" ctx=r2  ; line 2
//!        3  return r1                         ; line 2
//! ```
//!
//! An artifact that carries skills has a `skills N` line in its header, a `skills:` table
//! (`name -> skill I name`) in each module that imports some, and after the modules one
//! section per skill: `skill I name (from "SOURCE")`, its origin, its digest, and each file
//! with its size and SHA-256.
//!
//! Conventions: registers are `rN`; a register `d` static links out is `upD.rN`; table
//! entries are shown by id followed by what identifies them (a name, or quoted text);
//! templates are quoted with `{name}` for each variable and `\{`/`\}` for literal braces;
//! constants are shown as values; jump targets are pc numbers. In instruction lines, long
//! texts are cut after [`INLINE_TEXT`] characters (`...`); the module's tables show them in
//! full, and lists of more than eight registers, targets or branches are abbreviated. Each
//! instruction ends with `; line N`, followed by the trimmed source line whenever the line
//! number changes; instructions at line 0 (no source position) have no comment.

mod listing;
mod operands;
mod tables;
#[cfg(test)]
mod tests;
mod text;

use crate::artifact::{Header, FORMAT_VERSION};
use crate::bundle::{hex, BundledSkill};
use crate::ids::*;
use crate::module::*;
use text::word;

/// Characters of text shown for a string or template inside an instruction line.
pub const INLINE_TEXT: usize = 60;
/// The column where the `; line N` comment of an instruction starts (when the instruction
/// text is shorter).
const COMMENT_COLUMN: usize = 44;
/// Most items (registers, jump targets, branches, fields) an instruction line lists; longer
/// lists are abbreviated, so that a corrupt artifact cannot make the listing explode.
const MAX_LISTED: usize = 8;

/// Produces the listing of an artifact.
pub fn disassemble(header: &Header, artifact: &Artifact) -> String {
    let mut out = String::new();
    out.push_str("artifact\n");
    out.push_str(&format!("  format    {FORMAT_VERSION}\n"));
    out.push_str(&format!("  compiler  {}\n", word(&header.compiler_version)));
    out.push_str("  source    sha256 ");
    for b in header.source_hash {
        out.push_str(&format!("{b:02x}"));
    }
    out.push('\n');
    out.push_str(&format!("  modules   {}\n", artifact.modules.len()));
    if !artifact.skills.is_empty() {
        out.push_str(&format!("  skills    {}\n", artifact.skills.len()));
    }
    // Each module's parameters, for naming the arguments of `invoke` without rescanning.
    let params: Vec<Vec<StrId>> = artifact
        .modules
        .iter()
        .map(|m| {
            m.inputs
                .values()
                .filter(|i| i.parameter)
                .map(|i| i.name)
                .collect()
        })
        .collect();
    for (mi, m) in artifact.modules.iter().enumerate() {
        out.push('\n');
        Dis {
            artifact,
            params: &params,
            m,
            out: &mut out,
        }
        .module(mi);
    }
    for (i, skill) in artifact.skills.iter().enumerate() {
        out.push('\n');
        skill_listing(&mut out, i, skill);
    }
    out
}

/// The listing of bundled skill `i`: where it came from, its digest, and each file with its
/// size and hash (hashes as stored; the verifier compares them with the bytes).
fn skill_listing(out: &mut String, i: usize, skill: &BundledSkill) {
    out.push_str(&format!(
        "skill {i} {} (from {})\n",
        word(&skill.name),
        text::quoted(&skill.source, false, None)
    ));
    out.push_str(&format!(
        "  origin  {}\n",
        text::quoted(&skill.origin, false, None)
    ));
    out.push_str(&format!("  digest  sha256 {}\n", hex(&skill.digest())));
    out.push_str(&format!(
        "  files   {} ({} bytes)\n",
        skill.files.len(),
        skill.size()
    ));
    for f in &skill.files {
        out.push_str(&format!(
            "    {} {} bytes sha256 {}\n",
            word(&f.name),
            f.bytes.len(),
            hex(&f.sha256)
        ));
    }
}

/// Listing one module: the artifact (for the callees of `invoke`), each module's parameter
/// names, and the text so far.
struct Dis<'a> {
    artifact: &'a Artifact,
    params: &'a [Vec<StrId>],
    m: &'a Module,
    out: &'a mut String,
}

impl Dis<'_> {
    /// Appends one line at `indent` levels.
    fn line(&mut self, indent: usize, text: impl AsRef<str>) {
        for _ in 0..indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text.as_ref());
        self.out.push('\n');
    }
}
