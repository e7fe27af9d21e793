"""The evaluation stages in one namespace: attempts → executions → grades → diagnoses → scorecard.

Each stage is a module of its own in this package and reads only what earlier stages persisted
in the batch folder (:mod:`.batch_files` names every file, :mod:`.store` holds the batches):

* :mod:`.attempts` — stage 1, the generator's attempts (written once per batch);
* :mod:`.executions` — stage 2, every SQL attempt through the guard (once per batch; a changed
  guard policy gets a new batch);
* :mod:`.grades` — stage 3, grades (once per grader version; an older grader's are kept);
* :mod:`.diagnoses` — stage 3b, the judges' diagnoses of failures (extended, never redone,
  while a judge's version is unchanged);
* :mod:`.scorecard` — stage 4, the scorecard (reused while its inputs are unchanged);
* :mod:`.comparisons` — stage 5, diffs and the regression gate;
* :mod:`.calibration` — the judges' agreement with the human labels, across configurations.

The Dagster assets (``defs/evaluation``) call these functions, and the CLI materializes those
assets, so there is one pipeline. This module only gathers the stage functions under one name
(``ev.stage_grades``…) for the assets, the CLI and the tests; it defines nothing itself.
"""

from __future__ import annotations

from sqleval_pipeline.pipeline.attempts import record_inputs, stage_attempts
from sqleval_pipeline.pipeline.batch_files import artifact_file, load_artifact, save_artifact
from sqleval_pipeline.pipeline.calibration import (
    calibration_lines, calibration_path, calibration_report, judge_calibration_status,
)
from sqleval_pipeline.pipeline.diagnoses import judges_for, stage_diagnoses
from sqleval_pipeline.pipeline.environment import (
    Environment, EvaluationError, Progress, environment, find_config, select_cases,
)
from sqleval_pipeline.pipeline.executions import (
    ExecutionSummary, execution_summary, iter_executions, load_executions, stage_executions,
)
from sqleval_pipeline.pipeline.grades import grade_batch, grade_stream, stage_grades
from sqleval_pipeline.pipeline.scorecard import latest_scorecard, score_batch, scorecard_inputs, stage_scorecard

__all__ = [
    "Environment", "EvaluationError", "ExecutionSummary", "Progress", "artifact_file",
    "calibration_lines", "calibration_path", "calibration_report", "environment",
    "execution_summary", "find_config", "grade_batch", "grade_stream", "iter_executions",
    "judge_calibration_status", "judges_for", "latest_scorecard", "load_artifact",
    "load_executions", "record_inputs", "save_artifact", "score_batch", "scorecard_inputs",
    "select_cases", "stage_attempts", "stage_diagnoses", "stage_executions", "stage_grades",
    "stage_scorecard",
]
