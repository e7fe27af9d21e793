"""`sqleval show CASE`: one case as evaluated in one batch, checked against the stored files.

Two configurations are evaluated once for the module on the demo warehouse: the offline
baseline without curation (through the demo project) and a recorded system (through a copy of
the demo project whose golden set has a question with rich markup in it) whose answers are
chosen to hit the guard, a SQL error, a missing answer, a refusal and a correct answer. Every
expected value below is read back from the batch's Parquet files and the golden JSONL with
pandas/json, never from the code under test; the cases are picked from the stored grades.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.demo import location
from sqleval_pipeline import paths
from sqleval_pipeline import project as proj
from sqleval_pipeline.cli import app
from sqleval_pipeline.configs import load_config
from sqleval_pipeline.pipeline.records import OUTCOMES
from tests.conftest import home_over

runner = CliRunner()
MARKUP = "[bold red]x[/]"
MARKUP_SQL = f"SELECT '{MARKUP}' AS \"[bold red]c[/]\""
MARKUP_REFUSAL = "[bold red]no[/] cannot answer that"
CELL_WIDTH = 40  # docs/cases.md: longer cells are cut


# --------------------------------------------------------------------------- helpers


def flat(text: str) -> str:
    """Output without box drawing and with whitespace collapsed (rich wraps long lines)."""
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", text).split())


def cell(v) -> str:
    """A JSON-encoded value as the table prints it (docs/cases.md)."""
    return "NULL" if v is None else v if isinstance(v, str) else json.dumps(v)


def golden_cases() -> dict[str, dict]:
    out = {}
    for f in sorted(location.GOLDEN_DIR.glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                c = json.loads(line)
                out[c["id"]] = c
    return out


def stored(home: Path, key: str, batch_id: str, name: str) -> pd.DataFrame:
    p = home / "store" / "runs" / key / batch_id / name
    return pd.read_parquet(p) if p.exists() else pd.DataFrame(columns=["case_id", "run_index"])


def of_case(df: pd.DataFrame, case_id: str) -> pd.DataFrame:
    return df[df.case_id == case_id].sort_values("run_index")


def show(home: Path, *args: str, project: Path | None = None):
    pre = ["--project", str(project)] if project else []
    result = runner.invoke(app, [*pre, "show", *args], env={"SQLEVAL_HOME": str(home), "COLUMNS": "200"})
    return result


@pytest.fixture(autouse=True)
def _reset_project():
    yield
    proj.select(None)  # `--project` selects a project for the whole process


@pytest.fixture(scope="module")
def evaluated(serving_snapshot, tmp_path_factory):
    """One store with a full batch of baseline-raw (demo project) and two batches of a
    recorded configuration (a copy of the demo project) whose file has changed since."""
    tmp = tmp_path_factory.mktemp("show")
    home = home_over(serving_snapshot, tmp / "home")
    demo = proj.load_project(location.REPO_ROOT)
    env = ev.environment(demo, home=paths.Home(home))
    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml", project=demo)
    raw_batch = cmp.evaluate(env, raw).batch.batch_id

    # the copied project: same snapshot, guard and data, its own golden set and configs
    root = tmp / "project"
    (root / "golden").mkdir(parents=True)
    (root / "configs").mkdir()
    spec = yaml.safe_load((location.REPO_ROOT / "sqleval.yaml").read_text())
    repo = location.REPO_ROOT
    spec["dbt"]["project_dir"] = str(repo / spec["dbt"]["project_dir"])
    spec["validation"] = str(repo / spec["validation"])
    spec["paths"] = {k: str(repo / v) for k, v in spec["paths"].items()}
    spec["paths"].update(golden=str(root / "golden"), configs=str(root / "configs"))
    (root / "sqleval.yaml").write_text(yaml.safe_dump(spec))
    cases = golden_cases()
    frozen = sorted(i for i, c in cases.items() if c["band"] != "should_refuse" and c.get("expected"))
    a, b, c, d = frozen[:4]  # markup SQL; guard refusal, SQL error, no answer; refusal; correct
    cases[c]["question"] = f"{MARKUP} {cases[c]['question']}"
    (root / "golden" / "cases.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in cases.values()), encoding="utf-8")
    answers = [{"case_id": a, "run_index": i, "sql": MARKUP_SQL} for i in range(3)]
    answers += [{"case_id": b, "run_index": 0, "sql": "DELETE FROM fct_orders"},
                {"case_id": b, "run_index": 1, "sql": "SELECT no_such_column FROM fct_orders"}]
    answers += [{"case_id": c, "run_index": i, "refusal": MARKUP_REFUSAL} for i in range(3)]
    answers += [{"case_id": d, "run_index": i, "sql": cases[d]["reference_sql"]} for i in range(3)]
    answers_file = root / "answers.jsonl"
    answers_file.write_text("".join(json.dumps(x) + "\n" for x in answers))
    config = root / "configs" / "recorded.yaml"
    config.write_text(yaml.safe_dump({"name": "recorded-show", "generator": {
        "kind": "recorded", "path": str(answers_file)}, "runs": 3, "judge": "rules"}))
    copy = proj.load_project(root)
    env2 = ev.environment(copy, home=paths.Home(home))
    rec = load_config(config, project=copy)
    first = cmp.evaluate(env2, rec, case_ids=[a]).batch.batch_id
    # batch ids order batches by their creation second (then by a random suffix): let one pass
    time.sleep(max(0.0, 1.05 - (time.time() % 1)))
    second = cmp.evaluate(env2, rec, case_ids=[a, b, c, d]).batch.batch_id
    # the recorded file changes afterwards: the version evaluated is no longer the current one
    with answers_file.open("a") as fh:
        fh.write(json.dumps({"case_id": frozen[4], "run_index": 0, "sql": "SELECT 1"}) + "\n")
    assert load_config(config, project=copy).partition_key != rec.partition_key
    return {"home": home, "raw": raw.partition_key, "raw_batch": raw_batch,
            "project": root, "config": config, "rec": rec.partition_key, "first": first,
            "second": second, "cases": (a, b, c, d), "golden": golden_cases()}


def _pick(grades: pd.DataFrame, diagnoses: pd.DataFrame, failing: bool) -> str:
    """A case whose every run failed with a result mismatch and a diagnosis, or passed."""
    for case_id, g in grades.groupby("case_id"):
        if failing and (g.outcome == "WRONG").all() and g.reason.str.startswith("result_mismatch").all() \
                and case_id in set(diagnoses.case_id):
            return case_id
        if not failing and (g.outcome == "CORRECT").all():
            return case_id
    pytest.fail("the stored grades have no such case")


# --------------------------------------------------------------------------- baseline-raw


def test_a_failing_case_prints_what_the_batch_stored(evaluated):
    home, key, batch = evaluated["home"], evaluated["raw"], evaluated["raw_batch"]
    grades = stored(home, key, batch, "grades.parquet")
    diagnoses = stored(home, key, batch, "diagnoses.parquet")
    case_id = _pick(grades, diagnoses, failing=True)
    result = show(home, case_id, "-c", "baseline-raw")
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    golden = evaluated["golden"][case_id]
    for text in (golden["question"], golden["reference_sql"], key, batch, golden["band"],
                 golden["difficulty"], golden["split"], *golden["traps"]):
        assert flat(text) in out, text
    for v in golden["expected"]["rows"][0]:
        assert cell(v) in out
    attempts = of_case(stored(home, key, batch, "attempts.parquet"), case_id)
    executions = of_case(stored(home, key, batch, "executions.parquet"), case_id)
    g = of_case(grades, case_id)
    assert len(g) == len(attempts) == 3
    for sql in attempts.sql:
        assert flat(sql) in out
    for res in executions.result:
        for v in json.loads(res)["rows"][0]:
            if len(cell(v)) <= CELL_WIDTH:
                assert cell(v) in out
    for mismatch in g.mismatch:
        assert flat(mismatch) in out
    assert out.count("WRONG") >= len(g) and "CORRECT" not in out
    for d in of_case(diagnoses, case_id).itertuples():
        assert d.category in out and flat(d.explanation) in out


def test_a_passing_case_by_configuration_file(evaluated):
    home, key, batch = evaluated["home"], evaluated["raw"], evaluated["raw_batch"]
    grades = stored(home, key, batch, "grades.parquet")
    case_id = _pick(grades, stored(home, key, batch, "diagnoses.parquet"), failing=False)
    result = show(home, case_id, "-c", str(location.EVALS_DIR / "configs" / "baseline_raw.yaml"))
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    assert out.count("CORRECT") >= 3 and "WRONG" not in out and "mismatch" not in out
    assert "diagnosis" not in out
    for sql in of_case(stored(home, key, batch, "attempts.parquet"), case_id).sql:
        assert flat(sql) in out
    for v in evaluated["golden"][case_id]["expected"]["rows"][0]:
        assert cell(v) in out


def _paths(doc: dict, prefix: str = "") -> set[str]:
    """Dotted keys of a JSON document; results and the outcome counts are leaves."""
    out = set()
    for k, v in doc.items():
        p = prefix + k
        out.add(p)
        if isinstance(v, dict) and "total_rows" not in v and k != "outcomes":
            out |= _paths(v, p + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict) and "total_rows" not in v[0]:
            for x in v:
                out |= _paths(x, p + "[].")
    return out


def _documented() -> tuple[set[str], set[str]]:
    text = (location.REPO_ROOT / "docs" / "cases.md").read_text()
    keys = re.findall(r"^\| `([^`]+)` \|", text.split("## `--json`", 1)[1], flags=re.M)
    result = {k.removeprefix("<result>.") for k in keys if k.startswith("<result>.")}
    return {k for k in keys if not k.startswith("<result>.")}, result


def test_json_has_the_documented_shape_and_the_stored_values(evaluated):
    home, key, batch = evaluated["home"], evaluated["raw"], evaluated["raw_batch"]
    grades = stored(home, key, batch, "grades.parquet")
    diagnoses = stored(home, key, batch, "diagnoses.parquet")
    case_id = _pick(grades, diagnoses, failing=True)
    result = show(home, case_id, "--partition", key, "--json", "--max-rows", "1")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    documented, result_keys = _documented()
    seen = _paths(doc)
    assert seen <= documented, seen - documented
    assert set(doc["case"]["expected"]) == result_keys
    assert doc["format"] == "sqleval.case/1" and doc["partition_key"] == key
    assert doc["batch"]["batch_id"] == batch and doc["max_rows"] == 1
    golden = evaluated["golden"][case_id]
    assert doc["case"]["question"] == golden["question"]
    assert doc["case"]["traps"] == golden["traps"] and doc["case"]["band"] == golden["band"]
    assert doc["case"]["expected"]["rows"] == golden["expected"]["rows"][:1]
    assert doc["case"]["expected"]["total_rows"] == len(golden["expected"]["rows"])
    g = of_case(grades, case_id)
    assert doc["outcomes"] == {o: int((g.outcome == o).sum()) for o in OUTCOMES}
    attempts = of_case(stored(home, key, batch, "attempts.parquet"), case_id)
    executions = of_case(stored(home, key, batch, "executions.parquet"), case_id)
    assert [r["run_index"] for r in doc["runs"]] == list(g.run_index)
    for run, a, e, gr in zip(doc["runs"], attempts.itertuples(), executions.itertuples(),
                             g.itertuples(), strict=True):
        assert run["answer"]["sql"] == a.sql and run["answer"]["kind"] == "sql"
        rows = json.loads(e.result)["rows"]
        assert run["execution"]["result"]["rows"] == rows[:1]
        assert run["execution"]["result"]["total_rows"] == len(rows)
        assert run["grade"]["outcome"] == gr.outcome and run["grade"]["reason"] == gr.reason
        assert run["grade"]["mismatch"] == gr.mismatch and run["grade"]["success"] is False
        want = of_case(diagnoses, case_id)
        want = want[want.run_index == gr.run_index]
        assert [(d["judge"], d["category"], d["explanation"]) for d in run["diagnoses"]] == \
            list(zip(want.judge, want.category, want.explanation, strict=True))
    # a second document (a recorded system: refusals, guard, errors) has the same keys
    other = show(home, evaluated["cases"][1], "--partition", evaluated["rec"], "--json",
                 project=evaluated["project"])
    assert other.exit_code == 0, other.output
    assert _paths(json.loads(other.stdout)) | seen == documented


def test_max_rows_bounds_rows_and_keeps_the_total(evaluated):
    home, key = evaluated["home"], evaluated["raw"]
    case_id = next(i for i, c in sorted(evaluated["golden"].items())
                   if c.get("expected") and len(c["expected"]["rows"]) > 1)
    n = len(evaluated["golden"][case_id]["expected"]["rows"])
    out = flat(show(home, case_id, "-c", "baseline-raw", "--max-rows", "1").output)
    assert f"1 of {n} rows" in out
    doc = json.loads(show(home, case_id, "-c", "baseline-raw", "--json").stdout)
    assert len(doc["case"]["expected"]["rows"]) == n and doc["max_rows"] == 10


# --------------------------------------------------------------------------- recorded system


def test_guard_refusals_errors_and_refusals_are_shown_as_stored(evaluated):
    home, key, batch = evaluated["home"], evaluated["rec"], evaluated["second"]
    _, b, c, _ = evaluated["cases"]
    out = flat(show(home, b, "--partition", key, project=evaluated["project"]).output)
    executions = of_case(stored(home, key, batch, "executions.parquet"), b)
    refused = executions[executions.status == "refused"].iloc[0]
    failed = executions[executions.status == "error"].iloc[0]
    assert refused.layer in out and refused.reason in out and flat(refused.message) in out
    assert failed.error_code in out and flat(failed.error_message) in out
    grades = of_case(stored(home, key, batch, "grades.parquet"), b)
    for g in grades.itertuples():
        assert g.outcome in out and g.reason in out
    assert set(grades.outcome) == {"WRONG", "ERROR"}
    error = of_case(stored(home, key, batch, "attempts.parquet"), b).query("kind == 'error'").iloc[0]
    assert error.error_code in out and flat(error.error_message) in out
    # run by run, the document holds that run's answer, execution, grade and diagnoses
    doc = json.loads(show(home, b, "--partition", key, "--json", project=evaluated["project"]).stdout)
    attempts = of_case(stored(home, key, batch, "attempts.parquet"), b).set_index("run_index")
    execs = executions.set_index("run_index")
    diags = of_case(stored(home, key, batch, "diagnoses.parquet"), b)
    for run, g in zip(doc["runs"], grades.itertuples(), strict=True):
        i = run["run_index"]
        assert i == g.run_index and run["answer"]["kind"] == attempts.loc[i, "kind"]
        assert (run["grade"]["outcome"], run["grade"]["reason"]) == (g.outcome, g.reason)
        if i in execs.index:
            e = execs.loc[i]
            assert (run["execution"]["status"], run["execution"]["layer"], run["execution"]["error_code"]) \
                == tuple(None if pd.isna(v) else v for v in (e.status, e.layer, e.error_code))
        else:
            assert run["execution"] is None
        assert [(d["judge"], d["category"], d["explanation"]) for d in run["diagnoses"]] == \
            [(d.judge, d.category, d.explanation) for d in diags[diags.run_index == i].itertuples()]
    declined = flat(show(home, c, "--partition", key, project=evaluated["project"]).output)
    assert declined.count(MARKUP_REFUSAL) >= 3 and "DEFERRED_WRONGLY" in declined


def test_rich_markup_in_questions_sql_and_values_is_printed_literally(evaluated):
    home, key = evaluated["home"], evaluated["rec"]
    a, _, c, _ = evaluated["cases"]
    result = show(home, a, "--partition", key, project=evaluated["project"])
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    assert flat(MARKUP_SQL) in out            # the SQL
    assert out.count(MARKUP) >= 3 * 3         # SQL, column name and value, in every run
    assert "[bold red]c[/]" in out
    question = show(home, c, "--partition", key, project=evaluated["project"])
    assert question.exit_code == 0, question.output
    assert flat(f"{MARKUP} {evaluated['golden'][c]['question']}") in flat(question.output)


def test_batch_defaults_to_the_newest_complete_one_and_can_be_picked(evaluated):
    home, key, first, second = evaluated["home"], evaluated["rec"], evaluated["first"], evaluated["second"]
    a, b, _, _ = evaluated["cases"]
    project = evaluated["project"]
    newest = json.loads(show(home, a, "--partition", key, "--json", project=project).stdout)
    assert newest["batch"]["batch_id"] == second and newest["batch"]["cases"] == 4
    older = json.loads(show(home, a, "--partition", key, "--batch", first, "--json",
                            project=project).stdout)
    assert older["batch"]["batch_id"] == first and older["batch"]["cases"] == 1
    assert flat(first) in flat(show(home, a, "--partition", key, "--batch", first, project=project).output)
    missing = show(home, b, "--partition", key, "--batch", first, project=project)
    assert missing.exit_code == 1
    assert f"not in batch {first}" in flat(missing.output) and second in flat(missing.output)


def test_partition_shows_a_version_whose_file_has_changed(evaluated):
    home, project = evaluated["home"], evaluated["project"]
    a = evaluated["cases"][0]
    by_name = show(home, a, "-c", "recorded-show", project=project)
    assert by_name.exit_code == 1
    out = flat(by_name.output)
    assert "no batch yet for recorded-show@" in out and "sqleval run -c" in out
    assert evaluated["rec"] not in out  # the current version, not the evaluated one
    old = show(home, a, "--partition", evaluated["rec"], project=project)
    assert old.exit_code == 0, old.output
    assert evaluated["second"] in flat(old.output)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("args, words", [
    (["{typo}", "-c", "baseline-raw"], ["unknown case id '{typo}'", "did you mean", "{case}"]),
    ([MARKUP, "-c", "baseline-raw"], [f"unknown case id '{MARKUP}'"]),  # plain text, too
    (["{case}", "-c", "baseline-rw"], ["no configuration named 'baseline-rw'", "did you mean baseline-raw"]),
    (["{case}", "-c", "nowhere/none.yaml"], ["no configuration file"]),
    (["{case}", "--partition", "baseline-raw@00000000"], ["no configuration version", "{raw}"]),
    (["{case}", "-c", "baseline-raw", "--batch", "b19990101T000000Z-0000"], ["no batch", "{batch}"]),
    (["{case}"], ["-c CONFIG", "--partition"]),
    (["{case}", "-c", "baseline-raw", "--partition", "{raw}"], ["not both"]),
])
def test_errors_say_what_to_do_and_exit_1(evaluated, args, words):
    case_id = sorted(evaluated["golden"])[0]
    values = {"case": case_id, "typo": case_id[:-1] + "x" + case_id[-1:], "raw": evaluated["raw"],
              "batch": evaluated["raw_batch"]}
    result = show(evaluated["home"], *(a.format(**values) for a in args))
    assert result.exit_code == 1, result.output
    out = flat(result.output)
    assert "error:" in out and "Traceback" not in out
    for w in words:
        assert w.format(**values) in out, (w, out)


def test_no_batch_yet_or_no_complete_batch_names_the_run_command(serving_snapshot, tmp_path):
    home = home_over(serving_snapshot, tmp_path / "home")
    result = show(home, sorted(golden_cases())[0], "-c", "baseline-raw")
    assert result.exit_code == 1
    out = flat(result.output)
    assert "no batch yet for baseline-raw@" in out and "sqleval run -c" in out
    assert "baseline_raw.yaml" in out
    # an unfinished batch: not picked by default, and said to be unfinished when asked for
    key = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml").partition_key
    batch_id = "b20250101T000000Z-0000"
    folder = home / "store" / "runs" / key / batch_id
    folder.mkdir(parents=True)
    (folder / "batch.json").write_text(json.dumps({
        "batch_id": batch_id, "partition_key": key, "config_name": key.split("@")[0],
        "config_version": key.split("@")[1], "snapshot_id": serving_snapshot.snapshot_id,
        "golden_hash": "0" * 12, "runs": 3, "case_ids": sorted(golden_cases()), "status": "running",
        "created_at": "2025-01-01T00:00:00+00:00"}))
    result = show(home, sorted(golden_cases())[0], "-c", "baseline-raw")
    assert result.exit_code == 1
    assert "no complete batch yet" in flat(result.output) and batch_id in flat(result.output)
    result = show(home, sorted(golden_cases())[0], "-c", "baseline-raw", "--batch", batch_id)
    assert result.exit_code == 1 and "no stored attempts" in flat(result.output), result.output
