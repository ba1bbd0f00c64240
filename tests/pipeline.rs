//! The toolchain end to end, as a user runs it: `prosec build` compiles a program with an
//! import to a `.pbc` artifact, and `prosevm exec` runs that artifact (verified first) in
//! each store (the file store, SQLite and PostgreSQL, required under `CI=true`); a program that does not compile never reaches the VM.

mod support;

#[test]
fn source_built_by_prosec_runs_in_prosevm_in_every_store() {
    let dir = support::scratch("pipeline");
    std::fs::write(
        dir.join("greet.prose"),
        "input who: \"whom to greet\"\noutput line = session \"Greet {who}\"\n",
    )
    .expect("import");
    std::fs::write(
        dir.join("main.prose"),
        "use \"./greet\" as greet\nlet g = greet(who: \"the tides\")\noutput r = session \"Sum up\"\n  context: g\n",
    )
    .expect("program");
    let (code, _, err) = support::output(support::command("prosec").current_dir(&dir).args([
        "build",
        "main.prose",
        "-o",
        "main.pbc",
    ]));
    assert_eq!(code, 0, "{err}");
    for kind in support::kinds("pipeline", &dir) {
        let store = kind.store;
        let (code, out, err) = support::output(
            support::command("prosevm")
                .current_dir(&dir)
                .args(["exec", "main.pbc", "--store", &store])
                .args(["--trace", "quiet", "--format", "json"]),
        );
        assert_eq!(code, 0, "{store}: {err}");
        let outputs = support::outputs(&out);
        assert!(
            outputs["r"].as_str().is_some_and(|r| r.contains("Sum up")),
            "{store}: {out}"
        );
    }
    // A program with an error is refused by the compiler, and no artifact is written.
    std::fs::write(dir.join("bad.prose"), "output r = session\n").expect("bad");
    let (code, _, err) = support::output(support::command("prosec").current_dir(&dir).args([
        "build",
        "bad.prose",
        "-o",
        "bad.pbc",
    ]));
    assert_eq!(code, 1, "{err}");
    assert!(!dir.join("bad.pbc").exists());
}
