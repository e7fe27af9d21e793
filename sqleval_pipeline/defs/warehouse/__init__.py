"""The project's raw-data step and dbt models (built from its ``sqleval.yaml``)."""

import dagster as dg


def definitions(ctx) -> dg.Definitions:
    assets, _served = ctx.warehouse
    return dg.Definitions(assets=assets)
