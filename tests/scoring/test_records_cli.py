"""Record persistence (JSON Lines, Parquet via DuckDB) and the scoring CLI."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from scoring_data import BASELINE, CANDIDATE, make_grades
from typer.testing import CliRunner

from sqleval_pipeline.cli.scoring import app
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade, load_records, save_records
from sqleval_pipeline.results import ResultSet

runner = CliRunner()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_round_trip(tmp_path, suffix):
    grades = make_grades("cfgA", BASELINE)
    p = save_records(tmp_path / f"grades{suffix}", grades)
    assert load_records(p, Grade) == grades
    ex = Execution(config_version="c", case_id="q1", run_index=0, status="ok", elapsed_ms=3.5,
                   result=ResultSet(columns=["n", "s"], types=["DECIMAL(18,2)", "VARCHAR"], rows=[[Decimal("1.50"), "4"]]))
    p = save_records(tmp_path / f"ex{suffix}", [ex])
    (back,) = load_records(p, Execution)
    assert back.result.rows == [[Decimal("1.50"), "4"]] and back == ex
    att = Attempt(config_version="c", case_id="q1", run_index=0, kind="sql", sql="SELECT 1",
                  usage={"input_tokens": 10})
    assert load_records(save_records(tmp_path / f"a{suffix}", [att]), Attempt) == [att]


def test_record_validation():
    with pytest.raises(ValueError):
        Attempt(config_version="c", case_id="q", run_index=0, kind="sql")
    with pytest.raises(ValueError):
        Execution(config_version="c", case_id="q", run_index=0, status="error")
    with pytest.raises(ValueError):
        Execution(config_version="c", case_id="q", run_index=0, status="refused")


def test_cli_scorecard_diff_gate(tmp_path):
    save_records(tmp_path / "a.parquet", make_grades("cfgA", BASELINE))
    save_records(tmp_path / "b.jsonl", make_grades("cfgB", CANDIDATE))
    r = runner.invoke(app, ["scorecard", str(tmp_path / "a.parquet"), "--out", str(tmp_path / "a.json"),
                            "--resamples", "200", "--markdown", str(tmp_path / "a.md")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "a.json").read_text())["overall"]["accuracy"]["value"] == 0.625
    r = runner.invoke(app, ["scorecard", str(tmp_path / "b.jsonl"), "-o", str(tmp_path / "b.json"), "--resamples", "200"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "d.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "d.json").read_text())["newly_failing"] == ["q1"]
    decisions = tmp_path / "decisions.yaml"
    decisions.write_text("[]\n")
    r = runner.invoke(app, ["gate", str(tmp_path / "b.json"), str(tmp_path / "a.json"), "--decisions", str(decisions)])
    assert r.exit_code == 1 and "gate FAILED" in r.output
    r = runner.invoke(app, ["gate", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--decisions", str(decisions)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["gate", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--decisions", str(decisions),
                            "--fail-on-case-regression"])
    assert r.exit_code == 1
    decisions.write_text("- {who: ana, why: accepted, date: 2025-06-01, baseline: cfgB, candidate: cfgA}\n")
    r = runner.invoke(app, ["gate", str(tmp_path / "b.json"), str(tmp_path / "a.json"), "--decisions", str(decisions)])
    assert r.exit_code == 0 and "decision of ana" in r.output


def test_cli_refuses_other_grader(tmp_path):
    save_records(tmp_path / "a.jsonl", make_grades("cfgA", BASELINE))
    save_records(tmp_path / "b.jsonl", make_grades("cfgB", BASELINE, grader="r9-other"))
    for n in ("a", "b"):
        runner.invoke(app, ["scorecard", str(tmp_path / f"{n}.jsonl"), "-o", str(tmp_path / f"{n}.json"), "--resamples", "50"])
    r = runner.invoke(app, ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert r.exit_code == 2 and "grader versions differ" in r.output
    r = runner.invoke(app, ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--rebase"])
    assert r.exit_code == 0 and "RE-BASED" in r.output
