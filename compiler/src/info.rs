//! Everything a person or a host should know about an artifact before running it
//! (`prosec info`, and `prosevm info`): the program, the format and source hash, its inputs
//! and outputs, its agents with their models, permissions and skills, the names it leaves
//! to the machine it runs on (MCP servers, installed skills), the skills and programs it
//! carries with their hashes, its static cost bounds, and its signature.
//!
//! The cost bounds are those of `prosec cost`: the analysis runs on the programs' sources,
//! which every artifact carries, recompiled in memory exactly as they were imported.

use crate::compile::{Compilation, Options};
use crate::cost::{self, Pricing};
use bytecode_spec::artifact::{self, LoadError, FORMAT_VERSION};
use bytecode_spec::bundle::hex;
use bytecode_spec::signature::{self, Trust, TrustKey};
use bytecode_spec::{Artifact, Module, PermissionValue, Persist, TplId, TplPart};
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::PathBuf;

/// What the host brings to the description.
#[derive(Clone, Debug, Default)]
pub struct InfoOptions {
    /// Keys the host trusts: the signature is checked against them.
    pub trust: Vec<TrustKey>,
    /// Prices, models and token assumptions for the cost bounds.
    pub pricing: Pricing,
    /// The MCP servers the host configures (`[mcp.servers]` of `prose.toml`): names in
    /// `skills:` that match one are reported as such.
    pub mcp_servers: Vec<String>,
}

/// The description of an artifact.
#[derive(Clone, Debug, Serialize)]
pub struct Info {
    /// The main program's name.
    pub program: String,
    /// The artifact format version.
    pub format: u16,
    /// The compiler that built it.
    pub compiler: String,
    /// SHA-256 of the main program's source, hexadecimal.
    pub source_sha256: String,
    /// Size of the file in bytes.
    pub size: usize,
    /// The main program's inputs.
    pub inputs: Vec<InputInfo>,
    /// The main program's outputs.
    pub outputs: Vec<String>,
    /// Every agent of every program it runs.
    pub agents: Vec<AgentInfo>,
    /// Names in `skills:` that resolve where it runs, configured there as MCP servers.
    pub mcp_servers: Vec<String>,
    /// Names in `skills:` that neither an import nor a known MCP server gives: looked up
    /// where it runs (an installed skill directory, or an MCP server of `prose.toml`).
    pub unbundled_skills: Vec<String>,
    /// The programs it imports, carried in it.
    pub programs: Vec<ProgramInfo>,
    /// The skills it carries.
    pub skills: Vec<SkillInfo>,
    /// Static bounds on sessions, judgments and cost (`prosec cost`), or why there are none.
    pub cost: Value,
    /// Its signature.
    pub signature: SignatureInfo,
}

/// An input.
#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    /// Its name.
    pub name: String,
    /// Its description (or question), with `{variables}` as written.
    pub description: Option<String>,
    /// Whether the caller must give it when the run starts (else it is asked mid-run).
    pub parameter: bool,
}

/// An agent.
#[derive(Clone, Debug, Serialize)]
pub struct AgentInfo {
    /// The program that defines it.
    pub program: String,
    /// Its name.
    pub name: String,
    /// Its model, if it names one.
    pub model: Option<String>,
    /// Its memory: `none`, `run`, `project`, `user`, or a path.
    pub persist: String,
    /// Its permission rules: kind, and the word or patterns.
    pub permissions: Vec<(String, Vec<String>)>,
    /// Its skills.
    pub skills: Vec<String>,
}

/// An imported program.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramInfo {
    /// Its name.
    pub name: String,
    /// How it was imported (`@handle/slug` or a relative path).
    pub import_path: String,
    /// SHA-256 of its source, hexadecimal.
    pub sha256: String,
}

/// A bundled skill.
#[derive(Clone, Debug, Serialize)]
pub struct SkillInfo {
    /// Its name.
    pub name: String,
    /// The source the import wrote.
    pub source: String,
    /// What exactly was taken.
    pub origin: String,
    /// The digest of its files ([`bytecode_spec::bundle::BundledSkill::digest`]).
    pub sha256: String,
    /// Its files: name, size, SHA-256.
    pub files: Vec<(String, usize, String)>,
}

/// What the signature says.
#[derive(Clone, Debug, Serialize)]
pub struct SignatureInfo {
    /// Whether the artifact carries one.
    pub signed: bool,
    /// The id of the key that signed it.
    pub key: Option<String>,
    /// Checked against the trusted keys: `trusted`, `foreign`, `altered`, `unsigned`, or
    /// `not checked` when no key was given.
    pub verdict: String,
    /// What the check found, in words.
    pub detail: Option<String>,
}

/// What a host should know about the artifact in `file`: read, verified and described,
/// with its signature checked against the keys `trust` names (and [`crate::ship::keys::TRUST_ENV`]
/// and `[trust]`), the cost bounds priced and the MCP servers named as the `prose.toml`
/// for it says (`config`, else the project's found from the artifact's directory over the
/// user's). The one entry point of `prosec info` and `prosevm info`; an error is the
/// message and the exit status to end with.
pub fn of_file(
    file: &std::path::Path,
    trust: &[std::path::PathBuf],
    config: Option<&std::path::Path>,
) -> Result<Info, (String, u8)> {
    let bytes = bytecode_spec::artifact::read_file(file)
        .map_err(|e| (format!("cannot read {}: {e}", file.display()), 2))?;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let settings = prose_settings::Settings::load(config, dir).map_err(|e| (e.to_string(), 2))?;
    let options = InfoOptions {
        trust: crate::ship::keys::trusted(trust, &settings).map_err(|e| (e, 2))?,
        pricing: Pricing::from_settings(
            &settings,
            crate::cost::DEFAULT_TOKENS_IN,
            crate::cost::DEFAULT_TOKENS_OUT,
        ),
        mcp_servers: settings.mcp.servers.keys().cloned().collect(),
    };
    describe(&bytes, &options).map_err(|e| {
        // Under trusted keys the signature is judged first, as `prosevm exec` judges it: an
        // artifact whose bytes were changed after signing is `altered` (exit 2), not corrupt.
        match untrusted(&bytes, &options.trust) {
            Some(t) => (format!("{}: {t}", file.display()), UNTRUSTED_EXIT.code()),
            None => (format!("{}: {e}", file.display()), 1),
        }
    })
}

/// The exit status of a host refusing an artifact its trusted keys do not vouch for: what
/// `prosevm exec` ends with, and `info` under `--trust` too.
pub const UNTRUSTED_EXIT: crate::console::Exit = crate::console::Exit::Unusable;

/// The verdict on `bytes` under `keys` when there are keys and it is not `trusted`.
fn untrusted(bytes: &[u8], keys: &[TrustKey]) -> Option<Trust> {
    if keys.is_empty() {
        return None;
    }
    match signature::check(bytes, keys) {
        Ok(Trust::Trusted { .. }) => None,
        Ok(t) => Some(t),
        Err(e) => Some(Trust::Altered {
            key: None,
            reason: format!("the artifact cannot be read: {e}"),
        }),
    }
}

/// Describes the artifact file `bytes`. Fails when it does not load (the framing, the
/// decoding or the verifier refuses it).
pub fn describe(bytes: &[u8], options: &InfoOptions) -> Result<Info, LoadError> {
    let (header, verified) = artifact::load(bytes)?;
    let a: &Artifact = &verified;
    let main = &a.modules[0];
    let text = |m: &Module, t: TplId| template_text(m, t);
    let inputs = main
        .inputs
        .values()
        .map(|i| InputInfo {
            name: main.strings[i.name].clone(),
            description: i.description.map(|t| text(main, t)),
            parameter: i.parameter,
        })
        .collect();
    let outputs = main
        .outputs
        .values()
        .map(|o| main.strings[o.name].clone())
        .collect();
    let mut agents = Vec::new();
    // Names each module gives itself for `skills:`: its imported skills and programs.
    let mut named_at_run_time = BTreeSet::new();
    for m in &a.modules {
        let given: BTreeSet<&str> = m
            .skills
            .iter()
            .map(|s| m.strings[s.name].as_str())
            .chain(m.programs.values().map(|p| m.strings[p.alias].as_str()))
            .collect();
        for agent in m.agents.values() {
            let skills: Vec<String> = agent.skills.iter().map(|s| m.strings[*s].clone()).collect();
            agents.push(AgentInfo {
                program: m.name.clone(),
                name: m.strings[agent.name].clone(),
                model: agent.model.map(|s| m.strings[s].clone()),
                persist: match &agent.persist {
                    Persist::None => "none".into(),
                    Persist::Run => "run".into(),
                    Persist::Project => "project".into(),
                    Persist::User => "user".into(),
                    Persist::Path(p) => m.strings[*p].clone(),
                },
                permissions: agent
                    .permissions
                    .iter()
                    .map(|p| {
                        let value = match &p.value {
                            PermissionValue::Word(w) => vec![m.strings[*w].clone()],
                            PermissionValue::Patterns(ts) => {
                                ts.iter().map(|t| text(m, *t)).collect()
                            }
                        };
                        (m.strings[p.kind].clone(), value)
                    })
                    .collect(),
                skills,
            });
        }
        let used = m
            .agents
            .values()
            .flat_map(|ag| ag.skills.iter())
            .chain(m.sessions.values().flat_map(|s| s.skills.iter()));
        for s in used {
            let name = m.strings[*s].as_str();
            if !given.contains(name) {
                named_at_run_time.insert(name.to_string());
            }
        }
    }
    let (mcp_servers, unbundled_skills): (Vec<String>, Vec<String>) = named_at_run_time
        .into_iter()
        .partition(|n| options.mcp_servers.contains(n));
    let programs = a.modules[1..]
        .iter()
        .map(|m| ProgramInfo {
            name: m.name.clone(),
            import_path: m.import_path.clone(),
            sha256: hex(&Sha256::digest(m.source.as_bytes())),
        })
        .collect();
    let skills = a
        .skills
        .iter()
        .map(|s| SkillInfo {
            name: s.name.clone(),
            source: s.source.clone(),
            origin: s.origin.clone(),
            sha256: hex(&s.digest()),
            files: s
                .files
                .iter()
                .map(|f| (f.name.clone(), f.bytes.len(), hex(&f.sha256)))
                .collect(),
        })
        .collect();
    let cost = match cost_of(a, &options.pricing) {
        Ok(v) => v,
        Err(why) => serde_json::json!({ "unavailable": why }),
    };
    let signer = signature::signer(bytes)?;
    let (verdict, detail) = if options.trust.is_empty() {
        ("not checked".to_string(), None)
    } else {
        let t = signature::check(bytes, &options.trust)?;
        let word = match &t {
            Trust::Unsigned => "unsigned",
            Trust::Foreign { .. } => "foreign",
            Trust::Altered { .. } => "altered",
            Trust::Trusted { .. } => "trusted",
        };
        (word.to_string(), Some(t.to_string()))
    };
    let signed = artifact::split_signature(bytes)?.1.is_some();
    Ok(Info {
        program: main.name.clone(),
        format: FORMAT_VERSION,
        compiler: header.compiler_version.clone(),
        source_sha256: hex(&header.source_hash),
        size: bytes.len(),
        inputs,
        outputs,
        agents,
        mcp_servers,
        unbundled_skills,
        programs,
        skills,
        cost,
        signature: SignatureInfo {
            signed,
            key: signer.map(|k| k.to_string()),
            verdict,
            detail,
        },
    })
}

/// A template as written: literal text, and `{name.path}` for each variable.
fn template_text(m: &Module, t: TplId) -> String {
    let mut out = String::new();
    for part in &m.templates[t].parts {
        match part {
            TplPart::Text(s) => out.push_str(&m.strings[*s]),
            TplPart::Var { name, path, .. } => {
                out.push('{');
                out.push_str(&m.strings[*name]);
                for step in path {
                    match step {
                        bytecode_spec::PathStep::Field(f) => {
                            out.push('.');
                            out.push_str(&m.strings[*f]);
                        }
                        bytecode_spec::PathStep::Index(i) => {
                            let _ = write!(out, "[{i}]");
                        }
                    }
                }
                out.push('}');
            }
        }
    }
    out
}

/// The cost bounds of the artifact's main program, from its carried sources: each module
/// is laid at a path of its own in memory, such that every `use` path of its importer
/// resolves to it, and the whole is compiled again.
fn cost_of(a: &Artifact, pricing: &Pricing) -> Result<Value, String> {
    // Deep enough that no chain of `../` climbs out of it.
    let mut base = PathBuf::from(format!("/.prose-info-{}", std::process::id()));
    for _ in 0..32 {
        base.push("d");
    }
    let lib = base.join("lib");
    let mut paths: Vec<Option<PathBuf>> = vec![None; a.modules.len()];
    paths[0] = Some(base.join(format!("{}.prose", a.modules[0].name)));
    let mut overlay = FxHashMap::default();
    let mut queue = vec![0usize];
    while let Some(mi) = queue.pop() {
        let m = &a.modules[mi];
        let here = paths[mi].clone().expect("placed before queued");
        overlay.insert(here.clone(), m.source.clone());
        let uses = crate::compile::use_paths(&m.source);
        if uses.len() != m.programs.len() {
            return Err(format!(
                "the source of `{}` imports {} program(s) but its code links {}",
                m.name,
                uses.len(),
                m.programs.len()
            ));
        }
        for (text, prog) in uses.iter().zip(m.programs.values()) {
            let target = prog.module as usize;
            let path = if text.starts_with('@') {
                lib.join(format!("{text}.prose"))
            } else {
                let mut p = here.parent().unwrap_or(&base).join(text);
                if p.extension().is_none() {
                    p.set_extension("prose");
                }
                p
            };
            if paths[target].is_none() {
                paths[target] = Some(path.clone());
                queue.push(target);
            }
            overlay.insert(path, a.modules[target].source.clone());
        }
    }
    let mut c = Compilation::with_overlay(
        Options {
            lib_paths: vec![lib],
            require_imports: true,
            ..Options::default()
        },
        overlay,
    );
    let root_path = paths[0].clone().expect("root placed");
    let root = c.add_source(&root_path, &a.modules[0].source);
    if c.error_count() > 0 {
        let first = c
            .diagnostics
            .iter()
            .find(|d| d.is_error())
            .map(|d| format!("{}: {}", d.code, d.message))
            .unwrap_or_default();
        return Err(format!(
            "its sources do not compile with this prosec ({first})"
        ));
    }
    let bounds = cost::bounds(&c, root, pricing);
    Ok(bounds.to_json(pricing))
}

/// Shows `info` as `program info` does, in the console's format, and gives its exit status:
/// success, or [`UNTRUSTED_EXIT`] when the keys given do not vouch for it (said after the
/// description on stderr, or as the JSON document's `error`).
pub fn show(program: &str, info: &Info) -> std::process::ExitCode {
    use crate::console::{error_json, Console, Exit};
    let refusal = info.refusal();
    if Console::json() {
        let mut doc = info.to_json();
        if let Some(why) = refusal {
            doc["error"] = error_json(why, None, UNTRUSTED_EXIT)["error"].take();
        }
        println!("{doc}");
    } else {
        print!("{}", info.render_text());
        if let Some(why) = refusal {
            eprintln!("{program}: not trusted: {why}");
        }
    }
    match refusal {
        Some(_) => UNTRUSTED_EXIT.into(),
        None => Exit::Success.into(),
    }
}

impl Info {
    /// Why a host that trusts only the keys given would refuse the artifact: the verdict's
    /// words when it is `unsigned`, `foreign` or `altered` (`prosevm exec` refuses those with
    /// [`UNTRUSTED_EXIT`]); nothing when it is trusted or no key was given.
    pub fn refusal(&self) -> Option<&str> {
        match self.signature.verdict.as_str() {
            "trusted" | "not checked" => None,
            _ => self.signature.detail.as_deref(),
        }
    }

    /// The description as lines for a person.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "program   {}", self.program);
        let _ = writeln!(out, "format    {} ({})", self.format, self.compiler);
        let _ = writeln!(out, "source    sha256 {}", self.source_sha256);
        let _ = writeln!(out, "size      {} bytes", self.size);
        let s = &self.signature;
        let sig = match (&s.key, &s.detail) {
            (_, Some(d)) => format!("{}: {d}", s.verdict),
            (Some(k), None) => format!("key {k} (not checked: no trusted key given)"),
            (None, None) if s.signed => {
                "present but unreadable (not checked: no trusted key given)".to_string()
            }
            (None, None) => "unsigned".to_string(),
        };
        let _ = writeln!(out, "signature {sig}");
        if !self.inputs.is_empty() {
            let _ = writeln!(out, "inputs:");
            for i in &self.inputs {
                let when = if i.parameter { "" } else { " (asked mid-run)" };
                match &i.description {
                    Some(d) => {
                        let _ = writeln!(out, "  {}{when}: {d}", i.name);
                    }
                    None => {
                        let _ = writeln!(out, "  {}{when}", i.name);
                    }
                }
            }
        }
        if !self.outputs.is_empty() {
            let _ = writeln!(out, "outputs:  {}", self.outputs.join(", "));
        }
        if !self.agents.is_empty() {
            let _ = writeln!(out, "agents:");
            for ag in &self.agents {
                let _ = write!(out, "  {}", ag.name);
                if ag.program != self.program {
                    let _ = write!(out, " (in {})", ag.program);
                }
                let _ = write!(out, ": model {}", ag.model.as_deref().unwrap_or("default"));
                if ag.persist != "none" {
                    let _ = write!(out, ", persist {}", ag.persist);
                }
                if !ag.skills.is_empty() {
                    let _ = write!(out, ", skills {}", ag.skills.join(", "));
                }
                let _ = writeln!(out);
                for (kind, value) in &ag.permissions {
                    let _ = writeln!(out, "    {kind}: {}", value.join(", "));
                }
            }
        }
        if !self.mcp_servers.is_empty() {
            let _ = writeln!(out, "mcp servers: {}", self.mcp_servers.join(", "));
        }
        if !self.unbundled_skills.is_empty() {
            let _ = writeln!(
                out,
                "needed where it runs (installed skills or MCP servers): {}",
                self.unbundled_skills.join(", ")
            );
        }
        for p in &self.programs {
            let _ = writeln!(
                out,
                "program   {} (imported as {}) sha256 {}",
                p.name, p.import_path, p.sha256
            );
        }
        for s in &self.skills {
            let size: usize = s.files.iter().map(|f| f.1).sum();
            let _ = writeln!(
                out,
                "skill     {} from {} ({} file(s), {size} bytes) sha256 {}",
                s.name,
                s.source,
                s.files.len(),
                s.sha256
            );
            let _ = writeln!(out, "          {}", s.origin);
        }
        match self.cost.get("unavailable") {
            Some(why) => {
                let _ = writeln!(
                    out,
                    "cost      unknown: {}",
                    why.as_str().unwrap_or_default()
                );
            }
            None => {
                for (key, label) in [
                    ("sessions", "sessions "),
                    ("judgments", "judgments"),
                    ("cost_usd", "cost     "),
                ] {
                    if let Some(t) = self.cost[key]["text"].as_str() {
                        let _ = writeln!(out, "{label} {t}");
                    }
                }
            }
        }
        out
    }

    /// The description as one JSON document.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
