"""Several configurations at once: the Dagster run queue the project file configures, and the
provider tag every queued evaluation run carries."""

import datetime as dt

import dagster as dg
import pytest
import yaml

from sqleval_pipeline.orchestrate import MANAGED, ensure_dagster_home, instance_yaml
from sqleval_pipeline.paths import Home
from sqleval_pipeline.project import OrchestrationSettings


def queue_config(dagster_home):
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        return instance.get_concurrency_config().run_queue_config


def test_the_instance_runs_the_queue_the_project_file_sets(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = Home(tmp_path / "build")
    ensure_dagster_home(home, OrchestrationSettings(max_concurrent_runs=3, runs_per_provider=2))
    q = queue_config(home.dagster_home)
    assert q.max_concurrent_runs == 3
    assert q.tag_concurrency_limits == [
        {"key": "sqleval/provider", "limit": 2, "value": {"applyLimitPerUniqueValue": True}},
        {"key": "dagster/partition", "limit": 1, "value": {"applyLimitPerUniqueValue": True}}]
    # the settings change: the file sqleval wrote follows them
    ensure_dagster_home(home, OrchestrationSettings(max_concurrent_runs=5))
    q = queue_config(home.dagster_home)
    assert q.max_concurrent_runs == 5 and q.tag_concurrency_limits[0]["limit"] == 1


def test_a_dagster_yaml_the_team_edited_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = Home(tmp_path / "build")
    home.dagster_home.mkdir(parents=True)
    own = "telemetry:\n  enabled: false\nconcurrency:\n  runs:\n    max_concurrent_runs: 9\n"
    (home.dagster_home / "dagster.yaml").write_text(own)
    ensure_dagster_home(home, OrchestrationSettings(max_concurrent_runs=2))
    assert (home.dagster_home / "dagster.yaml").read_text() == own
    # the bare file earlier versions wrote is replaced by the managed one
    (home.dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    ensure_dagster_home(home, OrchestrationSettings(max_concurrent_runs=2))
    text = (home.dagster_home / "dagster.yaml").read_text()
    assert text.startswith(MANAGED) and yaml.safe_load(text)["concurrency"]["runs"]["max_concurrent_runs"] == 2


def test_the_project_file_rejects_a_queue_of_no_runs():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="runs_per_provider"):
        OrchestrationSettings(runs_per_provider=0)
    assert "max_concurrent_runs: 4" in instance_yaml()


@pytest.mark.slow
def test_nightly_runs_name_their_provider_and_offline_ones_none(tmp_path):
    from sqleval_pipeline.configs import load_configs
    from sqleval_pipeline.defs.evaluation.schedules import nightly_evaluation
    from sqleval_pipeline.defs.resources import SqlevalHome
    from sqleval_pipeline.project import current

    p = current()
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "a.yaml").write_text("name: offline\ngenerator: {kind: baseline}\n")
    (folder / "b.yaml").write_text("name: local-llm\ngenerator: {kind: openai, model: m, "
                                   "base_url: 'http://10.1.2.3:8000/v1', api_key_env: null}\n")
    (folder / "c.yaml").write_text("name: claude\ngenerator: {kind: anthropic, model: claude-x}\n")
    loaded = {c.name: c for c in load_configs(folder, project=p, errors=[])}
    res = {"sqleval": SqlevalHome(project_file=str(p.file), root=str(p.home.root),
                                  configs_dir=str(folder))}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("config_versions", [c.partition_key for c in loaded.values()])
        ctx = dg.build_schedule_context(instance=instance, resources=res,
                                        scheduled_execution_time=dt.datetime(2026, 12, 2, 2, 0))
        requests = {r.partition_key: r.tags for r in nightly_evaluation(ctx)}
    assert requests[loaded["local-llm"].partition_key]["sqleval/provider"] == "openai:10.1.2.3:8000"
    assert requests[loaded["claude"].partition_key]["sqleval/provider"] == "anthropic"
    assert "sqleval/provider" not in requests[loaded["offline"].partition_key]


def test_a_partition_registered_by_many_at_once_is_registered_once(tmp_path):
    from sqleval_pipeline.orchestrate import add_partition
    from tests.conftest import at_once

    with dg.instance_for_test() as instance:
        _, errors = at_once(*[lambda: add_partition(instance, "config_versions", "alpha@12345678",
                                                    lock=tmp_path / ".lock")] * 8)
        assert errors == []
        assert instance.get_dynamic_partitions("config_versions") == ["alpha@12345678"]


def test_the_queue_holds_back_a_second_run_of_a_provider_or_of_a_version(tmp_path, monkeypatch):
    """Dagster's own tag-limit counter (what the daemon's dequeuer consults), over the limits
    of the instance sqleval writes: with one Anthropic run in progress, a second Anthropic run
    waits while a local model's run, an offline run and other versions go ahead."""
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = Home(tmp_path / "build")
    ensure_dagster_home(home, OrchestrationSettings(runs_per_provider=1))
    limits = queue_config(home.dagster_home).tag_concurrency_limits

    def run(key, provider=None):
        tags = {"dagster/partition": key, **({"sqleval/provider": provider} if provider else {})}
        return dg.DagsterRun(job_name="evaluate", run_id=f"r-{key}", tags=tags)

    counter = TagConcurrencyLimitsCounter(limits, [run("claude@1", "anthropic")])
    assert counter.is_blocked(run("claude-long@2", "anthropic"))      # same provider
    assert counter.is_blocked(run("claude@1"))                         # same version
    assert not counter.is_blocked(run("qwen@3", "openai:10.0.0.5:8000"))
    assert not counter.is_blocked(run("baseline-raw@4"))


@pytest.mark.slow  # curated configurations version the demo's semantic layer: `dbt parse` on a fresh machine
def test_a_run_launched_without_tags_is_tagged_with_its_provider_before_it_queues(tmp_path, monkeypatch):
    """The UI's Materialize, a job's partition and a backfill launch runs with Dagster's tags
    only; the instance sqleval writes submits them through its coordinator, which adds the
    configuration's provider tag (and the trigger) before the run enters the queue — so the
    queue's per-provider limit holds them back like a CLI or sensor run."""
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    from sqleval_pipeline.configs import load_configs
    from sqleval_pipeline.project import current
    from sqleval_pipeline.run_queue import ProviderTaggingRunCoordinator

    p = current()
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "a.yaml").write_text("name: offline\ngenerator: {kind: baseline}\n")
    (folder / "b.yaml").write_text("name: local-llm\ngenerator: {kind: openai, model: m, "
                                   "base_url: 'http://10.1.2.3:8000/v1', api_key_env: null}\n")
    loaded = {c.name: c for c in load_configs(folder, project=p, errors=[])}
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = Home(tmp_path / "build")
    ensure_dagster_home(home, OrchestrationSettings(runs_per_provider=1), p.file)
    text = (home.dagster_home / "dagster.yaml").read_text()
    doc = yaml.safe_load(text)
    # the configurations folder is the project's in real use; here a temporary one
    doc["run_coordinator"]["config"]["configs_dir"] = str(folder)
    (home.dagster_home / "dagster.yaml").write_text(yaml.safe_dump(doc))

    def launch(instance, run_id, **tags):
        from dagster._core.remote_origin import (
            RegisteredCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin)

        origin = RemoteJobOrigin(RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("sqleval"),
                                                        "__repository__"), "__ASSET_JOB")
        run = instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=run_id, tags=tags,
                                             remote_job_origin=origin))
        # what DagsterInstance.submit_run hands the coordinator (once the run has its origin)
        instance.run_coordinator.submit_run(dg.SubmitRunContext(run, workspace=None))
        return instance.get_run_by_id(run_id)

    llm, offline = loaded["local-llm"].partition_key, loaded["offline"].partition_key
    with dg.DagsterInstance.from_config(str(home.dagster_home)) as instance:
        assert isinstance(instance.run_coordinator, ProviderTaggingRunCoordinator)
        ui = launch(instance, "ui-1", **{"dagster/partition": llm})
        assert ui.status == dg.DagsterRunStatus.QUEUED
        assert ui.tags["sqleval/provider"] == "openai:10.1.2.3:8000"
        assert ui.tags["sqleval/trigger"] == "ui"
        backfill = launch(instance, "bf-1", **{"dagster/partition": llm, "dagster/backfill": "abc"})
        assert backfill.tags["sqleval/trigger"] == "backfill"
        assert backfill.tags["sqleval/provider"] == "openai:10.1.2.3:8000"
        # an offline configuration has no provider; a tag already set is kept as it is
        assert "sqleval/provider" not in launch(instance, "off-1", **{"dagster/partition": offline}).tags
        kept = launch(instance, "cli-1", **{"dagster/partition": llm, "sqleval/provider": "mine",
                                            "sqleval/trigger": "cli"})
        assert kept.tags["sqleval/provider"] == "mine" and kept.tags["sqleval/trigger"] == "cli"
        # a version no configuration has (edited since) still queues, with no provider
        gone = launch(instance, "gone-1", **{"dagster/partition": "local-llm@00000000"})
        assert gone.status == dg.DagsterRunStatus.QUEUED and "sqleval/provider" not in gone.tags
        # a run that is no evaluation (no partition) is left alone
        assert "sqleval/trigger" not in launch(instance, "plain-1").tags
        limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
        # with the UI run in progress, the backfill's run of the same provider waits
        counter = TagConcurrencyLimitsCounter(limits, [ui])
        assert counter.is_blocked(instance.get_run_by_id("bf-1"))
        assert not counter.is_blocked(instance.get_run_by_id("off-1"))
