"""Output that fits CI and people (docs/command-line.md): outside a terminal nothing is cut,
library warnings go to the run log, and `sqleval run` opens with its verdict (`--quiet`,
`--json` for scripts).

Commands run as a subprocess with stdout and stderr pipes (as in CI) or through CliRunner;
expected values come from the files the run stored, read here with `json`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sqleval_pipeline.cli import app
from sqleval_pipeline.demo import location
from tests.conftest import home_over

BIN = Path(sys.executable).parent
CONFIGS = location.EVALS_DIR / "configs"
runner = CliRunner()
VERDICT_KEYS = {"partition", "config_version", "batch_id", "gate", "gate_summary", "accuracy",
                "strict_accuracy", "newly_failing", "report", "markdown_report"}


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update({"SQLEVAL_PROJECT": str(location.REPO_ROOT / "sqleval.yaml"), "SQLEVAL_HOME": str(home),
                "DAGSTER_HOME": str(home / "dagster_home"), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
                "DO_NOT_TRACK": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    return env


def sqleval(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "sqleval"), *args], env=env, cwd=location.REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)


# --------------------------------------------------------------------------- nothing cut


def test_a_long_import_rejection_is_printed_whole(serving_snapshot, tmp_path, monkeypatch):
    """The rejection table of `golden import` keeps a reason of several hundred characters on
    one line, as the import's own JSON report records it."""
    home = home_over(serving_snapshot, tmp_path / "home")
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    monkeypatch.delenv("COLUMNS", raising=False)
    table = "widget_sales_by_depot_and_season_archive_table_of_the_northern_region"
    questions = tmp_path / "q.csv"
    questions.write_text("id,question,sql,answerable\n"
                         "imp-1,How many widgets did the northern depot sell?,"
                         f"SELECT count(*) FROM {table},true\n")
    report = tmp_path / "import.json"
    result = runner.invoke(app, ["golden", "import", str(questions), "--file", str(tmp_path / "g.jsonl"),
                                 "--json", str(report)])
    assert result.exit_code == 1, result.output  # its only row is rejected
    reason = json.loads(report.read_text())["rejected"][0]["reason"]
    assert len(reason) >= 300 and table in reason, reason
    line = next((ln for ln in result.stdout.splitlines() if "rejected:" in ln), "")
    assert reason in line, f"reason cut or wrapped:\n{result.stdout}"
    assert "…" not in result.stdout


def _long_gate_report():
    from sqleval_pipeline.pipeline.comparisons import Comparison, GateReport

    reason = ("gate failed: accuracy dropped " + "and the paired interval excludes zero; " * 8).strip()
    failing = [f"case-with-a-long-identifier-{i:03d}" for i in range(8)]
    return GateReport(partition_key="candidate-configuration-with-a-long-name@1a2b3c4d",
                      batch_id="b20260101T000000.000Z-abcd", comparisons=[Comparison(
                          kind="baseline", status="failed", reason=reason,
                          baseline_partition="baseline-configuration-with-a-very-long-name@9f8e7d6c",
                          baseline_accuracy=0.8, candidate_accuracy=0.5, delta=-0.3,
                          newly_failing=failing)]), reason, failing


def test_the_gate_table_is_not_cut_outside_a_terminal(monkeypatch):
    from sqleval_pipeline.cli.common import console
    from sqleval_pipeline.reporting.gate import render_gate_report

    monkeypatch.delenv("COLUMNS", raising=False)
    report, reason, failing = _long_gate_report()
    out = io.StringIO()
    with redirect_stdout(out):  # the CLI console writes to whatever sys.stdout is
        render_gate_report(report, console)
    text = out.getvalue()
    assert len(reason) > 300
    assert reason in text
    assert ", ".join(failing) in text  # the table row with the eight ids, on one line
    assert "baseline-configuration-with-a-very-long-name@9f8e7d6c" in text
    assert "…" not in text


def test_an_explicit_columns_is_respected(monkeypatch):
    from sqleval_pipeline.cli.output import CliConsole
    from sqleval_pipeline.reporting.gate import render_gate_report

    monkeypatch.setenv("COLUMNS", "70")
    out = io.StringIO()
    render_gate_report(_long_gate_report()[0], CliConsole(file=out))
    assert max(len(line) for line in out.getvalue().splitlines()) <= 70


# --------------------------------------------------------------------------- warnings


FAKE_RUN = """\
import sys, warnings
from sqleval_pipeline import orchestrate

def materialize(groups, run_config=None, **kwargs):  # a library warns while assets run
    warnings.warn("MARKER-7f3a: a third-party library is noisy", UserWarning)
    return orchestrate.RunSummary("fakerun0001", 0.01)

orchestrate.materialize = materialize
from sqleval_pipeline.cli import main
sys.argv = ["sqleval", "warehouse", "build"]
main()
"""


def test_a_warning_during_a_command_goes_to_the_log_not_the_console(tmp_path):
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    home = tmp_path / "home"
    proc = subprocess.run([sys.executable, str(script)], env=cli_env(home), cwd=location.REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "fakerun0" in proc.stdout  # the command ran to its summary
    assert "MARKER-7f3a" not in proc.stdout + proc.stderr, proc.stderr
    assert "MARKER-7f3a" in (home / "logs" / "last-run.log").read_text()


# --------------------------------------------------------------------------- sqleval run


@pytest.fixture(scope="module")
def evaluated(serving_snapshot, tmp_path_factory):
    """A home with the session's snapshot where `sqleval run --json` evaluated the demo's
    root baseline (baseline-raw)."""
    root = tmp_path_factory.mktemp("cli_output")
    home = home_over(serving_snapshot, root / "home")
    env = cli_env(home)
    md = root / "raw.md"
    proc = sqleval(["run", "-c", str(CONFIGS / "baseline_raw.yaml"), "--json", "--report", str(md)], env)
    return home, env, md, proc


def expected_gate(comparisons: dict) -> str:
    """docs/command-line.md: inconclusive, failed, passed when a comparison was made, else
    not gated."""
    statuses = [c["status"] for c in comparisons["comparisons"]]
    if comparisons.get("inconclusive") or "inconclusive" in statuses:
        return "inconclusive"
    if "failed" in statuses:
        return "failed"
    return "passed" if any(s != "skipped" for s in statuses) else "not_gated"


def check_against_store(doc: dict, home: Path) -> Path:
    """The JSON verdict agrees with the batch's stored files; returns the batch folder."""
    assert set(doc) == VERDICT_KEYS, sorted(doc)
    folder = home / "store" / "runs" / doc["partition"] / doc["batch_id"]
    card = json.loads((folder / "scorecard.json").read_text())
    comparisons = json.loads((folder / "comparisons.json").read_text())
    assert doc["config_version"] == card["config_version"] == doc["partition"].split("@")[1]
    for key in ("accuracy", "strict_accuracy"):
        stored, got = card["overall"][key], doc[key]
        assert (got["value"], got["numerator"], got["denominator"]) == (
            stored["value"], stored["num"], stored["den"])
        assert got["value"] == pytest.approx(stored["num"] / stored["den"])
        assert (got["low"], got["high"], got["method"]) == (stored["ci"]["low"], stored["ci"]["high"],
                                                            stored["ci"]["method"])
        assert got["level"] == 0.95 and got["low"] <= got["value"] <= got["high"]
    assert doc["gate"] == expected_gate(comparisons)
    made = [c for c in comparisons["comparisons"] if c["status"] != "skipped"]
    assert set(doc["newly_failing"]) == {i for c in made for i in c["newly_failing"]}
    assert doc["report"] == str(folder / "report.html") and (folder / "report.html").is_file()
    return folder


def test_run_json_is_one_object_that_agrees_with_the_stored_scorecard(evaluated):
    home, _, md, proc = evaluated
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # no warning, note or progress bar on the console
    doc = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    assert doc["partition"].startswith("baseline-raw@")
    check_against_store(doc, home)
    assert doc["gate"] == "not_gated"  # the root baseline has nothing to compare with
    assert doc["markdown_report"] == str(md) and md.read_text().startswith("## Scorecard")


def test_run_opens_with_the_verdict_then_the_details(evaluated):
    home, env, _, first = evaluated
    assert first.returncode == 0, first.stderr
    proc = sqleval(["run", "-c", str(CONFIGS / "baseline_curated.yaml")], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    verdict = out.index("verdict for baseline-curated@")
    for detail in ("Scorecard ", "┏", "regression gate:", "Dagster run "):
        assert verdict < out.index(detail), f"{detail!r} before the verdict:\n{out}"
    block = out[verdict:].splitlines()[:6]
    assert "gate PASSED" in block[0]  # curated vs its baseline, raw: no regression
    assert block[2].startswith("  accuracy: ") and "95% interval" in block[2] and "method:" in block[2]
    assert block[3].startswith("  strict accuracy: ")
    assert block[4] == "  newly failing (0): none"
    assert "…" not in out  # nothing cut at 80 columns


def test_run_quiet_prints_the_verdict_only(evaluated):
    home, env, _, first = evaluated
    assert first.returncode == 0, first.stderr
    proc = sqleval(["run", "-c", str(CONFIGS / "baseline_raw.yaml"), "--quiet"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("verdict for baseline-raw@"), proc.stdout
    assert lines[0].rsplit(": gate ", 1)[1] in ("PASSED", "FAILED", "not gated", "INCONCLUSIVE")
    assert all(line.startswith("  ") for line in lines[1:]), proc.stdout
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "gate", "accuracy", "strict accuracy", "newly failing (0)", "report"]
    assert proc.stderr == ""


def test_run_json_of_a_failed_gate_lists_the_newly_failing_cases_and_exits_1(serving_snapshot, tmp_path):
    """A candidate worse than its baseline: exit 1 as without --json, the JSON object on
    stdout with the cases the comparison found newly failing, the error on stderr."""
    home = home_over(serving_snapshot, tmp_path / "home")
    env = cli_env(home)
    configs = tmp_path / "configs"
    configs.mkdir()
    good = yaml.safe_load((CONFIGS / "baseline_curated.yaml").read_text())
    good.pop("baseline", None)
    good["name"] = "good"
    bad = yaml.safe_load((CONFIGS / "baseline_raw.yaml").read_text())
    bad.update(name="worse", baseline="good")
    (configs / "good.yaml").write_text(yaml.safe_dump(good))
    (configs / "worse.yaml").write_text(yaml.safe_dump(bad))
    (configs / "decisions.yaml").write_text((location.EVALS_DIR / "decisions.yaml").read_text())
    cases = "com-012,com-013,com-018,com-001"  # the curated baseline answers these, the raw one not all
    first = sqleval(["run", "-c", str(configs / "good.yaml"), "--cases", cases, "--quiet"], env)
    assert first.returncode == 0, first.stdout + first.stderr
    proc = sqleval(["run", "-c", str(configs / "worse.yaml"), "--cases", cases, "--json"], env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    folder = check_against_store(doc, home)
    assert doc["gate"] == "failed"
    assert doc["newly_failing"] and set(doc["newly_failing"]) <= set(cases.split(","))
    diff = json.loads((folder / "diff.json").read_text())
    assert set(diff["newly_failing"]) <= set(doc["newly_failing"])
    assert "regression gate failed" in proc.stderr
