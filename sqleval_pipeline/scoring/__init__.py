"""Scorecards, paired diffs and the regression gate (docs/grading.md, docs/configurations.md). Free of Dagster imports.

>>> from sqleval_pipeline.scoring import build_scorecard, diff, gate, load_decisions  # doctest: +SKIP
"""

from sqleval_pipeline.scoring.diff import Diff, IncomparableScorecards, check_comparable, diff
from sqleval_pipeline.scoring.gate import (
    Decision, GateResult, ThresholdCheck, check_thresholds, gate, load_decisions,
)
from sqleval_pipeline.scoring.scorecard import (
    CalibratedRefusal,
    Scorecard,
    build_scorecard,
    calibrated_refusal,
    load_scorecard,
)
from sqleval_pipeline.scoring.usage import UsageMetrics, usage_metrics

__all__ = [
    "CalibratedRefusal",
    "Decision",
    "Diff",
    "GateResult",
    "IncomparableScorecards",
    "Scorecard",
    "ThresholdCheck",
    "UsageMetrics",
    "build_scorecard",
    "calibrated_refusal",
    "check_comparable",
    "check_thresholds",
    "diff",
    "gate",
    "load_decisions",
    "load_scorecard",
    "usage_metrics",
]
