import re

from typer.testing import CliRunner

from sqleval_pipeline.demo import location
from sqleval_pipeline.cli import app
from tests.conftest import cli_home

runner = CliRunner()


def test_golden_stats_prints_the_table():
    result = runner.invoke(app, ["golden", "stats"])
    assert result.exit_code == 0, result.output
    assert "simple_aggregate" in result.output and "total" in result.output


def test_golden_stats_json():
    result = runner.invoke(app, ["golden", "stats", "--json"])
    assert result.exit_code == 0
    assert '"band": "should_refuse"' in result.output


def test_golden_validate_reports_file_line_and_field(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"id": "a-1"}\n')
    result = runner.invoke(app, ["golden", "validate", "--golden", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:1 field 'question'" in result.output.replace("\n", "")


def test_snapshot_build_without_a_warehouse_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("SQLEVAL_HOME", str(tmp_path))
    result = runner.invoke(app, ["snapshot", "build"])
    assert result.exit_code == 1
    assert "sqleval warehouse build" in result.output


def test_run_evaluates_a_configuration_end_to_end(serving_snapshot, tmp_path, monkeypatch):
    """`sqleval run` materializes the evaluation assets and prints scorecard, diff and gate."""
    cli_home(serving_snapshot, tmp_path, monkeypatch)
    for cfg in ("baseline_raw.yaml", "baseline_curated.yaml"):
        result = runner.invoke(app, ["run", "-c", f"evals/configs/{cfg}", "--cases",
                                     "com-012,com-055,com-013", "--report", str(tmp_path / f"{cfg}.md")])
        assert result.exit_code == 0, result.output
    out = result.output
    assert "Scorecard" in out and "gate passed" in out
    assert "calibrated refusal" in out
    assert (tmp_path / "baseline_curated.yaml.md").read_text().startswith("## Scorecard")


def test_run_shows_the_batch_it_made_or_reused_not_the_newest(serving_snapshot, tmp_path, monkeypatch):
    """A run of other cases after a first one: running the first cases again reuses their
    batch, and the verdict and scorecard shown are that batch's, not the newer one's."""
    cli_home(serving_snapshot, tmp_path, monkeypatch)
    cfg, cases = "evals/configs/baseline_raw.yaml", "com-012,com-013,com-001"
    first = runner.invoke(app, ["run", "-c", cfg, "--cases", cases, "--quiet"])
    assert first.exit_code == 0, first.output
    batch = re.search(r"verdict for \S+, batch (b\S+):", first.output).group(1)
    other = runner.invoke(app, ["run", "-c", cfg, "--cases", "com-055", "--quiet"])
    assert other.exit_code == 0, other.output
    newer = re.search(r"verdict for \S+, batch (b\S+):", other.output).group(1)
    assert newer != batch
    again = runner.invoke(app, ["run", "-c", cfg, "--cases", cases])
    assert again.exit_code == 0, again.output
    out = " ".join(again.output.split())
    # reused (through a Dagster run whose stages find everything current, or none at all)
    assert re.search(r"verdict for \S+, batch (b\S+):", out).group(1) == batch
    assert "3 cases" in out and newer not in out.split("newly failing")[0]


def test_run_with_a_broken_configuration_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ngenerator:\n  kind: baseline\nruns: 1\n")
    result = runner.invoke(app, ["run", "-c", str(bad)])
    assert result.exit_code == 1
    assert "field 'runs'" in result.output and "below the floor of 3" in result.output


def test_run_refuses_fewer_runs_than_the_floor():
    result = runner.invoke(app, ["run", "-c", str(location.EVALS_DIR / "configs" / "baseline_raw.yaml"),
                                 "--runs", "1"])
    assert result.exit_code == 1
    assert "below the floor of 3" in " ".join(result.output.split())


def test_run_exits_1_when_the_regression_gate_fails(serving_snapshot, tmp_path, monkeypatch):
    """A candidate worse than its baseline: the gate fails through Dagster's blocking check and
    `sqleval run` exits 1 (after printing the diff); the baseline itself passes."""
    import shutil

    import yaml

    cli_home(serving_snapshot, tmp_path, monkeypatch)
    configs = tmp_path / "configs"
    configs.mkdir()
    good = yaml.safe_load((location.EVALS_DIR / "configs" / "baseline_curated.yaml").read_text())
    good.update(name="good", baseline=None)
    bad = yaml.safe_load((location.EVALS_DIR / "configs" / "baseline_raw.yaml").read_text())
    bad.update(name="worse", baseline="good")
    (configs / "good.yaml").write_text(yaml.safe_dump({k: v for k, v in good.items() if v is not None}))
    (configs / "worse.yaml").write_text(yaml.safe_dump(bad))
    shutil.copy(location.EVALS_DIR / "decisions.yaml", configs / "decisions.yaml")
    cases = "com-012,com-013,com-018,com-001"  # the curated baseline answers these, the raw one not all
    first = runner.invoke(app, ["run", "-c", str(configs / "good.yaml"), "--cases", cases])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["run", "-c", str(configs / "worse.yaml"), "--cases", cases])
    assert second.exit_code == 1, second.output
    out = second.output
    # the scorecard, the diff and the gate verdict are printed, not a bare Dagster error
    assert "Scorecard" in out and "newly failing" in out and "regression gate failed" in out, out
    assert "DagsterAssetCheckFailedError" not in out, out


def test_an_outage_is_inconclusive_exit_3_and_running_again_asks_only_its_errors(serving_snapshot, tmp_path,
                                                                                  monkeypatch):
    """A provider down for the whole run: every attempt ERROR, exit 3 (not 0, not a regression);
    once it is back, the same command asks only those attempts again, in a new batch."""
    import json

    home = cli_home(serving_snapshot, tmp_path, monkeypatch)
    calls = tmp_path / "calls.txt"
    (tmp_path / "flaky_system.py").write_text(
        "import os\n"
        "def answer(question, context):\n"
        f"    with open({str(calls)!r}, 'a') as f: f.write(context.case_id + '\\n')\n"
        "    if os.environ.get('FLAKY_DOWN') == '1':\n"
        "        raise ConnectionError('connection refused')\n"
        "    return 'SELECT count(*) FROM fct_orders'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = tmp_path / "configs" / "flaky.yaml"
    cfg.parent.mkdir()
    cfg.write_text("name: flaky\ngenerator: {kind: callable, target: 'flaky_system:answer'}\n"
                   "runs: 3\nmax_retries: 0\nconcurrency: 1\n")
    args = ["run", "-c", str(cfg), "--cases", "com-001,com-012"]
    monkeypatch.setenv("FLAKY_DOWN", "1")
    down = runner.invoke(app, args)
    assert down.exit_code == 3, down.output
    assert "inconclusive" in " ".join(down.output.split()).lower()
    assert len(calls.read_text().split()) == 6
    monkeypatch.setenv("FLAKY_DOWN", "0")
    back = runner.invoke(app, args)
    assert back.exit_code == 0, back.output
    assert len(calls.read_text().split()) == 12                    # the 6 ERROR attempts, once each
    batches = sorted((home / "store" / "runs").glob("flaky@*/*/batch.json"))
    infos = [json.loads(b.read_text()) for b in batches]
    retry = next(i for i in infos if i.get("retries_errors_of"))
    assert retry["notes"]["retried_errors"]["count"] == 6 and retry["counts"].get("error", 0) == 0


def test_diff_of_a_damaged_scorecard_names_the_file(tmp_path):
    bad = tmp_path / "bad_card.json"
    bad.write_text('{"schema_version": "sqleval.scorecard/1", "overall":', encoding="utf-8")
    result = runner.invoke(app, ["diff", str(bad), str(bad)])
    assert result.exit_code == 2, result.output
    assert "bad_card.json" in result.output and "error" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
