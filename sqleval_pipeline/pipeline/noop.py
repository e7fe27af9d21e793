"""Nothing to do: the batch an evaluation would reuse, when every stage's output is current.

An evaluation in ``latest`` mode whose inputs have not changed reuses everything: the batch's
attempts and executions, its grades, diagnoses, scorecard, comparisons and page. Each stage
owns the check that says its output is current (:func:`~.attempts.reusable_batch`,
:func:`~.executions.executions_are_current`, :func:`~.grades.grades_are_current`,
:func:`~.diagnoses.diagnoses_are_current`, :func:`~.scorecard.scorecard_is_current`,
:func:`~.comparisons.gate_is_current`, and the page's
:func:`~sqleval_pipeline.reporting.html.report_is_current`); :func:`unchanged_batch` asks them
in stage order and stops at the first that says no. ``sqleval run`` then prints the stored
verdict without starting a Dagster run (docs/command-line.md); any other answer runs the
evaluation as usual, and the stages reuse what they can.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.pipeline.attempts import reusable_batch
from sqleval_pipeline.pipeline.comparisons import gate_is_current
from sqleval_pipeline.pipeline.diagnoses import diagnoses_are_current
from sqleval_pipeline.pipeline.environment import Environment
from sqleval_pipeline.pipeline.executions import executions_are_current
from sqleval_pipeline.pipeline.grades import grades_are_current
from sqleval_pipeline.pipeline.scorecard import scorecard_is_current
from sqleval_pipeline.pipeline.store import BatchInfo
from sqleval_pipeline.reporting.html import report_is_current


def unchanged_batch(env: Environment, loaded: LoadedConfig, *, runs: int | None = None,
                    case_ids: Sequence[str] | None = None, split: str | None = None) -> BatchInfo | None:
    """The finished batch whose every stage output is current (see module doc), or None."""
    batch = reusable_batch(env, loaded, runs=runs, case_ids=case_ids, split=split)
    if batch is None:
        return None
    checks = (lambda: executions_are_current(env, loaded, batch),
              lambda: grades_are_current(env, batch, loaded),
              lambda: diagnoses_are_current(env, loaded, batch),
              lambda: scorecard_is_current(env, loaded, batch),
              lambda: gate_is_current(env, loaded, batch),
              lambda: report_is_current(env, batch.partition_key, batch.batch_id))
    return batch if all(check() for check in checks) else None
