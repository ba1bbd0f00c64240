//! Shipping a workflow, end to end and offline: the published programs that import skills
//! build with their sources reachable (a repository through `insteadOf`, a package from a
//! loopback registry, a local directory), and their artifacts load from another directory
//! with every source gone, carrying each skill's instructions. Then each part on its own:
//! git refs and pins, npm versions and integrity, registry programs, `--locked` and
//! `--offline`, the rule that finds a skill in a tree, signing, and `prosec info`.

mod support;

use std::path::Path;
use support::{integrity, skill_md, tarball, Server, World, NOTES, TONE};

const WEB_SEARCH: &str = "Search the web before answering; cite every source.";
const SUMMARIZER: &str = "Summarize in five bullet points at most.";
const FILE_READER: &str = "Read files with read_file and quote them exactly.";
const CODE_ANALYZER: &str = "Look for injection, unchecked input and secrets in code.";

fn published(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/ship/published")
            .join(name),
    )
    .expect("fixture")
}

/// The artifact at `path`, loaded as the VM loads it.
fn load(path: &Path) -> bytecode_spec::verify::Verified {
    let bytes = std::fs::read(path).expect("artifact");
    bytecode_spec::artifact::load(&bytes).expect("loads").1
}

/// The instructions part of a bundled skill's SKILL.md.
fn instructions(v: &bytecode_spec::verify::Verified, name: &str) -> String {
    v.skill(0, name)
        .unwrap_or_else(|| panic!("`{name}` is not bundled"))
        .skill_md()
        .expect("SKILL.md")
        .to_string()
}

#[test]
fn the_published_skills_example_ships_with_every_skill_inside() {
    let w = World::new("published-11");
    // github:anthropic/skills holds the skill under skills/web-search/.
    w.commit(
        "anthropic",
        "skills",
        &[
            (
                "skills/web-search/SKILL.md",
                &skill_md("web-search", WEB_SEARCH),
            ),
            (
                "skills/web-search/scripts/search.sh",
                "#!/bin/sh\necho \"$1\"\n",
            ),
            ("README.md", "Skills.\n"),
        ],
        None,
    );
    // npm:@example/summarizer is a package whose root is the skill.
    let npm = Server::start();
    let tgz = tarball(&[
        (
            "package.json",
            "{\"name\":\"@example/summarizer\",\"version\":\"1.0.0\"}",
        ),
        ("SKILL.md", &skill_md("summarizer", SUMMARIZER)),
    ]);
    npm.publish("", "@example/summarizer", &[("1.0.0", tgz)], |_, t| {
        integrity(t)
    });
    let mut w = w;
    w.env.push(("npm_config_registry".into(), npm.url.clone()));
    // ./local-skills/file-reader beside the program.
    let project = w.dir("project");
    std::fs::write(
        project.join("main.prose"),
        published("11-skills-and-imports.prose"),
    )
    .unwrap();
    let local = project.join("local-skills/file-reader");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::write(local.join("SKILL.md"), skill_md("file-reader", FILE_READER)).unwrap();

    let err = w.prosec(&project, &["build", "main.prose"]).ok();
    assert!(
        err.contains("bundled skill(s): web-search, summarizer, file-reader"),
        "{err}"
    );
    let lock = std::fs::read_to_string(project.join("prose.lock")).expect("lock written");
    assert!(
        lock.contains("source = \"github:anthropic/skills@HEAD\""),
        "{lock}"
    );
    assert!(
        lock.contains("source = \"npm:@example/summarizer@latest\""),
        "{lock}"
    );
    assert!(lock.contains("version = \"1.0.0\""), "{lock}");

    // Another directory, every source gone: repositories, registry, cache, local skills.
    let elsewhere = w.dir("elsewhere");
    std::fs::copy(project.join("main.pbc"), elsewhere.join("app.pbc")).unwrap();
    for gone in [&w.github, &w.cache, &w.root.join("work"), &project] {
        std::fs::remove_dir_all(gone).unwrap();
    }
    npm.clear();
    let v = load(&elsewhere.join("app.pbc"));
    assert!(instructions(&v, "web-search").contains(WEB_SEARCH));
    assert!(instructions(&v, "summarizer").contains(SUMMARIZER));
    assert!(instructions(&v, "file-reader").contains(FILE_READER));
    let web = v.skill(0, "web-search").unwrap();
    assert_eq!(
        web.file("scripts/search.sh").map(|f| f.bytes.clone()),
        Some(b"#!/bin/sh\necho \"$1\"\n".to_vec())
    );
    assert!(
        web.file("README.md").is_none(),
        "only the skill's directory is carried"
    );
    assert!(
        web.origin
            .starts_with("https://github.com/anthropic/skills at "),
        "{}",
        web.origin
    );

    let out = w.prosec(&elsewhere, &["info", "app.pbc", "--format", "json"]);
    out.ok();
    let info: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
    let names: Vec<&str> = info["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web-search", "summarizer", "file-reader"]);
    assert_eq!(
        info["agents"][0]["skills"],
        serde_json::json!(["web-search", "summarizer"])
    );
}

#[test]
fn the_published_permissions_example_ships_its_skill() {
    let w = World::new("published-12");
    // github:anthropic/code-tools holds the skill as code-analyzer/ at its root.
    w.commit(
        "anthropic",
        "code-tools",
        &[(
            "code-analyzer/SKILL.md",
            &skill_md("code-analyzer", CODE_ANALYZER),
        )],
        None,
    );
    let project = w.dir("project");
    std::fs::write(
        project.join("secure.prose"),
        published("12-secure-agent-permissions.prose"),
    )
    .unwrap();
    w.prosec(&project, &["build", "secure.prose", "-o", "secure.pbc"])
        .ok();
    let elsewhere = w.dir("elsewhere");
    std::fs::copy(project.join("secure.pbc"), elsewhere.join("secure.pbc")).unwrap();
    for gone in [&w.github, &w.cache, &w.root.join("work"), &project] {
        std::fs::remove_dir_all(gone).unwrap();
    }
    let v = load(&elsewhere.join("secure.pbc"));
    assert!(instructions(&v, "code-analyzer").contains(CODE_ANALYZER));
    let out = w.prosec(&elsewhere, &["info", "secure.pbc", "--format", "json"]);
    out.ok();
    let info: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
    let reviewer = &info["agents"][0];
    assert_eq!(reviewer["name"], "code-reviewer");
    assert_eq!(reviewer["model"], "sonnet");
    assert_eq!(
        reviewer["permissions"],
        serde_json::json!([
            ["read", ["src/**/*.ts", "src/**/*.js", "*.md"]],
            ["write", []],
            ["bash", ["deny"]]
        ])
    );
    assert_eq!(info["cost"]["sessions"]["text"], "2");
}

#[test]
fn git_refs_resolve_and_stay_pinned() {
    let w = World::new("git-refs");
    let v1 = w.commit(
        "acme",
        "skills",
        &[("skills/notes/SKILL.md", &skill_md("notes", "version one"))],
        Some("v1"),
    );
    let v2 = w.commit(
        "acme",
        "skills",
        &[("skills/notes/SKILL.md", &skill_md("notes", "version two"))],
        None,
    );
    let p = w.dir("p");
    let program = |source: &str| {
        std::fs::write(
            p.join("main.prose"),
            format!("import \"notes\" from \"{source}\"\nagent a:\n  model: sonnet\n  skills: [\"notes\"]\nsession: a\n  prompt: \"go\"\n"),
        )
        .unwrap()
    };
    // The default branch, a tag, a commit.
    for (source, want, commit) in [
        ("github:acme/skills", "version two", &v2),
        ("github:acme/skills@v1", "version one", &v1),
        (&*format!("github:acme/skills@{v1}"), "version one", &v1),
        ("github:acme/skills@main", "version two", &v2),
    ] {
        program(source);
        w.prosec(&p, &["build", "main.prose"]).ok();
        assert!(
            instructions(&load(&p.join("main.pbc")), "notes").contains(want),
            "{source}"
        );
        let lock = std::fs::read_to_string(p.join("prose.lock")).unwrap();
        assert!(
            lock.contains(&format!("commit = \"{commit}\"")),
            "{source}: {lock}"
        );
    }
    // Upstream moves on: the pinned commit is still what a build uses.
    program("github:acme/skills");
    let v3 = w.commit(
        "acme",
        "skills",
        &[("skills/notes/SKILL.md", &skill_md("notes", "version three"))],
        None,
    );
    w.prosec(&p, &["build", "main.prose", "--locked"]).ok();
    assert!(instructions(&load(&p.join("main.pbc")), "notes").contains("version two"));
    // Deleting the pin takes the new head.
    std::fs::remove_file(p.join("prose.lock")).unwrap();
    w.prosec(&p, &["build", "main.prose"]).ok();
    assert!(instructions(&load(&p.join("main.pbc")), "notes").contains("version three"));
    assert!(std::fs::read_to_string(p.join("prose.lock"))
        .unwrap()
        .contains(&v3));

    // Errors name the import, the source and what is wrong, at the source string.
    program("github:acme/skills@v9");
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E150");
    assert!(
        err.contains("cannot import skill `notes` from \"github:acme/skills@v9\""),
        "{err}"
    );
    assert!(err.contains("has no branch, tag or commit `v9`"), "{err}");
    assert!(err.contains("main.prose:1:"), "{err}");
    assert!(err.contains("it has main, v1"), "{err}");
    program("github:acme/nothing");
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E149");
    assert!(err.contains("github.com/acme/nothing"), "{err}");
    std::fs::write(
        p.join("main.prose"),
        "import \"other\" from \"github:acme/skills/elsewhere\"\nsession \"go\"\n",
    )
    .unwrap();
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E149");
    assert!(err.contains("no skill `other`"), "{err}");
    assert!(
        err.contains("elsewhere/other/, skills/other/, other/"),
        "{err}"
    );
    // A new ref under --locked would change the lock.
    program("github:acme/skills@v1");
    let before = std::fs::read_to_string(p.join("prose.lock")).unwrap();
    let err = w
        .prosec(&p, &["build", "main.prose", "--locked"])
        .fails_with("E153");
    assert!(err.contains("--locked"), "{err}");
    assert_eq!(
        std::fs::read_to_string(p.join("prose.lock")).unwrap(),
        before
    );
}

#[test]
fn offline_builds_use_only_the_cache() {
    let mut w = World::new("offline");
    w.commit(
        "acme",
        "skills",
        &[("notes/SKILL.md", &skill_md("notes", "from git"))],
        None,
    );
    let npm = Server::start();
    npm.publish(
        "",
        "helper",
        &[(
            "2.1.0",
            tarball(&[("skills/helper/SKILL.md", &skill_md("helper", "from npm"))]),
        )],
        |_, t| integrity(t),
    );
    w.env.push(("npm_config_registry".into(), npm.url.clone()));
    let p = w.dir("p");
    std::fs::write(
        p.join("main.prose"),
        "import \"notes\" from \"github:acme/skills\"\nimport \"helper\" from \"npm:helper@^2\"\nagent a:\n  model: sonnet\n  skills: [\"notes\", \"helper\"]\nsession: a\n  prompt: \"go\"\n",
    )
    .unwrap();
    // Offline with nothing pinned: nothing can be had.
    let err = w
        .prosec(&p, &["build", "main.prose", "--offline"])
        .fails_with("E152");
    assert!(err.contains("--offline"), "{err}");
    // `prosec fetch` fills the cache and the lock; then the sources can go.
    let out = w.prosec(&p, &["fetch", "main.prose"]).ok();
    assert!(out.contains("fetched github:acme/skills@HEAD at "), "{out}");
    assert!(out.contains("fetched npm:helper@^2 as 2.1.0"), "{out}");
    std::fs::remove_dir_all(&w.github).unwrap();
    npm.clear();
    let requests = npm.paths().len();
    w.prosec(&p, &["build", "main.prose", "--offline", "--locked"])
        .ok();
    assert_eq!(
        npm.paths().len(),
        requests,
        "an offline build asked the registry"
    );
    let v = load(&p.join("main.pbc"));
    assert!(instructions(&v, "notes").contains("from git"));
    assert!(instructions(&v, "helper").contains("from npm"));
    // A cache elsewhere is empty: offline and not cached.
    w.env.push((
        "XDG_CACHE_HOME".into(),
        w.dir("other-cache").display().to_string(),
    ));
    let err = w
        .prosec(&p, &["build", "main.prose", "--offline"])
        .fails_with("E152");
    assert!(err.contains("not in the cache"), "{err}");
    // A tampered cache entry is not used.
    w.env.pop();
    let tgz = std::fs::read_dir(w.cache.join("prose/npm"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&tgz, b"tampered").unwrap();
    w.prosec(&p, &["build", "main.prose", "--offline"])
        .fails_with("E152");
}

#[test]
fn npm_tarballs_must_match_their_integrity() {
    let mut w = World::new("npm");
    let npm = Server::start();
    let good = tarball(&[("SKILL.md", &skill_md("helper", "the real one"))]);
    let other = tarball(&[("SKILL.md", &skill_md("helper", "something else"))]);
    npm.publish(
        "",
        "helper",
        &[
            ("1.0.0", good.clone()),
            ("1.4.0", good.clone()),
            ("2.0.0", good.clone()),
        ],
        |_, t| integrity(t),
    );
    // The document promises one tarball, the server sends another.
    let promised = tarball(&[("SKILL.md", &skill_md("helper", "what was promised"))]);
    npm.publish("", "liar", &[("1.0.0", other.clone())], |_, _| {
        integrity(&promised)
    });
    w.env.push(("npm_config_registry".into(), npm.url.clone()));
    let p = w.dir("p");
    let program = |source: &str| {
        std::fs::write(
            p.join("main.prose"),
            format!("import \"helper\" from \"{source}\"\nsession \"go\"\n"),
        )
        .unwrap()
    };
    program("npm:helper@^1");
    w.prosec(&p, &["build", "main.prose"]).ok();
    let lock = std::fs::read_to_string(p.join("prose.lock")).unwrap();
    assert!(lock.contains("version = \"1.4.0\""), "{lock}");
    assert!(
        lock.contains(&format!("integrity = \"{}\"", integrity(&good))),
        "{lock}"
    );
    program("npm:liar");
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E151");
    assert!(err.contains("does not match its integrity"), "{err}");
    program("npm:helper@^3");
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E150");
    assert!(err.contains("no version of `helper` matches `^3`"), "{err}");
    program("npm:absent");
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E149");
    assert!(err.contains("has no package `absent`"), "{err}");
    // A pinned tarball that changed upstream is refused too.
    program("npm:helper@^1");
    let _ = std::fs::remove_dir_all(w.cache.join("prose/npm"));
    npm.route("/helper/-/helper-1.4.0.tgz", other);
    w.prosec(&p, &["build", "main.prose"]).fails_with("E151");
}

#[test]
fn npm_follows_npmrc_scopes_and_tokens() {
    let w = World::new("npmrc");
    let public = Server::start();
    let private = Server::start();
    let tgz = tarball(&[("SKILL.md", &skill_md("secret-sauce", "private skill"))]);
    private.publish("/npm", "@acme/sauce", &[("1.0.0", tgz)], |_, t| {
        integrity(t)
    });
    let p = w.dir("p");
    let host = private.url.trim_start_matches("http://");
    std::fs::write(
        p.join(".npmrc"),
        format!(
            "registry={}/\n@acme:registry={}/npm/\n//{host}/npm/:_authToken=${{ACME_TOKEN}}\n",
            public.url, private.url
        ),
    )
    .unwrap();
    std::fs::write(
        p.join("main.prose"),
        "import \"secret-sauce\" from \"npm:@acme/sauce\"\nsession \"go\"\n",
    )
    .unwrap();
    let mut w = w;
    w.env.push(("ACME_TOKEN".into(), "t0ken".into()));
    w.prosec(&p, &["build", "main.prose"]).ok();
    assert!(
        public.paths().is_empty(),
        "the scoped package went to the default registry"
    );
    let log = private.log.lock().unwrap().clone();
    assert_eq!(log[0].0, "/npm/@acme%2fsauce");
    for (path, headers) in &log {
        assert!(
            headers.contains(&("authorization".into(), "Bearer t0ken".into())),
            "{path}: {headers:?}"
        );
    }
}

#[test]
fn registry_programs_are_fetched_and_pinned() {
    let mut w = World::new("registry");
    let reg = Server::start();
    reg.route(
        "/@alice/digest",
        b"input text: \"What to digest\"\noutput digest = session \"Digest {text}\"\n".to_vec(),
    );
    w.env.push(("PROSE_REGISTRY".into(), reg.url.clone()));
    let p = w.dir("p");
    std::fs::write(
        p.join("main.prose"),
        "use \"@alice/digest\"\nlet d = digest(text: \"a report\")\n",
    )
    .unwrap();
    w.prosec(&p, &["build", "main.prose"]).ok();
    let v = load(&p.join("main.pbc"));
    assert_eq!(v.modules[1].import_path, "@alice/digest");
    let lock = std::fs::read_to_string(p.join("prose.lock")).unwrap();
    assert!(lock.contains("source = \"@alice/digest\""), "{lock}");
    // The registry changes the program: the pin refuses it once the cache is gone.
    std::fs::remove_dir_all(&w.cache).unwrap();
    reg.route(
        "/@alice/digest",
        b"output digest = session \"Something else\"\n".to_vec(),
    );
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E151");
    assert!(err.contains("not the"), "{err}");
    std::fs::write(p.join("main.prose"), "use \"@alice/missing\"\n").unwrap();
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E138");
    assert!(err.contains("@alice/missing"), "{err}");
}

#[test]
fn a_skill_is_found_by_the_location_rule() {
    let w = World::new("location");
    let p = w.dir("p");
    let tree = p.join("tree");
    for (dir, name) in [("sub/a", "a"), ("skills/b", "b"), ("c", "c"), ("", "root")] {
        let d = tree.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("SKILL.md"), skill_md(name, &format!("skill {name}"))).unwrap();
    }
    let build = |name: &str, source: &str| {
        std::fs::write(
            p.join("main.prose"),
            format!("import \"{name}\" from \"{source}\"\nsession \"go\"\n"),
        )
        .unwrap();
        w.prosec(&p, &["build", "main.prose"])
    };
    for (name, source) in [
        ("b", "./tree"),
        ("c", "./tree"),
        ("root", "./tree"),
        ("a", "./tree/sub"),
    ] {
        build(name, source).ok();
        assert!(instructions(&load(&p.join("main.pbc")), name).contains(&format!("skill {name}")));
    }
    let err = build("zzz", "./tree").fails_with("E149");
    assert!(err.contains("names `root`"), "{err}");
    // Not bundleable: no front matter, a link.
    std::fs::create_dir_all(p.join("bad/plain")).unwrap();
    std::fs::write(p.join("bad/plain/SKILL.md"), "Just text.\n").unwrap();
    let err = build("plain", "./bad").fails_with("E154");
    assert!(err.contains("front matter"), "{err}");
    std::fs::create_dir_all(p.join("bad/linked")).unwrap();
    std::fs::write(p.join("bad/linked/SKILL.md"), skill_md("linked", "x")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", p.join("bad/linked/passwd")).unwrap();
        let err = build("linked", "./bad").fails_with("E154");
        assert!(err.contains("symbolic link"), "{err}");
    }
}

/// A local skill reached through a symbolic link anywhere below the importing program's
/// directory is refused as a link inside a skill is: otherwise the files of wherever the link
/// points (someone else's home directory, say) are bundled into the artifact.
#[cfg(unix)]
#[test]
fn a_link_on_the_way_to_a_local_skill_is_refused() {
    use std::os::unix::fs::symlink;
    let w = World::new("local-links");
    let p = w.dir("p");
    let outside = w.dir("outside");
    support::put(&outside, "secret/SKILL.md", &skill_md("secret", "OUTSIDE"));
    support::put(&outside, "secret/id_rsa", "PRIVATE KEY");
    support::put(
        &outside,
        "skills/secret/SKILL.md",
        &skill_md("secret", "OUTSIDE"),
    );
    let build = |source: &str| {
        std::fs::write(
            p.join("main.prose"),
            format!("import \"secret\" from \"{source}\"\nsession \"go\"\n"),
        )
        .unwrap();
        let _ = std::fs::remove_file(p.join("main.pbc"));
        w.prosec(&p, &["build", "main.prose"])
    };
    // The directory the source names is a link.
    symlink(outside.join("secret"), p.join("linked")).unwrap();
    let err = build("./linked").fails_with("E154");
    assert!(err.contains("`./linked` is a symbolic link"), "{err}");
    // A directory on the way to it is.
    std::fs::create_dir_all(p.join("vendor")).unwrap();
    symlink(&outside, p.join("vendor/deps")).unwrap();
    let err = build("./vendor/deps/secret").fails_with("E154");
    assert!(err.contains("`./vendor/deps` is a symbolic link"), "{err}");
    // A directory the location rule goes through inside the source's: `skills/`.
    std::fs::create_dir_all(p.join("tree")).unwrap();
    symlink(outside.join("skills"), p.join("tree/skills")).unwrap();
    let err = build("./tree").fails_with("E154");
    assert!(err.contains("`skills` is a symbolic link"), "{err}");
    // Or the skill's own directory.
    std::fs::create_dir_all(p.join("tree2")).unwrap();
    symlink(outside.join("secret"), p.join("tree2/secret")).unwrap();
    let err = build("./tree2").fails_with("E154");
    assert!(err.contains("`secret` is a symbolic link"), "{err}");
    assert!(!p.join("main.pbc").exists());
    // Links above the program's directory are the builder's business: a program reached
    // through one builds, and so does a real directory of skills beside it.
    support::put(&p, "real/secret/SKILL.md", &skill_md("secret", "INSIDE"));
    symlink(&p, w.dir("via").join("p")).unwrap();
    std::fs::write(
        p.join("main.prose"),
        "import \"secret\" from \"./real\"\nsession \"go\"\n",
    )
    .unwrap();
    w.prosec(&w.root.join("via/p"), &["build", "main.prose"])
        .ok();
    assert!(instructions(&load(&p.join("main.pbc")), "secret").contains("INSIDE"));
}

/// A `prose.lock` that is a symbolic link, even one to a file that does not exist, is not
/// read or written through: a build that pins a source would otherwise create or overwrite
/// the file the link names, wherever it is.
#[cfg(unix)]
#[test]
fn a_lock_that_is_a_link_is_refused_and_nothing_is_written_through_it() {
    let w = World::new("lock-link");
    w.commit(
        "acme",
        "skills",
        &[("skills/notes/SKILL.md", &skill_md("notes", "notes"))],
        None,
    );
    let p = w.dir("p");
    std::fs::write(
        p.join("main.prose"),
        "import \"notes\" from \"github:acme/skills\"\nsession \"go\"\n",
    )
    .unwrap();
    let target = w.dir("elsewhere").join("planted");
    std::os::unix::fs::symlink(&target, p.join("prose.lock")).unwrap();
    let err = w.prosec(&p, &["build", "main.prose"]).fails_with("E155");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!target.exists(), "the build wrote through the link");
    // With the link gone the build pins its source in a lock of its own.
    std::fs::remove_file(p.join("prose.lock")).unwrap();
    w.prosec(&p, &["build", "main.prose"]).ok();
    let lock = std::fs::symlink_metadata(p.join("prose.lock")).unwrap();
    assert!(lock.is_file());
}

#[test]
fn signatures_say_who_built_it_and_whether_it_changed() {
    let w = World::new("signing");
    let p = w.dir("p");
    std::fs::write(p.join("main.prose"), "session \"go\"\n").unwrap();
    let out = w
        .prosec(&p, &["keygen", "release", "--without-password"])
        .ok();
    assert!(
        out.contains("release.key") && out.contains("release.pub"),
        "{out}"
    );
    w.prosec(&p, &["keygen", "other", "-W"]).ok();
    assert!(w
        .prosec(&p, &["keygen", "release", "-W"])
        .stderr()
        .contains("--force"));
    let pubkey = std::fs::read_to_string(p.join("release.pub")).unwrap();
    assert!(
        pubkey.starts_with("untrusted comment: minisign public key"),
        "{pubkey}"
    );
    let out = w
        .prosec(&p, &["build", "main.prose", "--sign", "release.key"])
        .ok();
    assert!(out.contains("signed with key"), "{out}");
    // `info` gives exec's verdict and exit status: 0 only when a trusted key signed it.
    let verdict = |file: &str, key: &str| {
        let out = w.prosec(&p, &["info", file, "--trust", key, "--format", "json"]);
        let info: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
        let verdict = info["signature"]["verdict"].as_str().unwrap().to_string();
        let exit = if verdict == "trusted" { 0 } else { 2 };
        assert_eq!(out.code(), exit, "{file}: {info}");
        verdict
    };
    assert_eq!(verdict("main.pbc", "release.pub"), "trusted");
    assert_eq!(verdict("main.pbc", "other.pub"), "foreign");
    // Altered after signing: another prompt, the file framed anew with the old signature.
    let bytes = std::fs::read(p.join("main.pbc")).unwrap();
    let (_, sig) = bytecode_spec::artifact::split_signature(&bytes).unwrap();
    let (header, mut a) = bytecode_spec::artifact::read(&bytes).unwrap();
    for s in a.modules[0].strings.values_mut() {
        if s == "go" {
            *s = "delete everything".into();
        }
    }
    let forged = bytecode_spec::artifact::write(&a, &header).unwrap();
    let forged = bytecode_spec::artifact::with_signature(&forged, sig.unwrap()).unwrap();
    std::fs::write(p.join("altered.pbc"), &forged).unwrap();
    assert_eq!(verdict("altered.pbc", "release.pub"), "altered");
    w.prosec(&p, &["build", "main.prose", "-o", "plain.pbc"])
        .ok();
    assert_eq!(verdict("plain.pbc", "release.pub"), "unsigned");
    // A secret key without a password that others can read is refused before building.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            p.join("release.key"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let r = w.prosec(
            &p,
            &[
                "build",
                "main.prose",
                "--sign",
                "release.key",
                "-o",
                "x.pbc",
            ],
        );
        assert_eq!(r.code(), 2);
        assert!(r.stderr().contains("chmod 600"), "{}", r.stderr());
        assert!(!p.join("x.pbc").exists());
    }
}

#[test]
fn info_tells_a_host_what_it_needs_to_know() {
    let w = World::new("info");
    let p = w.dir("p");
    std::fs::create_dir_all(p.join("lib")).unwrap();
    std::fs::write(
        p.join("lib/digest.prose"),
        "input text: \"What to digest\"\noutput digest = session \"Digest {text}\"\n",
    )
    .unwrap();
    let main_source = "import \"style\" from \"./skills/style\"\nuse \"./lib/digest\"\ninput topic: \"The subject to research\"\nagent scout:\n  model: haiku\n  skills: [\"web-search\", \"files\", \"style\"]\n  permissions:\n    network: allow\nfor t in [\"a\", \"b\", \"c\"]:\n  session: scout\n    prompt: \"Research {topic} {t}\"\nlet d = digest(text: topic)\noutput report = session \"Write it up\"\n";
    std::fs::write(p.join("main.prose"), main_source).unwrap();
    // A bundled skill of two files, and an MCP server the host configures.
    let style_md = skill_md("style", "Write plainly.");
    let style_script = "#!/bin/sh\necho styled\n";
    std::fs::create_dir_all(p.join("skills/style/bin")).unwrap();
    std::fs::write(p.join("skills/style/SKILL.md"), &style_md).unwrap();
    std::fs::write(p.join("skills/style/bin/fmt.sh"), style_script).unwrap();
    std::fs::write(
        p.join("prose.toml"),
        "[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"@modelcontextprotocol/server-filesystem\", \".\"]\n",
    )
    .unwrap();
    w.prosec(&p, &["build", "main.prose"]).ok();
    let out = w.prosec(&p, &["info", "main.pbc", "--format", "json"]);
    out.ok();
    let info: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
    assert_eq!(info["program"], "main");
    assert_eq!(info["format"], bytecode_spec::artifact::FORMAT_VERSION);
    assert_eq!(
        info["inputs"],
        serde_json::json!([{"name": "topic", "description": "The subject to research", "parameter": true}])
    );
    assert_eq!(info["outputs"], serde_json::json!(["report"]));
    assert_eq!(info["agents"][0]["model"], "haiku");
    assert_eq!(
        info["agents"][0]["permissions"],
        serde_json::json!([["network", ["allow"]]])
    );
    assert_eq!(info["unbundled_skills"], serde_json::json!(["web-search"]));
    assert_eq!(info["mcp_servers"], serde_json::json!(["files"]));
    let sha =
        |bytes: &[u8]| bytecode_spec::bundle::hex(&<sha2::Sha256 as sha2::Digest>::digest(bytes));
    assert_eq!(info["source_sha256"], sha(main_source.as_bytes()));
    // The bundled skill: each file's size and hash, and one digest over them (each file's
    // name, a NUL, its hash in hex and a newline, in name order).
    assert_eq!(info["skills"][0]["name"], "style");
    assert_eq!(info["skills"][0]["source"], "./skills/style");
    assert_eq!(
        info["skills"][0]["files"],
        serde_json::json!([
            ["SKILL.md", style_md.len(), sha(style_md.as_bytes())],
            [
                "bin/fmt.sh",
                style_script.len(),
                sha(style_script.as_bytes())
            ],
        ])
    );
    let digest = format!(
        "SKILL.md\0{}\nbin/fmt.sh\0{}\n",
        sha(style_md.as_bytes()),
        sha(style_script.as_bytes())
    );
    assert_eq!(info["skills"][0]["sha256"], sha(digest.as_bytes()));
    assert_eq!(info["programs"][0]["import_path"], "./lib/digest");
    let src = std::fs::read(p.join("lib/digest.prose")).unwrap();
    assert_eq!(
        info["programs"][0]["sha256"],
        bytecode_spec::bundle::hex(&<sha2::Sha256 as sha2::Digest>::digest(&src))
    );
    // Three scout sessions, the digest's one, the write-up: five, as `prosec cost` says.
    assert_eq!(info["cost"]["sessions"]["text"], "5");
    let cost = w.prosec(&p, &["cost", "main.prose", "--format", "json"]);
    let cost: serde_json::Value = serde_json::from_str(&cost.stdout()).expect("json");
    assert_eq!(info["cost"]["cost_usd"], cost["cost_usd"]);
    assert_eq!(info["signature"]["signed"], false);
    assert_eq!(info["signature"]["key"], serde_json::Value::Null);
    let text = w.prosec(&p, &["info", "main.pbc"]).stdout();
    assert!(text.contains("topic: The subject to research"), "{text}");
    assert!(text.contains("sessions  5"), "{text}");
    assert!(
        text.contains(&format!("source    sha256 {}", sha(main_source.as_bytes()))),
        "{text}"
    );

    // Another host's prose.toml configures no such server: the name is left to that host.
    std::fs::write(p.join("bare.toml"), "").unwrap();
    let out = w.prosec(
        &p,
        &[
            "info",
            "main.pbc",
            "--config",
            "bare.toml",
            "--format",
            "json",
        ],
    );
    out.ok();
    let bare: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
    assert_eq!(bare["mcp_servers"], serde_json::json!([]));
    assert_eq!(
        bare["unbundled_skills"],
        serde_json::json!(["files", "web-search"])
    );

    // Signed: the key id is the one minisign writes in the public key's comment.
    w.prosec(&p, &["keygen", "release", "-W"]).ok();
    let pubkey = std::fs::read_to_string(p.join("release.pub")).unwrap();
    let key_id = pubkey
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("untrusted comment: minisign public key: "))
        .expect("minisign's comment names the key")
        .trim()
        .to_string();
    assert_eq!(key_id.len(), 16, "{pubkey}");
    w.prosec(
        &p,
        &[
            "build",
            "main.prose",
            "-o",
            "signed.pbc",
            "--sign",
            "release.key",
        ],
    )
    .ok();
    let out = w.prosec(&p, &["info", "signed.pbc", "--format", "json"]);
    out.ok();
    let signed: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
    assert_eq!(signed["signature"]["signed"], true);
    assert_eq!(signed["signature"]["key"], key_id.as_str());
    assert_eq!(signed["signature"]["verdict"], "not checked");
    assert_eq!(signed["source_sha256"], info["source_sha256"]);
    let out = w.prosec(
        &p,
        &[
            "info",
            "signed.pbc",
            "--trust",
            "release.pub",
            "--format",
            "json",
        ],
    );
    out.ok();
    let checked: serde_json::Value = serde_json::from_str(&out.stdout()).expect("json");
    assert_eq!(checked["signature"]["verdict"], "trusted");
    assert_eq!(checked["signature"]["key"], key_id.as_str());
    assert!(
        checked["signature"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&key_id)),
        "{checked}"
    );
    let text = w.prosec(&p, &["info", "signed.pbc"]).stdout();
    assert!(text.contains(&format!("signature key {key_id}")), "{text}");
}

#[test]
fn local_sources_are_relative_to_the_importing_file_wherever_the_build_runs() {
    let w = World::new("relative");
    let (a, cwd) = support::relative_layout(&w);

    let out = w.prosec(&cwd, &["build", "../../a/project/main.prose"]);
    out.ok();
    let pbc = a.join("project/main.pbc");
    let v = load(&pbc);
    assert!(instructions(&v, "notes").contains(NOTES));
    let helper = v
        .modules
        .iter()
        .position(|m| m.import_path == "./lib/helper")
        .expect("the module is carried");
    let tone = v
        .skill(helper, "tone")
        .expect("the module's skill is bundled")
        .skill_md()
        .expect("SKILL.md");
    assert!(tone.contains(TONE), "{tone}");
    assert!(
        v.skill(0, "tone").is_none(),
        "the module's import is its own"
    );
    assert!(!cwd.join("main.pbc").exists() && !cwd.join("prose.lock").exists());

    // Built to an output elsewhere, with an absolute path: the same.
    let abs = a.join("project/main.prose");
    w.prosec(
        &cwd,
        &["build", abs.to_str().expect("utf-8"), "-o", "here.pbc"],
    )
    .ok();
    let v = load(&cwd.join("here.pbc"));
    assert!(instructions(&v, "notes").contains(NOTES));

    // A source missing relative to the importer is an error there, naming the module.
    std::fs::remove_dir_all(a.join("project/lib/vendor")).unwrap();
    let err = w
        .prosec(&cwd, &["build", "../../a/project/main.prose"])
        .fails_with("E149");
    assert!(err.contains("helper.prose:1:"), "{err}");
    assert!(err.contains("./vendor/tone"), "{err}");
}
