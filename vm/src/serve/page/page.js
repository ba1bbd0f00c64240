// The server's page: the run list (#/) and the live view of one run (#/runs/ID). Everything
// comes from the API under /v1 (the page's cookie carries the token); a run's view follows
// its events over server-sent events and redraws its report as they come. A waiting run's
// view takes the inputs it waits for (a form) and the tool calls it waits for a person's
// approval of (allow, always allow, deny).
(function () {
  "use strict";
  var api = "/v1";
  var current = null; // the run shown: {id, source, timer, ended, asked, approving}
  var listTimer = null;
  var $ = function (id) { return document.getElementById(id); };

  function note(text) { $("note").textContent = text || ""; }

  function request(method, path, body) {
    var init = { method: method, headers: {} };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(api + path, init).then(function (r) {
      return r.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = { error: text }; }
        if (!r.ok) { throw new Error((data && data.error) || ("HTTP " + r.status)); }
        return data;
      });
    });
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function badge(node, status) {
    node.textContent = status;
    node.className = "status s-" + status;
    node.dataset.status = status;
  }

  // The run list.
  function showList() {
    $("run-view").hidden = true;
    $("list-view").hidden = false;
    document.body.dataset.view = "list";
    loadList();
    listTimer = setInterval(loadList, 2000);
  }

  function loadList() {
    request("GET", "/runs?limit=100").then(function (page) {
      var body = $("runs").tBodies[0];
      body.textContent = "";
      page.runs.forEach(function (r) {
        var tr = el("tr");
        tr.dataset.id = r.id;
        tr.appendChild(el("td")).appendChild(el("code", r.id));
        tr.appendChild(el("td", r.program));
        var st = tr.appendChild(el("td")).appendChild(el("span"));
        badge(st, r.status);
        tr.appendChild(el("td", r.started || ""));
        tr.appendChild(el("td", String(r.answered)));
        tr.addEventListener("click", function () { location.hash = "#/runs/" + r.id; });
        body.appendChild(tr);
      });
      $("no-runs").hidden = page.runs.length > 0;
      $("runs").dataset.loaded = String(page.runs.length);
      note("");
    }).catch(function (e) { note(e.message); });
  }

  // One run, live.
  function showRun(id) {
    $("list-view").hidden = true;
    $("run-view").hidden = false;
    document.body.dataset.view = "run";
    $("run-title").textContent = "run " + id;
    $("report").textContent = "";
    $("run-outputs").textContent = "";
    $("answer").hidden = true;
    $("approvals").hidden = true;
    current = { id: id, source: null, timer: null, ended: false, asked: "", approving: "" };
    follow();
    refresh();
  }

  function follow() {
    var run = current;
    if (run.source) run.source.close();
    $("event-list").textContent = "";
    $("event-count").textContent = "0";
    run.ended = false;
    var source = new EventSource(api + "/runs/" + encodeURIComponent(run.id) + "/events");
    run.source = source;
    source.onmessage = function (m) {
      if (current !== run) return;
      var line;
      try { line = JSON.parse(m.data); } catch (e) { return; }
      var list = $("event-list");
      var item = el("li", describe(line));
      item.value = Number(m.lastEventId);
      item.dataset.event = line.event;
      list.appendChild(item);
      while (list.children.length > 500) list.removeChild(list.firstChild);
      list.scrollTop = list.scrollHeight;
      $("event-count").textContent = m.lastEventId ? String(Number(m.lastEventId) + 1) : "";
      // A log holds every drive of the run (started, stopped, resumed): an `end` closes a
      // drive, and the stream goes on if another follows.
      run.ended = line.event === "end";
      if (!run.ended) badge($("run-status"), "running");
      soon();
    };
    source.onerror = function () {
      // The server ends the stream when a drive ends. A run no one drives has nothing more
      // to say; one being driven again (resumed, or after a restart of the server) is
      // followed on by the browser's reconnection, which names the last event it had.
      if (current !== run) return;
      request("GET", "/runs/" + encodeURIComponent(run.id)).then(function (r) {
        if (!r.live && source.readyState !== EventSource.OPEN) source.close();
      }).catch(function () {});
    };
  }

  function describe(line) {
    var bits = [line.event];
    ["id", "name", "line", "status", "question", "approval", "detail", "message", "error"].forEach(function (k) {
      if (line[k] !== undefined && line[k] !== null) bits.push(k + "=" + String(line[k]).slice(0, 120));
    });
    return bits.join(" ");
  }

  // Redraws after a burst of events, not on each one.
  function soon() {
    var run = current;
    if (run.timer) return;
    run.timer = setTimeout(function () { run.timer = null; if (current === run) refresh(); }, 250);
  }

  function refresh() {
    var run = current;
    var path = "/runs/" + encodeURIComponent(run.id);
    request("GET", path).then(function (r) {
      if (current !== run) return;
      badge($("run-status"), r.status);
      $("cancel").hidden = !r.live;
      $("resume").hidden = r.live || r.status === "finished" || r.status === "waiting";
      outputs(r.outputs);
      questions(r.waiting || [], r.live);
      approvals(r.approvals || [], r.live);
    }).catch(function (e) { note(e.message); });
    fetch(api + path + "/report").then(function (resp) {
      return resp.ok ? resp.text() : null;
    }).then(function (html) {
      if (html === null || current !== run) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      doc.querySelectorAll("script").forEach(function (s) { s.remove(); });
      var into = $("report");
      into.textContent = "";
      Array.prototype.slice.call(doc.body.children).forEach(function (child) {
        into.appendChild(document.importNode(child, true));
      });
      into.dataset.cards = String(into.querySelectorAll(".card").length);
      document.documentElement.dataset.ready = "true";
    }).catch(function (e) { note(e.message); });
  }

  function outputs(values) {
    var into = $("run-outputs");
    into.textContent = "";
    if (!values) return;
    into.appendChild(el("h3", "outputs"));
    var dl = into.appendChild(el("dl"));
    Object.keys(values).forEach(function (k) {
      dl.appendChild(el("dt", k));
      var v = values[k];
      dl.appendChild(el("dd")).appendChild(el("pre", typeof v === "string" ? v : JSON.stringify(v)));
    });
  }

  function questions(waiting, live) {
    var form = $("answer");
    var names = waiting.map(function (w) { return w.name; }).join(",");
    form.hidden = live || waiting.length === 0;
    if (names === current.asked) return;
    current.asked = names;
    var box = $("questions");
    box.textContent = "";
    waiting.forEach(function (w) {
      var label = box.appendChild(el("label"));
      label.appendChild(el("span", w.question + " (" + w.name + ")"));
      var input = label.appendChild(el("input"));
      input.name = w.name;
      input.required = true;
    });
  }

  // The tool calls the run waits for a person's approval of, each with its buttons.
  function approvals(waiting, live) {
    var box = $("approvals");
    var ids = waiting.map(function (a) { return a.id; }).join(",");
    box.hidden = live || waiting.length === 0;
    if (ids === current.approving) return;
    current.approving = ids;
    var list = $("approval-list");
    list.textContent = "";
    waiting.forEach(function (a) {
      var item = list.appendChild(el("li"));
      item.dataset.approval = a.id;
      var who = a.agent ? "Agent " + a.agent : "A session";
      var what = a.capability === "bash" ? " wants to run a command with " : " wants to reach the network with ";
      item.appendChild(el("div", who + what + a.tool + ":"));
      item.appendChild(el("pre", a.detail));
      item.appendChild(el("div", "Its task: " + a.prompt, "prompt"));
      if (a.expires) item.appendChild(el("div", "Refused at " + a.expires + " if no one answers.", "prompt"));
      var choices = item.appendChild(el("div", null, "choices"));
      [["approve", "Allow", true, false], ["always", "Always allow in this session", true, true], ["deny", "Deny", false, false]]
        .forEach(function (c) {
          var b = choices.appendChild(el("button", c[1]));
          b.type = "button";
          b.dataset.answer = c[0];
          b.addEventListener("click", function () { decide(a.id, c[2], c[3]); });
        });
    });
  }

  function decide(approval, approve, always) {
    var run = current;
    var path = "/runs/" + encodeURIComponent(run.id) + "/approvals/" + encodeURIComponent(approval);
    request("POST", path, { approve: approve, always: always }).then(function (taken) {
      if (current !== run) return;
      current.approving = "";
      if (taken && taken.state === "resuming") follow();
      refresh();
    }).catch(function (e) { note(e.message); });
  }

  $("answer").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var run = current;
    var fields = Array.prototype.slice.call($("questions").querySelectorAll("input"));
    var chain = Promise.resolve(null);
    fields.forEach(function (f) {
      chain = chain.then(function () {
        return request("POST", "/runs/" + encodeURIComponent(run.id) + "/input", { name: f.name, value: f.value });
      });
    });
    chain.then(function (last) {
      if (current !== run) return;
      $("answer").hidden = true;
      current.asked = "";
      if (last && last.state === "resuming") follow();
      refresh();
    }).catch(function (e) { note(e.message); });
  });

  $("cancel").addEventListener("click", function () {
    var run = current;
    request("POST", "/runs/" + encodeURIComponent(run.id) + "/cancel")
      .then(function () { note("stopping run " + run.id); })
      .catch(function (e) { note(e.message); });
  });

  $("resume").addEventListener("click", function () {
    var run = current;
    request("POST", "/runs/" + encodeURIComponent(run.id) + "/resume").then(function () {
      if (current !== run) return;
      follow();
      refresh();
    }).catch(function (e) { note(e.message); });
  });

  function route() {
    if (listTimer) { clearInterval(listTimer); listTimer = null; }
    if (current) {
      if (current.source) current.source.close();
      if (current.timer) clearTimeout(current.timer);
      current = null;
    }
    var m = /^#\/runs\/([A-Za-z0-9._-]+)$/.exec(location.hash);
    if (m) showRun(m[1]); else showList();
  }

  window.addEventListener("hashchange", route);
  route();
  if (document.body.dataset.view === "list") document.documentElement.dataset.ready = "true";
}());
