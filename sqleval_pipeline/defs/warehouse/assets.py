"""The project's optional raw-data step and its dbt models, built from ``sqleval.yaml``."""

import shutil
from collections.abc import Mapping
from typing import Any
import re

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, dbt_assets

from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.defs.warehouse.dbt_resource import dbt_project
from sqleval_pipeline.project import Project
from sqleval_pipeline.warehouse import dbt as dbt_core
from sqleval_pipeline.warehouse.raw import run_raw_step


class ProjectTranslator(DagsterDbtTranslator):
    """Groups: ``raw`` (sources and seeds), ``served`` (the models the snapshot serves),
    ``warehouse`` (every other model: staging, sensitive, helpers)."""

    def __init__(self, served_ids: frozenset[str]):
        super().__init__()
        self.served_ids = served_ids

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        kind = dbt_resource_props.get("resource_type")
        if kind in ("source", "seed"):
            return "raw"
        return "served" if dbt_resource_props.get("unique_id") in self.served_ids else "warehouse"


def build_warehouse_assets(project: Project) -> tuple[list[dg.AssetsDefinition], list[dg.AssetKey]]:
    """(assets, asset keys of the served models) for the project's raw step and dbt build."""
    prepared = dbt_project(project)
    selection = dbt_core.served_selection(project)
    served_ids = frozenset(r.unique_id for r in selection.served)
    translator = ProjectTranslator(served_ids)
    manifest = dbt_core.load_manifest(project)
    # seeds some model reads through source(): dbt sees no edge from them to the model
    early_seeds = dbt_core.seeds_read_as_sources(manifest)

    @dbt_assets(manifest=prepared.manifest_path, dagster_dbt_translator=translator,
                name=f"{_ident(project.name)}_dbt_models", project=prepared)
    def dbt_models(context: dg.AssetExecutionContext, dbt: DbtCliResource,  # noqa: F811
                   sqleval: SqlevalHome):
        """dbt build of the project: models, seeds, data tests and unit tests. Seeds that a
        model reads through ``source()`` are loaded first (``dbt seed``), since dbt orders
        nothing after them."""
        target = sqleval.project.dbt_target_dir / f"dagster-{context.run_id[:8]}"
        try:
            log_path = str(dbt_core.log_dir(sqleval.project))
            selected = {spec.metadata.get("dagster_dbt/unique_id") for spec in dbt_models.specs
                        if spec.key in context.selected_asset_keys}
            first = [uid for uid in early_seeds if uid in selected]
            exclude: list[str] = []
            if first:
                # those seeds are loaded (and reported) first, then left out of dbt build; one
                # --select/--exclude value, a space-separated union (dagster-dbt reads one value)
                chosen = " ".join(dbt_core.seed_selector(manifest["nodes"][uid]) for uid in first)
                context.log.info(f"loading {len(first)} seed(s) read through source() before dbt build: "
                                 f"{', '.join(first)}")
                yield from dbt.cli(["seed", "--log-path", log_path, "--select", chosen], context=context,
                                   target_path=target.with_name(target.name + "-seed")).stream()
                exclude = ["--exclude", chosen]
            yield from dbt.cli(["build", "--log-path", log_path, *exclude], context=context,
                               target_path=target).stream()
        finally:
            results = target / "run_results.json"
            if results.exists():  # the validation step reads which dbt tests ran
                shutil.copyfile(results, sqleval.project.dbt_target_dir / "run_results.json")
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(target.with_name(target.name + "-seed"), ignore_errors=True)

    served_keys = sorted((spec.key for spec in dbt_models.specs
                          if spec.metadata.get("dagster_dbt/unique_id") in served_ids),
                         key=lambda k: k.path)
    assets: list[dg.AssetsDefinition] = [dbt_models]
    if project.spec.raw_data is not None:
        source_keys = sorted({dep.asset_key for spec in dbt_models.specs for dep in spec.deps
                              if dep.asset_key not in {s.key for s in dbt_models.specs}},
                             key=lambda k: k.path)
        assets.insert(0, _raw_step(project, source_keys))
    return assets, served_keys


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name.lower())


def _raw_step(project: Project, source_keys: list[dg.AssetKey]) -> dg.AssetsDefinition:
    step = project.spec.raw_data
    how = step.python or " ".join(step.command or [])  # type: ignore[union-attr]

    @dg.multi_asset(
        name="raw_data",
        specs=[dg.AssetSpec(k, group_name="raw", kinds={"duckdb"},
                            description=f"Source table filled by the project's raw-data step ({how})")
               for k in source_keys],
        can_subset=False,
    )
    def raw_data(context: dg.AssetExecutionContext, sqleval: SqlevalHome):
        """The project's raw-data step (``raw_data:`` in sqleval.yaml), before dbt."""
        p = sqleval.project
        counts = run_raw_step(p, sqleval.home.raw_dir, dbt_core.warehouse_path(p))
        for key in source_keys:
            rows = counts.get(".".join(key.path[-2:]))
            yield dg.MaterializeResult(asset_key=key,
                                       metadata={"rows": rows} if rows is not None else {})

    return raw_data
