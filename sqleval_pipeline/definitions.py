"""Dagster definitions: thin, merges the per-domain defs (loaded by workspace.yaml)."""

from __future__ import annotations

import dagster as dg

import sqleval_pipeline.defs  # noqa: F401  (sets the dbt no-tracking environment first)
from sqleval_pipeline import paths
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
from sqleval_pipeline.defs.snapshot.assets import serving_snapshot
from sqleval_pipeline.defs.warehouse.assets import commerce_dbt_models, raw_commerce_data

foundation_job = dg.define_asset_job(
    "foundation",
    selection=dg.AssetSelection.assets(raw_commerce_data, commerce_dbt_models, serving_snapshot,
                                       golden_set, guardrail_suite),
    description="Raw data → dbt warehouse → GX-validated serving snapshot → verified golden set "
                "→ hostile guardrail suite",
)


def build_definitions(home: str | None = None, manifest_dir: str | None = None,
                      configs_dir: str | None = None) -> dg.Definitions:
    """All definitions; the arguments override where files are (tests use tmp folders)."""
    overrides = {k: v for k, v in {"manifest_dir": manifest_dir, "configs_dir": configs_dir}.items() if v}
    sqleval = SqlevalHome(root=home or str(paths.home().root), **overrides)
    return dg.Definitions(
        assets=[raw_commerce_data, commerce_dbt_models, serving_snapshot, golden_set, guardrail_suite,
                eval_attempts, eval_executions, eval_grades, eval_diagnoses, eval_scorecard, eval_gate,
                judge_calibration],
        jobs=[foundation_job, evaluate_job],
        schedules=[nightly_evaluation],
        sensors=[new_configuration_versions],
        resources={
            "sqleval": sqleval,
            "dbt": dbt_resource(),
        },
    )


defs = build_definitions()
