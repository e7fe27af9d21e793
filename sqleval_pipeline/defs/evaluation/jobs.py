import dagster as dg

from sqleval_pipeline.defs.evaluation.freshness import scorecard_freshness
from sqleval_pipeline.defs.evaluation.partitions import config_versions

evaluate_job = dg.define_asset_job(
    "evaluate",
    # the freshness check runs on its own sensor, not after every evaluation
    selection=dg.AssetSelection.groups("evaluation") - dg.AssetSelection.checks(*scorecard_freshness),
    partitions_def=config_versions,
    # one process for the whole chain: each stage continues the batch of the one before, so
    # there is nothing to run in parallel, and a subprocess per step re-imports the
    # definitions (seconds each) — the UI run takes what the CLI takes
    executor_def=dg.in_process_executor,
    tags={"sqleval/job": "evaluate"},
    description="Attempts → guarded executions → grades → scorecard → diff and regression gate "
                "for one configuration version",
)
