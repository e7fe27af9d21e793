"""Stage 3, grades: every attempt of a batch graded on execution against its case's expected result.

Persisted once per grader version; an older grader's grades (and the scorecard built from
them) are kept beside the new ones under their version's name, never overwritten.
"""

from __future__ import annotations

from sqleval_pipeline.grading import GRADER_VERSION, grade_attempt
from sqleval_pipeline.grading.vendor_rows import vendor_fields, with_vendor_rows
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError
from sqleval_pipeline.pipeline.executions import iter_executions
from sqleval_pipeline.pipeline.records import Grade, RecordWriter, load_records
from sqleval_pipeline.pipeline.store import BatchInfo
from sqleval_pipeline.pipeline.streams import MissingExecution, joined


def grade_stream(env: Environment, batch: BatchInfo, *, skip_unknown: bool = False):
    """The grade of every attempt of a stored batch under the current grader, in attempt
    order, streamed (writes nothing).

    ``skip_unknown``: attempts of cases the golden set no longer has are left out (an older
    batch re-graded for a comparison: a case removed since cannot be compared); otherwise
    they are an error."""
    attempts_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    cases = {c.id: c for c in env.cases}
    try:
        for a, ex in with_vendor_rows(attempts_path, joined(attempts_path, iter_executions(env, batch))):
            if a.case_id not in cases:
                if skip_unknown:
                    continue
                raise EvaluationError(f"attempt for unknown case {a.case_id} in batch {batch.batch_id}")
            grade = grade_attempt(cases[a.case_id], a, ex)
            extra = vendor_fields(cases[a.case_id], a, ex)  # a vendor's own rows, when it sent them
            yield grade.model_copy(update=extra) if extra else grade
    except MissingExecution as exc:
        raise EvaluationError(str(exc)) from exc


def grade_batch(env: Environment, batch: BatchInfo, *, skip_unknown: bool = False) -> list[Grade]:
    """Grade every attempt of a stored batch under the current grader (writes nothing)."""
    return list(grade_stream(env, batch, skip_unknown=skip_unknown))


def stage_grades(env: Environment, batch: BatchInfo) -> list[Grade]:
    """The batch's grades under the current grader (persisted once per grader version).

    Grades made by an older grader are kept, renamed ``grades.<version>.parquet`` (with the
    scorecard built from them, ``scorecard.<version>.json``): a stored artifact is never
    overwritten."""
    out_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.GRADES)
    if out_path.exists():
        grades = load_records(out_path, Grade)
        if grades and grades[0].grader_version == GRADER_VERSION:
            return grades
        old = grades[0].grader_version if grades else "empty"
        card = out_path.with_name(bf.SCORECARD)
        if card.exists():
            card.replace(card.with_name(f"scorecard.{old}.json"))
        out_path.replace(out_path.with_name(f"grades.{old}.parquet"))

    with RecordWriter(out_path, Grade) as out:
        out.write_all(grade_stream(env, batch))
    env.store.publish(batch)
    return load_records(out_path, Grade)
