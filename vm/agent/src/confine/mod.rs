//! The OS sandbox commands run in (`bash`, and files run through `execute` patterns). There
//! are two confinements, tried in this order:
//!
//! 1. **bubblewrap** ([`bubblewrap`]), where `bwrap` is installed and can create its
//!    namespaces: the command gets its own user, PID, IPC and mount namespaces and a view of
//!    the file system made of mounts.
//! 2. **Landlock** ([`landlocked`]), built into the VM, with nothing to install: Landlock
//!    rules in the kernel (ABI 6, Linux 6.12, or later) and a seccomp filter, which the
//!    command's process applies to itself between fork and exec. It gives the command the
//!    same reads and writes as far as the kernel can express them; the differences are
//!    listed in [`landlocked`].
//!
//! Where neither works, commands are refused, unless the user allowed unsandboxed commands
//! (`--allow unsandboxed-bash`); then they run as plain processes in their own process
//! group. The environment variable [`CHOICE_VAR`] forces one confinement (tests run every
//! sandbox test under each); which one is in use is probed once per process ([`support`]).

mod access;
pub mod bubblewrap;
mod child;
pub mod landlocked;
mod seccomp;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::beneath::Root;

/// The environment variable that picks the confinement: `auto` (or unset: bubblewrap where
/// it works, else Landlock), `bwrap` or `landlock`. Read here only ([`Choice::from_env`]).
pub const CHOICE_VAR: &str = "PROSE_SANDBOX";

/// How a granted command is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// A shell command, run as `sh -c COMMAND`.
    Shell(String),
    /// A file run directly, with literal arguments and no shell (an `execute` pattern's
    /// grant).
    Exec {
        /// The file (canonical).
        program: PathBuf,
        /// Its arguments, passed as they are.
        args: Vec<String>,
    },
}

/// A confinement commands can run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// bubblewrap's namespaces and mounts.
    Bubblewrap,
    /// Landlock rules and a seccomp filter.
    Landlock,
}

impl Kind {
    /// Both, in the order [`Choice::Auto`] tries them.
    pub const ALL: [Kind; 2] = [Kind::Bubblewrap, Kind::Landlock];

    /// Its name as [`CHOICE_VAR`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bubblewrap => "bwrap",
            Kind::Landlock => "landlock",
        }
    }
}

/// Which confinement commands should run in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    /// bubblewrap where it works, else Landlock.
    #[default]
    Auto,
    /// This one or none.
    Only(Kind),
}

impl std::str::FromStr for Choice {
    type Err = String;

    fn from_str(s: &str) -> Result<Choice, String> {
        match s {
            "" | "auto" => Ok(Choice::Auto),
            other => Kind::ALL
                .into_iter()
                .find(|k| k.name() == other)
                .map(Choice::Only)
                .ok_or_else(|| {
                    format!("{CHOICE_VAR} is `{other}`: it takes `auto`, `bwrap` or `landlock`")
                }),
        }
    }
}

impl Choice {
    /// The choice [`CHOICE_VAR`] makes (unset: [`Choice::Auto`]); a value it does not take
    /// is an error saying which it takes.
    pub fn from_env() -> Result<Choice, String> {
        match std::env::var_os(CHOICE_VAR) {
            None => Ok(Choice::Auto),
            Some(v) => v
                .to_str()
                .ok_or_else(|| format!("{CHOICE_VAR} is not valid UTF-8"))?
                .parse(),
        }
    }
}

/// Whether commands can be confined in this process, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// bubblewrap works here: this program.
    Bubblewrap(PathBuf),
    /// Landlock works here, with this ABI version; `instead` says why bubblewrap is not used
    /// (it does not work here, or it was not chosen).
    Landlock {
        /// The kernel's Landlock ABI version.
        abi: i32,
        /// Why not bubblewrap.
        instead: String,
    },
    /// No confinement can be set up, and why.
    Unavailable(String),
}

impl Support {
    /// The confinement this is, if any.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Support::Bubblewrap(_) => Some(Kind::Bubblewrap),
            Support::Landlock { .. } => Some(Kind::Landlock),
            Support::Unavailable(_) => None,
        }
    }

    /// What commands run in, in a few words, for the narration.
    pub fn describe(&self) -> String {
        match self {
            Support::Bubblewrap(bwrap) => format!(
                "bubblewrap (`{}`: own user, PID, IPC and mount namespaces)",
                bwrap.display()
            ),
            Support::Landlock { abi, instead } => {
                format!("Landlock (ABI {abi}) and a seccomp filter; not bubblewrap: {instead}")
            }
            Support::Unavailable(why) => format!("no OS sandbox: {why}"),
        }
    }
}

/// How commands are confined for `choice`, from the probes made once per process (the
/// first call for a confinement tries it).
pub fn support(choice: Choice) -> Support {
    static BUBBLEWRAP: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static LANDLOCK: OnceLock<Result<i32, String>> = OnceLock::new();
    let bwrap = || BUBBLEWRAP.get_or_init(bubblewrap::probe);
    let landlock = || LANDLOCK.get_or_init(landlocked::probe);
    match choice {
        Choice::Only(Kind::Bubblewrap) => decide(choice, bwrap(), &Err(String::new())),
        Choice::Only(Kind::Landlock) => decide(choice, &Err(String::new()), landlock()),
        Choice::Auto => match bwrap() {
            Ok(_) => decide(choice, bwrap(), &Err(String::new())),
            Err(_) => decide(choice, bwrap(), landlock()),
        },
    }
}

/// The support `choice` gets from what the probes found (each an error saying why that
/// confinement cannot be used; unused when `choice` rules it out).
fn decide(
    choice: Choice,
    bwrap: &Result<PathBuf, String>,
    landlock: &Result<i32, String>,
) -> Support {
    let chosen = |kind: Kind| format!("{CHOICE_VAR}={}", kind.name());
    match (choice, bwrap, landlock) {
        (Choice::Only(Kind::Bubblewrap), Ok(path), _) | (Choice::Auto, Ok(path), _) => {
            Support::Bubblewrap(path.clone())
        }
        (Choice::Only(Kind::Bubblewrap), Err(why), _) => {
            Support::Unavailable(format!("{why} ({})", chosen(Kind::Bubblewrap)))
        }
        (Choice::Only(Kind::Landlock), _, Ok(abi)) => Support::Landlock {
            abi: *abi,
            instead: chosen(Kind::Landlock),
        },
        (Choice::Only(Kind::Landlock), _, Err(why)) => {
            Support::Unavailable(format!("{why} ({})", chosen(Kind::Landlock)))
        }
        (Choice::Auto, Err(no_bwrap), Ok(abi)) => Support::Landlock {
            abi: *abi,
            instead: no_bwrap.clone(),
        },
        (Choice::Auto, Err(no_bwrap), Err(no_landlock)) => {
            Support::Unavailable(format!("{no_bwrap}; and {no_landlock}"))
        }
    }
}

/// What a [`Confinement`] is built from.
pub struct Plan<'a> {
    /// The working directory, held open; its path is canonical.
    pub workdir: &'a Arc<Root>,
    /// Whether the network is reachable.
    pub network: bool,
    /// Writable paths inside the working directory, canonical: the working directory
    /// itself when the agent may write anywhere.
    pub writable: Vec<PathBuf>,
    /// Protected files and directories (canonical) that stay read-only if they are inside a
    /// writable path, whether they exist or not, with whether each is a directory.
    pub protect: Vec<(PathBuf, bool)>,
    /// Directories to hide where they exist (list them in `protect` too, so that a missing
    /// one cannot be created).
    pub hidden: Vec<PathBuf>,
}

impl Plan<'_> {
    /// The writable paths without those inside another, sorted.
    fn roots(&self) -> Vec<PathBuf> {
        let mut writable = self.writable.clone();
        writable.sort();
        writable.dedup();
        writable
            .iter()
            .filter(|w| !writable.iter().any(|o| o != *w && w.starts_with(o)))
            .cloned()
            .collect()
    }

    /// The hidden directories that exist and do not hold the working directory.
    fn existing_hidden(&self) -> Vec<PathBuf> {
        let workdir = self.workdir.path();
        self.hidden
            .iter()
            .filter(|h| h.is_dir() && !workdir.starts_with(h))
            .cloned()
            .collect()
    }
}

/// What a command may touch: built by the session's sandbox
/// (`super::permissions::Sandbox::confinement`) for each command, and kept until the command
/// has ended (dropping it undoes what it set up).
#[derive(Debug)]
pub struct Confinement(Inner);

#[derive(Debug)]
enum Inner {
    Bubblewrap(bubblewrap::Confinement),
    Landlock(landlocked::Confinement),
}

impl Confinement {
    /// The confinement of `plan` in what `support` found; an error where it found none.
    pub fn new(support: &Support, plan: Plan<'_>) -> Result<Confinement, String> {
        Ok(Confinement(match support {
            Support::Bubblewrap(bwrap) => {
                Inner::Bubblewrap(bubblewrap::Confinement::new(plan, bwrap)?)
            }
            Support::Landlock { abi, .. } => {
                Inner::Landlock(landlocked::Confinement::new(plan, *abi)?)
            }
            Support::Unavailable(why) => return Err(why.clone()),
        }))
    }

    /// Which confinement this is.
    pub fn kind(&self) -> Kind {
        match self.0 {
            Inner::Bubblewrap(_) => Kind::Bubblewrap,
            Inner::Landlock(_) => Kind::Landlock,
        }
    }

    /// The command that runs `program` with `args` inside this confinement, in a process
    /// group of its own whose id is its process id.
    pub fn command(&self, program: &OsStr, args: &[OsString]) -> tokio::process::Command {
        match &self.0 {
            Inner::Bubblewrap(c) => c.command(program, args),
            Inner::Landlock(c) => c.command(program, args),
        }
    }

    /// Once the command and everything it started have ended: undoes what a command may have
    /// left that this confinement cannot prevent, saying what (one line each).
    pub fn settle(&mut self) -> Vec<String> {
        match &mut self.0 {
            Inner::Bubblewrap(_) => Vec::new(),
            Inner::Landlock(c) => c.settle(),
        }
    }

    /// A word for the model on where commands may create files, when this confinement
    /// allows fewer places than the agent's write paths (Landlock).
    pub fn where_to_write(&self) -> Option<String> {
        match &self.0 {
            Inner::Bubblewrap(_) => None,
            Inner::Landlock(c) => Some(c.where_to_write()),
        }
    }
}

/// The directory directly under `/tmp` that holds `workdir` (canonical), or `/tmp` itself
/// when that is the working directory; `None` when the working directory is elsewhere.
fn shared_tmp_tree(workdir: &Path) -> Option<PathBuf> {
    let tmp = Path::new("/tmp");
    let rest = workdir.strip_prefix(tmp).ok()?;
    Some(match rest.components().next() {
        Some(top) => tmp.join(top),
        None => tmp.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_a_bad_one_says_what_is_taken() {
        assert_eq!("".parse::<Choice>(), Ok(Choice::Auto));
        assert_eq!("auto".parse::<Choice>(), Ok(Choice::Auto));
        assert_eq!("bwrap".parse(), Ok(Choice::Only(Kind::Bubblewrap)));
        assert_eq!("landlock".parse(), Ok(Choice::Only(Kind::Landlock)));
        let e = "bubblewrap".parse::<Choice>().unwrap_err();
        assert_eq!(
            e,
            "PROSE_SANDBOX is `bubblewrap`: it takes `auto`, `bwrap` or `landlock`"
        );
    }

    #[test]
    fn auto_takes_bubblewrap_then_landlock_then_says_why_neither() {
        let bwrap = Ok(PathBuf::from("/usr/bin/bwrap"));
        let no_bwrap: Result<PathBuf, String> = Err("bubblewrap (`bwrap`) is not installed".into());
        let landlock = Ok(7);
        let no_landlock: Result<i32, String> = Err("the kernel has no Landlock".into());
        assert_eq!(
            decide(Choice::Auto, &bwrap, &landlock),
            Support::Bubblewrap("/usr/bin/bwrap".into())
        );
        assert_eq!(
            decide(Choice::Auto, &no_bwrap, &landlock),
            Support::Landlock {
                abi: 7,
                instead: "bubblewrap (`bwrap`) is not installed".into()
            }
        );
        assert_eq!(
            decide(Choice::Auto, &no_bwrap, &no_landlock),
            Support::Unavailable(
                "bubblewrap (`bwrap`) is not installed; and the kernel has no Landlock".into()
            )
        );
        // A forced choice takes that one or none.
        assert_eq!(
            decide(Choice::Only(Kind::Landlock), &bwrap, &landlock),
            Support::Landlock {
                abi: 7,
                instead: "PROSE_SANDBOX=landlock".into()
            }
        );
        assert_eq!(
            decide(Choice::Only(Kind::Bubblewrap), &no_bwrap, &landlock),
            Support::Unavailable(
                "bubblewrap (`bwrap`) is not installed (PROSE_SANDBOX=bwrap)".into()
            )
        );
        assert_eq!(
            decide(Choice::Only(Kind::Landlock), &bwrap, &no_landlock),
            Support::Unavailable("the kernel has no Landlock (PROSE_SANDBOX=landlock)".into())
        );
    }
}
