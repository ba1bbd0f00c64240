//! Webhooks: a run names a URL the server allows (`--webhook-allow`), and a receiver on the
//! loopback address ([`Receiver`]) gets a POST as the run ends, signed with the server's
//! secret, tried again until it answers 2xx, each try under the delivery's id. A receiver
//! that fails twice takes exactly one delivery, also when the server is killed between the
//! tries (in every store); a run ended while no server ran is delivered at the next start; a
//! run that waits (for an input, or for an approval) is delivered as waiting, then as
//! finished; a delivery never accepted is given up once its time runs out; schedules name
//! webhooks too; and only the server's list lets a URL be named.

use super::gate::Gate;
use super::receiver::{Answer, Received, Receiver};
use super::{built, json, private_file, strs, support, Server};
use base64::Engine;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;
use std::path::Path;

/// One session answering a parameter.
const GREETS: &str =
    "# Greets someone.\ninput name: \"Who to greet\"\noutput reply = session \"Greet {name}\"\n";

/// The server's secret, as Standard Webhooks writes one, and its key.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The key [`SECRET`] stands for.
fn key() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .expect("base64")
}

/// The flags letting runs post to `receiver`'s `/hooks/`, signed with [`SECRET`] (written to
/// `dir`'s `secret`).
fn flags(dir: &Path, receiver: &Receiver) -> Vec<String> {
    private_file(&dir.join("secret"), &format!("{SECRET}\n"));
    vec![
        "--webhook-allow".into(),
        format!("{}/hooks/", receiver.base),
        "--webhook-secret-file".into(),
        "secret".into(),
    ]
}

/// Checks that `r` is signed by the server's secret as Standard Webhooks signs, its id that
/// of its body; returns the id.
fn verified(r: &Received) -> String {
    let id = r.header("webhook-id").to_string();
    let timestamp = r.header("webhook-timestamp");
    assert!(timestamp.parse::<i64>().is_ok(), "{timestamp:?}");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key()).expect("key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(&r.body);
    let want = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    assert_eq!(
        r.header("webhook-signature"),
        want,
        "the signature of {r:?}"
    );
    assert_eq!(r.json()["id"], id.as_str(), "the body names the delivery");
    assert_eq!(r.header("content-type"), "application/json");
    id
}

/// Starts a run of artifact `sha` with `inputs` naming the webhook `url`; returns its id.
fn start_hooked(server: &Server, sha: &str, inputs: Value, url: &str) -> String {
    let r = server
        .request(Method::POST, "/v1/runs")
        .json(&json!({"artifact": sha, "inputs": inputs, "webhook": url}))
        .send()
        .expect("POST");
    json(r, 201)["id"].as_str().expect("id").to_string()
}

/// Waits until the server says run `id`'s delivery `n` (from 0) is as `done` says; returns
/// the run's webhooks.
fn wait_delivery(server: &Server, id: &str, n: usize, done: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let hooks = server.get(&format!("/v1/runs/{id}/webhooks"));
        if hooks["deliveries"].get(n).is_some_and(&done) {
            return hooks;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "run {id}'s deliveries are {hooks}; the server said:\n{}",
            server.said()
        );
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
}

#[test]
fn a_receiver_failing_twice_gets_one_signed_delivery_and_only_allowed_urls_are_taken() {
    let dir = built("serve-webhook", GREETS);
    let receiver = Receiver::start(|n| Answer::Now(if n <= 2 { 500 } else { 200 }));
    let server = Server::start(&dir, &strs(&flags(&dir, &receiver)));
    let sha = server.upload(&dir);
    let url = format!("{}/hooks/runs?team=a", receiver.base);
    let id = start_hooked(&server, &sha, json!({"name": "Ada"}), &url);
    let got = receiver.wait_answered(3);
    assert_eq!(
        got.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 500, 200]
    );
    // Every try is the same delivery, signed, telling of the run's end.
    let ids: Vec<String> = got.iter().map(verified).collect();
    assert!(
        ids.iter().all(|i| *i == ids[0] && i.starts_with("dlv_")),
        "{ids:?}"
    );
    for r in &got {
        assert_eq!(r.path, "/hooks/runs?team=a");
        let body = r.json();
        assert_eq!(body["type"], "run.finished");
        assert_eq!(body["run"]["id"], id.as_str());
        assert_eq!(body["run"]["status"], "finished");
        assert_eq!(body["run"]["outputs"], json!({"reply": "[mock] Greet Ada"}));
    }
    let hooks = wait_delivery(&server, &id, 0, |d| d["state"] == "delivered");
    assert_eq!(hooks["webhook"], url.as_str());
    assert_eq!(hooks["deliveries"].as_array().map(Vec::len), Some(1));
    let d = &hooks["deliveries"][0];
    assert_eq!(
        (&d["id"], &d["attempts"]),
        (&Value::from(ids[0].clone()), &Value::from(3))
    );
    assert_eq!(d["payload"], got[2].json());

    // Only URLs under the list's entry are taken, for runs and schedules alike.
    for refused in [
        format!("{}/elsewhere", receiver.base),
        format!("{}/hooks-x/", receiver.base),
        "http://198.51.100.7/hooks/".to_string(),
        "file:///etc/passwd".to_string(),
    ] {
        for (path, body) in [
            (
                "/v1/runs",
                json!({"artifact": sha, "inputs": {"name": "x"}, "webhook": refused}),
            ),
            (
                "/v1/schedules",
                json!({"cron": "0 0 1 1 *", "artifact": sha, "inputs": {"name": "x"}, "webhook": refused}),
            ),
        ] {
            let r = server
                .request(Method::POST, path)
                .json(&body)
                .send()
                .expect("POST");
            let e = json(r, 422)["error"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(e.contains("webhook"), "{path} {refused}: {e}");
        }
    }
    // A server without a list takes no webhook.
    drop(server);
    let plain = Server::start(&dir, &[]);
    let r = plain
        .request(Method::POST, "/v1/runs")
        .json(&json!({"artifact": sha, "inputs": {"name": "x"}, "webhook": url}))
        .send()
        .expect("POST");
    assert!(json(r, 422)["error"]
        .as_str()
        .is_some_and(|e| e.contains("--webhook-allow")));
}

#[test]
fn a_delivery_outlives_a_kill_of_the_server_and_is_accepted_once_in_every_store() {
    let dir = built("serve-webhook-kill", GREETS);
    for kind in support::kinds("serve_webhook_kill", &dir) {
        let name = kind.name;
        // The second try is held until the server that made it is killed.
        let receiver = Receiver::start(|n| match n {
            1 => Answer::Now(500),
            2 => Answer::Held(500),
            _ => Answer::Now(200),
        });
        let mut args = vec!["--store".to_string(), kind.store.clone()];
        args.extend(flags(&dir, &receiver));
        let server = Server::start(&dir, &strs(&args));
        let sha = server.upload(&dir);
        let url = format!("{}/hooks/", receiver.base);
        let id = start_hooked(&server, &sha, json!({"name": "Bo"}), &url);
        receiver.wait_came(2);
        assert_eq!(server.signal(libc::SIGKILL), None, "{name}: killed");
        receiver.release();
        receiver.wait_answered(2);

        let server = Server::start(&dir, &strs(&args));
        let got = receiver.wait_answered(3);
        assert_eq!(
            got.iter().map(|r| r.status).collect::<Vec<_>>(),
            [500, 500, 200],
            "{name}"
        );
        let ids: Vec<String> = got.iter().map(verified).collect();
        assert!(ids.iter().all(|i| *i == ids[0]), "{name}: {ids:?}");
        let hooks = wait_delivery(&server, &id, 0, |d| d["state"] == "delivered");
        assert_eq!(
            hooks["deliveries"].as_array().map(Vec::len),
            Some(1),
            "{name}"
        );
        assert_eq!(hooks["deliveries"][0]["attempts"], 3, "{name}");

        // Nothing more of that delivery: the next one to come is another run's.
        let second = start_hooked(&server, &sha, json!({"name": "Cy"}), &url);
        let got = receiver.wait_answered(4);
        let next = verified(&got[3]);
        assert_ne!(next, ids[0], "{name}");
        assert_eq!(got[3].json()["run"]["id"], second.as_str(), "{name}");
        assert_eq!(
            receiver
                .received()
                .iter()
                .filter(|r| r.header("webhook-id") == ids[0])
                .count(),
            3,
            "{name}"
        );
        assert_eq!(
            receiver
                .received()
                .iter()
                .filter(|r| r.status == 200)
                .count(),
            2,
            "{name}: one accepted delivery per run"
        );
    }
}

#[test]
fn a_run_ended_while_no_server_ran_is_delivered_at_the_next_start() {
    let dir = built("serve-webhook-cli", GREETS);
    let receiver = Receiver::start(|_| Answer::Now(200));
    let gate = Gate::new(&dir, "gate");
    let mut args = flags(&dir, &receiver);
    args.extend(gate.flags());
    let server = Server::start(&dir, &strs(&args));
    let sha = server.upload(&dir);
    let id = start_hooked(
        &server,
        &sha,
        json!({"name": "Di"}),
        &format!("{}/hooks/", receiver.base),
    );
    // Killed while its one request is held; then finished by hand, on the CLI.
    gate.wait_asked(1);
    assert_eq!(server.signal(libc::SIGKILL), None);
    gate.open();
    let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
        "resume",
        &id,
        "--state-dir",
        "state",
        "--trace",
        "quiet",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(receiver.received().is_empty());
    let _server = Server::start(&dir, &strs(&args));
    let got = receiver.wait_answered(1);
    verified(&got[0]);
    let body = got[0].json();
    assert_eq!(
        (&body["type"], &body["run"]["id"]),
        (&Value::from("run.finished"), &Value::from(id))
    );
    assert_eq!(body["run"]["outputs"]["reply"], "re: Greet Di");
}

#[test]
fn a_waiting_run_is_delivered_as_waiting_then_as_finished() {
    let dir = built(
        "serve-webhook-waiting",
        "let draft = session \"Draft a note\"\ninput audience: \"Who reads it\"\noutput r = session \"Rewrite for {audience}\"\n  context: draft\n",
    );
    let receiver = Receiver::start(|_| Answer::Now(204));
    let server = Server::start(&dir, &strs(&flags(&dir, &receiver)));
    let sha = server.upload(&dir);
    let id = start_hooked(
        &server,
        &sha,
        json!({}),
        &format!("{}/hooks/", receiver.base),
    );
    let got = receiver.wait_answered(1);
    let waiting = got[0].json();
    assert_eq!(waiting["type"], "run.waiting");
    assert_eq!(
        waiting["run"]["waiting"],
        json!([{"name": "audience", "question": "Who reads it"}])
    );
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/input"))
        .json(&json!({"name": "audience", "value": "sailors"}))
        .send()
        .expect("POST");
    json(r, 202);
    let got = receiver.wait_answered(2);
    let finished = got[1].json();
    assert_eq!(finished["type"], "run.finished");
    assert_eq!(
        finished["run"]["outputs"],
        json!({"r": "[mock] Rewrite for sailors"})
    );
    assert_ne!(
        verified(&got[0]),
        verified(&got[1]),
        "two ends, two deliveries"
    );
}

#[test]
fn a_delivery_never_accepted_is_given_up_when_its_time_runs_out() {
    let dir = built("serve-webhook-give-up", GREETS);
    let receiver = Receiver::start(|_| Answer::Now(503));
    let mut args = flags(&dir, &receiver);
    args.extend(["--webhook-retry-for".to_string(), "1.5".to_string()]);
    let server = Server::start(&dir, &strs(&args));
    let sha = server.upload(&dir);
    let id = start_hooked(
        &server,
        &sha,
        json!({"name": "Ed"}),
        &format!("{}/hooks/", receiver.base),
    );
    let hooks = wait_delivery(&server, &id, 0, |d| d["state"] == "failed");
    let d = &hooks["deliveries"][0];
    let tries = d["attempts"].as_u64().expect("attempts");
    assert!((1..=2).contains(&tries), "{d}");
    assert!(
        d["last_error"].as_str().is_some_and(|e| e.contains("503")),
        "{d}"
    );
    assert!(d["done"].is_string() && d["next_attempt"].is_null(), "{d}");
    assert_eq!(receiver.wait_answered(tries as usize).len() as u64, tries);
    assert!(
        server.said().contains("gave up webhook delivery"),
        "{}",
        server.said()
    );
}

#[test]
fn a_schedule_names_a_webhook_for_each_run_it_starts() {
    let dir = built("serve-webhook-schedule", GREETS);
    let receiver = Receiver::start(|_| Answer::Now(200));
    let server = Server::start(&dir, &strs(&flags(&dir, &receiver)));
    let sha = server.upload(&dir);
    let url = format!("{}/hooks/scheduled", receiver.base);
    let r = server
        .request(Method::POST, "/v1/schedules")
        .json(&json!({"cron": "* * * * * *", "artifact": sha, "inputs": {"name": "Flo"}, "webhook": url}))
        .send()
        .expect("POST");
    let schedule = json(r, 201);
    assert_eq!(schedule["webhook"], url.as_str());
    let got = receiver.wait_answered(1);
    verified(&got[0]);
    assert_eq!(got[0].path, "/hooks/scheduled");
    let body = got[0].json();
    assert_eq!(body["type"], "run.finished");
    assert_eq!(body["run"]["inputs"], json!({"name": "Flo"}));
    let r = server
        .request(
            Method::DELETE,
            &format!("/v1/schedules/{}", schedule["id"].as_str().expect("id")),
        )
        .send()
        .expect("DELETE");
    assert_eq!(r.status().as_u16(), 204);
}

#[test]
fn webhook_flags_are_checked_at_start() {
    let dir = support::scratch("serve-webhook-flags");
    private_file(&dir.join("secret"), &format!("{SECRET}\n"));
    std::fs::write(dir.join("shared"), "a secret of some length\n").expect("secret");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("shared"), std::fs::Permissions::from_mode(0o644))
        .expect("mode");
    private_file(&dir.join("short"), "tiny\n");
    let allow = ["--webhook-allow", "https://hooks.example/prose"];
    for (flags, says) in [
        (&allow[..], "--webhook-allow needs --webhook-secret-file"),
        (
            &["--webhook-secret-file", "secret"][..],
            "no --webhook-allow",
        ),
        (
            &[
                "--webhook-allow",
                "https://hooks.example/?x=1",
                "--webhook-secret-file",
                "secret",
            ][..],
            "it has a query",
        ),
        (
            &[
                "--webhook-allow",
                "ftp://hooks.example/",
                "--webhook-secret-file",
                "secret",
            ][..],
            "not http or https",
        ),
        (
            &[allow[0], allow[1], "--webhook-secret-file", "shared"][..],
            "chmod 600",
        ),
        (
            &[allow[0], allow[1], "--webhook-secret-file", "short"][..],
            "fewer than the 16",
        ),
        (
            &[
                allow[0],
                allow[1],
                "--webhook-secret-file",
                "secret",
                "--webhook-retry-for",
                "0",
            ][..],
            "--webhook-retry-for 0",
        ),
    ] {
        let (code, _, err) = support::output(
            support::command("prosevm")
                .current_dir(&dir)
                .args(["serve", "--listen", "127.0.0.1:0", "--state-dir", "state"])
                .args(flags),
        );
        assert_eq!(code, 2, "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}

#[test]
fn a_run_waiting_for_an_approval_is_delivered_with_it_then_as_finished() {
    let dir = built(
        "serve-webhook-approval",
        "agent builder:\n  permissions:\n    bash: prompt\noutput r = session: builder\n  prompt: \"Ship it\"\n",
    );
    let script = json!([{"kind": "turn", "times": 1, "reply": {"tool_calls": [
        {"name": "bash", "arguments": {"command": "echo shipped >> effects.log"}}
    ]}}]);
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let receiver = Receiver::start(|_| Answer::Now(200));
    let mut args = flags(&dir, &receiver);
    args.extend(["--mock-script".to_string(), "script.json".to_string()]);
    let server = Server::start(&dir, &strs(&args));
    let sha = server.upload(&dir);
    let id = start_hooked(
        &server,
        &sha,
        json!({}),
        &format!("{}/hooks/", receiver.base),
    );
    let got = receiver.wait_answered(1);
    let waiting = got[0].json();
    assert_eq!(waiting["type"], "run.waiting");
    let approval = &waiting["run"]["approvals"][0];
    assert_eq!(
        (&approval["tool"], &approval["detail"]),
        (&json!("bash"), &json!("echo shipped >> effects.log")),
        "{waiting}"
    );
    let approval = approval["id"].as_str().expect("approval id");
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/approvals/{approval}"))
        .json(&json!({"approve": true}))
        .send()
        .expect("POST");
    json(r, 202);
    let got = receiver.wait_answered(2);
    let finished = got[1].json();
    assert_eq!(finished["type"], "run.finished");
    assert_eq!(finished["run"]["approvals"], json!([]));
    assert_ne!(verified(&got[0]), verified(&got[1]));
    assert_eq!(
        std::fs::read_to_string(dir.join("effects.log"))
            .ok()
            .as_deref(),
        Some("shipped\n")
    );
}
