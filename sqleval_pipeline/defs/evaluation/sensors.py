"""Register every new configuration version as a partition, and evaluate it."""

import hashlib
import json
import re
from pathlib import Path

import dagster as dg

from sqleval_pipeline.configs import ConfigError, LoadedConfig, load_configs
from sqleval_pipeline.defs.evaluation.jobs import evaluate_job
from sqleval_pipeline.defs.evaluation.partitions import config_versions
from sqleval_pipeline.defs.resources import SqlevalHome


def current_configs(configs_dir: Path | None = None, project=None,
                    errors: list[str] | None = None) -> dict[str, LoadedConfig]:
    """Every loadable configuration by its current partition key (``errors`` collects the
    files that could not be loaded)."""
    return {c.partition_key: c for c in load_configs(configs_dir, project=project, errors=errors)}


#: a partition key names a configuration version: ``<name>@<8 hex digits>`` (configs.py)
KEY = re.compile(r".+@[0-9a-f]{8}")


@dg.sensor(job=evaluate_job, minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds a partition for each new configuration version in evals/configs "
                       "and requests its evaluation (active configurations only); a revert makes "
                       "the earlier version current again; removes malformed keys never run.")
def new_configuration_versions(context: dg.SensorEvaluationContext, sqleval: SqlevalHome):
    """The cursor holds the current version of each configuration name (``{name: key}``), so
    a change — a new version, or a revert to one registered before — is acted on once: the
    version becomes current (registered and evaluated; a reverted one is evaluated again,
    which reuses its batch when nothing it depends on changed) and only the version it
    replaces is marked superseded. Without a cursor (the first tick), a name's current version
    is taken to be its registered one."""
    errors: list[str] = []
    try:
        configs = current_configs(Path(sqleval.configs_dir) if sqleval.configs_dir else None,
                                  sqleval.project, errors)
    except ConfigError as exc:
        return dg.SkipReason(f"configurations cannot be loaded, nothing registered: {exc}")
    for e in errors:
        context.log.warning(f"invalid configuration skipped: {e}")
    existing = set(context.instance.get_dynamic_partitions(config_versions.name))
    state: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    current = {c.config.name: k for k, c in configs.items() if c.config.active}  # inactive: never registered
    new = sorted(k for k in current.values() if k not in existing)
    reverted = sorted(k for n, k in current.items() if k in existing and state.get(n) not in (None, k))
    events = []
    for name, key in sorted(current.items()):
        before = state.get(name)
        if before is not None and before != key:
            events += superseded({before}, [key])  # the version it replaces, once
        elif before is None and key in new:
            events += superseded(existing, [key])  # first tick: the registered ones of that name
    stale = malformed_keys(existing - set(new), context.instance)
    if not (new or reverted or stale or events):  # nothing changed: the cursor stands
        return dg.SkipReason("no new version of an active configuration")
    cursor = json.dumps({**state, **current}, sort_keys=True)
    tick = hashlib.sha256((context.cursor or "").encode()).hexdigest()[:12]
    requests = ([config_versions.build_add_request(new)] if new else []) + \
        ([config_versions.build_delete_request(stale)] if stale else [])
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k,
                                    run_key=f"register:{k}" if k in new else f"current:{k}:{tick}",
                                    tags={"sqleval/trigger": "new-version" if k in new else "revert",
                                          **configs[k].run_tags})
                      for k in new + reverted],
        dynamic_partitions_requests=requests, asset_events=events, cursor=cursor,
    )


def malformed_keys(keys: set[str], instance: dg.DagsterInstance) -> list[str]:
    """Partition keys that name no configuration version (not ``name@hash8``, e.g. added by
    hand in the UI) and were never materialized: removed, so nothing can run them again."""
    bad = sorted(k for k in keys if not KEY.fullmatch(k))
    if not bad:
        return []
    done = instance.get_materialized_partitions(dg.AssetKey("eval_attempts"))
    return [k for k in bad if k not in done]


def superseded(existing: set[str], new: list[str]) -> list[dg.AssetObservation]:
    """An observation on the scorecard of every registered version that a new version of the
    same configuration name replaces: the UI shows "superseded by …" on that partition."""
    events = []
    for key in new:
        name = key.rsplit("@", 1)[0]
        for old in sorted(existing):
            if old != key and old.rsplit("@", 1)[0] == name:
                events.append(dg.AssetObservation(
                    asset_key="eval_scorecard", partition=old,
                    metadata={"superseded_by": key,
                              "status": f"stale: the configuration file now defines {key}"}))
    return events
