//! Where persistent agents keep their memory: `memory.md` (the memory as the driver last
//! returned it) and one numbered segment per session (`{name}-001.md`, ...) in a directory
//! chosen by the agent's `persist:` scope. What each agent had when a run started is recorded
//! in `run.json`, so a resumed run starts from the same memory even if another run has
//! changed the files since, and rewrites the same segment numbers.

use super::{fs, StoreError};
use bytecode_spec::{Artifact, Persist};
use prose_runtime::record::AgentHome;
use std::path::{Path, PathBuf};

/// The persistent agents of `artifact`'s program (module 0), their directories for a run in
/// `run_dir` whose state root is `state_root` (`.prose` or `--state-dir`), and what those
/// directories hold now. An agent name or persist path that cannot be a path (the verifier
/// already refuses them) is an error, never a directory elsewhere.
pub fn discover(
    artifact: &Artifact,
    run_dir: &Path,
    state_root: &Path,
) -> Result<Vec<AgentHome>, StoreError> {
    let m = &artifact.modules[0];
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("~"), PathBuf::from);
    let mut homes = Vec::new();
    for a in m.agents.values() {
        let name = m.strings[a.name].clone();
        let file = fs::file_name(&name)?;
        let (scope, dir) = match a.persist {
            Persist::None => continue,
            Persist::Run => ("execution", run_dir.join("agents").join(file)),
            Persist::Project => ("project", state_root.join("agents").join(file)),
            Persist::User => ("user", home.join(".prose").join("agents").join(file)),
            Persist::Path(p) => ("path", fs::relative_dir(Path::new(""), &m.strings[p])?),
        };
        let memory = fs::read_to_string(&dir.join("memory.md")).ok();
        let segments = count_segments(&dir, &name);
        homes.push(AgentHome {
            name,
            scope: scope.into(),
            dir,
            memory,
            segments,
        });
    }
    Ok(homes)
}

/// The highest segment number among `dir`'s `{name}-NNN.md` files (0 if none).
fn count_segments(dir: &Path, name: &str) -> u32 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let n = file
                .strip_prefix(name)?
                .strip_prefix('-')?
                .strip_suffix(".md")?;
            n.parse::<u32>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// The file name of segment `n` of `name`: three digits at least.
pub fn segment_file(name: &str, n: u32) -> String {
    format!("{name}-{n:03}.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_counted_by_their_highest_number() {
        let dir = std::env::temp_dir().join(format!("prose-agents-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(count_segments(&dir, "captain"), 0);
        for f in [
            "captain-001.md",
            "captain-007.md",
            "captain-x.md",
            "cap-009.md",
        ] {
            std::fs::write(dir.join(f), "").expect("file");
        }
        assert_eq!(count_segments(&dir, "captain"), 7);
        assert_eq!(segment_file("captain", 8), "captain-008.md");
        assert_eq!(segment_file("captain", 1000), "captain-1000.md");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn homes_round_trip_through_run_json() {
        let homes = vec![AgentHome {
            name: "captain".into(),
            scope: "project".into(),
            dir: PathBuf::from(".prose/agents/captain"),
            memory: Some("- decided X".into()),
            segments: 3,
        }];
        let json = serde_json::to_string(&homes).expect("serialize");
        assert_eq!(
            serde_json::from_str::<Vec<AgentHome>>(&json).expect("parse"),
            homes
        );
    }
}
