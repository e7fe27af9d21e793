"""The evaluation stages end to end on the offline baseline, through the core and through Dagster."""

import shutil
from pathlib import Path

import dagster as dg
import pytest

from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.demo import location
from sqleval_pipeline import paths
from sqleval_pipeline.configs import load_config
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade, load_records
from tests.conftest import home_over



def test_stages_chain_and_persist(env):
    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml")
    res = cmp.evaluate(env, loaded, case_ids=["com-012", "com-055", "com-028"], runs=3)
    folder = env.store.batch_dir(loaded.partition_key, res.batch.batch_id)
    attempts = load_records(folder / "attempts.parquet", Attempt)
    executions = load_records(folder / "executions.parquet", Execution)
    grades = load_records(folder / "grades.parquet", Grade)
    assert len(attempts) == 9 and len(grades) == 9
    assert {a.kind for a in attempts} == {"sql", "refusal"}
    assert len(executions) == sum(a.kind == "sql" for a in attempts)
    outcomes = {(g.case_id, g.outcome) for g in grades}
    assert ("com-012", "CORRECT") in outcomes and ("com-055", "DEFERRED_CORRECTLY") in outcomes
    assert (folder / "scorecard.json").exists()
    assert res.scorecard.overall.accuracy.value == 1.0
    # a second evaluation reuses the batch: no provider calls, same files
    again = cmp.evaluate(env, loaded, case_ids=["com-012", "com-055", "com-028"], runs=3)
    assert again.provider_calls == 0 and again.batch.batch_id == res.batch.batch_id


def test_a_changed_configuration_is_refused_by_its_old_key(env):
    with pytest.raises(Exception, match="has changed"):
        ev.find_config(env, "baseline-curated@00000000")


def test_gate_compares_against_the_configured_baseline(env):
    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    cur = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml")
    ids = ["com-012", "com-013", "com-018", "com-001", "com-055"]
    cmp.evaluate(env, raw, case_ids=ids)
    res = cmp.evaluate(env, cur, case_ids=ids)
    assert res.baseline == raw.partition_key
    assert res.gate.passed and res.gate.delta > 0
    # the reverse comparison (raw against curated) would be a regression
    from sqleval_pipeline.scoring import gate

    assert not gate(res.scorecard, ev.latest_scorecard(env, raw.partition_key)[0], []).passed


@pytest.mark.slow
def test_partitioned_assets_materialize_through_dagster(serving_snapshot, tmp_path, monkeypatch):
    from sqleval_pipeline.orchestrate import EVALUATION_GROUPS, materialize

    manifests = tmp_path / "manifests"
    shutil.copytree(serving_snapshot.manifest_dir, manifests)
    home = paths.Home(home_over(serving_snapshot, tmp_path / "home"))
    monkeypatch.setenv("SQLEVAL_HOME", str(home.root))  # the project's build dir for this test
    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    summary = materialize(
        EVALUATION_GROUPS,
        {"ops": {"eval_attempts": {"config": {"case_ids": ["com-001", "com-012", "com-055"]}}}},
        manifest_dir=str(manifests), partition_key=loaded.partition_key,
    )
    assert {"eval_attempts", "eval_executions", "eval_grades", "eval_scorecard", "eval_gate"} <= set(summary.materialized)
    assert summary.materialized["eval_attempts"]["attempts"] == 9
    # no baseline configured for raw and no earlier batch: nothing to compare with — the check
    # is left unevaluated (Dagster shows it skipped), neither passed nor failed
    assert "eval_gate:regression_gate" not in summary.checks
    assert summary.materialized["eval_gate"]["gate"].startswith("## Regression gate: skipped")
    batch_ids = {summary.materialized[a]["batch_id"] for a in
                 ("eval_attempts", "eval_executions", "eval_grades", "eval_diagnoses",
                  "eval_scorecard", "eval_gate")}
    assert len(batch_ids) == 1
    folder = home.store / "runs" / loaded.partition_key / batch_ids.pop()
    assert summary.materialized["eval_grades"]["grades_parquet"] == str(folder / "grades.parquet")
    assert (folder / "grades.parquet").exists() and (folder / "inputs.json").exists()
    # the HTML report, linked from the gate and written after it: it shows the gate's comparisons
    page = Path(summary.materialized["eval_gate"]["report"])
    assert page == folder / "report.html" and loaded.partition_key in page.read_text()
    assert "No comparisons stored" not in page.read_text()
    assert page.stat().st_mtime >= (folder / "comparisons.json").stat().st_mtime
    with dg.DagsterInstance.get() as instance:
        assert loaded.partition_key in instance.get_dynamic_partitions("config_versions")
        run = instance.get_run_by_id(summary.run_id)
        assert run.job_name == "evaluate" and run.tags["sqleval/trigger"] == "cli"
        assert run.tags["dagster/partition"] == loaded.partition_key
        assert run.status == dg.DagsterRunStatus.SUCCESS
        (record,) = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("eval_gate"), "regression_gate"), limit=5)
        # planned, never evaluated, in a run that succeeded: what Dagster resolves to SKIPPED
        assert record.status.value == "PLANNED" and record.run_id == summary.run_id
        # every configuration's status, observed after the gate
        (obs,) = instance.fetch_observations(dg.AssetKey("configuration_status"), limit=1).records
        rows = {r.data["configuration"]: r.data for r in
                obs.asset_observation.metadata["configurations"].value.records}
        assert rows["baseline-raw"]["gate"] == "not evaluated"
        assert rows["baseline-raw"]["current_version"] == loaded.partition_key


def _resources():
    from sqleval_pipeline.defs.resources import SqlevalHome
    from sqleval_pipeline.project import current

    p = current()
    return {"sqleval": SqlevalHome(project_file=str(p.file), root=str(p.home.root))}


def _configs(folder, *, edited: bool = False):
    """Three configuration files: an active one, an inactive one and a broken one."""
    folder.mkdir(exist_ok=True)
    (folder / "a.yaml").write_text("name: alpha\ngenerator: {kind: baseline}\ncontext: {curation: false}\n"
                                   f"runs: {4 if edited else 3}\n")
    (folder / "b.yaml").write_text("name: beta\ngenerator: {kind: baseline}\nactive: false\n")
    (folder / "broken.yaml").write_text("name: gamma\ngenerator: {kind: nonsense}\n")
    return folder


@pytest.mark.slow
def test_sensor_registers_only_active_versions_and_marks_superseded_ones(tmp_path, session_home):
    from sqleval_pipeline.configs import load_configs
    from sqleval_pipeline.defs.evaluation.sensors import new_configuration_versions
    from sqleval_pipeline.defs.resources import SqlevalHome
    from sqleval_pipeline.project import current

    p = current()
    folder = _configs(tmp_path / "configs")
    res = {"sqleval": SqlevalHome(project_file=str(p.file), root=str(p.home.root),
                                  configs_dir=str(folder))}
    errors: list[str] = []
    alpha = {c.name: c for c in load_configs(folder, project=p, errors=errors)}["alpha"]
    assert len(errors) == 1 and "broken.yaml" in errors[0]
    with dg.instance_for_test() as instance:
        result = new_configuration_versions(dg.build_sensor_context(instance=instance, resources=res))
        # the broken file is skipped, the inactive one is not registered
        assert list(result.dynamic_partitions_requests[0].partition_keys) == [alpha.partition_key]
        assert [r.partition_key for r in result.run_requests] == [alpha.partition_key]
        assert result.asset_events == []
        instance.add_dynamic_partitions("config_versions", [alpha.partition_key])
        again = new_configuration_versions(dg.build_sensor_context(instance=instance, resources=res))
        assert isinstance(again, dg.SkipReason)
        _configs(folder, edited=True)  # the file is edited in place: a new version
        edited = {c.name: c for c in load_configs(folder, project=p, errors=[])}["alpha"]
        assert edited.partition_key != alpha.partition_key
        third = new_configuration_versions(dg.build_sensor_context(instance=instance, resources=res))
        assert [r.partition_key for r in third.run_requests] == [edited.partition_key]
        (obs,) = third.asset_events
        assert obs.partition == alpha.partition_key
        assert obs.metadata["superseded_by"].value == edited.partition_key


@pytest.mark.slow
def test_sensor_follows_a_revert_and_removes_malformed_keys(tmp_path):
    """A → B → A: the revert makes A current again (evaluated again, B superseded once, no
    observation repeated for older versions); a key added by hand that names no version and
    never ran is removed; a tick with nothing new does nothing (issue 24, item 5)."""
    from sqleval_pipeline.configs import load_configs
    from sqleval_pipeline.defs.evaluation.sensors import new_configuration_versions
    from sqleval_pipeline.defs.resources import SqlevalHome
    from sqleval_pipeline.project import current

    p = current()
    folder = _configs(tmp_path / "configs")
    res = {"sqleval": SqlevalHome(project_file=str(p.file), root=str(p.home.root), configs_dir=str(folder))}

    def key() -> str:
        return {c.name: c for c in load_configs(folder, project=p, errors=[])}["alpha"].partition_key

    a = key()
    with dg.instance_for_test() as instance:
        def tick(cursor):
            return new_configuration_versions(dg.build_sensor_context(instance=instance, resources=res,
                                                                      cursor=cursor))

        first = tick(None)
        assert [r.partition_key for r in first.run_requests] == [a]
        instance.add_dynamic_partitions("config_versions", [a])
        _configs(folder, edited=True)
        b = key()
        second = tick(first.cursor)
        assert [r.partition_key for r in second.run_requests] == [b]
        assert [(o.partition, o.metadata["superseded_by"].value) for o in second.asset_events] == [(a, b)]
        instance.add_dynamic_partitions("config_versions", [b])
        _configs(folder)  # the edit is undone: the file defines A again
        assert key() == a
        third = tick(second.cursor)
        assert [r.partition_key for r in third.run_requests] == [a]
        assert third.run_requests[0].tags["sqleval/trigger"] == "revert"
        assert third.dynamic_partitions_requests == []  # A is registered already
        assert [(o.partition, o.metadata["superseded_by"].value) for o in third.asset_events] == [(b, a)]
        assert isinstance(tick(third.cursor), dg.SkipReason)  # nothing new: nothing re-emitted
        instance.add_dynamic_partitions("config_versions", ["baseline-raw"])  # "Add partition" by hand
        fourth = tick(third.cursor)
        assert fourth.run_requests == [] and fourth.asset_events == []
        (delete,) = fourth.dynamic_partitions_requests
        assert list(delete.partition_keys) == ["baseline-raw"]


@pytest.mark.slow
def test_one_broken_configuration_does_not_stop_the_nightly_run(tmp_path):
    import datetime as dt

    from sqleval_pipeline.configs import load_configs
    from sqleval_pipeline.defs.evaluation.schedules import nightly_evaluation
    from sqleval_pipeline.defs.resources import SqlevalHome
    from sqleval_pipeline.project import current

    p = current()
    folder = _configs(tmp_path / "configs")
    res = {"sqleval": SqlevalHome(project_file=str(p.file), root=str(p.home.root),
                                  configs_dir=str(folder))}
    alpha = {c.name: c for c in load_configs(folder, project=p, errors=[])}["alpha"]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("config_versions", [alpha.partition_key])
        ctx = dg.build_schedule_context(instance=instance, resources=res,
                                        scheduled_execution_time=dt.datetime(2026, 12, 2, 2, 0))
        requests = nightly_evaluation(ctx)
    assert [r.partition_key for r in requests] == [alpha.partition_key]
    assert requests[0].tags["sqleval/trigger"] == "nightly"


def test_schedule_and_sensors_run_by_default():
    from sqleval_pipeline.defs.evaluation.freshness import freshness_sensor
    from sqleval_pipeline.defs.evaluation.schedules import nightly_evaluation
    from sqleval_pipeline.defs.evaluation.sensors import new_configuration_versions

    assert nightly_evaluation.default_status == dg.DefaultScheduleStatus.RUNNING
    assert new_configuration_versions.default_status == dg.DefaultSensorStatus.RUNNING
    assert freshness_sensor.default_status == dg.DefaultSensorStatus.RUNNING


@pytest.mark.slow
def test_nightly_schedule_requests_fresh_batches_for_active_configurations():
    from sqleval_pipeline.configs import load_configs
    from sqleval_pipeline.defs.evaluation.schedules import nightly_evaluation

    with dg.instance_for_test() as instance:
        keys = sorted(c.partition_key for c in load_configs())
        instance.add_dynamic_partitions("config_versions", keys)
        import datetime as dt

        ctx = dg.build_schedule_context(instance=instance, resources=_resources(),
                                        scheduled_execution_time=dt.datetime(2026, 12, 1, 2, 0))
        requests = nightly_evaluation(ctx)
        active = {c.partition_key for c in load_configs() if c.config.active}
        assert {r.partition_key for r in requests} == active
        assert all(r.run_config["ops"]["eval_attempts"]["config"]["batch"] == "new" for r in requests)
        assert all(r.run_key.startswith("nightly:2026-12-01:") for r in requests)


def test_a_baseline_graded_by_an_older_grader_is_regraded_not_compared(env):
    from sqleval_pipeline.pipeline.records import save_records
    from sqleval_pipeline.scoring import load_scorecard

    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    cur = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml")
    ids = ["com-012", "com-001"]
    first = cmp.evaluate(env, raw, case_ids=ids)
    folder = env.store.batch_dir(raw.partition_key, first.batch.batch_id)
    old = [g.model_copy(update={"grader_version": "r0-old"}) for g in load_records(folder / "grades.parquet", Grade)]
    save_records(folder / "grades.parquet", old)
    card = load_scorecard(folder / "scorecard.json").model_copy(update={"grader_version": "r0-old"})
    card.save(folder / "scorecard.json")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    res = cmp.evaluate(env, cur, case_ids=ids)
    assert res.gate is not None and res.diff.baseline_grader_version == res.diff.candidate_grader_version
    # the baseline's stored artifacts are immutable: not one byte of its folder changed
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert load_records(folder / "grades.parquet", Grade)[0].grader_version == "r0-old"
    cand = env.store.batch_dir(cur.partition_key, res.batch.batch_id)
    rebased = cand / "rebased" / raw.partition_key / first.batch.batch_id
    assert load_records(rebased / "grades.parquet", Grade)[0].grader_version == res.diff.candidate_grader_version
    assert load_scorecard(rebased / "scorecard.json").grader_version == res.diff.candidate_grader_version
    assert (cand / "calibrated_refusal.json").exists()


def test_two_candidates_gating_against_one_old_baseline_at_once(env):
    """Both gates re-grade the same baseline concurrently; each writes only into its own batch."""
    import threading

    from sqleval_pipeline.pipeline.records import save_records
    from sqleval_pipeline.scoring import load_scorecard

    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    cur = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml")
    ids = ["com-012", "com-001", "com-018"]
    first = cmp.evaluate(env, raw, case_ids=ids)
    folder = env.store.batch_dir(raw.partition_key, first.batch.batch_id)
    save_records(folder / "grades.parquet", [g.model_copy(update={"grader_version": "r0-old"})
                                             for g in load_records(folder / "grades.parquet", Grade)])
    load_scorecard(folder / "scorecard.json").model_copy(update={"grader_version": "r0-old"}).save(
        folder / "scorecard.json")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    # two candidate batches of the curated configuration (the same version, two batches)
    runs = [ev.stage_attempts(env, cur, mode="new", case_ids=ids) for _ in range(2)]
    cards = []
    for run in runs:
        ev.stage_executions(env, cur, run.batch)
        ev.stage_grades(env, run.batch)
        ev.stage_diagnoses(env, cur, run.batch)
        cards.append(ev.stage_scorecard(env, cur, run.batch))
    results, errors = [], []

    def gate(run, card):
        try:
            results.append(cmp.stage_gate(env, cur, run.batch, card))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=gate, args=(r, c)) for r, c in zip(runs, cards, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 2 and all(r.comparisons[0].status != "skipped" for r in results)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    for run in runs:
        rebased = env.store.batch_dir(cur.partition_key, run.batch.batch_id) / "rebased" / raw.partition_key
        assert (rebased / first.batch.batch_id / "scorecard.json").exists()


def test_a_changed_guard_policy_executes_again_in_a_new_batch(env, monkeypatch):
    """Executions belong to the guard policy they were made under: after the policy changes,
    the stored attempts are reused (no provider call) and executed again in a new batch; the
    old batch is untouched and the diff says the policies differ."""
    from sqleval_pipeline.scoring import diff

    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml")
    ids = ["com-012", "com-001", "com-028"]
    first = cmp.evaluate(env, loaded, case_ids=ids)
    folder = env.store.batch_dir(loaded.partition_key, first.batch.batch_id)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert first.batch.policy_version == env.policy(loaded.config.guard or None).version
    # the same policy: the batch is reused as stored
    again = cmp.evaluate(env, loaded, case_ids=ids)
    assert again.batch.batch_id == first.batch.batch_id and again.provider_calls == 0

    real = ev.Environment.policy
    monkeypatch.setattr(ev.Environment, "policy",
                        lambda self, overrides=None: real(self, overrides).with_overrides(
                            {"denied_functions": {"names": ["count"]}}))
    changed = cmp.evaluate(env, loaded, case_ids=ids)
    assert changed.batch.batch_id != first.batch.batch_id
    assert changed.batch.attempts_from == first.batch.batch_id and changed.provider_calls == 0
    assert changed.batch.policy_version != first.batch.policy_version
    new_folder = env.store.batch_dir(loaded.partition_key, changed.batch.batch_id)
    old_ex = load_records(folder / "executions.parquet", Execution)
    new_ex = load_records(new_folder / "executions.parquet", Execution)
    assert {e.policy_version for e in new_ex} == {changed.batch.policy_version}
    assert {e.policy_version for e in old_ex} == {first.batch.policy_version}
    # the attempts are the stored ones; the executions are new, under the new policy
    old_at = load_records(folder / "attempts.parquet", Attempt)
    assert load_records(new_folder / "attempts.parquet", Attempt) == old_at
    counting = [e for e, a in zip(new_ex, [a for a in old_at if a.kind == "sql"], strict=True)
                if "count(" in (a.sql or "").lower()]
    assert counting and all(e.status == "refused" and e.reason == "denied_function" for e in counting)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    d = diff(first.scorecard, changed.scorecard)
    assert any("guard policies differ" in n for n in d.notes)
    assert d.baseline_policy_version == first.batch.policy_version


def test_failures_are_diagnosed_and_judges_calibrated_against_labels(env):
    from sqleval_pipeline.pipeline.records import Diagnosis

    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    ids = ["com-008", "com-012", "com-018", "com-001"]  # three labelled failures, one success
    res = cmp.evaluate(env, raw, case_ids=ids)
    folder = env.store.batch_dir(raw.partition_key, res.batch.batch_id)
    diags = load_records(folder / "diagnoses.parquet", Diagnosis)
    assert {d.case_id for d in diags} == {"com-008", "com-012", "com-018"}
    assert {d.judge for d in diags} == {"rules"} and len(diags) == 9
    # the scorecard's histogram counts the stored diagnoses, one per failed attempt
    from collections import Counter

    assert res.scorecard.failure_histogram == dict(Counter(d.category for d in diags))
    report = ev.calibration_report(env)
    rules = next(j for j in report.judges if j.judge == "rules")
    assert rules.n == 3 and rules.status.startswith("uncalibrated")
    assert rules.agreements == 3  # com-018 too: a missing coded-value filter, not a wrong table
    assert any("uncalibrated" in line for line in ev.calibration_lines(report))
    # a later run of one of those cases hides none of the labelled attempts of the earlier
    # run: each label meets the newest diagnosis of its attempt (the newest batch alone held
    # one of the three)
    cmp.evaluate(env, raw, case_ids=["com-008"])
    again = next(j for j in ev.calibration_report(env).judges if j.judge == "rules")
    assert again.n == 3 and again.agreements == 3


def test_diagnoses_are_kept_per_grader_version_and_only_for_what_still_fails(env):
    from sqleval_pipeline.pipeline.suite_checks import grader_for
    from sqleval_pipeline.pipeline.records import Diagnosis, save_records

    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    res = cmp.evaluate(env, raw, case_ids=["com-008", "com-001"])
    folder = env.store.batch_dir(raw.partition_key, res.batch.batch_id)
    diags = load_records(folder / "diagnoses.parquet", Diagnosis)
    assert diags and all(d.grader_version == grader_for(env).version for d in diags)
    # a stored verdict made for another grader's grade, and one for an attempt that passes:
    # neither is reused — the first is made again, the second dropped
    passing = next(g for g in load_records(folder / "grades.parquet", Grade) if g.outcome == "CORRECT")
    stale = [d.model_copy(update={"grader_version": "r0-old", "explanation": "stale"}) for d in diags]
    ghost = diags[0].model_copy(update={"case_id": passing.case_id, "run_index": passing.run_index,
                                        "explanation": "ghost"})
    save_records(folder / "diagnoses.parquet", [*stale, ghost])
    again = ev.stage_diagnoses(env, raw, res.batch)
    assert {d.key for d in again} == {d.key for d in diags}
    assert not any(d.explanation in ("stale", "ghost") for d in again)
    assert all(d.grader_version == grader_for(env).version for d in again)


def test_a_model_backed_configuration_runs_end_to_end_against_a_loopback_provider(env, tmp_path, monkeypatch):
    """The real Anthropic SDK path, through attempts → guard → grades → scorecard. The fake
    answers from the question it finds in the rendered prompt: right SQL, a hostile query, a
    refusal, and one 429 that the runner retries."""
    from tests.generation.fakes import FakeAnthropic, rate_limited, refusal, sql

    answers = {
        "How many orders were paid with UPI?":
            sql("SELECT count(*) FROM fct_orders WHERE payment_method = 'unified_payments'"),
        "How many customers do we have?": sql("SELECT * FROM pii.customer_contacts"),
        "What is the average salary of employees in Engineering?": refusal("hr data is not served"),
    }

    def answer(req):
        prompt = req.json["messages"][0]["content"]
        return next(a for q, a in answers.items() if f"Question: {q}" in prompt)

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with FakeAnthropic(default=answer) as fake:
        fake.queue(rate_limited(0.01))
        cfg_dir = tmp_path / "configs"
        cfg_dir.mkdir()
        (cfg_dir / "claude_fake.yaml").write_text(
            "name: claude-fake\ngenerator:\n  kind: anthropic\n  model: claude-test-1\n"
            f"  base_url: {fake.base_url}\nconcurrency: 2\nmax_retries: 2\n")
        env2 = ev.Environment(**{**env.__dict__, "configs_dir": cfg_dir})
        loaded = ev.find_config(env2, "claude-fake")
        res = cmp.evaluate(env2, loaded, case_ids=["com-012", "com-002", "com-055"], runs=3)
    outcomes = {(g.case_id, g.outcome) for g in
                load_records(env.store.artifact(loaded.partition_key, res.batch.batch_id, "grades.parquet"), Grade)}
    assert outcomes == {("com-012", "CORRECT"), ("com-002", "WRONG"), ("com-055", "DEFERRED_CORRECTLY")}
    attempts = load_records(env.store.artifact(loaded.partition_key, res.batch.batch_id, "attempts.parquet"), Attempt)
    assert all(a.model == "claude-test-1" and a.temperature_settable is False for a in attempts)
    assert all("Today is 2025-12-15" in a.prompt for a in attempts)
    assert sum(a.retries for a in attempts) == 1 and res.provider_calls == 10
    executions = load_records(env.store.artifact(loaded.partition_key, res.batch.batch_id, "executions.parquet"), Execution)
    assert {e.layer for e in executions if e.case_id == "com-002"} == {"filter"}


def test_a_configuration_in_another_dialect_is_transpiled_before_the_guard(env, tmp_path):
    """Snowflake SQL from the system under test: transpiled to DuckDB, both texts kept; a text
    that cannot be transpiled is its own recorded reason (the system's fault: WRONG)."""
    import json

    answers = tmp_path / "answers.jsonl"
    sql = {0: "SELECT IFF(TRUE, COUNT(*), 0) AS upi_orders FROM fct_orders WHERE payment_method = 'unified_payments'",
           1: "SELECT COUNT(*) AS upi_orders FROM fct_orders WHERE payment_method = 'unified_payments' QUALIFY",
           2: "SELECT COUNT(*) AS upi_orders FROM fct_orders WHERE payment_method ILIKE 'unified%'"}
    answers.write_text("".join(json.dumps({"case_id": "com-012", "run_index": r, "sql": s}) + "\n"
                               for r, s in sql.items()))
    cfg = tmp_path / "sf.yaml"
    cfg.write_text(f"name: snowflake-sut\ngenerator: {{kind: recorded, path: {answers}}}\n"
                   "context: {curation: false}\ndialect: snowflake\n")
    loaded = load_config(cfg, tmp_path, project=env.project)
    res = cmp.evaluate(env, loaded, case_ids=["com-012"], runs=3)
    folder = env.store.batch_dir(loaded.partition_key, res.batch.batch_id)
    attempts = {a.run_index: a for a in load_records(folder / "attempts.parquet", Attempt)}
    executions = {e.run_index: e for e in load_records(folder / "executions.parquet", Execution)}
    grades = {g.run_index: g for g in load_records(folder / "grades.parquet", Grade)}
    assert attempts[0].sql == sql[0]  # the system's own text is kept on the attempt
    assert "IFF" not in executions[0].executed_sql.upper() and executions[0].status == "ok"
    assert executions[1].status == "error" and executions[1].error_code == "transpile_failed"
    assert "snowflake" in executions[1].error_message
    assert executions[2].status == "ok"
    assert [grades[r].outcome for r in range(3)] == ["CORRECT", "WRONG", "CORRECT"]


def test_an_unrelated_broken_configuration_does_not_stop_another(env, tmp_path):
    import dataclasses

    configs = tmp_path / "configs"
    configs.mkdir()
    shutil.copy(location.EVALS_DIR / "configs" / "baseline_raw.yaml", configs / "raw.yaml")
    (configs / "broken.yaml").write_text("name: broken\ngenerator: {kind: recorded, path: missing.jsonl}\n"
                                         "runs: 1\n")
    env2 = dataclasses.replace(env, configs_dir=configs)
    raw = load_config(configs / "raw.yaml", project=env.project)
    assert ev.find_config(env2, raw.partition_key).name == "baseline-raw"
    with pytest.raises(ev.EvaluationError, match=r"broken.yaml.*runs"):
        ev.find_config(env2, "broken@00000000")


def test_the_llm_judge_runs_inside_stage_diagnoses(env, tmp_path, monkeypatch):
    """`judge: llm`: the diagnoses stage calls the real Anthropic SDK (against the loopback
    fake) once per failed attempt, stores its verdicts beside the rules judge's, and reuses
    them on the next run (no second call)."""
    import json

    import yaml

    from sqleval_pipeline.judging.base import is_failure
    from sqleval_pipeline.pipeline.records import Diagnosis
    from tests.generation.fakes import FakeAnthropic, text

    doc = yaml.safe_load((location.EVALS_DIR / "configs" / "baseline_raw.yaml").read_text())
    doc.update(name="raw-llm-judged", judge="llm", judge_model="claude-opus-4-1")
    doc.pop("baseline", None)
    cfg = tmp_path / "raw_llm.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    loaded = load_config(cfg, root=location.REPO_ROOT)
    ids = ["com-008", "com-012", "com-001"]  # two failing cases, one success (the offline baseline)
    verdict = text(json.dumps({"category": "wrong_filter", "explanation": "filters the wrong coded value"}))
    with FakeAnthropic(default=verdict) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        res = cmp.evaluate(env, loaded, case_ids=ids)
        folder = env.store.batch_dir(loaded.partition_key, res.batch.batch_id)
        grades = load_records(folder / "grades.parquet", Grade)
        failed = {g.key for g in grades if is_failure(g)}
        diags = load_records(folder / "diagnoses.parquet", Diagnosis)
        llm = [d for d in diags if d.judge.startswith("llm:")]
        assert failed and {d.key for d in llm} == failed
        assert {d.key for d in diags if d.judge == "rules"} == failed
        assert all(d.category == "wrong_filter" and d.judge == "llm:claude-opus-4-1" for d in llm)
        # one call per distinct failure: runs that gave the same SQL are asked once
        answers = {(a.case_id, a.run_index): a.sql for a in load_records(folder / "attempts.parquet", Attempt)}
        distinct = {(k[1], answers[(k[1], k[2])]) for k in failed}
        assert fake.calls == len(distinct) <= len(failed)
        assert all(r.json["model"] == "claude-opus-4-1" for r in fake.requests)
        ev.stage_diagnoses(env, loaded, res.batch)  # stored verdicts are reused
        assert fake.calls == len(distinct)


def test_a_second_batch_of_one_version_is_compared_with_the_first(env):
    """Drift: a fresh batch of an unchanged version is compared with the previous batch, and
    nothing but the batch is named as changed; the earlier batch's files are not touched."""
    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    ids = sorted(c.id for c in env.cases)[:3]  # any three cases of the golden set
    first = cmp.evaluate(env, loaded, case_ids=ids)
    kinds = {c.kind: c for c in first.report.comparisons}
    assert kinds["previous_batch"].status == "skipped"
    folder = env.store.batch_dir(loaded.partition_key, first.batch.batch_id)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    second = cmp.evaluate(env, loaded, case_ids=ids, mode="new")
    assert second.batch.batch_id != first.batch.batch_id
    drift = {c.kind: c for c in second.report.comparisons}["previous_batch"]
    assert drift.baseline_batch == first.batch.batch_id
    assert drift.status == "passed" and drift.delta == 0  # the offline baseline is deterministic
    assert [c.field for c in drift.changes] == ["batch"]
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    stored = env.store.batch_dir(loaded.partition_key, second.batch.batch_id)
    assert (stored / "previous_batch" / "gate.json").exists()


def test_a_baseline_holding_a_case_removed_since_is_compared_on_the_cases_both_have(env):
    """An older batch re-graded for a comparison may hold attempts of a case the golden set no
    longer has (a re-import rejected it): they are left out, never a crash."""
    import dataclasses

    from sqleval_pipeline.pipeline.records import save_records
    from sqleval_pipeline.scoring import load_scorecard

    def on_the_snapshot(loaded):
        # graded on the snapshot alone (`test_suite: false`, a field that leaves the version as
        # it is): a golden set without com-001 has a test suite of its own, and distilling it
        # is not what this test is about (grading on the suite: tests/suite/test_grading.py)
        return loaded.model_copy(update={"config": loaded.config.model_copy(update={"test_suite": False})})

    raw = on_the_snapshot(load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml"))
    cur = on_the_snapshot(load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml"))
    assert raw.partition_key == load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml").partition_key
    first = cmp.evaluate(env, raw, case_ids=["com-012", "com-001"])
    folder = env.store.batch_dir(raw.partition_key, first.batch.batch_id)
    # an older grader, so the candidate's comparison re-grades the baseline's attempts
    old = [g.model_copy(update={"grader_version": "r0-old"}) for g in load_records(folder / "grades.parquet", Grade)]
    save_records(folder / "grades.parquet", old)
    card = load_scorecard(folder / "scorecard.json").model_copy(update={"grader_version": "r0-old"})
    card.save(folder / "scorecard.json")
    smaller = dataclasses.replace(env, cases=[c for c in env.cases if c.id != "com-001"])
    res = cmp.evaluate(smaller, cur, case_ids=["com-012"])
    assert res.gate is not None and res.diff is not None
    rebased = env.store.batch_dir(cur.partition_key, res.batch.batch_id) / "rebased" / raw.partition_key
    regraded = load_records(rebased / first.batch.batch_id / "grades.parquet", Grade)
    assert {g.case_id for g in regraded} == {"com-012"} and len(regraded) == 3


@pytest.mark.parametrize("key", ["baseline-raw", "baseline-raw@", "baseline-raw@XYZ", "no-such@12345678"])
def test_a_malformed_or_unknown_partition_key_is_refused_listing_the_valid_ones(env, key):
    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    with pytest.raises(ev.EvaluationError) as err:
        ev.find_config(env, key, strict=True)
    assert "the current keys are" in str(err.value) and raw.partition_key in str(err.value)
    assert ev.find_config(env, raw.partition_key, strict=True).name == "baseline-raw"
