"""The pinned serving snapshot; it depends on the project's served dbt models."""

import dagster as dg


def definitions(ctx) -> dg.Definitions:
    from sqleval_pipeline.defs.snapshot.assets import build_snapshot_asset

    _assets, served = ctx.warehouse
    return dg.Definitions(assets=[build_snapshot_asset(served)])
