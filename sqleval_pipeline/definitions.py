"""Dagster definitions: thin, merges the per-domain defs (loaded by workspace.yaml).

They are built from the selected sqleval project (``SQLEVAL_PROJECT``, else ``sqleval.yaml``
in the working directory, else the bundled demo): asset keys come from *its* dbt project."""

from __future__ import annotations

import dagster as dg

import sqleval_pipeline.defs  # noqa: F401  (sets the dbt no-tracking environment first)
from sqleval_pipeline.defs.evaluation.assets import (
    eval_attempts,
    eval_diagnoses,
    eval_executions,
    eval_gate,
    eval_grades,
    eval_scorecard,
)
from sqleval_pipeline.defs.evaluation.jobs import evaluate_job
from sqleval_pipeline.defs.evaluation.schedules import nightly_evaluation
from sqleval_pipeline.defs.evaluation.sensors import new_configuration_versions
from sqleval_pipeline.defs.golden.assets import golden_set
from sqleval_pipeline.defs.guardrails.assets import guardrail_suite
from sqleval_pipeline.defs.judging.assets import judge_calibration
from sqleval_pipeline.defs.resources import SqlevalHome, dbt_resource
from sqleval_pipeline.defs.snapshot.assets import build_snapshot_asset
from sqleval_pipeline.defs.warehouse.assets import build_warehouse_assets
from sqleval_pipeline.project import Project
from sqleval_pipeline.project import current as current_project


def build_definitions(project: Project | None = None, manifest_dir: str | None = None,
                      configs_dir: str | None = None) -> dg.Definitions:
    """All definitions of a project; the arguments override where pins and configurations
    are (tests use temporary folders)."""
    project = project or current_project()
    warehouse_assets, served_keys = build_warehouse_assets(project)
    serving_snapshot = build_snapshot_asset(served_keys)
    foundation_job = dg.define_asset_job(
        "foundation",
        selection=dg.AssetSelection.assets(*warehouse_assets, serving_snapshot, golden_set,
                                           guardrail_suite),
        description="dbt warehouse → GX-validated serving snapshot → verified golden set → "
                    "hostile guardrail suite",
    )
    sqleval = SqlevalHome(project_file=str(project.file), root=str(project.home.root),
                          manifest_dir=manifest_dir, configs_dir=configs_dir)
    return dg.Definitions(
        assets=[*warehouse_assets, serving_snapshot, golden_set, guardrail_suite,
                eval_attempts, eval_executions, eval_grades, eval_diagnoses, eval_scorecard,
                eval_gate, judge_calibration],
        jobs=[foundation_job, evaluate_job],
        schedules=[nightly_evaluation],
        sensors=[new_configuration_versions],
        resources={"sqleval": sqleval, "dbt": dbt_resource(project)},
    )


defs = build_definitions()
