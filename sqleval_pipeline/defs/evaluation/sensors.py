"""Register every new configuration version as a partition, and evaluate it."""

from pathlib import Path

import dagster as dg

from sqleval_pipeline.configs import ConfigError, load_configs
from sqleval_pipeline.defs.evaluation.jobs import evaluate_job
from sqleval_pipeline.defs.evaluation.partitions import config_versions
from sqleval_pipeline.defs.resources import SqlevalHome


def config_partition_keys(configs_dir: Path | None = None, project=None,
                          errors: list[str] | None = None) -> dict[str, bool]:
    """Current partition key of every configuration → whether it is active."""
    return {c.partition_key: c.config.active
            for c in load_configs(configs_dir, project=project, errors=errors)}


@dg.sensor(job=evaluate_job, minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds a partition for each new configuration version in evals/configs "
                       "and requests its evaluation (active configurations only).")
def new_configuration_versions(context: dg.SensorEvaluationContext, sqleval: SqlevalHome):
    errors: list[str] = []
    try:
        keys = config_partition_keys(Path(sqleval.configs_dir) if sqleval.configs_dir else None,
                                     sqleval.project, errors)
    except ConfigError as exc:
        return dg.SkipReason(f"configurations cannot be loaded, nothing registered: {exc}")
    for e in errors:
        context.log.warning(f"invalid configuration skipped: {e}")
    existing = set(context.instance.get_dynamic_partitions(config_versions.name))
    new = sorted(k for k in keys if k not in existing)
    if not new:
        return dg.SkipReason("no new configuration version")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"register:{k}")
                      for k in new if keys[k]],
        dynamic_partitions_requests=[config_versions.build_add_request(new)],
    )
