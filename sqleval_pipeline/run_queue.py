"""The run queue sqleval's Dagster instance uses: Dagster's queued run coordinator, which also
names the model provider of every evaluation run, whatever launched it.

The queue limits runs per provider by the run tag ``sqleval/provider``. The CLI, the nightly
schedule and the new-version sensor set that tag themselves; a run launched from the UI (the
asset graph's Materialize, a job's partition, a backfill) carries only Dagster's own tags. So
this coordinator, before a run enters the queue, reads the run's configuration version (its
``dagster/partition`` tag) and adds the tags the configuration's runs carry
(:attr:`~sqleval_pipeline.configs.LoadedConfig.run_tags`) and ``sqleval/trigger``
(``ui`` or ``backfill``) when the run has none. The queue's limits then hold for every route.

``dagster.yaml`` (written by :func:`sqleval_pipeline.orchestrate.instance_yaml`) names it::

    run_coordinator:
      module: sqleval_pipeline.run_queue
      class: ProviderTaggingRunCoordinator
      config: {project_file: /path/to/sqleval.yaml}

The queue's limits stay in the ``concurrency: runs:`` block. A version whose configuration
cannot be read (a broken file, a version no file has any more) gets no provider tag: its
first step fails on the same file before any provider is called.
"""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg
# the module Dagster's own docs name for it in dagster.yaml (it is not exported at the top)
from dagster._core.run_coordinator import DefaultRunCoordinator

from sqleval_pipeline.configs import load_configs, PROVIDER_TAG
from sqleval_pipeline.project import current, load_project

log = logging.getLogger("sqleval_pipeline.run_queue")

PARTITION_TAG = "dagster/partition"
BACKFILL_TAG = "dagster/backfill"
TRIGGER_TAG = "sqleval/trigger"


def tags_to_add(tags: dict[str, str], project_file: str | None, configs_dir: str | None = None) -> dict[str, str]:
    """The tags an evaluation run with these ``tags`` lacks: its configuration's run tags
    (the provider) and a trigger; empty for a run of no configuration version."""
    key = tags.get(PARTITION_TAG)
    if not key:
        return {}
    add: dict[str, str] = {}
    if TRIGGER_TAG not in tags:
        add[TRIGGER_TAG] = "backfill" if BACKFILL_TAG in tags else "ui"
    if PROVIDER_TAG not in tags:
        loaded = _configuration(key, project_file, configs_dir)
        if loaded is not None:
            add.update({k: v for k, v in loaded.run_tags.items() if k not in tags})
    return add


def _configuration(key: str, project_file: str | None, configs_dir: str | None):
    try:
        project = load_project(Path(project_file)) if project_file else current()
        errors: list[str] = []
        found = [c for c in load_configs(Path(configs_dir) if configs_dir else None, project=project,
                                         errors=errors) if c.partition_key == key]
    except Exception as exc:  # noqa: BLE001 - never refuse a launch over a tag
        log.warning("no provider tag for %s: %s", key, exc)
        return None
    return found[0] if found else None


class _Tagging:
    """What both coordinators add: the project's configurations, and the tags before submit."""

    _project_file: str | None = None
    _configs_dir: str | None = None

    @classmethod
    def _own_fields(cls) -> dict:
        return {"project_file": dg.Field(dg.StringSource, is_required=False,
                                         description="The sqleval.yaml whose configurations name the providers."),
                "configs_dir": dg.Field(dg.StringSource, is_required=False,
                                        description="Where the configurations are (default: the project's).")}

    def _tagged(self, context: dg.SubmitRunContext) -> dg.SubmitRunContext:
        run = context.dagster_run
        add = tags_to_add(dict(run.tags), self._project_file, self._configs_dir)
        if not add:
            return context
        instance = self._instance  # type: ignore[attr-defined]
        instance.add_run_tags(run.run_id, add)
        return dg.SubmitRunContext(instance.get_run_by_id(run.run_id) or run, context.workspace)


def _split(config_value) -> tuple[dict, dict]:
    own = {k: config_value.get(k) for k in ("project_file", "configs_dir")}
    return own, {k: v for k, v in (config_value or {}).items() if k not in own}


class ProviderTaggingRunCoordinator(_Tagging, dg.QueuedRunCoordinator):
    """:class:`dagster.QueuedRunCoordinator` that tags each evaluation run with its provider
    (see the module documentation). The one sqleval's instance uses."""

    @classmethod
    def config_type(cls):
        return {**dg.QueuedRunCoordinator.config_type(), **cls._own_fields()}

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        own, base = _split(config_value)
        made = super().from_config_value(inst_data, base)
        made._project_file, made._configs_dir = own["project_file"], own["configs_dir"]
        return made

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        return super().submit_run(self._tagged(context))


class ProviderTaggingDirectRunCoordinator(_Tagging, DefaultRunCoordinator):
    """:class:`DefaultRunCoordinator` (runs start at once, no queue and no daemon)
    with the same tags — for an instance a team runs without ``dagster-daemon``; no limit
    applies there, but the runs still name their provider."""

    @classmethod
    def config_type(cls):
        return cls._own_fields()

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        own, _ = _split(config_value)
        made = cls(inst_data=inst_data)
        made._project_file, made._configs_dir = own["project_file"], own["configs_dir"]
        return made

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        return super().submit_run(self._tagged(context))
