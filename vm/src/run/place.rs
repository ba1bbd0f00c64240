//! Where a run runs and what it is equipped with: the state directory, the trust and
//! skills settings, the people to ask, MCP servers, the memo and the budget's check.

use super::{RunError, Unequipped};
use bytecode_spec::bundle::BundledSkill;
use bytecode_spec::signature::{self, TrustKey};
use bytecode_spec::verify::Verified;
use bytecode_spec::Code;
use prose_agent::people::People;
use prose_agent::protected::Protected;
use prose_agent::skills::{bundled_skills_dir, user_skills_dir, SkillSearch};
use prose_agent::workshop::{SkillPlaces, Workshop};
use prose_machine::RuntimeError;
use prose_runtime::driver::settings::{AnyDriver, DriverSettings};
use prose_runtime::memo::{MemoStore, Memoised};
use prose_runtime::record::RunRecord;
use prose_runtime::runner::RunConfig;
use prose_settings::McpConfig;
use prose_store::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where runs live and how they are served.
#[derive(Clone)]
pub struct Place {
    /// The state directory (default: `.prose` in the working directory).
    pub state_dir: Option<PathBuf>,
    /// Concurrency and backoff of the runner.
    pub config: RunConfig,
    /// Who answers a person's questions when the driver's host does not: the terminal, or
    /// no one.
    pub people: People,
    /// The MCP servers that skills may name (`[mcp]` in `prose.toml`).
    pub mcp: McpConfig,
    /// A token and a cost budget given for a resumed run, replacing the recorded ones.
    pub budget: (Option<u64>, Option<f64>),
    /// The keys an artifact must be signed by to run here (`--trust`, `PROSE_TRUST`,
    /// `[trust]`); none: any artifact runs.
    pub trust: Vec<TrustKey>,
    /// Where a new run's sessions act (default: this process's working directory): a test
    /// case's own directory, for one.
    pub workdir: Option<PathBuf>,
}

impl Default for Place {
    fn default() -> Place {
        Place {
            state_dir: None,
            config: RunConfig::default(),
            people: People::Nobody,
            mcp: McpConfig::default(),
            budget: (None, None),
            trust: Vec::new(),
            workdir: None,
        }
    }
}

impl Place {
    /// Refuses the artifact `bytes` unless it is signed by a key this place trusts (any
    /// artifact passes where no key is trusted): unsigned, signed by another key, and
    /// altered after signing are told apart.
    pub fn check_trust(&self, bytes: &[u8]) -> Result<(), RunError> {
        if self.trust.is_empty() {
            return Ok(());
        }
        match signature::check(bytes, &self.trust) {
            Ok(t) if t.is_trusted() => Ok(()),
            Ok(t) => Err(RunError::Untrusted(t.to_string())),
            Err(e) => Err(RunError::Untrusted(format!(
                "the artifact cannot be read: {e}"
            ))),
        }
    }

    /// The state directory.
    pub fn root(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".prose"))
    }

    /// A workshop for `record`'s sessions: its working directory and allowances, the skills
    /// the program's agents name resolved (an MCP server's name, an imported program, a
    /// skill the artifact carries, else a skill directory beside the program, in the state
    /// directory or the user's), and this place's people. A skill no place has is an E219
    /// error at the first statement naming it; under the mock driver, which never reads a
    /// skill, it is a warning instead (returned with the workshop).
    pub(super) fn workshop(
        &self,
        record: &RunRecord,
        artifact: &Verified,
    ) -> Result<(Workshop, Vec<String>), RunError> {
        let mut w = Workshop::new(
            record.workdir.clone(),
            record.options.allow,
            self.people.clone(),
        );
        w.max_turns = record.options.max_turns;
        w.session_timeout = record
            .options
            .session_timeout_s
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok());
        w.approval_timeout = record
            .options
            .approval_timeout_s
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok());
        w.tools = record.options.tools;
        let program_dir = record
            .origin
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        w.protected = protected_places(&record.origin, &program_dir, artifact, &self.root());
        let search = SkillSearch::new(program_dir, self.root()).with_user_dir(user_skills_dir());
        let servers: Vec<String> = self.mcp.servers.keys().cloned().collect();
        let programs: Vec<(String, u32)> = artifact
            .modules
            .iter()
            .flat_map(|m| {
                m.programs
                    .values()
                    .map(move |p| (m.strings[p.alias].clone(), p.module))
            })
            .collect();
        let bundled: Vec<(&str, &BundledSkill)> = skill_sites(artifact)
            .into_iter()
            .filter_map(|(name, module, _)| Some((name, artifact.skill(module as usize, name)?)))
            .collect();
        let unpack_to = bundled_skills_dir();
        let places = SkillPlaces {
            servers: &servers,
            programs: &programs,
            bundled: &bundled,
            unpack_to: &unpack_to,
            search: &search,
        };
        let missing = w.resolve_skills(skill_names(artifact), &places);
        let Some((name, why)) = missing.first() else {
            return Ok((w, Vec::new()));
        };
        if matches!(record.driver, DriverSettings::Mock(_)) {
            let warnings = missing
                .iter()
                .map(|(_, why)| {
                    format!(
                        "{why}\n  (the mock driver reads no skill, so the run goes on; \
                         any other driver stops here with E219)"
                    )
                })
                .collect();
            return Ok((w, warnings));
        }
        let (module, line) = skill_sites(artifact)
            .into_iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, m, l)| (m, l))
            .unwrap_or((0, 0));
        Err(RunError::Unequipped(Box::new(Unequipped {
            error: RuntimeError::at(artifact, module, line, Code::E219, why.to_string()),
            help: format!(
                "import it from where it is published (`import \"{name}\" from \"github:OWNER/REPO\"`, \
                 or `npm:PACKAGE`, or `./path`) and build again, so that the artifact carries it; \
                 or install it as skills/{name}/SKILL.md beside the program, or in ~/.prose/skills/{name}/"
            ),
        })))
    }
}

/// What the run's tools may never change beyond the fixed names: its state directory
/// `state` and the user's agent memory (`~/.prose/agents`), and the program's directory and
/// files: `origin` and the files its relative `use`
/// paths name (each looked up from the program's directory and from every imported file's
/// directory, as the compiler resolves a path from the file that wrote it).
pub(super) fn protected_places(
    origin: &Path,
    program_dir: &Path,
    artifact: &Verified,
    state: &Path,
) -> Protected {
    let mut protected = Protected::new()
        .state_dir(state)
        .program_dir(program_dir)
        .program_file(origin);
    // The memory of `persist: user` agents is run state too.
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        protected = protected.state_dir(&Path::new(&home).join(".prose").join("agents"));
    }
    let relative: Vec<&str> = artifact
        .modules
        .iter()
        .map(|m| m.import_path.as_str())
        .filter(|p| !p.is_empty() && !p.starts_with('@'))
        .collect();
    let mut dirs = vec![program_dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        for use_path in &relative {
            let mut file = dirs[i].join(use_path);
            if file.extension().is_none() {
                file.set_extension("prose");
            }
            let Ok(file) = std::fs::canonicalize(&file) else {
                continue;
            };
            if !file.is_file() || protected.program_files().contains(&file) {
                continue;
            }
            protected = protected.program_file(&file);
            if let Some(dir) = file.parent() {
                if !dirs.iter().any(|d| d == dir) {
                    dirs.push(dir.to_path_buf());
                }
            }
        }
        i += 1;
    }
    protected
}

/// Every model the program's sessions name (as written: an alias or a provider id), and
/// `None` for sessions naming none.
pub fn models_named(artifact: &Verified) -> Vec<Option<String>> {
    let mut models: Vec<Option<String>> = artifact
        .modules
        .iter()
        .flat_map(|m| {
            m.sessions
                .values()
                .map(move |s| s.model.map(|id| m.strings[id].clone()))
        })
        .collect();
    models.sort();
    models.dedup();
    models
}

/// The driver `settings` describe, connected, with `memo` in front of it (answers kept
/// across runs), once its provider is known to offer every model `artifact`'s sessions
/// name: what a run is driven with. Call it on the runtime that will drive the run (the
/// driver's HTTP client and reader threads belong to it).
pub async fn connect(
    settings: &DriverSettings,
    artifact: &Verified,
    memo: Option<Arc<dyn MemoStore>>,
) -> Result<Arc<Memoised<AnyDriver>>, String> {
    use prose_runtime::driver::Driver;
    let driver = Arc::new(Memoised::new(settings.connect()?, memo));
    driver.check_models(&models_named(artifact)).await?;
    Ok(driver)
}

/// The memo of `store` for a run whose options say `on` (`--memo`, `memo = true`).
pub fn memo_for(store: &dyn Store, on: bool) -> Option<Arc<dyn MemoStore>> {
    on.then(|| store.memo())
}

/// Refuses a budget (`max_tokens`, `max_cost`) that the driver `settings` describe cannot
/// keep for `artifact`'s sessions ([`DriverSettings::keeps_budget`]): said before anything
/// runs, never ignored.
pub fn check_budget(
    settings: &DriverSettings,
    artifact: &Verified,
    max_tokens: Option<u64>,
    max_cost: Option<f64>,
) -> Result<(), String> {
    settings.keeps_budget(
        &models_named(artifact),
        max_tokens.is_some(),
        max_cost.is_some(),
    )
}

/// Every skill name the program's sessions carry (agents' skills are merged into them).
pub(super) fn skill_names(artifact: &Verified) -> Vec<&str> {
    let mut names: Vec<&str> = skill_sites(artifact)
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Each skill name a session carries, with the session's module and line, in the
/// artifact's order.
pub(super) fn skill_sites(artifact: &Verified) -> Vec<(&str, u32, u32)> {
    artifact
        .modules
        .iter()
        .enumerate()
        .flat_map(|(mi, m)| {
            m.sessions.values().flat_map(move |s| {
                s.skills
                    .iter()
                    .map(move |n| (m.strings[*n].as_str(), mi as u32, s.line))
            })
        })
        .collect()
}
