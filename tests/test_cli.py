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
