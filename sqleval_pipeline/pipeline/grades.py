"""Stage 3, grades: every attempt of a batch graded on execution against its case's expected result.

Persisted once per grader version; an older grader's grades (and the scorecard built from
them) are kept beside the new ones under their version's name, never overwritten. An answer
right on the snapshot is also checked on its case's test suite unless the configuration turns
it off (:mod:`.suite_checks`); the suite's digest is part of the grader's version.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.grading import grade_attempt
from sqleval_pipeline.grading.vendor_rows import vendor_fields, with_vendor_rows
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError
from sqleval_pipeline.pipeline.executions import iter_executions
from sqleval_pipeline.pipeline.records import Grade, RecordWriter, iter_records, load_records
from sqleval_pipeline.pipeline.store import BatchInfo
from sqleval_pipeline.pipeline.streams import MissingExecution, joined
from sqleval_pipeline.pipeline.suite_checks import Grader, SuiteChecker, grader_for, suite_grade


def grade_stream(env: Environment, batch: BatchInfo, *, skip_unknown: bool = False,
                 grader: Grader | None = None, policy: Any = None):
    """The grade of every attempt of a stored batch under ``grader`` (default: the rules and
    the test suite), in attempt order, streamed (writes nothing but the suite's cache).

    ``skip_unknown``: attempts of cases the golden set no longer has are left out (an older
    batch re-graded for a comparison: a case removed since cannot be compared); otherwise
    they are an error. ``policy``: the guard policy answers run under on the neighbours
    (default: the project's)."""
    grader = grader or grader_for(env)
    attempts_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    cases = {c.id: c for c in env.cases}
    checking = (SuiteChecker(env, grader.suite, policy or env.policy(None), cache_dir=grader.cache_dir)
                if grader.suite is not None else nullcontext(None))
    try:
        with checking as checker:
            for a, ex in with_vendor_rows(attempts_path, joined(attempts_path, iter_executions(env, batch))):
                if a.case_id not in cases:
                    if skip_unknown:
                        continue
                    raise EvaluationError(f"attempt for unknown case {a.case_id} in batch {batch.batch_id}")
                case = cases[a.case_id]
                grade = grade_attempt(case, a, ex, grader_version=grader.version)
                extra = vendor_fields(case, a, ex)  # a vendor's own rows, when it sent them
                grade = grade.model_copy(update=extra) if extra else grade
                yield suite_grade(grade, case, a, ex, checker)
            if checker is not None:
                checker.add_to(grader.stats)
    except MissingExecution as exc:
        raise EvaluationError(str(exc)) from exc


def grade_batch(env: Environment, batch: BatchInfo, *, skip_unknown: bool = False,
                grader: Grader | None = None, policy: Any = None) -> list[Grade]:
    """Grade every attempt of a stored batch under ``grader`` (writes nothing)."""
    return list(grade_stream(env, batch, skip_unknown=skip_unknown, grader=grader, policy=policy))


def grades_are_current(env: Environment, batch: BatchInfo, loaded: LoadedConfig) -> bool:
    """The batch's stored grades were made by the configuration's current grader (the rules'
    version and, with the test suite on, the suite's)."""
    path = env.store.artifact(batch.partition_key, batch.batch_id, bf.GRADES)
    if not path.exists():
        return False
    first = next(iter_records(path, Grade), None)
    return first is not None and first.grader_version == grader_for(env, loaded.config.test_suite).version


def stage_grades(env: Environment, batch: BatchInfo, loaded: LoadedConfig | None = None) -> list[Grade]:
    """The batch's grades under the current grader of ``loaded``'s configuration (its
    ``test_suite`` setting and guard overrides; without it, the rules and the suite under the
    project's guard), persisted once per grader version.

    Grades made by an older grader are kept, renamed ``grades.<version>.parquet`` (with the
    scorecard built from them, ``scorecard.<version>.json``): a stored artifact is never
    overwritten."""
    grader = grader_for(env, loaded.config.test_suite if loaded else True)
    policy = env.policy(loaded.config.guard or None) if loaded else None
    out_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.GRADES)
    if out_path.exists():
        grades = load_records(out_path, Grade)
        if grades and grades[0].grader_version == grader.version:
            return grades
        old = grades[0].grader_version if grades else "empty"
        card = out_path.with_name(bf.SCORECARD)
        if card.exists():
            card.replace(card.with_name(f"scorecard.{old}.json"))
        out_path.replace(out_path.with_name(f"grades.{old}.parquet"))

    with RecordWriter(out_path, Grade) as out:
        out.write_all(grade_stream(env, batch, grader=grader, policy=policy))
    env.store.publish(batch)
    return load_records(out_path, Grade)
