"""A re-run with every input unchanged reuses what it derived (derived.py): the scorecard, the
gate and the page are not computed or written again; a changed input, or a derived file edited
since, is computed again. And through Dagster: the second materialization of an unchanged
configuration rewrites nothing and parses each configuration file once."""

import dataclasses
import hashlib
import shutil

import pytest

from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline import configs as configs_module
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline import paths
from sqleval_pipeline.configs import load_config
from sqleval_pipeline.demo import location
from sqleval_pipeline.project import current as current_project
from tests.conftest import cli_home, home_over

CASES = ["com-001", "com-012", "com-055"]


def _state(folder, *names):
    return {n: ((folder / n).stat().st_mtime_ns, hashlib.sha256((folder / n).read_bytes()).hexdigest())
            for n in names}


def test_scorecard_and_gate_are_reused_until_an_input_changes(env, tmp_path):
    env = dataclasses.replace(env, decisions=tmp_path / "decisions.yaml")  # never the project's file
    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    cmp.evaluate(env, raw, case_ids=CASES)
    res = cmp.evaluate(env, raw, case_ids=CASES, mode="new")  # compared with the first batch
    batch = res.batch
    folder = env.store.batch_dir(raw.partition_key, batch.batch_id)
    before = _state(folder, "scorecard.json", "comparisons.json", "files.json")

    card = ev.stage_scorecard(env, raw, batch)
    report = cmp.stage_gate(env, raw, batch, card)
    assert _state(folder, "scorecard.json", "comparisons.json", "files.json") == before
    assert report.model_dump() == cmp.GateReport.model_validate_json(
        (folder / "comparisons.json").read_text()).model_dump()
    assert card.overall.accuracy.value == res.scorecard.overall.accuracy.value
    assert [c.status for c in report.comparisons if c.kind == "previous_batch"] == ["passed"]

    # a scorecard edited by hand since it was written is never reused: computed again
    edited = (folder / "scorecard.json").read_text().replace('"n_cases"', '"n_cases" ', 1)
    (folder / "scorecard.json").write_text(edited)
    again = ev.stage_scorecard(env, raw, batch)
    assert (folder / "scorecard.json").read_text() != edited
    assert again.overall.accuracy.value == card.overall.accuracy.value
    assert env.store.damaged(batch) == []  # rewritten and recorded again: the batch is intact

    # a decision recorded since is an input of the gate: the gate is computed again
    gate_before = _state(folder, "comparisons.json")
    env.decisions.write_text("# no decision, but another file\n[]\n")
    cmp.stage_gate(env, raw, batch, again)
    assert _state(folder, "comparisons.json") != gate_before


@pytest.mark.slow
def test_a_noop_materialization_rewrites_nothing_and_parses_each_configuration_once(
        serving_snapshot, tmp_path, monkeypatch):
    from sqleval_pipeline.orchestrate import EVALUATION_GROUPS, materialize

    manifests = tmp_path / "manifests"
    shutil.copytree(serving_snapshot.manifest_dir, manifests)
    home = paths.Home(home_over(serving_snapshot, tmp_path / "home"))
    monkeypatch.setenv("SQLEVAL_HOME", str(home.root))
    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    run_config = {"ops": {"eval_attempts": {"config": {"case_ids": CASES}}}}
    first = materialize(EVALUATION_GROUPS, run_config, manifest_dir=str(manifests),
                        partition_key=loaded.partition_key)
    folder = home.store / "runs" / loaded.partition_key / first.materialized["eval_gate"]["batch_id"]
    names = ("scorecard.json", "comparisons.json", "report.html", "grades.parquet", "files.json")
    before = _state(folder, *names)

    parsed = []
    real = configs_module.parse_yaml

    def counting(path, text, error):
        parsed.append(str(path))
        return real(path, text, error)

    configs_module._PARSED.clear()  # this process has parsed them already: count afresh
    monkeypatch.setattr(configs_module, "parse_yaml", counting)
    second = materialize(EVALUATION_GROUPS, run_config, manifest_dir=str(manifests),
                         partition_key=loaded.partition_key)
    assert second.materialized["eval_gate"]["batch_id"] == first.materialized["eval_gate"]["batch_id"]
    assert second.materialized["eval_attempts"]["provider_calls"] == 0
    assert _state(folder, *names) == before  # nothing derived again, nothing rewritten
    config_files = sorted(str(p) for p in (location.EVALS_DIR / "configs").glob("*.yaml"))
    assert parsed and sorted(set(parsed)) == sorted(set(parsed) & set(config_files))
    assert len(parsed) == len(set(parsed)), f"a configuration parsed more than once: {parsed}"


def test_the_configurations_own_limits_gate_a_batch_with_nothing_to_compare_with(env, tmp_path):
    """gate: limits are checked on the batch's own scorecard, also for a first batch of a root
    configuration (no comparison): exceeded is FAILED, within is PASSED (not "not gated")."""
    from sqleval_pipeline.project import current
    from sqleval_pipeline.reporting.status import FAILED, PASSED, gate_status

    def config(name: str, limit: float):
        f = tmp_path / f"{name}.yaml"
        f.write_text(f"name: {name}\ngenerator: {{kind: baseline}}\ncontext: {{curation: false}}\n"
                     f"gate: {{max_p95_latency_s: {limit}}}\n")
        return load_config(f, project=current())

    tight = cmp.evaluate(env, config("tight", 1e-9), case_ids=CASES)
    folder = env.store.batch_dir(tight.batch.partition_key, tight.batch.batch_id)
    report = cmp.GateReport.model_validate_json((folder / "comparisons.json").read_text())
    assert all(c.status == "skipped" for c in report.comparisons)
    (check,) = report.thresholds
    assert check.name == "max_p95_latency_s" and check.status == "failed" and check.value > 1e-9
    assert report.passed is False and gate_status(None, report)[0] == FAILED

    loose = cmp.evaluate(env, config("loose", 3600), case_ids=CASES)
    folder = env.store.batch_dir(loose.batch.partition_key, loose.batch.batch_id)
    report = cmp.GateReport.model_validate_json((folder / "comparisons.json").read_text())
    assert [t.status for t in report.thresholds] == ["passed"]
    assert report.passed is True and gate_status(None, report)[0] == PASSED


@pytest.mark.slow
def test_sqleval_run_starts_no_dagster_run_when_nothing_changed(serving_snapshot, tmp_path, monkeypatch):
    """`sqleval run` of an unchanged configuration asks every stage whether its output is
    current (pipeline/noop.py) and, when all say yes, prints the stored verdict without a
    Dagster run; a stage output that is not current (the page removed) runs the evaluation."""
    import dagster as dg
    from typer.testing import CliRunner

    from sqleval_pipeline.cli import app
    from sqleval_pipeline.pipeline import environment as environment_module
    from sqleval_pipeline.pipeline.noop import unchanged_batch

    home = paths.Home(cli_home(serving_snapshot, tmp_path, monkeypatch))
    runner = CliRunner()
    args = ["run", "-c", str(location.EVALS_DIR / "configs" / "baseline_raw.yaml"), "--cases", ",".join(CASES)]
    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")

    def runs() -> int:
        with dg.DagsterInstance.from_config(str(home.dagster_home)) as instance:
            return len(instance.get_run_records())

    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "nothing changed" not in first.output and runs() == 1
    env = environment_module.environment(current_project(), home=home)
    batch = unchanged_batch(env, loaded, case_ids=CASES)
    assert batch is not None
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    before = _state(folder, "scorecard.json", "comparisons.json", "report.html", "grades.parquet")

    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert f"nothing changed since batch {batch.batch_id}" in second.output
    assert "Scorecard" in second.output and runs() == 1  # the verdict, from the stored files
    assert _state(folder, "scorecard.json", "comparisons.json", "report.html", "grades.parquet") == before

    # a stage output that is not current: the evaluation runs (and reuses what it can)
    (folder / "report.html").unlink()
    assert unchanged_batch(env, loaded, case_ids=CASES) is None
    third = runner.invoke(app, args)
    assert third.exit_code == 0, third.output
    assert "nothing changed" not in third.output and runs() == 2
    assert (folder / "report.html").exists()
    # other selections are other batches: not a no-op of this one
    assert unchanged_batch(env, loaded, case_ids=CASES[:2]) is None
