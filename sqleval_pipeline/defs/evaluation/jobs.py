import dagster as dg

from sqleval_pipeline.defs.evaluation.partitions import config_versions

evaluate_job = dg.define_asset_job(
    "evaluate",
    selection=dg.AssetSelection.groups("evaluation"),
    partitions_def=config_versions,
    description="Attempts → guarded executions → grades → scorecard → diff and regression gate "
                "for one configuration version",
)
