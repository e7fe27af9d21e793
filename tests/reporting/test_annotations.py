"""GitHub workflow commands of ``sqleval run --github-annotations``.

Each line is parsed back as GitHub does (``::error k=v,…::message``, then the escapes undone)
and checked against what the synthetic batch holds: the file relative to the root, and the
case's 1-based line found here by reading the JSON Lines file, not by the code under test.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sqleval_pipeline.reporting.annotations import (
    command,
    escape_data,
    escape_property,
    github_annotations,
)
from sqleval_pipeline.reporting.ci_batch import annotation_root, golden_locations, load_batch_results
from tests.reporting.ci_batches import Spec, gate_against, line_of, write_batch, write_golden
from tests.conftest import home_over

BASE, CAND = "base@11111111", "cand@22222222"
LINE = re.compile(r"^::(?P<level>[a-z]+)(?: (?P<props>[^:]*))?::(?P<message>.*)$")


def unescape(text: str) -> str:
    return (text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",")
            .replace("%25", "%"))


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """(level, properties, message) of one workflow command, escapes undone."""
    assert "\n" not in line and "\r" not in line, line
    m = LINE.match(line)
    assert m, line
    props = {}
    for part in (m["props"] or "").split(","):
        if part:
            key, _, value = part.partition("=")
            props[key] = unescape(value)
    return m["level"], props, unescape(m["message"])


def test_escaping_follows_githubs_rules():
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext%3A a%2Cb"
    assert escape_data("%0A") == "%250A"                    # an escape in the data stays data
    assert escape_data("nul\x00 esc\x1b") == "nul\\u0000 esc\\u001b"
    line = command("error", "m", file="a,b:c.jsonl", line=7, title=None)
    assert line == "::error file=a%2Cb%3Ac.jsonl,line=7::m"


@pytest.fixture
def gated(tmp_path):
    store = tmp_path / "store"
    ids = ["q-keep", "q-broke", "q-odd", "q-refused", "q-flaky", "q-gone"]
    base = write_batch(store, BASE, "b1", [Spec(i, ["CORRECT"] * 3) for i in ids])
    odd = "50% of rows\r\nwere: wrong, really; ::error:: injected"
    cand = write_batch(store, CAND, "b2", [
        Spec("q-keep", ["CORRECT"] * 3),
        Spec("q-broke", ["WRONG"] * 3, mismatch="expected 3 rows, got 4"),
        Spec("q-odd", ["WRONG", "WRONG", "CORRECT"], mismatch=odd),
        Spec("q-refused", ["DEFERRED_WRONGLY"] * 3),
        Spec("q-flaky", ["CORRECT", "WRONG", "CORRECT"]),        # passes by majority
        Spec("q-gone", ["WRONG"] * 3),                           # no longer in the golden set
    ])
    gate_against(cand, base)
    golden = tmp_path / "evals" / "golden"
    write_golden(golden / "alpha.jsonl", ["q-x1", "q-refused", "q-x2", "q-x3", "q-keep"], blank_every=2)
    write_golden(golden / "beta.jsonl", ["q-y1", "q-y2", "q-odd", "q-broke", "q-flaky"], blank_every=1)
    return tmp_path, cand, golden


def test_one_error_per_newly_failing_case_at_its_file_and_line(gated):
    root, cand, golden = gated
    results = load_batch_results(cand.folder, golden_locations(golden, root))
    lines = github_annotations(results, "evals/configs/c,and:1.yaml")
    parsed = [parse(line) for line in lines]
    # the gate first: the candidate lost four of six cases its baseline passed
    level, props, message = parsed[0]
    assert level == "error" and props["file"] == "evals/configs/c,and:1.yaml" and "line" not in props
    assert "regression gate FAILED" in props["title"] and CAND in props["title"]
    assert "declared baseline base@11111111" in message
    cases = {re.match(r"sqleval: (\S+) newly failing", p["title"]).group(1): (p, m) for _, p, m in parsed[1:]}
    assert set(cases) == {"q-broke", "q-odd", "q-refused", "q-gone"}
    for case_id, file in (("q-broke", "beta"), ("q-odd", "beta"), ("q-refused", "alpha")):
        props, message = cases[case_id]
        path = golden / f"{file}.jsonl"
        assert props["file"] == f"evals/golden/{file}.jsonl"
        assert int(props["line"]) == line_of(path, case_id)
        assert message.startswith(f"{case_id} newly failing in {CAND} (declared baseline {BASE} passed it):\n")
    assert "file" not in cases["q-gone"][0] and "line" not in cases["q-gone"][0]
    assert "expected 3 rows, got 4" in cases["q-broke"][1]
    odd = cases["q-odd"][1]
    assert "50% of rows were: wrong, really; ::error:: injected" in odd   # one line, whole
    assert "DEFERRED_WRONGLY" in cases["q-refused"][1]


def test_every_line_is_one_command_whatever_the_text(gated):
    """q-odd's mismatch holds a CR LF and ``::error::``: still one command per line, five in all
    (the gate and four cases), each parsing back whole."""
    root, cand, golden = gated
    lines = github_annotations(load_batch_results(cand.folder, golden_locations(golden, root)))
    assert len(lines) == 5 and all(line.startswith("::error ") for line in lines)
    assert all("\n" not in line and "\r" not in line for line in lines)
    assert [parse(line)[0] for line in lines] == ["error"] * 5


def test_a_passing_gate_still_marks_its_newly_failing_cases(tmp_path):
    store = tmp_path / "store"
    base = write_batch(store, BASE, "b1", [Spec("q1", ["CORRECT"] * 3)]
                       + [Spec(f"q{i}", ["WRONG"] * 3) for i in (2, 3, 4)])
    cand = write_batch(store, CAND, "b2", [Spec("q1", ["WRONG"] * 3)]
                       + [Spec(f"q{i}", ["CORRECT"] * 3) for i in (2, 3, 4)])
    gate_against(cand, base)
    golden = tmp_path / "g"
    write_golden(golden / "x.jsonl", ["q4", "q3", "q2", "q1"])
    results = load_batch_results(cand.folder, golden_locations(golden, tmp_path))
    assert results.status == "passed"
    parsed = [parse(line) for line in github_annotations(results)]
    assert len(parsed) == 1
    assert parsed[0][1]["file"] == "g/x.jsonl" and int(parsed[0][1]["line"]) == line_of(golden / "x.jsonl", "q1")


def test_nothing_to_compare_with_prints_nothing(tmp_path):
    cand = write_batch(tmp_path / "store", CAND, "b2", [Spec("q1", ["WRONG"] * 3)])
    gate_against(cand, None)
    assert github_annotations(load_batch_results(cand.folder)) == []


def test_paths_are_relative_to_the_checkout(tmp_path):
    project = tmp_path / "repo" / "analytics" / "eval"
    project.mkdir(parents=True)
    assert annotation_root(project, {}) == project                        # no checkout found
    (tmp_path / "repo" / ".git").mkdir()
    assert annotation_root(project, {}) == tmp_path / "repo"
    assert annotation_root(project, {"GITHUB_WORKSPACE": str(tmp_path / "repo" / "analytics")}) == \
        tmp_path / "repo" / "analytics"
    assert annotation_root(project, {"GITHUB_WORKSPACE": str(tmp_path / "elsewhere")}) == tmp_path / "repo"


# --------------------------------------------------------------------------- end to end


DEMO = Path(__file__).resolve().parents[2]


def test_sqleval_run_writes_junit_summary_and_annotations(serving_snapshot, tmp_path, monkeypatch):
    """Through the command line on the demo: a configuration worse than its baseline on four
    cases. Its JUnit file parses, its summary opens with the failed gate, and each newly
    failing case is annotated at its line in evals/golden/commerce.jsonl."""
    from lxml import etree

    from sqleval_pipeline.cli import app

    home = home_over(serving_snapshot, tmp_path / "home")  # over the session's build of the demo
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    configs = tmp_path / "configs"
    configs.mkdir()
    good = yaml.safe_load((DEMO / "evals" / "configs" / "baseline_curated.yaml").read_text())
    good.update(name="good", baseline=None)
    worse = yaml.safe_load((DEMO / "evals" / "configs" / "baseline_raw.yaml").read_text())
    worse.update(name="worse", baseline="good")
    (configs / "good.yaml").write_text(yaml.safe_dump({k: v for k, v in good.items() if v is not None}))
    (configs / "worse.yaml").write_text(yaml.safe_dump(worse))
    shutil.copy(DEMO / "evals" / "decisions.yaml", configs / "decisions.yaml")
    cases = "com-012,com-013,com-018,com-001"   # the curated baseline answers them, the raw one not all
    runner = CliRunner()
    first = runner.invoke(app, ["run", "-c", str(configs / "good.yaml"), "--cases", cases, "-q"])
    assert first.exit_code == 0, first.output
    junit, summary = tmp_path / "out" / "junit.xml", tmp_path / "out" / "summary.md"
    second = runner.invoke(app, ["run", "-c", str(configs / "worse.yaml"), "--cases", cases, "-q",
                                 "--junit", str(junit), "--summary", str(summary), "--github-annotations"])
    assert second.exit_code == 1, second.output
    commands = [parse(line) for line in second.output.splitlines() if line.startswith("::")]
    assert "regression gate FAILED" in commands[0][1]["title"]
    golden = DEMO / "evals" / "golden" / "commerce.jsonl"
    batch = next((home / "store" / "runs").glob("worse@*/*/batch.json"))
    comparisons = json.loads((batch.parent / "comparisons.json").read_text())
    newly = comparisons["comparisons"][0]["newly_failing"]
    assert newly                                    # the raw configuration loses some of them
    marked = {p["title"].split()[1]: p for _, p, _ in commands[1:]}
    assert set(marked) == set(newly)
    root = annotation_root(DEMO, {})
    for case_id, props in marked.items():
        assert props["file"] == golden.relative_to(root).as_posix()
        assert int(props["line"]) == line_of(golden, case_id)
    doc = etree.fromstring(junit.read_bytes())
    failed = {c.get("name") for c in doc.iter("testcase") if c.find("failure") is not None}
    assert set(newly) <= failed and "baseline" in failed
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## sqleval: gate FAILED")
    assert all(f"`{case_id}`" in text for case_id in newly)
