import dagster as dg

calibrate_job = dg.define_asset_job(
    "calibrate_judges",
    selection=dg.AssetSelection.groups("judging"),
    tags={"sqleval/job": "calibrate_judges"},
    description="Agreement of each judge with the human labels (evals/labels)",
)
