"""Raw data (deterministic generator + load) and the dbt models of the warehouse."""


import json
import os
import shutil
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, dbt_assets

from sqleval_pipeline import paths
from sqleval_pipeline.defs.resources import OfflineDbtCliResource, SqlevalHome, dbt_project
from sqleval_pipeline.warehouse.load import load_raw
from sqleval_pipeline.warehouse.rawgen import RAW_TABLES, write_raw

RAW_CHECKSUMS = paths.DBT_PROJECT_DIR / "raw_checksums.json"


def raw_asset_key(schema: str, name: str) -> dg.AssetKey:
    return dg.AssetKey([schema, name])


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            raw_asset_key(t.schema, t.name),
            group_name="raw",
            description=f"Raw {t.name} ({len(t.columns)} columns) from the deterministic generator",
            kinds={"duckdb", "python"},
        )
        for t in RAW_TABLES
    ],
    can_subset=False,
)
def raw_commerce_data(context: dg.AssetExecutionContext, sqleval: SqlevalHome):
    """Generate the raw CSV files (same bytes everywhere) and load them into the warehouse."""
    home = sqleval.home
    checksums = write_raw(home.raw_dir)
    pinned = json.loads(RAW_CHECKSUMS.read_text()) if RAW_CHECKSUMS.exists() else {}
    drifted = sorted(f for f, h in checksums.items() if pinned and pinned.get(f) != h)
    if drifted:
        context.log.warning(f"raw files differ from {RAW_CHECKSUMS.name}: {drifted}")
    counts = load_raw(home.raw_dir, home.warehouse)
    for t in RAW_TABLES:
        yield dg.MaterializeResult(
            asset_key=raw_asset_key(t.schema, t.name),
            metadata={
                "rows": counts[f"{t.schema}.{t.name}"],
                "sha256": checksums[t.filename],
                "matches_committed_checksum": t.filename not in drifted,
            },
        )


class CommerceTranslator(DagsterDbtTranslator):
    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        if dbt_resource_props.get("resource_type") == "source":
            return "raw"
        schema = dbt_resource_props.get("config", {}).get("schema") or "warehouse"
        return {"marts": "marts", "staging": "staging"}.get(schema, "sensitive")


@dbt_assets(manifest=dbt_project().manifest_path, dagster_dbt_translator=CommerceTranslator())
def commerce_dbt_models(
    context: dg.AssetExecutionContext, dbt: OfflineDbtCliResource, sqleval: SqlevalHome
):
    """dbt build: staging views, marts, sensitive schemas, data tests and unit tests."""
    os.environ["SQLEVAL_WAREHOUSE"] = str(sqleval.home.warehouse)
    target = dbt_project().project_dir / "target" / f"dagster-{context.run_id[:8]}"
    try:
        yield from dbt.cli(["build"], context=context, target_path=target).stream()
    finally:
        shutil.rmtree(target, ignore_errors=True)
