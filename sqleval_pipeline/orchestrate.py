"""Materialize Dagster assets in-process from the CLI: the same assets as the Dagster UI, so
there is one pipeline. Runs are recorded in ``$SQLEVAL_HOME/dagster_home`` (the instance that
``make ui`` opens), so CLI runs show up in the UI's run history and lineage."""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from contextlib import nullcontext
import getpass

import dagster as dg
import yaml

from sqleval_pipeline import definitions, paths
from sqleval_pipeline.configs import PROVIDER_TAG
from sqleval_pipeline.defs.evaluation.partitions import config_versions
from sqleval_pipeline.pipeline.store import file_lock
from sqleval_pipeline.processes import process_alive
from sqleval_pipeline.project import OrchestrationSettings, Project
from sqleval_pipeline.project import current as current_project
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.textfiles import write_atomically


class RunFailed(SqlevalError, RuntimeError):
    """A materialization failed; ``str()`` is the underlying error a person should read."""

    def __init__(self, step: str, message: str, *, summary: RunSummary | None = None,
                 check_failure: bool = False):
        self.step = step
        #: what the run did materialize before it failed (metadata, check verdicts)
        self.summary = summary
        #: every failed step failed only because a blocking asset check failed (the assets
        #: themselves were materialized: e.g. the regression gate wrote its diff and verdict)
        self.check_failure = check_failure
        super().__init__(f"[{step}] {message}")

    @property
    def failed_checks(self) -> set[str]:
        return {k for k, ok in (self.summary.checks if self.summary else {}).items() if not ok}


@dataclass
class RunSummary:
    run_id: str
    seconds: float
    materialized: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)


#: the first line of a dagster.yaml that sqleval writes (and rewrites when the project's
#: orchestration settings change); a file without it is the team's own and is left alone
MANAGED = "# sqleval: written from the project file (orchestration); delete this line to edit by hand"


def instance_yaml(settings=None, project_file: Path | None = None) -> str:
    """The Dagster instance settings sqleval runs with: no telemetry; a run queue that keeps
    ``max_concurrent_runs`` in progress, at most ``runs_per_provider`` per model provider
    (run tag ``sqleval/provider``) and one per configuration version (``dagster/partition``:
    two runs of one version never fill its batch at once, whichever machine they run on);
    its coordinator (:mod:`sqleval_pipeline.run_queue`) adds the provider tag to a run
    launched without it (from the UI, a backfill), reading ``project_file``'s configurations.

    >>> import yaml
    >>> yaml.safe_load(instance_yaml())["concurrency"]["runs"]["tag_concurrency_limits"][0]
    {'key': 'sqleval/provider', 'value': {'applyLimitPerUniqueValue': True}, 'limit': 1}
    """
    s = settings or OrchestrationSettings()
    per_value = {"applyLimitPerUniqueValue": True}
    doc = {"telemetry": {"enabled": False},
           "concurrency": {"runs": {
               "max_concurrent_runs": s.max_concurrent_runs,
               "tag_concurrency_limits": [
                   {"key": PROVIDER_TAG, "value": per_value, "limit": s.runs_per_provider},
                   {"key": "dagster/partition", "value": per_value, "limit": 1}]}},
           "run_coordinator": {"module": "sqleval_pipeline.run_queue",
                               "class": "ProviderTaggingRunCoordinator",
                               "config": {"project_file": str(project_file)} if project_file else {}}}
    return f"{MANAGED}\n{yaml.safe_dump(doc, sort_keys=False)}"


def ensure_dagster_home(home: paths.Home, settings=None, project_file: Path | None = None) -> str:
    """Create the project's Dagster instance folder; write its ``dagster.yaml`` from the
    project's orchestration settings unless the team manages that file itself."""
    dh = home.dagster_home
    dh.mkdir(parents=True, exist_ok=True)
    cfg = dh / "dagster.yaml"
    text = instance_yaml(settings, project_file)
    current = cfg.read_text() if cfg.exists() else None
    if current is None or (current.startswith(MANAGED) and current != text) or \
            current == "telemetry:\n  enabled: false\n":  # the file earlier versions wrote
        write_atomically(cfg, text)
    os.environ["DAGSTER_HOME"] = str(dh)
    return str(dh)


def _root_message(err) -> str:
    """The innermost user-facing message of a serialized Dagster error."""
    msgs = []
    while err is not None:
        if err.message:
            msgs.append(err.message.strip())
        err = err.cause
    user = [m for m in msgs if not m.startswith("dagster._core.errors")]
    msg = (user[0] if user else msgs[-1]) if msgs else "unknown error"
    # "sqleval_pipeline.x.SomeError: text" -> "SomeError: text"
    return re.sub(r"^(?:[a-z_][\w]*\.)+(?=[A-Z]\w*: )", "", msg)


from sqleval_pipeline.defs.foundation.jobs import FOUNDATION_GROUPS, WAREHOUSE_GROUPS  # noqa: E402,F401
EVALUATION_GROUPS = ["evaluation"]
JUDGING_GROUPS = ["judging"]


#: the named job that runs each set of groups (the CLI runs the jobs the UI shows)
JOBS = {"evaluation": "evaluate", "judging": "calibrate_judges"}
#: the definition domains (folders of sqleval_pipeline/defs) each job needs: its own assets and
#: the assets its assets depend on (None: every domain)
JOB_DOMAINS: dict[str, tuple[str, ...] | None] = {
    "evaluate": ("evaluation", "golden", "guardrails"),
    "calibrate_judges": ("judging", "evaluation", "golden", "guardrails"),
    "foundation": None,
}


def job_for(groups: list[str]) -> str:
    """The job whose selection holds these groups.

    >>> job_for(["evaluation"]), job_for(WAREHOUSE_GROUPS), job_for(["judging"])
    ('evaluate', 'foundation', 'calibrate_judges')
    """
    names = {JOBS.get(g, "foundation" if g in FOUNDATION_GROUPS else None) for g in groups}
    if len(names) != 1 or None in names:
        raise ValueError(f"groups {groups} do not belong to one job")
    return names.pop()


#: tags naming the process (and host) that runs an in-process run: a run still STARTED whose
#: process is gone was killed, and is marked failed by the next run (:func:`fail_orphaned_runs`)
PID_TAG = "sqleval/pid"
HOST_TAG = "sqleval/host"


def fail_orphaned_runs(instance) -> list[str]:
    """Mark failed every run of this host still STARTED whose process no longer exists (a
    ``kill -9`` leaves a run STARTED forever); returns their run ids."""
    host = socket.gethostname()
    failed = []
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED],
                                                     tags={HOST_TAG: host}), limit=200)
    for record in records:
        run = record.dagster_run
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            instance.report_run_failed(run, f"the process that ran it ({pid} on {host}) is gone "
                                            "(killed); its work resumes in the next run")
            failed.append(run.run_id)
    return failed


def materialize(groups: list[str], run_config: dict | None = None,
                project: Project | None = None, manifest_dir: str | None = None,
                partition_key: str | None = None, configs_dir: str | None = None,
                tags: dict[str, str] | None = None) -> RunSummary:
    """Run the named job (``foundation``, ``evaluate``, ``calibrate_judges``) that holds the
    given asset groups, in-process, on the project's own Dagster instance (under its build
    dir); only the groups' assets when they are a part of the job. Raise RunFailed on failure.

    With ``partition_key`` (a configuration version), the key is registered as a dynamic
    partition first (as the sensor would) and the partitioned assets run for it."""
    project = project or current_project()
    ensure_dagster_home(project.home, project.spec.orchestration, project.file)

    job_name = job_for(groups)
    defs = definitions.build_definitions(project, manifest_dir, configs_dir, only=JOB_DOMAINS.get(job_name))
    config = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    if run_config:
        config.update(run_config)
    run_tags = {"sqleval/trigger": "cli", "sqleval/user": _user(getpass), **(tags or {}),
                PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    started = time.perf_counter()

    # the first open of a new instance creates its SQLite schema: several runs starting at
    # once on a fresh instance would race ("table … already exists"); open it one at a time
    with file_lock(project.home.dagster_home / ".instance.lock"):
        instance = dg.DagsterInstance.get()
    with instance:  # (entered: resolving the job reads its state)
        fail_orphaned_runs(instance)
        job = defs.resolve_job_def(job_name)
        graph = defs.resolve_asset_graph()
        wanted = [k for k in graph.get_all_asset_keys()
                  if graph.get(k).is_executable and graph.get(k).group_name in groups]
        selection = None if set(wanted) >= set(job.asset_layer.executable_asset_keys) else wanted
        if partition_key:
            add_partition(instance, config_versions.name, partition_key,
                          lock=project.home.dagster_home / ".partitions.lock")
        result = job.execute_in_process(
            run_config=config, instance=instance, partition_key=partition_key,
            raise_on_error=False, asset_selection=selection, tags=run_tags)
    summary = RunSummary(result.run_id, time.perf_counter() - started)
    for ev in result.get_asset_materialization_events():
        mat = ev.event_specific_data.materialization
        summary.materialized[mat.asset_key.to_user_string()] = {
            k: getattr(v, "value", v) for k, v in mat.metadata.items()
        }
    for ev in result.get_asset_check_evaluations():
        summary.checks[f"{ev.asset_key.to_user_string()}:{ev.check_name}"] = ev.passed
    if not result.success:
        failures = result.get_step_failure_events()
        if failures:
            f = failures[0]
            only_checks = all(getattr(x.step_failure_data.error, "cls_name", "") == "DagsterAssetCheckFailedError"
                              for x in failures)
            raise RunFailed(f.step_key or "run", _root_message(f.step_failure_data.error), summary=summary,
                            check_failure=only_checks)
        raise RunFailed("run", "the run did not succeed (see `make ui` for its log)", summary=summary)
    return summary


def add_partition(instance, name: str, key: str, lock: Path | None = None) -> None:
    """Register a dynamic partition; safe when other processes register it at the same time
    (check-then-add under ``lock``, a file lock shared by the processes of this instance;
    a concurrent add from elsewhere is tolerated when the key is there afterwards)."""
    with file_lock(lock) if lock is not None else nullcontext():
        if instance.has_dynamic_partition(name, key):
            return
        try:
            instance.add_dynamic_partitions(name, [key])
        except Exception:  # noqa: BLE001 - added meanwhile by a process without the lock
            if not instance.has_dynamic_partition(name, key):
                raise


def _user(getpass) -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (containers): the tag says so
        return "unknown"
