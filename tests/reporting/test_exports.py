"""``sqleval export`` (docs/exports.md) and the report commands, on the ``evaluated`` store of
tests/reporting/conftest.py (slow lane): the exported files match the documented schema and
the stored grades; ``sqleval report``, ``sqleval export`` and ``sqleval guardrails report``
write what they are asked for and fail with a sentence on an unknown version."""

from __future__ import annotations

import json
import re

import pandas as pd
import pyarrow.parquet as pq
from typer.testing import CliRunner

from sqleval_pipeline.demo import location
from tests.reporting.pages import Page, assert_self_contained



def _documented_columns() -> dict[str, str]:
    text = (location.REPO_ROOT / "docs" / "exports.md").read_text()
    section = text.split("## `cases.parquet` and `cases.jsonl`", 1)[1]
    return dict(re.findall(r"^\| `([a-z_]+)` \| `([a-z0-9]+)` \|", section, flags=re.M))


def test_exports_match_the_documented_schema_and_the_stored_grades(evaluated, tmp_path):
    from sqleval_pipeline.reporting.exports import export

    files = export(evaluated.env, None, tmp_path / "out")
    documented = _documented_columns()
    assert documented, "docs/exports.md documents no column"
    index = json.loads((tmp_path / "out" / "export.json").read_text())
    assert {e["partition_key"] for e in index["evaluations"]} == set(evaluated.keys.values())
    assert all(f.exists() for f in files)
    for key in evaluated.keys.values():
        folder = tmp_path / "out" / key
        table = pq.read_table(folder / "cases.parquet")
        assert {f.name: str(f.type) for f in table.schema} == documented
        lines = [json.loads(x) for x in (folder / "cases.jsonl").read_text().splitlines()]
        assert lines and all(list(x) == list(documented) for x in lines)
        assert (folder / "scorecard.json").read_bytes() == (evaluated.folder(key) / "scorecard.json").read_bytes()
        grades = pd.read_parquet(evaluated.folder(key) / "grades.parquet")
        got = {(x["case_id"], x["run_index"]): (x["outcome"], x["grade_reason"]) for x in lines}
        assert got == {(g.case_id, g.run_index): (g.outcome, g.reason) for g in grades.itertuples()}
        assert table.num_rows == len(lines) == len(grades)
        assert table.to_pylist() == lines


# --------------------------------------------------------------------------- commands


def test_report_export_and_evidence_commands(evaluated, tmp_path):
    from sqleval_pipeline import project as proj
    from sqleval_pipeline.cli import app

    runner = CliRunner()
    env = {"SQLEVAL_HOME": str(evaluated.home), "COLUMNS": "200"}
    pre = ["--project", str(evaluated.project)]
    try:
        out = tmp_path / "r.html"
        res = runner.invoke(app, [*pre, "report", "-c", "baseline-curated", "-c", "recorded-report",
                                  "-o", str(out)], env=env)
        assert res.exit_code == 0, res.output
        page = Page(out.read_text())
        assert {a["data-config"] for a, _ in page.rows if "data-config" in a} == \
            {evaluated.keys["curated"], evaluated.keys["recorded"]}
        res = runner.invoke(app, [*pre, "report", "--partition", "nope@00000000", "-o", str(out)], env=env)
        assert res.exit_code == 1 and "no configuration version" in res.output
        res = runner.invoke(app, [*pre, "export", "--partition", evaluated.keys["raw"], "-o",
                                  str(tmp_path / "x")], env=env)
        assert res.exit_code == 0, res.output
        assert (tmp_path / "x" / evaluated.keys["raw"] / "cases.parquet").exists()
        pack = tmp_path / "evidence.html"
        res = runner.invoke(app, [*pre, "guardrails", "report", "-o", str(pack)], env=env)
        assert res.exit_code == 0, res.output
        html = pack.read_text()
        page = assert_self_contained(html)
        suite = json.loads((evaluated.home / "reports" / "guardrails.json").read_text())
        assert suite["checksum_before"] in html and all(c["case_id"] in html for c in suite["cases"])
        settings = page.of("section:policy")
        for name in ("enable_external_access", "lock_configuration", "access_mode", "max_execution_time"):
            assert name in settings
        assert "differs" not in settings and evaluated.env.policy().version in settings
    finally:
        proj.select(None)
