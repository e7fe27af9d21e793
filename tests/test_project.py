"""A sqleval project that is not the demo: init → build → golden import → run → scorecard on
the insurance example (seeds, views served from `analytics`, a dbt semantic layer, a
`restricted` schema), through the real CLI, dbt, DuckDB, GX and Dagster. Plus the bad inputs
a newcomer meets, each answered with the file/field and what to do."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqleval_pipeline import project as proj
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.cli import app
from tests.conftest import INSURANCE as FIXTURE, INSURANCE_HOSTILE

runner = CliRunner()


def sqleval(*args: str):
    result = runner.invoke(app, list(args))
    proj.select(None)  # the CLI selects a project for the process: forget it between commands
    return result


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def insurance(built_insurance) -> Path:
    """The insurance dbt project copied into a temporary folder, and a sqleval project over it
    written by `sqleval init` and built by `sqleval build` (tests.conftest.BuiltInsurance; a
    copy of this module's own: nothing of the repository is written to)."""
    mp = pytest.MonkeyPatch()
    mp.delenv("SQLEVAL_HOME", raising=False)  # each project keeps its own build dir
    mp.delenv("SQLEVAL_PROJECT", raising=False)
    yield built_insurance.copy("project")
    mp.undo()
    proj.select(None)


@pytest.fixture(scope="module")
def built(insurance):
    return insurance


def _served_models() -> set[str]:
    return {p.stem for p in (FIXTURE / "models" / "analytics").glob("*.sql")}


def _csv_rows(name: str) -> list[dict]:
    with (FIXTURE / name).open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # runs dbt (parse, ls) on a foreign project
def test_init_writes_a_project_and_says_what_to_do_next(insurance):
    spec = proj.load_project(insurance).spec
    assert spec.serve.select == "tag:serving" and str(spec.as_of) == "2024-06-30"
    assert spec.sensitive_schemas == ["restricted"]
    assert (insurance / "evals" / "configs" / "baseline.yaml").exists()
    assert (insurance / "evals" / "answers" / "example.jsonl").exists()
    # the project has a dbt semantic layer: its baseline is curated with it
    assert "curation: true" in (insurance / "evals" / "configs" / "baseline.yaml").read_text()


@pytest.mark.slow  # runs dbt (parse, ls) on a foreign project
def test_init_prints_what_it_serves(built_insurance):
    out = _one_line(built_insurance.init_output)
    assert f"serves {len(_served_models())} model(s): " in out
    assert all(name in out for name in _served_models())


@pytest.mark.slow  # runs dbt (parse, ls) on a foreign project
def test_init_refuses_a_selection_that_serves_nothing_and_writes_no_project(tmp_path, insurance):
    dbt_dir = insurance.parent / "dbt"
    target = tmp_path / "empty"
    res = sqleval("init", str(target), "--dbt-project", str(dbt_dir), "--select", "tag:no_such_tag",
                  "--as-of", "2024-06-30")
    assert res.exit_code == 1
    out = _one_line(res.output)
    assert "serves no model" in out and "no sqleval.yaml was written" in out
    assert not (target / "sqleval.yaml").exists() and not (target / "evals").exists()
    # --force over an existing project with a bad selection keeps the existing file
    before = (insurance / "sqleval.yaml").read_bytes()
    res = sqleval("init", str(insurance), "--dbt-project", str(dbt_dir), "--select", "tag:no_such_tag",
                  "--force")
    assert res.exit_code == 1 and (insurance / "sqleval.yaml").read_bytes() == before


@pytest.mark.slow
def test_build_serves_the_selected_views_and_nothing_else(built, built_insurance):
    project = proj.load_project(built)
    pinned = snap.read_pinned(project.manifest_dir)
    manifest = snap.SnapshotManifest.from_file(snap.manifest_path(project.manifest_dir, pinned))
    assert set(manifest.tables) == _served_models()
    assert manifest.as_of.isoformat() == "2024-06-30"
    assert all(src.startswith("analytics.") for src in manifest.sources.values())
    # views became tables, with the rows of the seeds behind them
    claims = _csv_rows("seeds/raw_claims.csv")
    assert manifest.tables["fct_claims"].rows == len(claims)
    serving = snap.serving_path(project.home.snapshot_dir, pinned)
    names = {o[2] for o in snap.list_serving_objects(serving)}
    assert not names & {"adjuster_notes", "customer_contacts", "metricflow_time_spine"}
    # the pins live in the project, not in the repository
    assert project.manifest_dir.is_relative_to(built)
    # guardrails ran on this project's tables and every case was blocked
    report = json.loads((project.home.root / "reports" / "guardrails.json").read_text())
    assert report["passed"] and report["checksum_unchanged"]
    # ... through the guardrail_suite asset, whose blocking checks (every case blocked, the
    # serving file unchanged) passed: only the empty golden set's coverage check failed
    out = _one_line(built_insurance.build_output)
    assert f"{len(report['cases'])} hostile cases, 0 got through" in out
    assert "asset checks passed (failed: golden_set:coverage)" in out
    sqls = " ".join(c.get("sql") or "" for c in report["cases"])
    assert "restricted.adjuster_notes" in sqls and "fct_orders" not in sqls
    # the project's own suite (paths.hostile): its sensitive template once per relation that is
    # not served (the declared sensitive schema's among them), and every layer met: the filter,
    # and the database's timeout for the bomb
    own = {c["id"] for c in INSURANCE_HOSTILE}
    assert {c["case_id"].split("[")[0] for c in report["cases"]} == own
    read = {c["sql"].split("FROM ")[1] for c in report["cases"] if c["case_id"].startswith("ins-sensitive")}
    assert {"restricted.adjuster_notes", "restricted.customer_contacts"} <= read
    assert not {r.split(".")[1] for r in read} & _served_models()
    bomb = next(c for c in report["cases"] if c["case_id"] == "ins-bomb")
    assert bomb["verdict"] == "blocked" and bomb["blocked_by"] in ("database", "sandbox"), bomb


@pytest.mark.slow
def test_import_run_and_scorecard(built):
    project = proj.load_project(built)
    questions = _csv_rows("questions.csv")
    res = sqleval("--project", str(built), "golden", "import", str(FIXTURE / "questions.csv"),
                  "--reviewer", "qa")
    assert res.exit_code == 0, res.output
    golden = project.default_golden_file()
    cases = [json.loads(line) for line in golden.read_text().splitlines()]
    assert [c["id"] for c in cases] == [q["id"] for q in questions]
    by_id = {c["id"]: c for c in cases}
    claims = _csv_rows("seeds/raw_claims.csv")
    assert by_id["ins-001"]["expected"]["rows"] == [[len(claims)]]  # count(*) of the claims seed
    assert all(c["status"] == "verified" for c in cases)

    before = golden.read_bytes()
    report_file = built / "bad_import.json"
    res = sqleval("--project", str(built), "golden", "import", str(FIXTURE / "bad_questions.csv"),
                  "--json", str(report_file))
    out = _one_line(res.output)
    assert res.exit_code == 1, res.output
    assert "0 case(s) added, 2 row(s) rejected" in out
    # the same report, machine-readable: every rejected line with its reason
    data = json.loads(report_file.read_text())
    assert data["accepted"] == [] and not data["written"] and len(data["rejected"]) == 2
    assert all(r["line"] > 1 and r["reason"] for r in data["rejected"])
    assert any("paid_amout" in r["reason"] for r in data["rejected"])
    assert "paid_amout" in out and "restricted" in out
    assert golden.read_bytes() == before  # nothing already frozen was touched

    res = sqleval("--project", str(built), "run", "-c", str(built / "evals" / "configs" / "baseline.yaml"))
    assert res.exit_code == 0, res.output
    store = project.home.store / "runs"
    cards = list(store.glob("baseline@*/*/scorecard.json"))
    assert len(cards) == 1
    card = json.loads(cards[0].read_text())
    answerable = [q for q in questions if q["answerable"] == "true"]
    assert card["overall"]["n_cases"] == len(questions)
    acc = card["overall"]["accuracy"]
    assert acc["den"] == 3 * len(answerable) and 0 < acc["num"] <= acc["den"]  # 3 runs per case
    assert card["snapshot_id"] == snap.read_pinned(project.manifest_dir)


@pytest.mark.slow
def test_drift_stops_the_foundation_through_dagster(built, monkeypatch):
    """What no longer matches its pin stops the foundation, through Dagster, with the failing
    check recorded and named: a pinned manifest the warehouse no longer gives, and a golden case
    whose frozen result no longer reproduces. On a copy of the built project (the module's
    project stays as it was)."""
    from sqleval_pipeline.orchestrate import RunFailed, materialize

    drifted = built.parent / "drifted"  # beside the project: its `../dbt` is the same dbt project
    shutil.copytree(built, drifted, ignore=shutil.ignore_patterns("dagster_home"))
    for f in (drifted / "evals" / "golden").glob("*.jsonl"):
        f.unlink()
    res = sqleval("--project", str(drifted), "golden", "import", str(FIXTURE / "questions.csv"), "--reviewer", "qa")
    assert res.exit_code == 0, res.output
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # a run sets the project's: restored after the test
    project = proj.load_project(drifted)
    manifests = project.manifest_dir
    pinned = snap.read_pinned(manifests)

    # 1. the pinned manifest no longer describes what the warehouse gives: serving_snapshot fails
    # (a pin made from other data: same tables, one row count different, another id)
    doc = json.loads((manifests / f"{pinned}.json").read_text())
    table = sorted(doc["tables"])[0]
    doc["tables"][table]["rows"] += 1
    doc["tables"][table]["checksum"] = "0" * 64
    doc["snapshot_id"] = "snap-000000000000"
    (manifests / "snap-000000000000.json").write_text(json.dumps(doc))
    snap.write_pinned(manifests, "snap-000000000000")
    with pytest.raises(RunFailed, match="snapshot drift") as info:
        materialize(["snapshot"], project=project)
    assert info.value.summary.checks["serving_snapshot:matches_pinned_snapshot"] is False
    assert table in str(info.value)
    # (a pin under another id whose table fingerprints all match: still drift, never accepted)
    same = json.loads((manifests / f"{pinned}.json").read_text())
    same["snapshot_id"] = "snap-111111111111"
    (manifests / "snap-111111111111.json").write_text(json.dumps(same))
    snap.write_pinned(manifests, "snap-111111111111")
    with pytest.raises(RunFailed, match="snapshot drift"):
        materialize(["snapshot"], project=project)
    snap.write_pinned(manifests, pinned)  # the real pin again

    # 2. a golden case whose frozen result no longer reproduces: golden_set fails, naming it
    golden = project.default_golden_file()
    lines = golden.read_text().splitlines()
    for i, line in enumerate(lines):
        case = json.loads(line)
        if case.get("expected") and case["expected"]["rows"] and isinstance(case["expected"]["rows"][0][0], int):
            case["expected"]["rows"][0][0] += 1
            lines[i] = json.dumps(case)
            drifted_case = case["id"]
            break
    golden.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunFailed, match="no longer reproduce") as info:
        materialize(["snapshot", "golden"], project=project)
    assert info.value.summary.checks["golden_set:reproduces_on_snapshot"] is False
    assert drifted_case in str(info.value)


@pytest.mark.slow  # `sqleval build` builds the project's Dagster definitions (they fail naming the field)
def test_a_missing_dbt_project_names_the_field(tmp_path):
    (tmp_path / "sqleval.yaml").write_text("name: x\nas_of: 2024-01-01\ndbt:\n  project_dir: nowhere\n")
    res = sqleval("--project", str(tmp_path), "build")
    out = _one_line(res.output)
    assert res.exit_code == 1
    assert "field 'dbt.project_dir'" in out and "dbt_project.yml not found" in out


@pytest.mark.slow
def test_a_selection_that_serves_nothing_names_the_field(tmp_path):
    dbt_dir = tmp_path / "dbt"
    shutil.copytree(FIXTURE, dbt_dir, ignore=shutil.ignore_patterns("target", "logs", "sqleval.yaml", "evals"))
    (tmp_path / "sqleval.yaml").write_text(
        "name: x\nas_of: 2024-06-30\ndbt: {project_dir: dbt}\nserve:\n  select: 'tag:no_such_tag'\n")
    res = sqleval("--project", str(tmp_path), "snapshot", "build", "--with-warehouse")
    out = _one_line(res.output)
    assert res.exit_code == 1
    assert "field 'serve.select'" in out and "serves no model" in out


def test_project_file_errors_name_file_line_and_field(tmp_path):
    f = tmp_path / "sqleval.yaml"
    f.write_text("name: x\nas_of: 2024-06-30\nserve:\n  selekt: 'tag:a'\n")
    with pytest.raises(proj.ProjectError) as exc:
        proj.load_project(f)
    assert f"{f}:4: field 'serve.selekt'" in str(exc.value) and "fix its spelling" in str(exc.value)
    f.write_text("name: x\n")
    with pytest.raises(proj.ProjectError, match=r"sqleval.yaml:1: field 'as_of'"):
        proj.load_project(f)


def test_profile_mode_uses_the_duckdb_file_the_target_names(tmp_path, monkeypatch):
    from sqleval_pipeline.warehouse import dbt

    dbt_dir = tmp_path / "dbt"
    shutil.copytree(FIXTURE, dbt_dir, ignore=shutil.ignore_patterns("target", "logs", "sqleval.yaml", "evals"))
    (tmp_path / "sqleval.yaml").write_text(
        "name: x\nas_of: 2024-06-30\ndbt: {project_dir: dbt, warehouse: profile}\n")
    project = proj.load_project(tmp_path)
    monkeypatch.delenv("INSURANCE_WAREHOUSE", raising=False)
    # the fixture's profile: env_var('INSURANCE_WAREHOUSE', 'target/insurance.duckdb'),
    # relative to the dbt project directory (where dbt runs)
    assert dbt.warehouse_path(project) == (dbt_dir / "target" / "insurance.duckdb").resolve()
    monkeypatch.setenv("INSURANCE_WAREHOUSE", str(tmp_path / "elsewhere.duckdb"))
    assert dbt.warehouse_path(project) == tmp_path / "elsewhere.duckdb"
    assert dbt.profiles_dir(project) == dbt_dir  # the user's own profiles.yml, as is


def test_build_mode_changes_only_the_path_of_the_users_target(tmp_path, monkeypatch):
    import yaml

    from sqleval_pipeline.warehouse import dbt

    dbt_dir = tmp_path / "dbt"
    shutil.copytree(FIXTURE, dbt_dir, ignore=shutil.ignore_patterns("target", "logs", "sqleval.yaml", "evals"))
    (tmp_path / "sqleval.yaml").write_text("name: x\nas_of: 2024-06-30\ndbt: {project_dir: dbt}\n")
    monkeypatch.delenv("SQLEVAL_HOME", raising=False)
    project = proj.load_project(tmp_path)
    generated = yaml.safe_load((dbt.profiles_dir(project) / "profiles.yml").read_text())
    user = yaml.safe_load((dbt_dir / "profiles.yml").read_text())
    out = generated["insurance"]["outputs"]["sqleval"]
    assert out["path"] == str(tmp_path / ".sqleval" / "warehouse.duckdb")
    assert out["type"] == "duckdb" and out["threads"] == user["insurance"]["outputs"]["dev"]["threads"]
    assert (dbt_dir / "profiles.yml").read_text() == (FIXTURE / "profiles.yml").read_text()


def test_a_custom_taxonomy_is_the_one_cases_are_checked_against(tmp_path):
    from sqleval_pipeline.golden.loader import GoldenError, load_golden

    line = json.dumps({"id": "x-001", "question": "How many claims?", "reference_sql": None,
                       "difficulty": "lookup", "band": "answerable", "cluster": "claims",
                       "split": "dev", "status": "unverified",
                       "provenance": {"source": "t", "author": "t"}})
    (tmp_path / "g.jsonl").write_text(line + "\n")
    (tmp_path / "sqleval.yaml").write_text("name: x\nas_of: 2024-06-30\n"
                                           "taxonomy: {difficulties: [lookup, aggregate]}\n")
    project = proj.load_project(tmp_path)
    assert [c.id for c in load_golden(tmp_path / "g.jsonl", difficulties=project.difficulties).cases] == ["x-001"]
    with pytest.raises(GoldenError, match=r"g.jsonl:1 field 'difficulty': 'lookup' is not in the project's taxonomy"):
        load_golden(tmp_path / "g.jsonl", difficulties=proj.DEFAULT_DIFFICULTIES)


def test_a_raw_data_command_runs_in_the_project_dir_with_its_paths(tmp_path):
    from sqleval_pipeline.warehouse.raw import run_raw_step

    (tmp_path / "sqleval.yaml").write_text(
        "name: x\nas_of: 2024-06-30\nraw_data:\n  command: [sh, -c, 'pwd > {raw_dir}/where; "
        "echo {warehouse} > {raw_dir}/wh']\n")
    project = proj.load_project(tmp_path)
    run_raw_step(project, tmp_path / "raw", tmp_path / "b" / "w.duckdb")
    assert (tmp_path / "raw" / "where").read_text().strip() == str(tmp_path)
    assert (tmp_path / "raw" / "wh").read_text().strip() == str(tmp_path / "b" / "w.duckdb")
    (tmp_path / "sqleval.yaml").write_text(
        "name: x\nas_of: 2024-06-30\nraw_data:\n  command: [sh, -c, 'echo boom >&2; exit 3']\n")
    with pytest.raises(RuntimeError, match=r"(?s)exited 3.*boom"):
        run_raw_step(proj.load_project(tmp_path), tmp_path / "raw", tmp_path / "w.duckdb")
