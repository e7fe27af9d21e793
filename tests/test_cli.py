from typer.testing import CliRunner

from sqleval_pipeline.cli import app

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
    home = tmp_path / "home"
    home.mkdir()
    (home / "snapshots").symlink_to(serving_snapshot.home.snapshot_dir)
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    for cfg in ("baseline_raw.yaml", "baseline_curated.yaml"):
        result = runner.invoke(app, ["run", "-c", f"evals/configs/{cfg}", "--cases",
                                     "com-012,com-055,com-013", "--report", str(tmp_path / f"{cfg}.md")])
        assert result.exit_code == 0, result.output
    out = result.output
    assert "Scorecard" in out and "gate passed" in out
    assert "calibrated refusal" in out
    assert (tmp_path / "baseline_curated.yaml.md").read_text().startswith("## Scorecard")


def test_run_with_a_broken_configuration_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ngenerator:\n  kind: baseline\nruns: 1\n")
    result = runner.invoke(app, ["run", "-c", str(bad)])
    assert result.exit_code == 1
    assert "field 'runs'" in result.output and "below the floor of 3" in result.output


def test_run_refuses_fewer_runs_than_the_floor():
    from sqleval_pipeline import paths

    result = runner.invoke(app, ["run", "-c", str(paths.EVALS_DIR / "configs" / "baseline_raw.yaml"),
                                 "--runs", "1"])
    assert result.exit_code == 1
    assert "below the floor of 3" in " ".join(result.output.split())
