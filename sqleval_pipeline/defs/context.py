"""What the per-domain definitions share: the project they are built for, and the dbt assets
(built once, because the snapshot's dependencies are the served models' asset keys)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import dagster as dg

from sqleval_pipeline.project import Project


@dataclass
class DefsContext:
    project: Project
    manifest_dir: str | None = None
    configs_dir: str | None = None

    @cached_property
    def warehouse(self) -> tuple[list[dg.AssetsDefinition], list[dg.AssetKey]]:
        """(the project's raw step and dbt assets, asset keys of the served models)."""
        # dagster-dbt and dbt-core (~2 s to import): only when the warehouse's assets are built
        from sqleval_pipeline.defs.warehouse.assets import build_warehouse_assets

        return build_warehouse_assets(self.project)
