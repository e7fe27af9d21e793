"""The HTML report and the exports (docs/report.md, docs/exports.md).

Fast lane: the page's escaping, its data block, its Content-Security-Policy and the inlined
plots, on data built here. Slow lane (the ``evaluated`` store of tests/reporting/conftest.py):
the page of a real evaluation holds the numbers of the stored scorecards, comparisons,
calibration and hostile suite (read back here with json/pandas, never through the code under
test), references nothing outside itself, stays under 5 MB, shows untrusted text only
escaped (tests/reporting/test_exports.py: the exports and the commands).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.reporting.conftest import BREAKOUT, HOSTILE_SQL, IMG, SCRIPT
from tests.reporting.pages import METHOD_TAG, Page, assert_self_contained, data_block, power_label, rate

MAX_BYTES = 5 * 1024 * 1024


# --------------------------------------------------------------------------- fast lane


def _synthetic():
    """A report of one tiny evaluation whose question, SQL, cells and hostile case carry payloads."""
    from sqleval_pipeline.pipeline.casefile import CaseDetail
    from sqleval_pipeline.pipeline.records import Grade
    from sqleval_pipeline.reporting.html.collect import Evaluation, ReportData, TrendPoint
    from sqleval_pipeline.reporting.html.evidence import CategoryRow, Evidence, Guardrails, HostileRow
    from sqleval_pipeline.scoring.scorecard import build_scorecard
    from sqleval_pipeline.pipeline.store import BatchInfo

    grades = [Grade(config_version="v1", case_id=f"q{i}", run_index=r, reason="x",
                    outcome="CORRECT" if (i + r) % 3 else "WRONG", grader_version="r1",
                    band="answerable", difficulty="top_k", split="heldout" if i % 2 else "dev",
                    cluster=f"c{i % 3}") for i in range(6) for r in range(3)]
    card = build_scorecard(grades, config_version="v1", resamples=50)
    batch = BatchInfo(batch_id="b1", partition_key="sys@0000abcd", config_name="sys",
                      config_version="0000abcd", snapshot_id="snap-1", golden_hash="g", runs=3,
                      case_ids=["q0"], status="complete", created_at="2025-01-01T00:00:00+00:00")
    rows = {"columns": [IMG, "b"], "types": ["VARCHAR", "VARCHAR"], "rows": [[SCRIPT, BREAKOUT]],
            "total_rows": 1}
    detail = CaseDetail.model_validate({
        "partition_key": "sys@0000abcd", "config_name": "sys", "config_version": "0000abcd",
        "max_rows": 10, "outcomes": {"WRONG": 1},
        "case": {"id": "q0", "question": f"{SCRIPT} {IMG} {BREAKOUT}", "band": "answerable",
                 "difficulty": "top_k", "split": "dev", "status": "verified", "cluster": "c0",
                 "traps": [IMG], "order_matters": False, "order_keys": [], "reference_sql": HOSTILE_SQL,
                 "alternative_sqls": [], "snapshot_id": "snap-1", "notes": None, "expected": rows,
                 "alternatives": []},
        "batch": {"batch_id": "b1", "status": "complete", "created_at": "2025-01-01", "finished_at": None,
                  "snapshot_id": "snap-1", "policy_version": None, "golden_hash": "g", "runs": 3,
                  "cases": 1, "attempts_from": None},
        "runs": [{"run_index": 0, "diagnoses": [], "grade": None,
                  "answer": {"kind": "sql", "sql": HOSTILE_SQL, "refusal_reason": None, "error_code": None,
                             "error_message": None, "model": None, "generator": None, "retries": 0,
                             "created_at": None},
                  "execution": {"status": "ok", "result": rows, "capped": False, "elapsed_ms": 1.0,
                                "layer": None, "reason": None, "message": None, "error_source": None,
                                "error_code": None, "error_message": None, "executed_sql": None,
                                "policy_version": None}}],
        "notes": []})
    guard = Guardrails(ran_at=None, passed=True, snapshot_file="snap-1.duckdb", checksum_before="ab",
                       checksum_after="ab", checksum_unchanged=True, seconds=1.0, totals={"blocked": 1},
                       categories=[CategoryRow(IMG, 1, {"filter": 1}, 0, 0, 0)],
                       cases=[HostileRow("h-1", IMG, "sql", "blocked", "filter", SCRIPT, IMG, sql=BREAKOUT)],
                       failures=[], unproven=[])
    evidence = Evidence(generated_at="now", versions={"sqleval": "0", "duckdb": "0", "sqlglot": "0", "python": "3"}, project="p", snapshot_id="snap-1",
                        as_of="2025-01-01", serving_file="snap-1.duckdb", checksum_now="ab",
                        policy_version="pv", policy_file="guard_policy.yaml", tables=["t"], schemas=["main"],
                        functions=["sum"], table_functions=["range"], denied_names=["glob"],
                        denied_patterns=["read_.*"], limits={"row_cap": 10}, sandbox={"workers": 1},
                        settings=[], settings_error=None, guardrails=guard)
    e = Evaluation(batch=batch, card=card, comparisons=[], calibrated_refusal=None, cases=[detail],
                   missing_cases=[])
    trend = [TrendPoint("sys@0000abcd", "b1", "2025-01-01T00:00:00+00:00", 0.5, 0.4, 0.6, 0.5, 10)]
    return ReportData(generated_at="now", project="p", snapshot_id="snap-1", as_of="2025-01-01",
                      evaluations=[e], trend=trend, judges=None, calibration_note=None, decisions=[],
                      evidence=evidence)


def test_untrusted_text_is_escaped_and_the_page_is_self_contained():
    from sqleval_pipeline.reporting.html.page import render_evidence, render_report

    data = _synthetic()
    for html in (render_report(data), render_evidence(data.evidence)):
        page = assert_self_contained(html)
        for payload in (SCRIPT, IMG, "<!--"):
            assert payload not in html
        assert len(page.scripts) == 2  # the data block and the report's own script
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    page = Page(render_report(data))
    _, payload = data_block(page)
    run = payload[0]["runs"][0]
    assert payload[0]["case"]["question"] == f"{SCRIPT} {IMG} {BREAKOUT}"
    assert run["answer"]["sql"] == HOSTILE_SQL and run["execution"]["result"]["rows"] == [[SCRIPT, BREAKOUT]]
    assert IMG in page.of("section:cases") and SCRIPT in page.of("section:hostile-cases")


@pytest.mark.parametrize("value", ["</script><script>alert(1)</script>", "<!--", "</SCRIPT >", "a&b>c",
                                   "\u2028\u2029", "<\\/script>", "]]>"])
def test_the_data_block_cannot_be_broken_out_of(value):
    from sqleval_pipeline.reporting.html.page import script_json

    text = str(script_json({"k": [value], value: 1}))
    assert not re.search(r"[<>&\u2028\u2029]", text)
    assert json.loads(text) == {"k": [value], value: 1}


def test_plots_are_inline_svg_without_styles_urls_or_shared_ids():
    from sqleval_pipeline.reporting.html import plots

    values = {"a$b$": {"s": (0.5, 0.4, 0.6)}, "<x>": {"s": (1.0, 1.0, 1.0)}}
    one = plots.forest(list(values), ["s"], values, "one", "first <plot>")
    two = plots.forest(list(values), ["s"], values, "two", "second")
    for svg in (one, two):
        assert svg.startswith("<svg") and svg.endswith("</svg>")
        assert "style=" not in svg and "<style" not in svg and "http" not in svg and "<script" not in svg
        assert "<?xml" not in svg and "DOCTYPE" not in svg
    assert "a$b$" in one and "&lt;x&gt;" in one  # text stays text, escaped, not mathtext
    ids = lambda s: set(re.findall(r'\sid="([^"]+)"', s))  # noqa: E731
    assert ids(one) and not ids(one) & ids(two)
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', one):
        assert ref in ids(one)


def test_a_plot_with_nothing_measured_is_no_figure_and_no_warning(recwarn):
    """Every attempt an error: no accuracy, no interval. The forest is left out (the page says
    there is nothing to plot) instead of an empty chart with a singular axis."""
    from sqleval_pipeline.reporting.html import plots

    values = {"overall": {"v1": (None, None, None)}, "dev": {}}
    assert plots.forest(["overall", "dev"], ["v1"], values, "empty", "nothing") == ""
    assert plots.forest([], ["v1"], {}, "none", "nothing") == ""
    assert plots.forest(["overall"], ["v1"], {"overall": {"v1": (0.5, None, None)}}, "one", "t").startswith("<svg")
    assert not [w for w in recwarn if "matplotlib" in w.filename or "ylim" in str(w.message)]


# --------------------------------------------------------------------------- slow lane: a real store


@pytest.fixture(scope="module")
def report(evaluated, tmp_path_factory):
    from sqleval_pipeline.reporting.html import write_report

    out = tmp_path_factory.mktemp("html") / "report.html"
    assert write_report(evaluated.env, None, out) == out
    html = out.read_text(encoding="utf-8")
    return {"path": out, "html": html, "page": Page(html)}


def test_the_page_holds_every_stored_scorecards_numbers(evaluated, report):
    page = report["page"]
    glance = page.row_texts()
    for key in evaluated.keys.values():
        card = evaluated.scorecard(key)
        text = page.of(f"article:{key}")
        assert text, f"no headline for {key}"
        for split in ("heldout", "dev"):
            m = card["by_split"][split]
            assert f"{split} split" in text
            assert rate(m["accuracy"]) in text and rate(m["strict_accuracy"]) in text
        assert text.index("heldout split") < text.index("dev split")  # held-out first
        assert rate(card["overall"]["accuracy"]) in text
        if card["tuned_heldout"]:
            assert re.search(r"heldout split tuned", text)
        label = power_label(card)
        assert label in text and any(r.startswith(key) and label in r for r in glance)
        slices = page.of("section:slices")
        for d, m in card["by_difficulty"].items():
            assert f"difficulty {d} " in slices and rate(m["accuracy"]) in slices
        refusals = page.of("section:refusals")
        for name in ("deferral_rate", "over_refusal_rate", "refusal_hold"):
            assert rate(card["refusal"][name]) in refusals
        stability = page.of("section:stability")
        assert rate(card["case_flip_rate"]) in stability
        for run in card["overall"]["per_run"]:
            assert f"run {run['run_index']}: {100 * run['accuracy']:.1f}%" in stability
        for c in card["cases"]:
            graded = [o for o in c["outcomes"] if o not in (None, "ERROR")]
            if len(set(graded)) > 1:
                assert c["case_id"] in stability
        failures = page.of("section:failures")
        for cat, n in (card.get("failure_histogram") or {}).items():
            assert any(r.startswith(f"{cat} ") and str(n) in r.split() for r in glance), cat
        if card.get("failures_diagnosed"):
            assert rate(card["failures_diagnosed"]) in failures


def test_flipping_and_guard_refused_cases_of_the_recorded_system_are_shown(evaluated, report):
    card = evaluated.scorecard(evaluated.keys["recorded"])
    flipped = [c["case_id"] for c in card["cases"] if len(set(c["outcomes"])) > 1]
    assert evaluated.guard_case in flipped  # the fixture made it flip
    executions = pd.read_parquet(evaluated.folder(evaluated.keys["recorded"]) / "executions.parquet")
    refused = executions[executions.status == "refused"].iloc[0]
    row = next(r for r in report["page"].row_texts()
               if r.startswith(f"{evaluated.guard_case} {evaluated.keys['recorded']}"))
    assert "flips" in row and f"guard: {refused.layer}:{refused.reason}" in row


def test_comparisons_gate_and_what_changed_are_the_stored_ones(evaluated, report):
    key = evaluated.keys["curated"]
    folder = evaluated.folder(key)
    stored = json.loads((folder / "comparisons.json").read_text())
    text = report["page"].of(f"article:{key}")
    texts = " ".join(report["page"].text.get(f"article:{key}", []))
    baseline = stored["comparisons"][0]
    assert baseline["kind"] == "baseline" and baseline["baseline_partition"] == evaluated.keys["raw"]
    for c in stored["comparisons"]:
        assert c["status"] in text
        if c["status"] != "skipped":
            assert f"{100 * c['delta']:+.1f}" in text
            for case_id in c["newly_failing"] + c["newly_passing"]:
                assert case_id in text
            for ch in c["changes"]:
                assert ch["field"] in text and f"{ch['baseline']} → {ch['candidate']}" in " ".join(texts.split())
    diff = json.loads((folder / "diff.json").read_text())
    acc = next(m for m in diff["metrics"] if m["metric"] == "accuracy" and m["slice"] == "overall")
    assert (f"[{100 * acc['ci']['low']:+.1f}, {100 * acc['ci']['high']:+.1f}] "
            f"{METHOD_TAG[acc['ci']['kind']]}") in text
    assert any(a.get("title") == acc["ci"]["method"] for t, a in report["page"].tags if t == "abbr")
    gate = json.loads((folder / "gate.json").read_text())
    assert ("passed" if gate["passed"] else "failed") in text
    cr = json.loads((folder / "calibrated_refusal.json").read_text())
    assert cr["verdict"] in report["page"].of("section:refusals")
    # the recorded system has no baseline: the page compares it with the oldest version itself
    recorded = report["page"].of(f"article:{evaluated.keys['recorded']}")
    assert "computed for this report" in recorded and "not a recorded gate" in recorded
    # every comparison that was made has its paired-difference plot
    made = sum(c["status"] != "skipped" for key in evaluated.keys.values()
               for c in json.loads((evaluated.folder(key) / "comparisons.json").read_text())["comparisons"])
    plots = [a.get("aria-label", "") for t, a in report["page"].tags if t == "svg"]
    assert sum("paired difference" in label for label in plots) == made + 1  # + the computed one


def test_calibration_status_trend_and_guardrails_are_the_stored_ones(evaluated, report):
    page = report["page"]
    calibration = json.loads((evaluated.env.store.root / "calibration.json").read_text())
    failures = page.of("section:failures")
    for j in calibration["judges"]:
        ok = j["n"] >= 20 and j["kappa"] is not None and j["kappa"] >= 0.6
        row = next(r for r in page.row_texts() if r.startswith(evaluated.keys["raw"]) and j["judge"] in r
                   and "kappa" in r)
        assert ("uncalibrated" not in row) == ok, row
        assert f"n={j['n']}" in row and f"kappa {j['kappa']:.2f}" in row
        assert f"agreement {100 * j['agreement_rate']:.0f}%" in failures
    trend = page.of("section:trend")
    for key in evaluated.keys.values():
        for batch in (evaluated.home / "store" / "runs" / key).iterdir():
            if (batch / "scorecard.json").exists():
                assert batch.name in trend
    suite = json.loads((evaluated.home / "reports" / "guardrails.json").read_text())
    guard = page.of("section:guardrails")
    assert suite["checksum_before"] in guard and suite["checksum_after"] in guard
    for cat, row in suite["summary"].items():
        assert any(r.startswith(f"{cat} {row['cases']} ") for r in page.row_texts()), cat
    cases = page.of("section:hostile-cases")
    for c in suite["cases"]:
        assert c["case_id"] in cases and c["category"] in cases


def test_every_case_of_every_batch_has_a_row_and_its_detail(evaluated, report):
    page = report["page"]
    _, payload = data_block(page)
    rows = [a for a, _ in page.rows if "data-i" in a]
    assert len(rows) == len(payload)
    for key in evaluated.keys.values():
        batch = json.loads((evaluated.folder(key) / "batch.json").read_text())
        mine = [a for a in rows if a["data-config"] == key]
        assert len(mine) == len(batch["case_ids"])
        attempts = pd.read_parquet(evaluated.folder(key) / "attempts.parquet")
        for a in mine[:5]:
            d = payload[int(a["data-i"])]
            assert d["partition_key"] == key
            want = attempts[attempts.case_id == d["case"]["id"]].sort_values("run_index")
            assert [r["answer"]["sql"] for r in d["runs"]] == [None if pd.isna(s) else s for s in want.sql]


def test_the_demo_page_is_self_contained_small_and_escapes_the_payloads(evaluated, report):
    html = report["html"]
    assert report["path"].stat().st_size < MAX_BYTES
    page = assert_self_contained(html)
    for payload in (SCRIPT, IMG, "<!--"):
        assert payload not in html
    assert not any(t == "img" for t, _ in page.tags)
    _, payload = data_block(page)
    hostile = next(d for d in payload if d["case"]["id"] == evaluated.hostile_case
                   and d["partition_key"] == evaluated.keys["recorded"])
    assert SCRIPT in hostile["case"]["question"] and BREAKOUT in hostile["case"]["question"]
    result = hostile["runs"][0]["execution"]["result"]
    assert result["columns"][0] == IMG and result["rows"][0][:2] == [SCRIPT, BREAKOUT]
    assert SCRIPT in page.of("section:cases")  # the question, shown as text


def test_batch_details_read_each_artifact_once_and_equal_case_detail(evaluated, monkeypatch):
    from sqleval_pipeline.pipeline import batch_files
    from sqleval_pipeline.pipeline.casefile import batch_details, case_detail

    key = evaluated.keys["recorded"]
    calls = []
    real = batch_files.load_artifact  # the one reader of a batch's record files (and their twins)
    monkeypatch.setattr(batch_files, "load_artifact", lambda p, m: calls.append(Path(p).name) or real(p, m))
    details = batch_details(evaluated.env, key)
    assert sorted(calls) == ["attempts.parquet", "diagnoses.parquet", "executions.parquet", "grades.parquet"]
    assert [d.case.id for d in details] == json.loads((evaluated.folder(key) / "batch.json").read_text())["case_ids"]
    for d in details:
        assert case_detail(evaluated.env, d.case.id, key) == d
