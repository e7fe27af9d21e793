"""The pinned serving snapshot; it depends on the project's served dbt models."""

import dagster as dg
from sqleval_pipeline.defs.snapshot.assets import build_snapshot_asset


def definitions(ctx) -> dg.Definitions:
    _assets, served = ctx.warehouse
    return dg.Definitions(assets=[build_snapshot_asset(served)])
