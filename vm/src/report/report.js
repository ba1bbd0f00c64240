// The report's interactions: filters, and lines of the source highlighting what was asked
// there. Everything works without this script; it only adds.
(function () {
  "use strict";
  var cards = Array.prototype.slice.call(document.querySelectorAll(".card"));
  var requests = Array.prototype.slice.call(document.querySelectorAll(".request"));
  var shown = document.getElementById("shown");

  function matches(el, filter) {
    if (filter === "all") return true;
    if (filter === "failed") return el.dataset.state === "failed";
    return el.dataset.kind === filter;
  }

  function apply(filter) {
    var count = 0;
    cards.forEach(function (c) {
      var on = matches(c, filter);
      c.classList.toggle("hidden", !on);
      if (on) count += 1;
    });
    requests.forEach(function (r) { r.classList.toggle("hidden", !matches(r, filter)); });
    shown.textContent = count + " of " + cards.length + " requests";
  }

  document.querySelectorAll(".filters button").forEach(function (b) {
    b.addEventListener("click", function () {
      document.querySelectorAll(".filters button").forEach(function (o) { o.classList.remove("on"); });
      b.classList.add("on");
      apply(b.dataset.filter);
    });
  });

  function highlight(anchor) {
    cards.concat(requests).forEach(function (el) {
      el.classList.toggle("hl", anchor !== "" && el.dataset.line === anchor);
    });
  }

  document.querySelectorAll(".src.asked").forEach(function (line) {
    line.addEventListener("click", function () {
      highlight(line.id);
      var first = cards.filter(function (c) { return c.dataset.line === line.id; })[0];
      if (first) first.scrollIntoView({ block: "center", behavior: "smooth" });
    });
  });

  cards.forEach(function (c) {
    c.addEventListener("mouseenter", function () {
      var src = document.getElementById(c.dataset.line);
      if (src) src.classList.add("hl");
    });
    c.addEventListener("mouseleave", function () {
      var src = document.getElementById(c.dataset.line);
      if (src) src.classList.remove("hl");
    });
  });

  apply("all");
  document.documentElement.dataset.ready = "true";
})();
