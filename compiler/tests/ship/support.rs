//! What the shipping tests stand on, all offline: a world of its own per test (a home, a
//! cache, a git configuration whose `insteadOf` sends `https://github.com/` to bare
//! repositories on disk), repositories made with the git command line, a small npm registry
//! on loopback that serves package documents and tarballs like the real one (and records
//! what it was asked), and `prosec` run in that world.

use base64::Engine;
use sha2::{Digest, Sha512};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// One test's world.
pub struct World {
    /// Its directory.
    pub root: PathBuf,
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CACHE_HOME`.
    pub cache: PathBuf,
    /// Where `https://github.com/OWNER/REPO` really is: `github/OWNER/REPO.git`.
    pub github: PathBuf,
    gitconfig: PathBuf,
    /// Extra environment for `prosec`.
    pub env: Vec<(String, String)>,
}

impl World {
    /// A fresh world for test `name`.
    pub fn new(name: &str) -> World {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("ship")
            .join(name);
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let cache = root.join("cache");
        let github = root.join("github");
        for d in [&home, &cache, &github] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let gitconfig = root.join("gitconfig");
        std::fs::write(
            &gitconfig,
            format!(
                "[url \"file://{}/\"]\n\tinsteadOf = https://github.com/\n",
                github.display()
            ),
        )
        .expect("gitconfig");
        World {
            root,
            home,
            cache,
            github,
            gitconfig,
            env: Vec::new(),
        }
    }

    /// A directory of the world, made.
    pub fn dir(&self, rel: &str) -> PathBuf {
        let d = self.root.join(rel);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    /// Runs `prosec` in directory `cwd`.
    pub fn prosec(&self, cwd: &Path, args: &[&str]) -> Run {
        Run(self
            .command("prosec", cwd)
            .args(args)
            .output()
            .expect("run prosec"))
    }

    /// A command running the toolchain's binary `name` (`prosec`, `prosevm`) in directory
    /// `cwd`, in this world: its home, cache and git configuration, no npm settings but
    /// the world's.
    pub fn command(&self, name: &str, cwd: &Path) -> Command {
        let mut cmd = Command::new(binary(name));
        cmd.current_dir(cwd)
            .env("HOME", &self.home)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("GIT_CONFIG_GLOBAL", &self.gitconfig)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("PROSE_REGISTRY");
        for (k, _) in std::env::vars() {
            if k.to_ascii_lowercase().starts_with("npm_config_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Makes (or adds a commit to) repository `owner/repo`, served as
    /// `https://github.com/owner/repo`: writes `files` in its work tree, commits, tags the
    /// commit with `tag` if given, and pushes. Returns the commit.
    pub fn commit(
        &self,
        owner: &str,
        repo: &str,
        files: &[(&str, &str)],
        tag: Option<&str>,
    ) -> String {
        let work = self.root.join("work").join(owner).join(repo);
        let bare = self.github.join(owner).join(format!("{repo}.git"));
        if !work.exists() {
            std::fs::create_dir_all(&work).expect("mkdir");
            git(&work, &["init", "-q", "-b", "main"]);
            std::fs::create_dir_all(&bare).expect("mkdir");
            git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        }
        for (name, text) in files {
            let p = work.join(name);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", "change"]);
        if let Some(t) = tag {
            git(&work, &["tag", "-a", t, "-m", t]);
        }
        git(
            &work,
            &[
                "push",
                "-q",
                "--tags",
                "-f",
                bare.to_str().expect("utf-8"),
                "main",
            ],
        );
        git_out(&work, &["rev-parse", "HEAD"])
    }
}

/// The binary `name` of this build: the one cargo names for the compiler's own tests, else
/// (in the top-level tests crate) the one beside the directory holding the test.
fn binary(name: &str) -> PathBuf {
    if let Some(p) = option_env!("CARGO_BIN_EXE_prosec").filter(|_| name == "prosec") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test is in target/<profile>/deps")
        .join(name)
}

/// Runs git in `dir` with a fixed identity and no user configuration.
pub fn git(dir: &Path, args: &[&str]) {
    let out = git_cmd(dir, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    c
}

/// What git printed.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("run git");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A finished `prosec`.
pub struct Run(pub Output);

impl Run {
    /// Its exit code.
    pub fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    /// Its standard output.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    /// Its standard error.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    /// Asserts it succeeded; returns stderr.
    pub fn ok(&self) -> String {
        assert_eq!(
            self.code(),
            0,
            "prosec failed:\n{}{}",
            self.stdout(),
            self.stderr()
        );
        self.stderr()
    }
    /// Asserts it failed with exit code 1 and reported `code`; returns stderr.
    pub fn fails_with(&self, code: &str) -> String {
        let err = self.stderr();
        assert_eq!(self.code(), 1, "expected a failure:\n{err}");
        assert!(
            err.contains(&format!("error[{code}]")),
            "expected {code}:\n{err}"
        );
        err
    }
}

/// Writes `text` to `dir/rel`, making its directories.
pub fn put(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The instructions of skill `notes` in [`relative_layout`].
pub const NOTES: &str = "Notes from beside the project.";
/// The instructions of skill `tone` in [`relative_layout`].
pub const TONE: &str = "Tone from beside the module.";

/// A project whose local imports are relative to each importing file, and a working
/// directory elsewhere; returns the directory holding the project (`a`, with the program
/// `a/project/main.prose`) and that working directory.
///
/// `main.prose` imports `notes` from `../skills/notes` (so [`NOTES`]) for its agent
/// `writer`, and uses `./lib/helper`, which imports `tone` from its own `./vendor/tone`
/// ([`TONE`]) for its agent `polisher`. Decoys stand where a wrong base would find the same
/// names: `tone` beside the main program, both beside and under the working directory.
pub fn relative_layout(w: &World) -> (PathBuf, PathBuf) {
    let a = w.dir("a");
    put(
        &a,
        "project/main.prose",
        "import \"notes\" from \"../skills/notes\"\nuse \"./lib/helper\"\nagent writer:\n  model: sonnet\n  skills: [\"notes\"]\nlet d = helper(text: \"x\")\noutput r = session: writer\n  prompt: \"Write it\"\n  context: d\n",
    );
    put(
        &a,
        "project/lib/helper.prose",
        "import \"tone\" from \"./vendor/tone\"\ninput text: \"What to polish\"\nagent polisher:\n  model: haiku\n  skills: [\"tone\"]\noutput polished = session: polisher\n  prompt: \"Polish {text}\"\n",
    );
    put(&a, "skills/notes/SKILL.md", &skill_md("notes", NOTES));
    put(
        &a,
        "project/lib/vendor/tone/SKILL.md",
        &skill_md("tone", TONE),
    );
    let wrong = |where_: &str| format!("WRONG: found {where_}.");
    put(
        &a,
        "project/vendor/tone/SKILL.md",
        &skill_md("tone", &wrong("beside the main program")),
    );
    let b = w.dir("b");
    put(
        &b,
        "skills/notes/SKILL.md",
        &skill_md("notes", &wrong("beside the working directory")),
    );
    put(
        &b,
        "cwd/vendor/tone/SKILL.md",
        &skill_md("tone", &wrong("in the working directory")),
    );
    (a, b.join("cwd"))
}

/// A `SKILL.md` for skill `name`.
pub fn skill_md(name: &str, instructions: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill\n---\n{instructions}\n")
}

/// A gzipped tarball of `files` under `package/`, as `npm pack` makes.
pub fn tarball(files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (name, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append_data(&mut h, format!("package/{name}"), text.as_bytes())
            .expect("append");
    }
    b.into_inner().expect("tar").finish().expect("gzip")
}

/// `sha512-<base64>` of `bytes`.
pub fn integrity(bytes: &[u8]) -> String {
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(bytes))
    )
}

/// A request as the server saw it: its path, and its headers with lower-cased names.
pub type Request = (String, Vec<(String, String)>);

/// A canned answer.
#[derive(Clone)]
pub struct Answer {
    /// The status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// An HTTP server on loopback answering GETs from a table of paths, recording each request
/// (its path and headers).
#[derive(Clone)]
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    routes: Arc<Mutex<HashMap<String, Answer>>>,
    /// Each request, in order.
    pub log: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    /// Starts a server.
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let server = Server {
            url,
            routes: Arc::default(),
            log: Arc::default(),
        };
        let s = server.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || s.serve(stream));
            }
        });
        server
    }

    fn serve(&self, mut stream: std::net::TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        self.log.lock().expect("log").push((path.clone(), headers));
        let answer = self.routes.lock().expect("routes").get(&path).cloned();
        let answer = answer.unwrap_or(Answer {
            status: 404,
            body: b"{\"error\":\"Not found\"}".to_vec(),
        });
        let reason = if answer.status == 200 {
            "OK"
        } else {
            "Not Found"
        };
        let head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
            answer.status,
            answer.body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&answer.body);
    }

    /// Serves `body` at `path`.
    pub fn route(&self, path: &str, body: Vec<u8>) {
        self.routes
            .lock()
            .expect("routes")
            .insert(path.to_string(), Answer { status: 200, body });
    }

    /// Forgets every route (everything is then 404).
    pub fn clear(&self) {
        self.routes.lock().expect("routes").clear();
    }

    /// Publishes `package` with `versions` (each a version and its tarball) under the
    /// registry at `prefix` (`""` or `/npm`), `latest` the last one. The document's
    /// integrity is `integrity_of(version, tarball)`.
    pub fn publish(
        &self,
        prefix: &str,
        package: &str,
        versions: &[(&str, Vec<u8>)],
        integrity_of: impl Fn(&str, &[u8]) -> String,
    ) {
        let file = package.rsplit('/').next().expect("name");
        let mut vs = serde_json::Map::new();
        for (v, tgz) in versions {
            let tar_path = format!("{prefix}/{package}/-/{file}-{v}.tgz");
            self.route(&tar_path, tgz.clone());
            vs.insert(
                v.to_string(),
                serde_json::json!({
                    "name": package,
                    "version": v,
                    "dist": {
                        "tarball": format!("{}{tar_path}", self.url),
                        "integrity": integrity_of(v, tgz),
                        "shasum": "0000",
                    }
                }),
            );
        }
        let latest = versions.last().map(|(v, _)| *v).unwrap_or("0.0.0");
        let doc = serde_json::json!({
            "name": package,
            "dist-tags": {"latest": latest},
            "versions": vs,
        });
        self.route(
            &format!("{prefix}/{}", package.replace('/', "%2f")),
            doc.to_string().into_bytes(),
        );
    }

    /// The paths requested so far.
    pub fn paths(&self) -> Vec<String> {
        self.log
            .lock()
            .expect("log")
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }
}
