"""The project's raw-data step and dbt models (built from its ``sqleval.yaml``)."""

import dagster as dg


def definitions(ctx) -> dg.Definitions:
    from sqleval_pipeline.defs.warehouse.dbt_resource import dbt_resource  # dagster-dbt: only here

    assets, _served = ctx.warehouse
    return dg.Definitions(assets=assets, resources={"dbt": dbt_resource(ctx.project)})
