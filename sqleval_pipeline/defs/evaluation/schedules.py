"""Nightly re-evaluation of the active configurations, with fresh attempts."""

from pathlib import Path

import dagster as dg

from sqleval_pipeline.defs.evaluation.jobs import evaluate_job
from sqleval_pipeline.defs.evaluation.partitions import config_versions
from sqleval_pipeline.defs.evaluation.sensors import current_configs
from sqleval_pipeline.defs.resources import SqlevalHome


@dg.schedule(job=evaluate_job, cron_schedule="0 2 * * *", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="02:00 UTC: re-run every active configuration in a new batch so that a "
                         "provider's model drift shows up")
def nightly_evaluation(context: dg.ScheduleEvaluationContext, sqleval: SqlevalHome):
    errors: list[str] = []
    configs = current_configs(Path(sqleval.configs_dir) if sqleval.configs_dir else None,
                              sqleval.project, errors)
    for e in errors:  # one broken file must not stop the others' nightly run
        context.log.warning(f"invalid configuration skipped: {e}")
    registered = set(context.instance.get_dynamic_partitions(config_versions.name))
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    requests = []
    for key, loaded in sorted(configs.items()):
        if not loaded.config.active:
            continue
        if key not in registered:
            context.log.warning(f"{key} is not registered yet (the sensor adds it); skipped")
            continue
        requests.append(dg.RunRequest(
            partition_key=key, run_key=f"nightly:{day}:{key}",
            run_config={"ops": {"eval_attempts": {"config": {"batch": "new"}}}},
            tags={"sqleval/trigger": "nightly", **loaded.run_tags},
        ))
    return requests or dg.SkipReason("no active, registered configuration")
