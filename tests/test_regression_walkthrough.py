"""Debugging a regression, end to end, as the README tells a user to.

A configuration file is edited in place so that it gets worse; the sensor registers the new
version (and marks the old one superseded); `sqleval run` fails the per-partition gate against
the previous version and says what changed; the gate's case table in Dagster names exactly the
newly failing cases (derived here from the stored grades, not from the code under test)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sqleval_pipeline.demo import location
from sqleval_pipeline.cli import app
from tests.conftest import cli_home

runner = CliRunner()
PASSING = {"CORRECT", "CORRECT_FACTS", "DEFERRED_CORRECTLY"}


def _shares(grades: pd.DataFrame) -> dict[str, float]:
    """Share of graded runs that passed, per case (ERROR and ungraded runs do not count)."""
    graded = grades[grades["outcome"].notna() & (grades["outcome"] != "ERROR")]
    return {cid: float(g["outcome"].isin(PASSING).mean()) for cid, g in graded.groupby("case_id")}


def _passes(grades: pd.DataFrame) -> dict[str, bool]:
    """Majority verdict per case over graded runs (ERROR and ungraded runs do not count)."""
    out = {}
    for cid, g in grades.groupby("case_id"):
        graded = g[g["outcome"].notna() & (g["outcome"] != "ERROR")]
        if len(graded):
            out[cid] = graded["outcome"].isin(PASSING).sum() * 2 > len(graded)
    return out


def _latest(instance, asset: str, partition: str):
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1)
    return found.records[0].asset_materialization


@pytest.mark.slow
def test_an_in_place_edit_that_makes_things_worse_is_caught_and_traced(serving_snapshot, tmp_path,
                                                                        monkeypatch):
    from sqleval_pipeline.configs import load_config
    from sqleval_pipeline.defs.evaluation.sensors import new_configuration_versions
    from sqleval_pipeline.defs.resources import SqlevalHome
    from sqleval_pipeline.project import current

    home = cli_home(serving_snapshot, tmp_path, monkeypatch)
    configs = tmp_path / "configs"
    configs.mkdir()
    doc = yaml.safe_load((location.EVALS_DIR / "configs" / "baseline_curated.yaml").read_text())
    doc = {k: v for k, v in doc.items() if k != "baseline"} | {"name": "walk"}
    path = configs / "walk.yaml"
    path.write_text(yaml.safe_dump(doc))
    before = load_config(path)
    first = runner.invoke(app, ["run", "-c", str(path)])
    assert first.exit_code == 0, first.output

    doc["context"] = {**doc.get("context", {}), "curation": False}  # the edit: no glossary
    path.write_text(yaml.safe_dump(doc))
    after = load_config(path)
    assert after.partition_key != before.partition_key

    project = current()
    resources = {"sqleval": SqlevalHome(project_file=str(project.file), root=str(home),
                                        configs_dir=str(configs))}
    with dg.DagsterInstance.get() as instance:
        tick = new_configuration_versions(dg.build_sensor_context(instance=instance,
                                                                  resources=resources))
        assert [r.partition_key for r in tick.run_requests] == [after.partition_key]
        assert [(o.partition, o.metadata["superseded_by"].value) for o in tick.asset_events] == [
            (before.partition_key, after.partition_key)]
        instance.add_dynamic_partitions("config_versions", [after.partition_key])

    second = runner.invoke(app, ["run", "-c", str(path)])
    out = " ".join(second.output.split())
    assert second.exit_code == 1, second.output
    assert "previous version" in out and "failed" in out and "context.curation" in out, out

    store = home / "store" / "runs"
    old_batch = max(p for p in (store / before.partition_key).iterdir() if p.is_dir())
    new_batch = max(p for p in (store / after.partition_key).iterdir() if p.is_dir())
    old = _passes(pd.read_parquet(old_batch / "grades.parquet"))
    new = _passes(pd.read_parquet(new_batch / "grades.parquet"))
    expected = sorted(c for c in old.keys() & new.keys() if old[c] and not new[c])
    assert expected, "the edit was meant to break cases"

    with dg.DagsterInstance.get() as instance:
        gate = _latest(instance, "eval_gate", after.partition_key)
        table = gate.metadata["newly_failing"].value
        assert {c.name for c in table.schema.columns} >= {"case_id", "comparison", "diagnosis"}
        against_previous = sorted(r.data["case_id"] for r in table.records
                                  if r.data["comparison"] == "previous_version")
        assert against_previous == expected
        assert all(r.data["diagnosis"] for r in table.records)  # every one has a category
        md = gate.metadata["worst_regressions"].value
        assert "```sql" in md
        # worst first: failing in more runs now plus passing in more runs before (ties by id)
        now_share = _shares(pd.read_parquet(new_batch / "grades.parquet"))
        before_share = _shares(pd.read_parquet(old_batch / "grades.parquet"))
        worst = min(expected, key=lambda c: (-((1 - now_share[c]) + before_share[c]), c))
        headings = [line[4:] for line in md.splitlines() if line.startswith("### ")]
        assert headings[0] == worst, (headings, worst)
        # the gate leads with the failing comparison, and the diff shown is that comparison's
        # (no baseline is declared here: the previous version is what failed)
        lead = gate.metadata["gate"].value.splitlines()[2]
        assert lead.startswith("**Failed against the previous version"), lead
        assert gate.metadata["diff_against"].value == "previous_version"
        # every newly failing case in full — reference, previous and current SQL — in a file
        full = Path(gate.metadata["regressions_file"].value).read_text(encoding="utf-8")
        for cid in expected:
            assert f"### {cid}" in full
        old_sql = pd.read_parquet(old_batch / "attempts.parquet")
        first_old = old_sql[(old_sql["case_id"] == worst) & (old_sql["run_index"] == 0)]["sql"].iloc[0]
        block = full.split(f"### {worst}")[1].split("\n### ")[0]
        assert "**Reference SQL**" in block and "**Before**" in block and "**Now, run 0" in block
        assert first_old.strip() in block
        # the check is evaluated for this partition, and failed
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": after.partition_key}))
        evaluations = [e.dagster_event.event_specific_data
                       for e in instance.all_logs(runs[0].run_id,
                                                  of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
        (check,) = [e for e in evaluations if e.check_name == "regression_gate"]
        assert check.passed is False and check.partition == after.partition_key
        grades = _latest(instance, "eval_grades", after.partition_key)
        failing = {r.data["case_id"] for r in grades.metadata["failing_cases"].value.records}
        assert set(expected) <= failing

    # one newly failing case in full, with its diagnosis (as stored for this batch)
    case = expected[0]
    diags = pd.read_parquet(new_batch / "diagnoses.parquet")
    categories = set(diags[(diags["case_id"] == case) & (diags["judge"] == "rules")]["category"])
    assert categories
    shown = runner.invoke(app, ["show", case, "-c", str(path), "--json"])
    assert shown.exit_code == 0, shown.output
    import json

    doc = json.loads(shown.output)
    assert doc["partition_key"] == after.partition_key and doc["case"]["id"] == case
    assert {d["category"] for r in doc["runs"] for d in r["diagnoses"]} == categories
    text = runner.invoke(app, ["show", case, "-c", str(path)], terminal_width=160)
    assert text.exit_code == 0 and "diagnosis" in text.output
