//! Builds bundled skills (as an artifact carries them) from arbitrary bytes, with their
//! hashes right so that most reach past the hash check, and runs them through what the VM
//! does with an artifact's skills: the bundle rules ([`BundledSkill::check`]), then, for a
//! skill that passes, unpacking it to disk for its agent. Whatever the names and bytes,
//! nothing may be written outside the unpacking root, the files unpacked must be the skill's
//! own, unpacking again must give the same directory, and a file changed on disk since must
//! be put back. Any panic or hang is a bug.
#![no_main]

use bytecode_spec::bundle::{BundledFile, BundledSkill, SKILL_FILE};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use prose_agent::skills::unpack;
use std::path::{Path, PathBuf};

/// A skill from `u`: a name, then up to 8 files, the first often `SKILL.md`, each with its
/// hash computed (one in a few altered); sorted by name unless `u` says otherwise.
fn skill(u: &mut Unstructured) -> Result<BundledSkill> {
    let name: String = u.arbitrary()?;
    let n = u.int_in_range(0..=8)?;
    let mut files = Vec::new();
    for i in 0..n {
        let name: String = if i == 0 && u.ratio(3, 4)? {
            SKILL_FILE.to_string()
        } else {
            u.arbitrary()?
        };
        let bytes: Vec<u8> = u.arbitrary()?;
        let mut file = BundledFile::new(name, bytes);
        if u.ratio(1, 16)? {
            file.sha256[0] ^= 1;
        }
        files.push(file);
    }
    if u.ratio(7, 8)? {
        files.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(BundledSkill {
        name,
        source: "fuzz".into(),
        origin: "fuzz".into(),
        files,
    })
}

/// Every path under `dir` (not following links), and whether each is a file.
fn tree(dir: &Path, out: &mut Vec<(PathBuf, bool)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let meta = std::fs::symlink_metadata(&path).expect("metadata");
        assert!(
            !meta.file_type().is_symlink(),
            "a link was unpacked: {path:?}"
        );
        out.push((path.clone(), meta.is_file()));
        if meta.is_dir() {
            tree(&path, out);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(skill) = skill(&mut u) else {
        return;
    };
    if skill.check().is_err() {
        return;
    }
    let base = std::env::temp_dir().join(format!("prose-fuzz-skills-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("root")).expect("root");
    let root = std::fs::canonicalize(base.join("root")).expect("root");
    let base = std::fs::canonicalize(&base).expect("base");
    let Ok(unpacked) = unpack(&skill, &root) else {
        let _ = std::fs::remove_dir_all(&base);
        return;
    };
    let mut written = Vec::new();
    tree(&base, &mut written);
    let root_files: Vec<&PathBuf> = written
        .iter()
        .filter(|(_, file)| *file)
        .map(|(p, _)| p)
        .collect();
    for p in &root_files {
        assert!(p.starts_with(&root), "written outside the root: {p:?}");
    }
    // Exactly the skill's files, with its bytes, in its directory.
    assert_eq!(root_files.len(), skill.files.len(), "{written:?}");
    let dir = unpacked.dir.clone();
    for f in &skill.files {
        let path = dir.join(&f.name);
        assert!(path.starts_with(&root));
        assert_eq!(std::fs::read(&path).expect("unpacked file"), f.bytes);
    }
    // Unpacked again: the same directory. A file changed since is put back.
    let first = &skill.files[0];
    std::fs::write(dir.join(&first.name), b"changed").expect("change");
    let again = unpack(&skill, &root).expect("unpacks again");
    assert_eq!(again.dir, dir);
    assert_eq!(
        std::fs::read(dir.join(&first.name)).expect("file"),
        first.bytes
    );
    let _ = std::fs::remove_dir_all(&base);
});
