//! web_fetch against a loopback HTTP server: HTML to text, caps, timeout, redirects re-checked.

use std::sync::Arc;
use std::time::Duration;

use prose_agent::permissions::{Action, Policy, Sandbox, UserAllow};
use prose_agent::tools::web::{FetchLimits, WebFetch};
use prose_agent::tools::Toolbox;
use prose_machine::protocol::{Capability, PromptAnswer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{call, call_with, err, ok, rules, sandbox, Scripted};
use crate::support::scratch;

/// Serves a few fixed routes on 127.0.0.1 until the test ends; returns the port.
/// How long `/slow` takes to answer.
const SLOW: Duration = Duration::from_secs(60);

async fn serve() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, content_type, extra, body): (&str, &str, String, Vec<u8>) =
                    match path.as_str() {
                        "/page" => (
                            "200 OK",
                            "text/html; charset=utf-8",
                            String::new(),
                            b"<html><head><title>T</title><style>p {color: red}</style></head>\
                              <body><h1>Release notes</h1><p>Version <b>2.0</b> is out.</p>\
                              <ul><li>faster</li><li>smaller</li></ul></body></html>"
                                .to_vec(),
                        ),
                        "/deep" => (
                            "200 OK",
                            "text/html",
                            String::new(),
                            format!(
                                "{}deep inside{}",
                                "<div><span>".repeat(20_000),
                                "</span></div>".repeat(20_000)
                            )
                            .into_bytes(),
                        ),
                        "/plain" => ("200 OK", "text/plain", String::new(), b"just text".to_vec()),
                        "/big" => (
                            "200 OK",
                            "text/plain",
                            String::new(),
                            vec![b'a'; 3 * 1024 * 1024],
                        ),
                        "/missing" => (
                            "404 Not Found",
                            "text/plain",
                            String::new(),
                            b"no such page".to_vec(),
                        ),
                        "/image" => (
                            "200 OK",
                            "image/png",
                            String::new(),
                            vec![0x89, b'P', b'N', b'G', 0, 0],
                        ),
                        "/to-localhost" => (
                            "302 Found",
                            "text/plain",
                            format!("Location: http://localhost:{port}/page\r\n"),
                            Vec::new(),
                        ),
                        "/relative" => (
                            "301 Moved",
                            "text/plain",
                            "Location: /plain\r\n".into(),
                            Vec::new(),
                        ),
                        "/loop" => (
                            "302 Found",
                            "text/plain",
                            "Location: /loop\r\n".into(),
                            Vec::new(),
                        ),
                        "/slow" => {
                            // Far longer than any fetch waits: a call that ends before it
                            // did not wait for the answer.
                            tokio::time::sleep(SLOW).await;
                            ("200 OK", "text/plain", String::new(), b"late".to_vec())
                        }
                        _ => ("404 Not Found", "text/plain", String::new(), Vec::new()),
                    };
                let header = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(header.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    port
}

fn networked(name: &str) -> Sandbox {
    let dir = scratch(name);
    sandbox(&dir, &[("network", &["allow"])], UserAllow::default())
}

#[tokio::test]
async fn html_becomes_text() {
    let port = serve().await;
    let sb = networked("agent-web-html");
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/page")}),
    )
    .await;
    let out = ok(&r);
    assert!(out.starts_with(&format!(
        "URL: http://127.0.0.1:{port}/page\nStatus: 200 OK\n"
    )));
    assert!(out.contains("Release notes"));
    assert!(out.contains("2.0") && out.contains("is out."));
    assert!(out.contains("faster") && out.contains("smaller"));
    assert!(
        !out.contains("<p>") && !out.contains("<b>") && !out.contains("color: red"),
        "{out}"
    );
    assert_eq!(r.decisions.len(), 1);
    assert!(r.decisions[0].allowed);

    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/plain")}),
    )
    .await;
    assert!(ok(&r).ends_with("\n\njust text"));
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/relative")}),
    )
    .await;
    assert!(
        ok(&r).ends_with("just text"),
        "relative redirects are followed"
    );
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/deep")}),
    )
    .await;
    let out = ok(&r);
    assert!(out.ends_with("without layout]\n\ndeep inside"), "{out}");
}

#[tokio::test]
async fn errors_statuses_and_non_text() {
    let port = serve().await;
    let sb = networked("agent-web-errors");
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/missing")}),
    )
    .await;
    let out = err(&r);
    assert!(out.contains("Status: 404 Not Found") && out.contains("no such page"));
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/image")}),
    )
    .await;
    assert!(err(&r).contains("is not text (image/png"));
    let r = call(&sb, "web_fetch", json!({"url": "file:///etc/passwd"})).await;
    assert!(err(&r).contains("only http and https"));
    let r = call(&sb, "web_fetch", json!({"url": "not a url"})).await;
    assert!(err(&r).contains("is not a valid URL"));
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/loop")}),
    )
    .await;
    assert!(err(&r).contains("more than 5 redirects"));
    assert_eq!(r.decisions.len(), 6, "every hop is checked");
}

#[tokio::test]
async fn size_and_time_caps() {
    let port = serve().await;
    let dir = scratch("agent-web-caps");
    let sb = sandbox(&dir, &[("network", &["allow"])], UserAllow::default());
    let mut toolbox = Toolbox::new();
    toolbox
        .add(Arc::new(WebFetch::with_limits(FetchLimits {
            max_body_bytes: 64 * 1024,
            max_text_bytes: 10 * 1024,
            timeout: Duration::from_secs(1),
        })))
        .unwrap();
    let r = call_with(
        &toolbox,
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/big")}),
    )
    .await;
    let out = ok(&r);
    assert!(out.contains("[cut: only the first 64 KiB of the body were read"));
    assert!(out.len() < 11 * 1024, "{}", out.len());
    let started = std::time::Instant::now();
    let r = call_with(
        &toolbox,
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/slow")}),
    )
    .await;
    assert!(err(&r).contains("took longer than 1 s"));
    // Ended by its own timeout, not by the answer: well before the server's 60 s (however
    // loaded the machine).
    assert!(
        started.elapsed() < SLOW / 2,
        "the fetch with a 1 s timeout took {:?}: it waited for the server",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_redirect_to_a_refused_host_is_not_followed() {
    let port = serve().await;
    let dir = scratch("agent-web-redirect");
    // The person allows the first host and refuses the one the redirect leads to.
    let person = Scripted::new(|q| {
        assert_eq!(q.capability, Capability::Network);
        if q.detail.contains("://127.0.0.1:") {
            Some(PromptAnswer::Yes)
        } else {
            Some(PromptAnswer::No)
        }
    });
    let sb = Sandbox::builder(&dir)
        .policy(Policy::from_rules(&rules(&[("network", &["prompt"])])).unwrap())
        .prompter(person.clone())
        .build()
        .unwrap();
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/to-localhost")}),
    )
    .await;
    let out = err(&r);
    assert!(
        out.contains(&format!(
            "a redirect led to http://localhost:{port}/page, which is refused"
        )),
        "{out}"
    );
    assert!(!out.contains("Release notes"));
    assert_eq!(person.count(), 2);
    assert_eq!(r.decisions.len(), 2);
    assert!(r.decisions[0].allowed && !r.decisions[1].allowed);
    assert_eq!(r.decisions[1].action, Action::Network);
    assert_eq!(
        r.decisions[1].target,
        format!("http://localhost:{port}/page")
    );

    // With network allowed the same redirect is followed.
    let sb = networked("agent-web-redirect-ok");
    let r = call(
        &sb,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/to-localhost")}),
    )
    .await;
    assert!(ok(&r).contains("Release notes"));
    assert!(r
        .output
        .content
        .starts_with(&format!("URL: http://localhost:{port}/page")));
}
