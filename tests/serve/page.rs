//! The web page in a real headless Chromium: opened once with `?token=`, it keeps the token
//! in a cookie scripts cannot read and lists the runs; a run's view follows it live (its
//! report's cards appear as the run asks, without a reload), shows parallel branches side by
//! side, answers the input a run waits for through its form, and cancels and resumes; and
//! nothing goes to the console.
//!
//! The runs are answered by a driver the test holds back ([`Gate`]): a run the page follows
//! gets its answers one at a time, each once the page showed the one before, and the run
//! cancelled from the page cannot end before the button is clicked.

use super::browser::{chromium, Browser};
use super::gate::Gate;
use super::{built, client, strs, Server, PROGRAM};
use serde_json::{json, Value};

const ASKS: &str = "let draft = session \"Draft a note\"
input audience: \"Who reads it\"
output r = session \"Rewrite for {audience}\"
  context: draft
";

/// Three sessions at once, then one joining them.
const FANOUT: &str = "parallel:
  a = session \"One\"
  b = session \"Two\"
  c = session \"Three\"
output r = session \"Join\"
  context: { a, b, c }
";

/// The run view's status, how many request cards its report shows, and how many of them
/// are answered.
const PROGRESS: &str = "JSON.stringify([document.getElementById('run-status').dataset.status, document.getElementById('report').dataset.cards, document.querySelectorAll('#report .card[data-state=answered]').length])";

fn status_is(status: &str) -> String {
    format!("document.getElementById('run-status').dataset.status === '{status}'")
}

#[test]
fn the_page_lists_runs_and_follows_answers_and_steers_a_live_run_without_console_errors() {
    let Some(chromium) = chromium() else { return };
    let dir = built("serve-page", PROGRAM);
    let asks = built("serve-page-asks", ASKS);
    std::fs::copy(asks.join("prog.pbc"), dir.join("asks.pbc")).expect("copy");
    let gate = Gate::opened(&dir, "gate");
    let server = Server::start_with(&dir, &strs(&gate.flags()), Some("page+token with a plus"));
    let sha = server.upload(&dir);
    let first = server.start_run(&sha, json!({"topic": "tides"}));

    // Without the token, no page.
    let r = client()
        .get(format!("{}/", server.base))
        .send()
        .expect("GET");
    assert_eq!(r.status().as_u16(), 401);

    let mut b = Browser::start(&chromium, &dir.join("profile"));
    // Pasted as it is in the file: the `+` is the token's, not a form's space.
    b.open(&format!(
        "{}/?token=page+token%20with%20a%20plus",
        server.base
    ));
    b.wait_until(
        "document.documentElement.dataset.ready === 'true' && document.querySelectorAll('#runs tbody tr').length === 1",
        "document.querySelectorAll('#runs tbody tr').length",
    );
    assert_eq!(
        b.eval("location.pathname + location.search"),
        json!("/"),
        "the token left the address"
    );
    assert_eq!(
        b.eval("document.cookie"),
        json!(""),
        "the cookie is HttpOnly"
    );
    assert_eq!(
        b.eval("document.querySelector('#runs tbody tr').dataset.id"),
        json!(first)
    );

    // A run started now, followed live from its view: its cards appear one by one, each
    // answer let through once the page shows the one before.
    server.wait_for(&first, |r| r["status"] == "finished");
    gate.close();
    let before = gate.asked().len();
    let second = server.start_run(&sha, json!({"topic": "reefs"}));
    b.eval(&format!(
        "location.hash = '#/runs/{second}'; window.stayed = 1; true"
    ));
    for n in 1..=4 {
        gate.let_through_next(before + n - 1, 1);
        b.wait_until(
            &format!(
                "{} && document.querySelectorAll('#report .card[data-state=answered]').length === {n}",
                status_is("running")
            ),
            PROGRESS,
        );
    }
    gate.let_through_next(before + 4, 1);
    b.wait_until(
        &format!(
            "{} && document.querySelectorAll('#report .card[data-state=answered]').length === 5",
            status_is("finished")
        ),
        PROGRESS,
    );
    assert_eq!(b.eval("window.stayed"), json!(1), "the page was reloaded");
    gate.open();
    let out = b.eval("document.querySelector('#run-outputs dd').textContent");
    assert!(
        out.as_str().is_some_and(|o| o.contains("Step five")),
        "{out}"
    );
    assert_eq!(
        b.eval("document.querySelector('#event-list li:last-child').dataset.event"),
        json!("end")
    );
    assert!(
        b.eval("document.querySelectorAll('#event-list li').length")
            .as_u64()
            > Some(10)
    );
    // The report's content: every session with its prompt, in lanes.
    assert_eq!(
        b.eval("document.querySelectorAll('#report .request.k-session').length"),
        json!(5)
    );
    // Each card in full: the prompt, what it was given as context, and the answer.
    let report = b.eval("document.getElementById('report').textContent");
    let report = report.as_str().expect("text");
    for want in [
        "Step one about reefs",
        "re: Step one about reefs",
        "Step two",
        "re: Step two",
        "re: Step five",
    ] {
        assert!(report.contains(want), "{want} not in the report: {report}");
    }
    let shot = b.screenshot();
    std::fs::write(dir.join("page.png"), &shot).expect("screenshot");
    if let Some(path) = std::env::var_os("PROSE_SCREENSHOT") {
        std::fs::write(path, &shot).expect("screenshot");
    }

    // Parallel branches side by side: a lane each, their sessions on one row.
    let fanout = built("serve-page-fanout", FANOUT);
    let bytes = std::fs::read(fanout.join("prog.pbc")).expect("artifact");
    let r = server
        .request(reqwest::Method::PUT, "/v1/artifacts")
        .body(bytes)
        .send()
        .expect("PUT");
    let fanout_sha = super::json(r, 201)["sha256"]
        .as_str()
        .expect("sha")
        .to_string();
    let parallel = server.start_run(&fanout_sha, json!({}));
    b.eval(&format!("location.hash = '#/runs/{parallel}'; true"));
    b.wait_until(
        &format!(
            "{} && document.getElementById('report').dataset.cards === '4'",
            status_is("finished")
        ),
        PROGRESS,
    );
    let places = b.eval(
        "Array.prototype.map.call(document.querySelectorAll('#report .card.k-session'), function (c) { return [c.style.gridColumnStart, c.style.gridRowStart]; })",
    );
    let places = places.as_array().expect("cards").clone();
    assert_eq!(places.len(), 4, "{places:?}");
    let branches: Vec<&Value> = places.iter().take(3).collect();
    let mut columns: Vec<String> = branches.iter().map(|p| p[0].to_string()).collect();
    columns.sort();
    columns.dedup();
    assert_eq!(columns.len(), 3, "the branches share a lane: {places:?}");
    assert!(
        branches.iter().all(|p| p[1] == branches[0][1]),
        "the branches are not side by side: {places:?}"
    );

    // A run waiting for a person: its form takes the answer, and the run goes on.
    let bytes = std::fs::read(dir.join("asks.pbc")).expect("artifact");
    let r = server
        .request(reqwest::Method::PUT, "/v1/artifacts")
        .body(bytes)
        .send()
        .expect("PUT");
    let asks_sha = super::json(r, 201)["sha256"]
        .as_str()
        .expect("sha")
        .to_string();
    let third = server.start_run(&asks_sha, json!({}));
    b.eval(&format!("location.hash = '#/runs/{third}'; true"));
    b.wait_until(
        "!document.getElementById('answer').hidden && document.querySelector('#questions input[name=audience]') !== null",
        PROGRESS,
    );
    assert_eq!(
        b.eval("document.querySelector('#questions span').textContent"),
        json!("Who reads it (audience)")
    );
    b.eval("(function () { document.querySelector('#questions input[name=audience]').value = 'sailors'; document.getElementById('answer').requestSubmit(); return true; })()");
    b.wait_until(
        &format!(
            "{} && document.querySelector('#run-outputs dd') !== null",
            status_is("finished")
        ),
        PROGRESS,
    );
    let out = b.eval("document.querySelector('#run-outputs dd').textContent");
    assert_eq!(out, json!("re: Rewrite for sailors"));

    // Cancel, then resume, from the buttons: held by the gate, the run is still going when
    // Cancel is clicked.
    gate.close();
    let fourth = server.start_run(&sha, json!({"topic": "kelp"}));
    b.eval(&format!("location.hash = '#/runs/{fourth}'; true"));
    b.wait_until("!document.getElementById('cancel').hidden", PROGRESS);
    b.eval("document.getElementById('cancel').click(); true");
    b.wait_until(
        &format!(
            "{} && !document.getElementById('resume').hidden",
            status_is("interrupted")
        ),
        PROGRESS,
    );
    gate.open();
    b.eval("document.getElementById('resume').click(); true");
    b.wait_until(
        &format!(
            "{} && document.querySelector('#run-outputs dd') !== null",
            status_is("finished")
        ),
        PROGRESS,
    );
    assert_eq!(
        server.get(&format!("/v1/runs/{fourth}"))["status"],
        "finished"
    );

    assert!(
        b.complaints.is_empty(),
        "the console said: {:#?}",
        b.complaints
    );
}
