"""The distilled suite as it is stored: ``suite.json`` beside the neighbour files.

One :class:`CaseSuite` per case: the neighbours kept for it (the smallest set found that kills
every mutant the whole set kills), how its mutants fared, the mutants that survived every
database, and the case's accepted results on each kept neighbour (so grading needs no second
run of the reference). ``reading_hash`` says which reference, alternatives and order rule it was
distilled for: a case edited since is *stale* and its stored results are not used.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field, computed_field

from sqleval_pipeline.golden.model import Case, Expected

SUITE_FILE = "suite.json"
SUITE_FORMAT = 1


def reading_hash(case: Case) -> str:
    """What a case's results on a database depend on: its SQL readings and its order rule."""
    text = json.dumps([case.reference_sql, list(case.alternative_sqls), case.order_matters])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class MutantRecord(BaseModel):
    kind: str
    detail: str
    sql: str
    #: 0: a mutant of the reference; i: of alternative i
    reading: int = 0


class FrozenOn(BaseModel):
    """A case's accepted results on one neighbour (as ``golden freeze`` would record them)."""

    expected: Expected
    order_keys: list[str] = Field(default_factory=list)


class CaseSuite(BaseModel):
    case_id: str
    reading_hash: str
    #: the distilled suite: neighbour ids, in the order they were chosen
    neighbours: list[str]
    mutants: int
    #: mutants that failed to run on the snapshot (not counted)
    invalid: int = 0
    killed_by_snapshot: int = 0
    killed_by_neighbours: int = 0
    surviving: list[MutantRecord] = Field(default_factory=list)
    #: how many snapshot survivors each neighbour kills (every neighbour of the set)
    kills: dict[str, int] = Field(default_factory=dict)
    #: neighbours where the reference itself could not be run, with why
    unusable: dict[str, str] = Field(default_factory=dict)
    frozen: dict[str, FrozenOn] = Field(default_factory=dict)
    #: mutants by kind: [total, killed]
    by_kind: dict[str, list[int]] = Field(default_factory=dict)
    #: queries run to distil it: mutants on the snapshot and on the neighbours, readings frozen there
    executions: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kill_rate(self) -> float | None:
        """Killed mutants (by the snapshot or a neighbour) over the mutants that ran."""
        return (self.killed_by_snapshot + self.killed_by_neighbours) / self.mutants if self.mutants else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def suite_kill_rate(self) -> float | None:
        """Of the mutants the snapshot does not kill, the share the neighbours kill."""
        alive = self.mutants - self.killed_by_snapshot
        return self.killed_by_neighbours / alive if alive else None


class SuiteFile(BaseModel):
    format: int = SUITE_FORMAT
    set_id: str
    snapshot_id: str
    as_of: dt.date
    grader_version: str
    mutator_version: str
    min_size: int
    max_mutants: int
    cases: dict[str, CaseSuite]
    #: cases without a suite, with why (no reference, should_refuse, not frozen, failing)
    skipped: dict[str, str] = Field(default_factory=dict)
    timings: dict[str, Any] = Field(default_factory=dict)
