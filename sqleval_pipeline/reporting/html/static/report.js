/* sqleval report: case filter and drill-down. Plain DOM, no framework. Every value from the
   data block is inserted as text (textContent), never parsed as HTML. */
(function () {
  "use strict";
  var dataNode = document.getElementById("report-data");
  var cases = dataNode ? JSON.parse(dataNode.textContent || "[]") : [];
  var form = document.getElementById("filters");
  var table = document.getElementById("case-table");
  var panel = document.getElementById("case-detail");
  if (!form || !table || !panel) { return; }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);

  function el(tag, text, cls) {
    var n = document.createElement(tag);
    if (text !== undefined && text !== null) { n.textContent = String(text); }
    if (cls) { n.className = cls; }
    return n;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function cell(v) {
    if (v === null || v === undefined) { return "NULL"; }
    return typeof v === "string" ? v : JSON.stringify(v);
  }
  function line(parent, label, value) {
    var p = add(parent, el("p"));
    add(p, el("span", label, "label"));
    add(p, el("span", value));
    return p;
  }

  function applyFilters() {
    var want = {};
    ["config", "outcome", "verdict", "band", "difficulty", "split", "diagnosis"].forEach(function (k) {
      want[k] = form.elements[k].value;
    });
    var text = form.elements.text.value.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (tr) {
      var ok = Object.keys(want).every(function (k) {
        if (!want[k]) { return true; }
        return (tr.getAttribute("data-" + k) || "").split(" ").indexOf(want[k]) >= 0;
      });
      if (ok && text) {
        var c = cases[Number(tr.getAttribute("data-i"))];
        var hay = tr.textContent.toLowerCase();
        if (c) {
          hay += " " + (c.case.reference_sql || "").toLowerCase();
          c.runs.forEach(function (r) { hay += " " + (r.answer.sql || "").toLowerCase(); });
        }
        ok = hay.indexOf(text) >= 0;
      }
      tr.hidden = !ok;
      if (ok) { shown += 1; }
    });
    document.getElementById("shown").textContent = shown + " of " + rows.length + " shown";
  }

  function rowsTable(parent, res) {
    var t = add(parent, el("table", null, "rows"));
    var head = add(add(t, el("thead")), el("tr"));
    res.columns.forEach(function (name, i) {
      var th = add(head, el("th", name));
      add(th, el("span", res.types[i], "type"));
    });
    var body = add(t, el("tbody"));
    res.rows.forEach(function (r) {
      var tr = add(body, el("tr"));
      r.forEach(function (v) { add(tr, el("td", cell(v))); });
    });
    var note = res.rows.length < res.total_rows ? res.rows.length + " of " + res.total_rows + " rows shown"
      : res.total_rows + (res.total_rows === 1 ? " row" : " rows");
    add(parent, el("p", note, "small"));
  }

  function showRun(parent, run) {
    var box = add(parent, el("div", null, "run"));
    var g = run.grade;
    var h = add(box, el("h4", "run " + run.run_index + " "));
    add(h, el("span", g ? (g.outcome || "ungraded") : "not graded", "o o-" + (g && g.outcome ? g.outcome : "UNGRADED")));
    var a = run.answer;
    if (a.kind === "sql") {
      add(box, el("span", "SQL the system wrote", "label"));
      add(box, el("pre", a.sql, "sql"));
    } else if (a.kind === "refusal") {
      line(box, "declined:", a.refusal_reason || "(no reason given)");
    } else {
      line(box, "no answer (error):", (a.error_code || "") + " " + (a.error_message || ""));
    }
    var x = run.execution;
    if (x) {
      if (x.executed_sql) { add(box, el("span", "DuckDB text run", "label")); add(box, el("pre", x.executed_sql)); }
      if (x.status === "ok" && x.result) {
        add(box, el("span", "result" + (x.capped ? " (cut by the row cap)" : ""), "label"));
        rowsTable(box, x.result);
      } else if (x.status === "refused") {
        line(box, "guard refused:", "layer " + x.layer + ", " + x.reason + (x.message ? " — " + x.message : ""));
      } else if (x.status === "timeout") {
        line(box, "timed out:", (x.layer || "") + " " + (x.reason || "") + " " + (x.message || ""));
      } else if (x.status === "error") {
        line(box, "SQL error:", (x.error_code || "") + " " + (x.error_message || ""));
      }
    }
    if (g) {
      line(box, "grade:", g.reason);
      if (g.mismatch) { line(box, "mismatch:", g.mismatch); }
    }
    run.diagnoses.forEach(function (d) {
      line(box, "diagnosis (" + d.judge + "):", d.category + " — " + d.explanation);
    });
  }

  function open(i) {
    var d = cases[i];
    if (!d) { return; }
    rows.forEach(function (tr) { tr.classList.toggle("selected", Number(tr.getAttribute("data-i")) === i); });
    while (panel.firstChild) { panel.removeChild(panel.firstChild); }
    var close = add(panel, el("button", "close", "open close"));
    close.type = "button";
    close.addEventListener("click", function () { panel.hidden = true; });
    var c = d.case;
    add(panel, el("h3", c.id + " — " + d.partition_key + ", batch " + d.batch.batch_id));
    add(panel, el("p", c.question, "lead"));
    line(panel, "band / difficulty / split:", c.band + " / " + c.difficulty + " / " + c.split);
    if (c.traps.length) { line(panel, "traps:", c.traps.join("; ")); }
    if (c.notes) { line(panel, "notes:", c.notes); }
    var o = Object.keys(d.outcomes).filter(function (k) { return d.outcomes[k]; })
      .map(function (k) { return k + " × " + d.outcomes[k]; });
    line(panel, "outcomes:", o.length ? o.join(", ") : "none graded");
    if (c.reference_sql) { add(panel, el("span", "reference SQL", "label")); add(panel, el("pre", c.reference_sql, "sql")); }
    c.alternative_sqls.forEach(function (s, k) { add(panel, el("span", "accepted alternative " + (k + 1), "label")); add(panel, el("pre", s)); });
    if (c.expected) { add(panel, el("span", "expected result (frozen on " + c.snapshot_id + ")", "label")); rowsTable(panel, c.expected); }
    else { line(panel, "expected result:", "none frozen (execution only)"); }
    d.runs.forEach(function (r) { showRun(panel, r); });
    d.notes.forEach(function (n) { add(panel, el("p", n, "warn")); });
    panel.hidden = false;
    panel.scrollIntoView({ block: "start" });
  }

  form.addEventListener("input", applyFilters);
  form.addEventListener("change", applyFilters);
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  table.addEventListener("click", function (ev) {
    var b = ev.target.closest("button.open");
    if (b) { open(Number(b.getAttribute("data-i"))); }
  });
}());
