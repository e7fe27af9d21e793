"""Dagster definitions: thin, merges the per-domain defs (loaded by workspace.yaml)."""

from __future__ import annotations

import dagster as dg

import sqleval_pipeline.defs  # noqa: F401  (sets the dbt no-tracking environment first)
from sqleval_pipeline import paths
from sqleval_pipeline.defs.golden.assets import golden_set
from sqleval_pipeline.defs.resources import SqlevalHome, dbt_resource
from sqleval_pipeline.defs.snapshot.assets import serving_snapshot
from sqleval_pipeline.defs.warehouse.assets import commerce_dbt_models, raw_commerce_data

foundation_job = dg.define_asset_job(
    "foundation",
    selection=dg.AssetSelection.assets(raw_commerce_data, commerce_dbt_models, serving_snapshot,
                                       golden_set),
    description="Raw data → dbt warehouse → GX-validated serving snapshot → verified golden set",
)


def build_definitions(home: str | None = None, manifest_dir: str | None = None) -> dg.Definitions:
    """All definitions; ``home``/``manifest_dir`` override where files go (tests use tmp)."""
    sqleval = SqlevalHome(root=home or str(paths.home().root))
    if manifest_dir:
        sqleval = SqlevalHome(root=sqleval.root, manifest_dir=manifest_dir)
    return dg.Definitions(
        assets=[raw_commerce_data, commerce_dbt_models, serving_snapshot, golden_set],
        jobs=[foundation_job],
        resources={
            "sqleval": sqleval,
            "dbt": dbt_resource(),
        },
    )


defs = build_definitions()
