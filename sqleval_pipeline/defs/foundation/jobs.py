import dagster as dg

#: raw-data step, seeds and sources; every other dbt model; the served dbt models
WAREHOUSE_GROUPS = ["raw", "warehouse", "served"]
FOUNDATION_GROUPS = [*WAREHOUSE_GROUPS, "snapshot", "golden", "guardrails"]

foundation_job = dg.define_asset_job(
    "foundation",
    selection=dg.AssetSelection.groups(*FOUNDATION_GROUPS),
    description="dbt warehouse → GX-validated serving snapshot → verified golden set → "
                "hostile guardrail suite",
)
