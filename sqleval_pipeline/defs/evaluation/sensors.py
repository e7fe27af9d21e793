"""Register every new configuration version as a partition, and evaluate it."""

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


@dg.sensor(job=evaluate_job, minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds a partition for each new configuration version in evals/configs "
                       "and requests its evaluation (active configurations only).")
def new_configuration_versions(context: dg.SensorEvaluationContext, sqleval: SqlevalHome):
    errors: list[str] = []
    try:
        configs = current_configs(Path(sqleval.configs_dir) if sqleval.configs_dir else None,
                                  sqleval.project, errors)
    except ConfigError as exc:
        return dg.SkipReason(f"configurations cannot be loaded, nothing registered: {exc}")
    for e in errors:
        context.log.warning(f"invalid configuration skipped: {e}")
    existing = set(context.instance.get_dynamic_partitions(config_versions.name))
    active = sorted(k for k, c in configs.items() if c.config.active)
    new = [k for k in active if k not in existing]  # inactive ones are never registered
    if not new:
        return dg.SkipReason("no new version of an active configuration")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"register:{k}",
                                    tags={"sqleval/trigger": "new-version", **configs[k].run_tags})
                      for k in new],
        dynamic_partitions_requests=[config_versions.build_add_request(new)],
        asset_events=superseded(existing, new),
    )


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
