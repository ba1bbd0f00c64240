//! The API over HTTP: upload → run → stream → outputs, listing by status and program a page
//! at a time, the OpenAPI document, bad uploads, uploads and runs under trusted keys, the
//! token, and bodies naming a driver or a key refused.

use super::{built, client, events, json, reference, support, Server, PROGRAM};
use reqwest::Method;
use serde_json::{json, Value};

#[test]
fn an_uploaded_artifact_runs_and_its_events_and_outputs_come_over_http() {
    let dir = built("serve-api", PROGRAM);
    let want = reference(&dir, &["topic=tides"]);
    let server = Server::start(&dir, &["--mock-latency", "20"]);
    assert_eq!(server.get("/healthz")["status"], "ok");

    let sha = server.upload(&dir);
    let bytes = std::fs::read(dir.join("prog.pbc")).expect("artifact");
    assert_eq!(sha, prose_runtime::program::sha256_hex(&bytes));
    // Uploading it again is no error.
    assert_eq!(server.upload(&dir), sha);

    let id = server.start_run(&sha, json!({"topic": "tides"}));
    // The stream starts at the first event and follows the run to its end.
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let all = events(r, |e| e.data["event"] == "end");
    assert_eq!(all[0].data["event"], "program_start", "{all:?}");
    let last = all.last().expect("events");
    assert_eq!(
        (&last.data["event"], &last.data["status"]),
        (&Value::from("end"), &Value::from("finished"))
    );
    for (n, e) in all.iter().enumerate() {
        assert_eq!(e.id.as_deref(), Some(n.to_string().as_str()), "{e:?}");
        assert_eq!(
            (&e.data["run"], &e.data["seq"]),
            (&Value::from(id.as_str()), &Value::from(n))
        );
    }
    let sessions = all.iter().filter(|e| e.data["event"] == "session").count();
    assert_eq!(sessions, 5, "{all:?}");

    let run = server.get(&format!("/v1/runs/{id}"));
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["outputs"], want);
    assert_eq!(run["inputs"], json!({"topic": "tides"}));
    assert_eq!(run["artifact"], sha.as_str());

    // Last-Event-ID resumes after the event it names.
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .header("Last-Event-ID", "2")
        .send()
        .expect("events");
    let tail = events(r, |_| false);
    assert_eq!(tail.len(), all.len() - 3);
    assert_eq!(tail[0].id.as_deref(), Some("3"));
    assert_eq!(tail[0].data, all[3].data);

    // Listed, filtered, paged.
    let second = server.start_run(&sha, json!({"topic": "reefs"}));
    server.wait_for(&second, |r| r["status"] == "finished");
    let page = server.get("/v1/runs");
    let ids: Vec<&str> = page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    // Newest first: ids sort by start time (to the second, then at random).
    let mut newest_first = vec![second.as_str(), id.as_str()];
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, newest_first);
    assert!(page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .all(|r| r["answered"] == 5));
    let first_page = server.get("/v1/runs?limit=1");
    assert_eq!(first_page["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(first_page["next"], newest_first[0]);
    let rest = server.get(&format!("/v1/runs?limit=1&before={}", newest_first[0]));
    assert_eq!(rest["runs"][0]["id"], newest_first[1]);
    assert_eq!(rest["next"], Value::Null);
    assert_eq!(server.get("/v1/runs?status=failed")["runs"], json!([]));
    assert_eq!(server.get("/v1/runs?program=nope")["runs"], json!([]));
    let r = server
        .request(Method::GET, "/v1/runs?status=done")
        .send()
        .expect("GET");
    assert!(json(r, 400)["error"]
        .as_str()
        .is_some_and(|e| e.contains("done")));

    // A finished run is not resumed, and one not running is not cancelled.
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/resume"))
        .send()
        .expect("POST");
    json(r, 409);
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/cancel"))
        .send()
        .expect("POST");
    json(r, 409);
    // A server without a token answers to loopback names only: no page of a name pointed
    // at this machine (DNS rebinding) reaches it.
    for host in ["evil.example", "evil.example:80"] {
        let r = server
            .request(Method::GET, "/v1/runs")
            .header("host", host)
            .send()
            .expect("GET");
        assert!(json(r, 403)["error"]
            .as_str()
            .is_some_and(|e| e.contains("localhost")));
    }
    let r = server
        .request(Method::GET, "/v1/runs/20990101-000000-nope00")
        .send()
        .expect("GET");
    json(r, 404);
    // Only run ids name runs: never a path the file store would also take.
    for path in [
        "state".to_string(),
        format!("..%2F..%2Fstate%2Fruns%2F{id}"),
        format!("{id}%2F"),
    ] {
        for (method, tail) in [
            (Method::GET, ""),
            (Method::POST, "/resume"),
            (Method::GET, "/events"),
        ] {
            let r = server
                .request(method.clone(), &format!("/v1/runs/{path}{tail}"))
                .send()
                .expect("send");
            assert_eq!(r.status().as_u16(), 400, "{method} {path}{tail}");
        }
    }
}

#[test]
fn the_openapi_document_describes_every_route_served() {
    let dir = built("serve-openapi", PROGRAM);
    let server = Server::start(&dir, &[]);
    let doc = server.get("/v1/openapi.json");
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
        "{doc}"
    );
    let paths = doc["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/healthz", "get"),
        ("/v1/artifacts", "put"),
        ("/v1/runs", "post"),
        ("/v1/runs", "get"),
        ("/v1/runs/{id}", "get"),
        ("/v1/runs/{id}/events", "get"),
        ("/v1/runs/{id}/cancel", "post"),
        ("/v1/runs/{id}/resume", "post"),
        ("/v1/runs/{id}/input", "post"),
        ("/v1/runs/{id}/report", "get"),
        ("/v1/schedules", "post"),
        ("/v1/schedules", "get"),
        ("/v1/schedules/{id}", "get"),
        ("/v1/schedules/{id}", "delete"),
        ("/v1/evals", "post"),
        ("/v1/evals", "get"),
        ("/v1/evals/{id}", "get"),
        ("/v1/evals/{id}/report", "get"),
        ("/v1/openapi.json", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is not in the document"
        );
    }
    // A real validator accepts it (every `$ref` resolves, the schema is OpenAPI 3.1's):
    // openapi-spec-validator from PyPI, which `.ci/run` installs. Required on CI.
    let file = dir.join("openapi.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    match std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .output()
    {
        Ok(out)
            if out.status.code() != Some(1)
                || !String::from_utf8_lossy(&out.stderr).contains("No module named") =>
        {
            assert!(
                out.status.success(),
                "openapi-spec-validator refuses the document: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "openapi-spec-validator is needed on CI (pip install openapi-spec-validator)"
            );
            eprintln!("openapi-spec-validator not installed: the document is not validated");
        }
    }
    // What the server serves is the document the repository keeps.
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json"),
        )
        .expect("docs/openapi.json"),
    )
    .expect("JSON");
    assert!(
        doc == kept,
        "docs/openapi.json is not what the server serves"
    );
}

#[test]
fn bad_uploads_unknown_artifacts_and_refused_inputs_are_4xx_with_the_reason() {
    let dir = built("serve-bad", PROGRAM);
    let server = Server::start(&dir, &[]);
    let r = server
        .request(Method::PUT, "/v1/artifacts")
        .body("not an artifact at all")
        .send()
        .expect("PUT");
    let e = json(r, 422);
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("not a valid artifact: ")),
        "{e}"
    );
    // A large body is read whole (up to 64 MiB) and judged by the verifier.
    let r = server
        .request(Method::PUT, "/v1/artifacts")
        .body(vec![0u8; 3 << 20])
        .send()
        .expect("PUT");
    json(r, 422);
    // A real artifact, cut short.
    let mut bytes = std::fs::read(dir.join("prog.pbc")).expect("artifact");
    bytes.truncate(bytes.len() / 2);
    let r = server
        .request(Method::PUT, "/v1/artifacts")
        .body(bytes)
        .send()
        .expect("PUT");
    json(r, 422);
    let r = server
        .request(Method::POST, "/v1/runs")
        .json(&json!({"artifact": "ab".repeat(32), "inputs": {}}))
        .send()
        .expect("POST");
    assert!(json(r, 404)["error"]
        .as_str()
        .is_some_and(|e| e.contains("PUT /v1/artifacts")));
    let r = server
        .request(Method::POST, "/v1/runs")
        .json(&json!({"artifact": "../../etc/passwd"}))
        .send()
        .expect("POST");
    json(r, 404);
    // The program needs its input.
    let sha = server.upload(&dir);
    let r = server
        .request(Method::POST, "/v1/runs")
        .json(&json!({"artifact": sha, "inputs": {}}))
        .send()
        .expect("POST");
    let e = json(r, 422);
    assert!(
        e["error"].as_str().is_some_and(|e| e.contains("topic")
            && e.contains("`inputs`")
            && !e.contains("--input")),
        "an HTTP client is told what an HTTP client can do: {e}"
    );
    let r = server
        .request(Method::POST, "/v1/runs")
        .body("{not json")
        .header("content-type", "application/json")
        .send()
        .expect("POST");
    assert!(json(r, 400)["error"].is_string());
    // Query parameters and run ids that do not read are refused the same way, in JSON.
    let r = server
        .request(Method::GET, "/v1/runs?limit=abc")
        .send()
        .expect("GET");
    assert!(json(r, 400)["error"]
        .as_str()
        .is_some_and(|e| e.contains("limit")));
    for path in ["/v1/runs/..%2F..%2Fetc", "/v1/runs/not-a-run/events"] {
        let r = server.request(Method::GET, path).send().expect("GET");
        assert!(
            json(r, 400)["error"]
                .as_str()
                .is_some_and(|e| e.contains("is not a run id")),
            "{path}"
        );
    }
    // A route the API does not have, or a method a route does not take: the same
    // `{"error"}` body as every failure.
    let r = server
        .request(Method::GET, "/v1/nothing")
        .send()
        .expect("GET");
    assert!(json(r, 404)["error"]
        .as_str()
        .is_some_and(|e| e.contains("/v1/nothing")));
    let r = server
        .request(Method::DELETE, "/v1/runs")
        .send()
        .expect("DELETE");
    assert!(json(r, 405)["error"].is_string());
    // Nothing was started by any of it.
    assert_eq!(server.get("/v1/runs")["runs"], json!([]));
}

#[test]
fn with_a_token_every_v1_request_needs_it_and_an_open_address_needs_one() {
    let dir = built("serve-token", PROGRAM);
    let server = Server::start_with(&dir, &[], Some("correct horse battery staple"));
    let url = |p: &str| format!("{}{p}", server.base);
    for (method, path) in [
        (Method::GET, "/v1/runs"),
        (Method::PUT, "/v1/artifacts"),
        (Method::POST, "/v1/runs"),
        (Method::GET, "/v1/openapi.json"),
        (Method::GET, "/v1/runs/x/events"),
    ] {
        let r = client()
            .request(method.clone(), url(path))
            .send()
            .expect("send");
        assert_eq!(r.status().as_u16(), 401, "{method} {path}");
        assert_eq!(
            r.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
        let r = client()
            .request(method.clone(), url(path))
            .bearer_auth("correct horse battery stapl")
            .send()
            .expect("send");
        assert_eq!(r.status().as_u16(), 401, "{method} {path}");
    }
    // The token opens the API; health needs none.
    assert_eq!(server.get("/v1/runs")["runs"], json!([]));
    let r = client().get(url("/healthz")).send().expect("GET");
    assert_eq!(r.status().as_u16(), 200);

    // Listening beyond the loopback address without a token is refused at start.
    let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("without a token"), "{err}");
    // Inputs come with each run, and no host sits on a server's stdin.
    for (flags, says) in [
        (["--input", "topic=x"], "has no use for --input"),
        (["--driver", "stdio"], "no host on its stdin"),
    ] {
        let (code, _, err) = support::output(
            support::command("prosevm")
                .current_dir(&dir)
                .args(["serve", "--listen", "127.0.0.1:0"])
                .args(flags),
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
    }
    // An empty token file is no token.
    crate::private_file(&dir.join("empty"), "\n");
    let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        "empty",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no token"), "{err}");
    // A token that can be guessed, or a file others can read, is refused at start.
    crate::private_file(&dir.join("short"), "x\n");
    std::fs::write(dir.join("shared"), "correct horse battery staple\n").expect("file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("shared"), std::fs::Permissions::from_mode(0o644))
            .expect("mode");
    }
    for (file, says) in [("short", "fewer than the 16"), ("shared", "chmod 600")] {
        let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            file,
        ]));
        assert_eq!(code, 2, "{file}: {err}");
        assert!(err.contains(says), "{file}: {err}");
    }
}

#[test]
fn requests_a_web_page_elsewhere_could_make_are_refused() {
    // A browser on this machine visiting a hostile page: a form posted to the server, or a
    // fetch without CORS, carries another origin or a form's content type.
    let dir = built("serve-cross-site", PROGRAM);
    let server = Server::start(&dir, &[]);
    let sha = server.upload(&dir);
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    server.wait_for(&id, |r| r["status"] == "finished");
    for path in [
        format!("/v1/runs/{id}/cancel"),
        format!("/v1/runs/{id}/resume"),
    ] {
        for (origin, kind, status) in [
            (
                Some("http://evil.example"),
                "application/x-www-form-urlencoded",
                403,
            ),
            (Some("http://evil.example"), "application/json", 403),
            (None, "application/x-www-form-urlencoded", 415),
            (None, "text/plain", 415),
            (None, "multipart/form-data; boundary=x", 415),
        ] {
            let mut r = server
                .request(Method::POST, &path)
                .header("content-type", kind)
                .body("a=b");
            if let Some(o) = origin {
                r = r.header("origin", o);
            }
            let e = json(r.send().expect("POST"), status);
            assert!(e["error"].is_string(), "{path} {origin:?} {kind}: {e}");
        }
        // Marked cross-site by the browser, without an Origin.
        let r = server
            .request(Method::POST, &path)
            .header("sec-fetch-site", "cross-site")
            .send()
            .expect("POST");
        json(r, 403);
    }
    // The server's own origin passes (as its page's requests do).
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/resume"))
        .header("origin", server.base.clone())
        .send()
        .expect("POST");
    assert_ne!(r.status().as_u16(), 403);
    assert_ne!(r.status().as_u16(), 415);
    // The report is a page of its own: it carries the page's guards.
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/report"))
        .send()
        .expect("GET");
    assert_eq!(r.status().as_u16(), 200);
    let csp = r
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(
        r.headers()
            .get("x-content-type-options")
            .and_then(|v| v.to_str().ok()),
        Some("nosniff")
    );
}

/// `prosec ARGS` in `dir`, expected to succeed.
fn prosec(dir: &std::path::Path, args: &[&str]) {
    let (code, _, err) = support::output(support::command("prosec").current_dir(dir).args(args));
    assert_eq!(code, 0, "prosec {args:?}: {err}");
}

#[test]
fn with_trusted_keys_an_upload_must_be_signed_by_one_and_so_must_a_run() {
    let dir = built("serve-trust", PROGRAM);
    for key in ["release", "other"] {
        prosec(&dir, &["keygen", key, "-W"]);
    }
    prosec(
        &dir,
        &[
            "build",
            "prog.prose",
            "-o",
            "signed.pbc",
            "--sign",
            "release.key",
        ],
    );
    prosec(
        &dir,
        &[
            "build",
            "prog.prose",
            "-o",
            "foreign.pbc",
            "--sign",
            "other.key",
        ],
    );
    let signed = std::fs::read(dir.join("signed.pbc")).expect("artifact");
    let mut altered = signed.clone();
    // A byte of the signed body (the source hash, in the header).
    altered[30] ^= 0x20;

    // A server that trusts nothing keeps the unsigned artifact.
    let server = Server::start(&dir, &[]);
    let unsigned = server.upload(&dir);
    drop(server);

    let server = Server::start(&dir, &["--trust", "release.pub"]);
    let put = |bytes: Vec<u8>| {
        server
            .request(Method::PUT, "/v1/artifacts")
            .body(bytes)
            .send()
            .expect("PUT")
    };
    for (what, bytes, why) in [
        (
            "unsigned",
            std::fs::read(dir.join("prog.pbc")).expect("artifact"),
            "the artifact is not signed",
        ),
        (
            "foreign",
            std::fs::read(dir.join("foreign.pbc")).expect("artifact"),
            "which is not trusted",
        ),
        ("altered", altered, "was altered after key"),
    ] {
        let e = json(put(bytes), 403);
        assert!(
            e["error"].as_str().is_some_and(|e| e.contains(why)),
            "{what}: {e}"
        );
    }
    // Nothing refused was kept: only the signed one is there to run.
    let kept = |sha: &str| {
        dir.join("state/serve/artifacts")
            .join(format!("{sha}.pbc"))
            .exists()
    };
    for name in ["foreign.pbc", "prog.pbc"] {
        let bytes = std::fs::read(dir.join(name)).expect("artifact");
        let sha = prose_runtime::program::sha256_hex(&bytes);
        assert_eq!(kept(&sha), name == "prog.pbc", "{name}");
    }
    let sha = json(put(signed), 201)["sha256"]
        .as_str()
        .expect("sha256")
        .to_string();
    assert!(kept(&sha));

    // The unsigned artifact an earlier server kept is in the library, but no run of it
    // starts here.
    let r = server
        .request(Method::POST, "/v1/runs")
        .json(&json!({"artifact": unsigned, "inputs": {"topic": "tides"}}))
        .send()
        .expect("POST");
    let e = json(r, 403);
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused to run") && e.contains("not signed")),
        "{e}"
    );
    assert_eq!(server.get("/v1/runs")["runs"], json!([]));
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    server.wait_for(&id, |r| r["status"] == "finished");
}

/// The ids of a page of runs.
fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

#[test]
fn runs_are_listed_by_status_and_program_a_page_at_a_time() {
    // Two programs: `prog` finishes, `asks` waits for a person.
    let dir = built("serve-filters", PROGRAM);
    std::fs::write(
        dir.join("asks.prose"),
        "let draft = session \"Draft a note\"\ninput audience: \"Who reads it\"\noutput r = session \"Rewrite for {audience}\"\n  context: draft\n",
    )
    .expect("program");
    prosec(&dir, &["build", "asks.prose", "-o", "asks.pbc"]);
    let server = Server::start(&dir, &[]);
    let prog = server.upload(&dir);
    let asks = server.upload_file(&dir.join("asks.pbc"));
    let mut finished: Vec<String> = ["tides", "reefs", "kelp"]
        .iter()
        .map(|t| {
            let id = server.start_run(&prog, json!({"topic": t}));
            server.wait_for(&id, |r| r["status"] == "finished");
            id
        })
        .collect();
    let waiting = server.start_run(&asks, json!({}));
    server.wait_for(&waiting, |r| r["status"] == "waiting");
    // Newest first: ids sort by start time (to the second, then at random).
    finished.sort_unstable_by(|a, b| b.cmp(a));
    let just_waiting = vec![waiting.clone()];

    assert_eq!(ids(&server.get("/v1/runs?status=finished")), finished);
    assert_eq!(ids(&server.get("/v1/runs?status=waiting")), just_waiting);
    for status in ["running", "failed", "interrupted", "paused", "queued"] {
        assert_eq!(
            ids(&server.get(&format!("/v1/runs?status={status}"))),
            Vec::<String>::new(),
            "{status}"
        );
    }
    let listed = server.get("/v1/runs?status=waiting");
    assert_eq!(
        (&listed["runs"][0]["program"], &listed["runs"][0]["status"]),
        (&Value::from("asks"), &Value::from("waiting"))
    );
    assert_eq!(ids(&server.get("/v1/runs?program=prog")), finished);
    assert_eq!(ids(&server.get("/v1/runs?program=asks")), just_waiting);
    assert_eq!(
        ids(&server.get("/v1/runs?program=asks&status=waiting")),
        just_waiting
    );
    assert_eq!(
        ids(&server.get("/v1/runs?program=prog&status=waiting")),
        Vec::<String>::new()
    );

    // Pages under a filter: each page's `next` leads to the next, to the last.
    let first = server.get("/v1/runs?program=prog&limit=2");
    assert_eq!(ids(&first), finished[..2].to_vec());
    assert_eq!(first["next"], finished[1].as_str());
    let second = server.get(&format!(
        "/v1/runs?program=prog&limit=2&before={}",
        finished[1]
    ));
    assert_eq!(ids(&second), finished[2..].to_vec());
    assert_eq!(second["next"], Value::Null);
    let mut walked = Vec::new();
    let mut path = "/v1/runs?status=finished&limit=1".to_string();
    loop {
        let page = server.get(&path);
        walked.extend(ids(&page));
        match page["next"].as_str() {
            Some(next) => path = format!("/v1/runs?status=finished&limit=1&before={next}"),
            None => break,
        }
    }
    assert_eq!(walked, finished);
    // A page of none is a page of one; all runs together, when no filter holds them back.
    assert_eq!(ids(&server.get("/v1/runs?limit=0")).len(), 1);
    let mut all = finished.clone();
    all.push(waiting.clone());
    all.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids(&server.get("/v1/runs")), all);
}

#[test]
fn a_client_cannot_choose_the_driver_its_key_or_its_address() {
    let dir = built("serve-no-keys", PROGRAM);
    let server = Server::start(
        &dir,
        &["--driver", "command", "--command", "echo from the server"],
    );
    let sha = server.upload(&dir);
    // A provider a client would point the run at: it must never be asked.
    let (elsewhere, seen) = super::provider::provider(vec![super::provider::ok("from the client")]);
    for (field, value) in [
        ("driver", json!("openai")),
        ("api_key", json!("sk-client")),
        ("base_url", json!(elsewhere)),
        ("model", json!("gpt-client")),
        ("command", json!("echo from the client")),
    ] {
        let mut body = json!({"artifact": sha, "inputs": {"topic": "tides"}});
        body[field] = value;
        let r = server
            .request(Method::POST, "/v1/runs")
            .json(&body)
            .send()
            .expect("POST");
        let e = json(r, 422);
        assert!(
            e["error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("unknown field `{field}`"))),
            "{field}: {e}"
        );
        // Schedules start runs too.
        let mut body = json!({"cron": "0 0 1 1 *", "artifact": sha, "inputs": {"topic": "tides"}});
        body[field] = json!("x");
        let r = server
            .request(Method::POST, "/v1/schedules")
            .json(&body)
            .send()
            .expect("POST");
        json(r, 422);
    }
    assert_eq!(server.get("/v1/runs")["runs"], json!([]));
    assert_eq!(server.get("/v1/schedules")["schedules"], json!([]));
    // Other bodies the API refuses are its errors too.
    let r = server
        .request(Method::POST, "/v1/runs")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .expect("POST");
    let e = json(r, 400);
    assert!(e["error"].as_str().is_some_and(|e| !e.is_empty()), "{e}");

    // The server's own driver answers.
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"]["r"], "from the server");
    assert!(seen.lock().expect("seen").is_empty());
}

#[test]
fn an_eval_started_over_http_runs_on_and_is_listed_shown_and_reported() {
    let dir = built("serve-evals", PROGRAM);
    let server = Server::start(&dir, &[]);
    let sha = server.upload(&dir);
    let rows: Vec<Value> = ["tides", "waves", "reefs"]
        .iter()
        .map(|t| json!({"inputs": {"topic": t}, "expected": {"topic": t}}))
        .collect();
    // Checks and judges that name what the program lacks are refused before anything runs.
    let r = server
        .request(Method::POST, "/v1/evals")
        .json(&json!({"artifact": sha, "rows": rows, "judges": [{"name": "j", "output": "nothing", "rubric": "r"}]}))
        .send()
        .expect("POST");
    assert!(json(r, 422)["error"]
        .as_str()
        .is_some_and(|e| e.contains("`nothing`")));
    let r = server
        .request(Method::POST, "/v1/evals")
        .json(&json!({"artifact": sha, "rows": [{"inputs": {"topik": "x"}}]}))
        .send()
        .expect("POST");
    assert!(json(r, 422)["error"]
        .as_str()
        .is_some_and(|e| e.contains("`topik`")));
    // A real one: a check of every row, and a judge.
    let r = server
        .request(Method::POST, "/v1/evals")
        .json(&json!({
            "artifact": sha,
            "rows": rows,
            "expect": {"outputs": {"r": {"contains": "Step five"}}},
            "judges": [{"name": "brief", "output": "r", "rubric": "About {expected.topic}, short: 5; long: 1."}],
        }))
        .send()
        .expect("POST");
    let id = json(r, 201)["id"].as_str().expect("id").to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let eval = loop {
        let e = server.get(&format!("/v1/evals/{id}"));
        if e["finished"].is_string() {
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the eval did not end: {e}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let results = eval["variants"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert!(
        results
            .iter()
            .all(|r| r["scored"] == true && r["run"].is_string()),
        "{eval}"
    );
    assert_eq!(
        eval["summaries"][0]["summary"]["scores"][1][0], "output r",
        "{eval}"
    );
    let listed = server.get("/v1/evals");
    assert!(
        listed["evals"]
            .as_array()
            .is_some_and(|l| l.iter().any(|e| e["id"] == id.as_str())),
        "{listed}"
    );
    let r = server
        .request(Method::GET, &format!("/v1/evals/{id}/report"))
        .send()
        .expect("GET");
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers().get("content-security-policy").is_some());
    let page = r.text().expect("page");
    assert_eq!(page.matches("<tr class=\"row\">").count(), 3);
    // Its runs are the server's like any other.
    let runs = server.get("/v1/runs");
    assert!(
        runs["runs"].as_array().is_some_and(|r| r.len() >= 6),
        "rows and judges: {runs}"
    );
}
