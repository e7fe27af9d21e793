"""What a judge sees and returns.

A judge receives one *failed* attempt — its case (question, reference SQL, expected result),
the attempt (SQL or refusal), the guarded execution and the grade with its mismatch text — and
returns a :class:`~sqleval_pipeline.pipeline.records.Diagnosis` with one of the six categories and an
explanation a person can act on.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.pipeline.records import FAILURE_CATEGORIES, Attempt, Diagnosis, Execution, Grade

FAILED_OUTCOMES = frozenset({"WRONG", "DEFERRED_WRONGLY"})

CATEGORY_HELP = {
    "wrong_table": "read the wrong table(s) or missed a needed join (fix: curation, retrieval)",
    "wrong_filter": "right table and measure, wrong rows: a missing, extra or wrong predicate, "
                    "value or time window (fix: aliases, coded values)",
    "wrong_metric": "right rows, wrong measure: another column or aggregate, net vs gross "
                    "(fix: certified metric definitions)",
    "wrong_grain": "wrong level of detail: grouping, number of rows, top-k or ordering",
    "ambiguous_question": "the question admits the system's reading, or it declined a question "
                          "it could have answered (fix: the question or the case)",
    "harness_bug": "the evaluation itself is at fault (reference, expected result, guard)",
}
assert set(CATEGORY_HELP) == set(FAILURE_CATEGORIES)


class JudgeInput(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    case: Case
    attempt: Attempt
    execution: Execution | None
    grade: Grade
    #: the served tables' column names (table -> columns), when the caller has the catalog: the
    #: rules judge then knows which columns a table has instead of inferring it from the SQL
    catalog: dict[str, list[str]] | None = None
    #: the configuration's SQL dialect when it is not DuckDB's (e.g. ``"sqlite"``): the rules
    #: judge then tells a dialect-translation failure from the system's own error; without it
    #: the judge reads the dialect off the execution (a ``transpile_failed`` message, the
    #: fidelity rules in ``rewrites``)
    dialect: str | None = None


@runtime_checkable
class Judge(Protocol):
    name: str      # recorded on every diagnosis, e.g. "rules" or "llm:claude-…"
    version: str   # changes when the judge's rules or prompt change

    def diagnose(self, item: JudgeInput) -> Diagnosis: ...


def is_failure(grade: Grade) -> bool:
    return grade.outcome in FAILED_OUTCOMES
