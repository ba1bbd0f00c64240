//! `prosec`: the OpenProse compiler command line.
//!
//! `prosec check <files or dirs>...` validates programs; exit status 0 means clean, 1 means
//! errors (or warnings under `--deny-warnings`), 2 means a usage or I/O error. `build`
//! compiles a program to bytecode (carrying the skills it imports, optionally signed), `fetch`
//! fetches and pins what programs import, `keygen` makes a signing key pair, `info` describes
//! an artifact ([`prosec::ship`]), `dis` lists an artifact, and `cost` prints a program's
//! static bounds (sessions and cost, [`prosec::cost`]), `fmt` lays programs out
//! ([`prosec::fmt`]) and `lsp` serves editors ([`prosec::lsp`]).

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use prosec::codegen::BuildError;
use prosec::compile::{Compilation, Options};
use prosec::console::{fail, Color, Console, Exit, Format};
use prosec::diagnostics::termcolor::{ColorChoice, StandardStream};
use prosec::diagnostics::Code;
use prosec::lints::Level;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

// The compiler allocates many small tree nodes; mimalloc is markedly faster at that than
// the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "prosec", version, about = "The OpenProse compiler")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How results and errors are printed: `text` for people, `json` (one document on
    /// stdout, errors included) for tools.
    #[arg(long, value_enum, default_value = "text", global = true)]
    format: Format,
    /// Colour in diagnostics: `auto` (only on a terminal, and not when NO_COLOR is set),
    /// `always` or `never`.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    color: Color,
}

#[derive(Subcommand)]
enum Command {
    /// Validate programs and report diagnostics.
    Check(CheckArgs),
    /// Compile a program (and the programs it imports) to a `.pbc` artifact.
    Build(BuildArgs),
    /// Print a readable listing of a `.pbc` artifact.
    Dis(DisArgs),
    /// Print the least and most sessions a program can run, and what they may cost.
    Cost(CostArgs),
    /// Lay programs out in the canonical style (`prose.toml` `[fmt]` sets the indent width).
    Fmt(FmtArgs),
    /// Serve editors: a language server (LSP 3.17) on standard input and output.
    Lsp,
    /// Fetch what programs import (skills, registry programs) into the cache, and pin it in
    /// prose.lock, so that later builds need no network.
    Fetch(FetchCmdArgs),
    /// Make a signing key pair: NAME.key (secret) and NAME.pub, in minisign's formats.
    Keygen(KeygenArgs),
    /// Describe an artifact: program, inputs, outputs, agents, bundled skills and programs,
    /// cost bounds, signature.
    Info(InfoArgs),
}

#[derive(Args)]
struct FetchFlags {
    /// Refuse to change prose.lock: a source it does not pin is an error.
    #[arg(long)]
    locked: bool,
    /// Use only the cache: no git, no HTTP (sources must be pinned and fetched already).
    #[arg(long)]
    offline: bool,
}

impl FetchFlags {
    fn fetcher(&self, program: &Path) -> prosec::ship::Fetcher {
        prosec::ship::Fetcher::new(
            program,
            prosec::ship::FetchOptions {
                offline: self.offline,
                locked: self.locked,
                ..Default::default()
            },
        )
    }
}

#[derive(Args)]
struct FetchCmdArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    fetch: FetchFlags,
    /// The programs.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Args)]
struct KeygenArgs {
    /// The key pair's name: writes NAME.key and NAME.pub.
    name: PathBuf,
    /// Leave the secret key unencrypted (minisign's -W), for builds that no one is at a
    /// terminal for; keep it private (it is written readable by its owner only).
    #[arg(long, short = 'W')]
    without_password: bool,
    /// Replace an existing key pair.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// The artifact.
    file: PathBuf,
    /// A public key to check the signature against (repeatable; also `PROSE_TRUST` and
    /// `[trust] keys` in prose.toml).
    #[arg(long, value_name = "KEY.pub")]
    trust: Vec<PathBuf>,
    /// The `prose.toml` to price the cost bounds with (default: the project's, found
    /// upward from the artifact's directory, over the user's).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct FmtArgs {
    /// Change no file: show a diff of what would change and exit 1 if anything would.
    #[arg(long)]
    check: bool,
    /// Files or directories (searched recursively for *.prose); `-` formats standard input
    /// to standard output.
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
struct CostArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The program (the programs it imports are counted where it invokes them).
    file: PathBuf,
    /// The `prose.toml` to read `driver`, `model`, `[models]` and `[prices]` from (default:
    /// the project's, found upward from the program's directory, over the user's).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Tokens assumed read per request.
    #[arg(long, value_name = "N", default_value_t = prosec::cost::DEFAULT_TOKENS_IN)]
    tokens_in: u64,
    /// Tokens assumed written per request.
    #[arg(long, value_name = "N", default_value_t = prosec::cost::DEFAULT_TOKENS_OUT)]
    tokens_out: u64,
    /// Of the tokens read per request, those assumed to be a prefix the provider caches
    /// (tool schemas, the agent's prompt): read from its cache in the least, written to it
    /// in the most; 0 prices all input as plain (as does `prompt_cache = "off"` on the
    /// anthropic driver).
    #[arg(long, value_name = "N", default_value_t = prosec::cost::DEFAULT_TOKENS_CACHED)]
    tokens_cached: u64,
    /// Price as this driver's default models: `anthropic` (the default) or `openai`.
    #[arg(long, value_name = "NAME")]
    driver: Option<String>,
    /// The model id for sessions naming no model (and for judgments).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
}

#[derive(Args)]
struct DisArgs {
    /// The artifact.
    file: PathBuf,
}

#[derive(Args)]
struct CommonArgs {
    /// Make relaxed rules (real-world forms the reference calls errors) errors again.
    #[arg(long)]
    strict: bool,
    /// Fail (exit 1) when there are warnings.
    #[arg(long)]
    deny_warnings: bool,
    /// Directory holding registry programs as DIR/@handle/slug.prose (repeatable).
    #[arg(long = "lib-path", value_name = "DIR")]
    lib_paths: Vec<PathBuf>,
    /// Do not report a warning or relaxed rule (a code, or a comma-separated list;
    /// repeatable; later flags win).
    #[arg(long, value_name = "CODE", value_delimiter = ',')]
    allow: Vec<String>,
    /// Report a warning or relaxed rule as a warning.
    #[arg(long, value_name = "CODE", value_delimiter = ',')]
    warn: Vec<String>,
    /// Report a warning or relaxed rule as an error.
    #[arg(long, value_name = "CODE", value_delimiter = ',')]
    deny: Vec<String>,
}

impl CommonArgs {
    /// The compilation options: `build` must link every import and lowers the programs.
    fn options(&self, lints: Vec<(Code, Level)>, build: bool) -> Options {
        Options {
            strict: self.strict,
            lints,
            lib_paths: self.lib_paths.clone(),
            require_imports: build,
            check_only: !build,
        }
    }
}

/// The `--allow`, `--warn` and `--deny` levels of a subcommand, in the order given.
fn lint_levels(m: &ArgMatches) -> Result<Vec<(Code, Level)>, String> {
    let mut given = Vec::new();
    for (id, level) in [
        ("allow", Level::Allow),
        ("warn", Level::Warn),
        ("deny", Level::Deny),
    ] {
        // A subcommand without these flags (`dis`) has none to give: asking clap for the
        // indices of an argument it does not define would panic.
        let Ok(Some(values)) = m.try_get_many::<String>(id) else {
            continue;
        };
        let Some(indices) = m.indices_of(id) else {
            continue;
        };
        for (value, index) in values.zip(indices) {
            given.push((index, id, value.trim().to_string(), level));
        }
    }
    given.sort_by_key(|g| g.0);
    given
        .into_iter()
        .map(|(_, flag, text, level)| match Code::parse(&text) {
            None => Err(format!("--{flag} {text}: no such diagnostic code")),
            Some(code) if !code.is_lint() => Err(format!(
                "--{flag} {code}: not a lint (errors always stop compilation)"
            )),
            Some(code) => Ok((code, level)),
        })
        .collect()
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print the documentation of a diagnostic code (`E007`) and exit.
    #[arg(long, value_name = "CODE")]
    explain: Option<String>,
    /// Files or directories (directories are searched recursively for *.prose).
    #[arg(required_unless_present = "explain")]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
struct BuildArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The program to compile.
    file: PathBuf,
    /// Where to write the artifact (default: beside the source, with the `.pbc` extension).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Print the register count of every function.
    #[arg(long)]
    stats: bool,
    /// Sign the artifact with this secret key (made by `prosec keygen` or `minisign -G`);
    /// the signature travels inside the artifact.
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    #[command(flatten)]
    fetch: FetchFlags,
}

/// The diagnostics of `c` as JSON, with their counts: the document `check` prints, and the
/// start of `build`'s, `cost`'s and `fetch`'s.
fn diagnostics_doc(c: &Compilation, files: usize) -> serde_json::Value {
    serde_json::json!({
        "files": files,
        "errors": c.error_count(),
        "warnings": c.warning_count(),
        "diagnostics": prosec::diagnostics::render_json(&c.sources, &c.diagnostics),
    })
}

/// Whether `c` fails the command: errors, or warnings under `--deny-warnings`.
fn failing(c: &Compilation, args: &CommonArgs) -> bool {
    c.error_count() > 0 || (args.deny_warnings && c.warning_count() > 0)
}

/// Writes `c`'s diagnostics on stderr, rustc's way, with a count.
fn render_diagnostics(c: &Compilation, files: usize) -> Result<(), ExitCode> {
    let color = if Console::get().color {
        ColorChoice::Always
    } else {
        ColorChoice::Never
    };
    let mut err = StandardStream::stderr(color);
    if let Err(e) = prosec::diagnostics::render_text(&mut err, &c.sources, &c.diagnostics) {
        return Err(fail(
            "prosec",
            format!("cannot write diagnostics: {e}"),
            Exit::Unusable,
        ));
    }
    eprintln!(
        "checked {files} file(s): {} error(s), {} warning(s)",
        c.error_count(),
        c.warning_count()
    );
    Ok(())
}

/// Reports `c`'s diagnostics in the format asked for, and gives the exit status they call for.
fn report(c: &Compilation, args: &CommonArgs, files: usize) -> ExitCode {
    match Console::get().format {
        Format::Text => {
            if let Err(status) = render_diagnostics(c, files) {
                return status;
            }
        }
        Format::Json => println!("{}", diagnostics_doc(c, files)),
    }
    if failing(c, args) {
        Exit::Failed.into()
    } else {
        ExitCode::SUCCESS
    }
}

fn check(args: CheckArgs, lints: Vec<(Code, Level)>) -> ExitCode {
    if let Some(code) = &args.explain {
        let parsed = Code::parse(code.trim());
        return match parsed.and_then(prosec::diagnostics::explain::explain) {
            Some(page) => {
                match Console::get().format {
                    Format::Text => println!("{page}"),
                    Format::Json => println!(
                        "{}",
                        serde_json::json!({
                            "code": parsed.map(|c| c.to_string()),
                            "explanation": page,
                        })
                    ),
                }
                ExitCode::SUCCESS
            }
            None => fail(
                "prosec",
                format!("`{code}` is not a diagnostic code"),
                Exit::Unusable,
            ),
        };
    }
    let (mut files, mut suites) = (Vec::new(), Vec::new());
    for p in &args.paths {
        let found = prosec::walk::prose_files(p, &mut files)
            .and_then(|()| prosec::walk::suite_files(p, &mut suites));
        if let Err(e) = found {
            return fail("prosec", format!("{}: {e}", p.display()), Exit::Unusable);
        }
    }
    if files.is_empty() && suites.is_empty() {
        let paths: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        return fail(
            "prosec",
            format!("no .prose files under {}", paths.join(", ")),
            Exit::Unusable,
        );
    }
    let mut c = Compilation::new(args.common.options(lints, false));
    if let Err(e) = c.add_files(&files) {
        return fail("prosec", e, Exit::Unusable);
    }
    // Tests and evals, each against the program it names (compiled once with the rest).
    for s in &suites {
        if let Err(e) = prosec::suite::static_check::check_file(&mut c, s) {
            return fail("prosec", e, Exit::Unusable);
        }
    }
    report(&c, &args.common, files.len() + suites.len())
}

/// Compiles `file` and what it imports for `build`, `cost` or `fetch`: the exit status to
/// stop with when it cannot be read (2) or has errors (or warnings under
/// `--deny-warnings`), reported.
fn compile_clean(
    file: &Path,
    common: &CommonArgs,
    lints: Vec<(Code, Level)>,
    fetcher: prosec::ship::Fetcher,
) -> Result<(Compilation, usize), ExitCode> {
    let mut c = Compilation::with_fetcher(common.options(lints, true), fetcher);
    let root = c
        .add_file(file)
        .map_err(|e| fail("prosec", e, Exit::Unusable))?;
    if failing(&c, common) {
        return Err(report(&c, common, 1));
    }
    Ok((c, root))
}

/// Fetches the skills module `root` and its imports import; `Err` with the exit status
/// (after reporting them) when some cannot be had.
fn bundle(
    c: &mut Compilation,
    root: usize,
    common: &CommonArgs,
) -> Result<(prosec::ship::Bundle, prosec::ship::Fetcher), ExitCode> {
    let mut fetcher = c.take_fetcher().expect("compiled with a fetcher");
    let (bundle, problems) = c.bundle(root, &mut fetcher);
    if !problems.is_empty() {
        c.diagnostics.extend(problems);
        return Err(report(c, common, 1));
    }
    Ok((bundle, fetcher))
}

/// Writes prose.lock if the build changed it, saying so (on stderr, in text).
fn save_lock(fetcher: &prosec::ship::Fetcher) -> Result<bool, ExitCode> {
    match fetcher.save_lock() {
        Ok(changed) => {
            if changed && !Console::json() {
                eprintln!("updated {}", fetcher.lock_path().display());
            }
            Ok(changed)
        }
        Err(e) => Err(fail(
            "prosec",
            format!("cannot write {}: {e}", fetcher.lock_path().display()),
            Exit::Unusable,
        )),
    }
}

fn build(args: BuildArgs, lints: Vec<(Code, Level)>) -> ExitCode {
    // The key first: a wrong password or an exposed key stops the build before any work.
    let signing = match &args.sign {
        Some(path) => {
            let prompt = format!("Password for {}: ", path.display());
            match prosec::ship::keys::read_secret_key(path, || {
                prosec::ship::keys::prompt_password(&prompt)
            }) {
                Ok(k) => {
                    for w in &k.warnings {
                        eprintln!("prosec: warning: {w}");
                    }
                    Some(k)
                }
                Err(e) => return fail("prosec", e, Exit::Unusable),
            }
        }
        None => None,
    };
    let fetcher = args.fetch.fetcher(&args.file);
    let (mut c, root) = match compile_clean(&args.file, &args.common, lints, fetcher) {
        Ok(x) => x,
        Err(status) => return status,
    };
    let (skills, fetcher) = match bundle(&mut c, root, &args.common) {
        Ok(x) => x,
        Err(status) => return status,
    };
    let built = prosec::codegen::build_bytes_bundled(&c, root, &skills);
    if let Err(BuildError::TooLarge(problems)) = &built {
        // Reported with the check's diagnostics, located like them.
        c.diagnostics
            .extend(problems.iter().map(|(d, _)| d.clone()));
    }
    let (bytes, stats) = match built {
        Ok(x) if !failing(&c, &args.common) => x,
        Ok(_) | Err(BuildError::TooLarge(_)) => return report(&c, &args.common, 1),
        Err(e) => {
            return fail(
                "prosec",
                format!("{}: {e}", args.file.display()),
                Exit::Failed,
            )
        }
    };
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.file.with_extension("pbc"));
    let bytes = match &signing {
        Some(key) => {
            let name = out
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let comment = prosec::ship::keys::signature_comment(&name);
            match bytecode_spec::signature::sign(&bytes, &key.key, &comment) {
                Ok(signed) => signed,
                Err(e) => {
                    return fail(
                        "prosec",
                        format!("cannot sign {}: {e}", out.display()),
                        Exit::Unusable,
                    )
                }
            }
        }
        None => bytes,
    };
    let lock_updated = match save_lock(&fetcher) {
        Ok(changed) => changed,
        Err(status) => return status,
    };
    if let Err(e) = std::fs::write(&out, &bytes) {
        return fail(
            "prosec",
            format!("cannot write {}: {e}", out.display()),
            Exit::Unusable,
        );
    }
    let source_len = c.sources.get(c.modules[root].file).text.len();
    let skill_names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
    match Console::get().format {
        Format::Json => {
            let mut doc = diagnostics_doc(&c, 1);
            doc["artifact"] = serde_json::json!({
                "path": out.display().to_string(),
                "bytes": bytes.len(),
                "source_bytes": source_len,
                "functions": stats.registers.len(),
                "skills": skill_names,
                "signed_by": signing.as_ref().map(|k| k.id.to_string()),
                "lock_updated": lock_updated,
                "registers": args.stats.then(|| stats.registers.iter().map(|(m, f, r)| {
                    serde_json::json!({"module": m, "function": f, "registers": r})
                }).collect::<Vec<_>>()),
            });
            println!("{doc}");
        }
        Format::Text => {
            if !c.diagnostics.is_empty() {
                // Warnings, as `check` writes them.
                if let Err(status) = render_diagnostics(&c, 1) {
                    return status;
                }
            }
            eprintln!(
                "wrote {}: {} bytes ({} bytes of source, {} function(s))",
                out.display(),
                bytes.len(),
                source_len,
                stats.registers.len()
            );
            if !skill_names.is_empty() {
                eprintln!("  bundled skill(s): {}", skill_names.join(", "));
            }
            if let Some(key) = &signing {
                eprintln!("  signed with key {}", key.id);
            }
            if args.stats {
                for (module, func, regs) in &stats.registers {
                    eprintln!("  {module}::{func}: {regs} register(s)");
                }
            }
        }
    }
    ExitCode::SUCCESS
}

fn fetch(args: FetchCmdArgs, lints: Vec<(Code, Level)>) -> ExitCode {
    let mut programs = Vec::new();
    for file in &args.files {
        let fetcher = args.fetch.fetcher(file);
        let (mut c, root) = match compile_clean(file, &args.common, lints.clone(), fetcher) {
            Ok(x) => x,
            Err(status) => return status,
        };
        let (skills, mut fetcher) = match bundle(&mut c, root, &args.common) {
            Ok(x) => x,
            Err(status) => return status,
        };
        if let Some(f) = c.take_fetcher() {
            fetcher.fetched.extend(f.fetched);
        }
        let lock_updated = match save_lock(&fetcher) {
            Ok(changed) => changed,
            Err(status) => return status,
        };
        let imported = c.reachable(root).len() - 1;
        if Console::json() {
            programs.push(serde_json::json!({
                "file": file.display().to_string(),
                "fetched": fetcher.fetched.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
                "skills": skills.skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                "programs_imported": imported,
                "lock_updated": lock_updated,
            }));
        } else {
            for what in &fetcher.fetched {
                eprintln!("fetched {what}");
            }
            eprintln!(
                "{}: {} skill(s) ready, {imported} program(s) imported",
                file.display(),
                skills.skills.len(),
            );
        }
    }
    if Console::json() {
        println!("{}", serde_json::json!({ "programs": programs }));
    }
    ExitCode::SUCCESS
}

fn keygen(args: KeygenArgs) -> ExitCode {
    let password = if args.without_password {
        None
    } else {
        let ask = || -> Result<String, String> {
            let first = prosec::ship::keys::prompt_password("Password for the new key: ")?;
            let again = prosec::ship::keys::prompt_password("Password (again): ")?;
            if first != again {
                return Err("the passwords differ".into());
            }
            if first.is_empty() {
                return Err(
                    "an empty password; for a key without one, pass --without-password".into(),
                );
            }
            Ok(first)
        };
        match ask() {
            Ok(p) => Some(p),
            Err(e) => return fail("prosec", e, Exit::Unusable),
        }
    };
    match prosec::ship::keys::keygen(&args.name, password, args.force) {
        Ok(id) => {
            let (secret, public) = prosec::ship::keys::key_paths(&args.name);
            match Console::get().format {
                Format::Text => eprintln!(
                    "wrote {} (secret: keep it private) and {} (public: give it to whoever runs your artifacts); key id {id}",
                    secret.display(),
                    public.display()
                ),
                Format::Json => println!(
                    "{}",
                    serde_json::json!({
                        "secret_key": secret.display().to_string(),
                        "public_key": public.display().to_string(),
                        "key_id": id.to_string(),
                    })
                ),
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("prosec", e, Exit::Unusable),
    }
}

fn info(args: InfoArgs) -> ExitCode {
    match prosec::info::of_file(&args.file, &args.trust, args.config.as_deref()) {
        Ok(info) => prosec::info::show("prosec", &info),
        Err((e, status)) => fail("prosec", e, Exit::from_code(status)),
    }
}

fn cost(args: CostArgs, lints: Vec<(Code, Level)>) -> ExitCode {
    let fetcher = prosec::ship::Fetcher::new(&args.file, Default::default());
    let (c, root) = match compile_clean(&args.file, &args.common, lints, fetcher) {
        Ok(x) => x,
        Err(status) => return status,
    };
    let dir = match args.file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut settings = match prose_settings::Settings::load(args.config.as_deref(), dir) {
        Ok(s) => s,
        Err(e) => return fail("prosec", e, Exit::Unusable),
    };
    settings.driver = args.driver.clone().or(settings.driver);
    settings.model = args.model.clone().or(settings.model);
    let pricing = prosec::cost::Pricing {
        tokens_cached: args.tokens_cached,
        ..prosec::cost::Pricing::from_settings(&settings, args.tokens_in, args.tokens_out)
    };
    let bounds = prosec::cost::bounds(&c, root, &pricing);
    match Console::get().format {
        Format::Text => {
            if !c.diagnostics.is_empty() {
                // Warnings, on stderr as `check` writes them.
                if let Err(status) = render_diagnostics(&c, 1) {
                    return status;
                }
            }
            print!("{}", bounds.render_text(&pricing));
        }
        Format::Json => {
            let mut doc = bounds.to_json(&pricing);
            doc["file"] = args.file.display().to_string().into();
            doc["diagnostics"] =
                serde_json::json!(prosec::diagnostics::render_json(&c.sources, &c.diagnostics));
            println!("{doc}");
        }
    }
    ExitCode::SUCCESS
}

/// Why a file could not be formatted.
enum Unformatted {
    /// Its syntax errors (formatted only when it parses).
    Syntax(Box<Compilation>),
    /// Anything else: the message, and the exit status.
    Other(String, Exit),
}

/// Formats one file's text.
fn fmt_text(display: &str, dir: &Path, text: String) -> Result<String, Unformatted> {
    let options = prosec::fmt::FmtOptions::for_dir(dir)
        .map_err(|e| Unformatted::Other(e.to_string(), Exit::Unusable))?;
    prosec::fmt::format(&text, &options).map_err(|e| match e {
        prosec::fmt::FmtError::Syntax(diags) => {
            let mut c = Compilation::new(Options::default());
            c.sources.add(display, text);
            c.diagnostics = diags;
            Unformatted::Syntax(Box::new(c))
        }
        prosec::fmt::FmtError::Layout { span, message } => {
            let mut sources = prosec::source::SourceMap::new();
            let file = sources.add(display, text);
            let at = sources.get(file).line_col(span.start as usize);
            Unformatted::Other(
                format!(
                    "{display}:{}:{}: cannot format: {message}",
                    at.line, at.column
                ),
                Exit::Failed,
            )
        }
    })
}

/// What `fmt` did to one file, for its JSON document.
#[derive(Default)]
struct Formatted {
    file: String,
    /// Whether formatting changes it.
    changed: bool,
    /// The unified diff, under `--check`, when it would change.
    diff: Option<String>,
    /// The formatted text, for standard input.
    text: Option<String>,
    /// Why it could not be formatted.
    error: Option<serde_json::Value>,
}

impl Formatted {
    fn to_json(&self) -> serde_json::Value {
        let mut doc = serde_json::json!({ "file": self.file, "changed": self.changed });
        for (key, value) in [("diff", &self.diff), ("text", &self.text)] {
            if let Some(v) = value {
                doc[key] = v.as_str().into();
            }
        }
        if let Some(e) = &self.error {
            doc["error"] = e.clone();
        }
        doc
    }
}

fn fmt(args: FmtArgs) -> ExitCode {
    use std::io::{Read, Write};
    let json = Console::json();
    let stdin = args.paths.len() == 1 && args.paths[0] == Path::new("-");
    let mut inputs: Vec<(String, PathBuf, Result<String, Unformatted>)> = Vec::new();
    if stdin {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            return fail(
                "prosec",
                format!("cannot read standard input: {e}"),
                Exit::Unusable,
            );
        }
        let dir = std::env::current_dir().unwrap_or_default();
        inputs.push(("<stdin>".into(), dir, Ok(text)));
    } else {
        let mut files = Vec::new();
        for p in &args.paths {
            if let Err(e) = prosec::walk::prose_files(p, &mut files) {
                return fail("prosec", format!("{}: {e}", p.display()), Exit::Unusable);
            }
        }
        for file in files {
            let display = file.display().to_string();
            let dir = match file.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let text = match std::fs::read(&file).map(prosec::decode_source) {
                Ok(Ok(t)) => Ok(t),
                Ok(Err((_, message, _))) => Err(Unformatted::Other(
                    format!("{display}: {message}"),
                    Exit::Failed,
                )),
                Err(e) => Err(Unformatted::Other(
                    format!("cannot read {display}: {e}"),
                    Exit::Unusable,
                )),
            };
            inputs.push((display, dir, text));
        }
    }
    let total = inputs.len();
    let mut worst = Exit::Success;
    let mut results = Vec::new();
    for (display, dir, text) in inputs {
        let mut result = Formatted {
            file: display.clone(),
            ..Formatted::default()
        };
        let done = text.and_then(|text| fmt_text(&display, &dir, text.clone()).map(|f| (text, f)));
        let (text, formatted) = match done {
            Ok(x) => x,
            Err(why) => {
                let (exit, error) = match why {
                    Unformatted::Syntax(c) => {
                        if !json {
                            let _ = render_diagnostics(&c, 1);
                            eprintln!("prosec: {display}: not formatted (syntax errors)");
                        }
                        (Exit::Failed, diagnostics_doc(&c, 1))
                    }
                    Unformatted::Other(message, exit) => {
                        if !json {
                            eprintln!("prosec: {message}");
                        }
                        (exit, prosec::console::error_json(&message, None, exit))
                    }
                };
                if worst == Exit::Success || exit == Exit::Unusable {
                    worst = exit;
                }
                result.error = Some(error);
                results.push(result);
                continue;
            }
        };
        result.changed = formatted != text;
        if args.check {
            if result.changed {
                let diff = similar::TextDiff::from_lines(&text, &formatted)
                    .unified_diff()
                    .header(&display, &format!("{display} (formatted)"))
                    .to_string();
                if !json {
                    print!("{diff}");
                }
                result.diff = Some(diff);
            }
        } else if stdin {
            // The formatted text is the result, changed or not.
            if !json {
                let _ = std::io::stdout().write_all(formatted.as_bytes());
            }
            result.text = Some(formatted);
        } else if result.changed {
            if let Err(e) = std::fs::write(&display, &formatted) {
                let message = format!("cannot write {display}: {e}");
                if !json {
                    eprintln!("prosec: {message}");
                }
                worst = Exit::Unusable;
                result.error = Some(prosec::console::error_json(&message, None, Exit::Unusable));
            }
        }
        results.push(result);
    }
    let changed = results.iter().filter(|r| r.changed).count();
    let exit = if worst != Exit::Success {
        worst
    } else if args.check && changed > 0 {
        Exit::Failed
    } else {
        Exit::Success
    };
    if json {
        let mut doc = serde_json::json!({
            "check": args.check,
            "files": results.iter().map(Formatted::to_json).collect::<Vec<_>>(),
            "changed": changed,
        });
        if exit != Exit::Success {
            doc["exit"] = exit.code().into();
        }
        println!("{doc}");
    } else if !stdin && changed > 0 {
        if args.check {
            eprintln!("{changed} of {total} file(s) would be reformatted");
        } else {
            eprintln!("reformatted {changed} of {total} file(s)");
        }
    }
    exit.into()
}

fn dis(args: DisArgs) -> ExitCode {
    let bytes = match bytecode_spec::artifact::read_file(&args.file) {
        Ok(b) => b,
        Err(e) => {
            return fail(
                "prosec",
                format!("cannot read {}: {e}", args.file.display()),
                Exit::Unusable,
            )
        }
    };
    let (header, artifact) = match bytecode_spec::artifact::read(&bytes) {
        Ok(x) => x,
        Err(e) => {
            return fail(
                "prosec",
                format!("{}: {e}", args.file.display()),
                Exit::Failed,
            )
        }
    };
    let listing = bytecode_spec::dis::disassemble(&header, &artifact);
    let verified = bytecode_spec::verify::verify(&artifact);
    match Console::get().format {
        Format::Text => print!("{listing}"),
        Format::Json => {
            let mut doc = serde_json::json!({
                "file": args.file.display().to_string(),
                "listing": listing,
                "verifies": verified.is_ok(),
            });
            if let Err(e) = &verified {
                doc["error"] = prosec::console::error_json(
                    &format!("{}: fails verification: {e}", args.file.display()),
                    None,
                    Exit::Failed,
                )["error"]
                    .clone();
            }
            println!("{doc}");
        }
    }
    match verified {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !Console::json() {
                eprintln!("prosec: {}: fails verification: {e}", args.file.display());
            }
            Exit::Failed.into()
        }
    }
}

fn main() -> ExitCode {
    // Output piped into a command that stops reading (`| head`) ends this process quietly,
    // as it does any Unix tool, instead of panicking on the failed write.
    // SAFETY: setting a signal's disposition to the default, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let words: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = prosec::console::json_asked(&words);
    let matches =
        match prosec::console::with_exit_table(Cli::command()).try_get_matches_from(&words) {
            Ok(m) => m,
            Err(e) => return prosec::console::usage_error(e, json),
        };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return prosec::console::usage_error(e, json),
    };
    Console::set(cli.format, cli.color);
    let lints = match matches.subcommand().map(|(_, m)| lint_levels(m)) {
        Some(Ok(lints)) => lints,
        Some(Err(e)) => return fail("prosec", e, Exit::Unusable),
        None => Vec::new(),
    };
    match cli.command {
        Command::Check(args) => check(args, lints),
        Command::Build(args) => build(args, lints),
        Command::Dis(args) => dis(args),
        Command::Cost(args) => cost(args, lints),
        Command::Fmt(args) => fmt(args),
        Command::Fetch(args) => fetch(args, lints),
        Command::Keygen(args) => keygen(args),
        Command::Info(args) => info(args),
        Command::Lsp => match prosec::lsp::run_stdio() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("prosec lsp", e, Exit::Failed),
        },
    }
}
