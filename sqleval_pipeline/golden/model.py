"""The golden-set case model (docs/golden-set.md).

One case per JSON line. ``expected`` holds the *encoded* result (see
:mod:`sqleval_pipeline.results`) frozen by ``sqleval golden freeze``; never type it by hand.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sqleval_pipeline.results import ResultSet

#: the default difficulty taxonomy; a project may declare its own (``taxonomy.difficulties``)
DEFAULT_DIFFICULTIES: tuple[str, ...] = (
    "simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k", "trap",
)
Band = Literal["answerable", "needs_definition", "should_refuse"]
Split = Literal["dev", "heldout"]
Status = Literal["verified", "unverified", "generated"]

DIFFICULTIES: tuple[str, ...] = DEFAULT_DIFFICULTIES
BANDS: tuple[str, ...] = Band.__args__  # type: ignore[attr-defined]
SPLITS: tuple[str, ...] = Split.__args__  # type: ignore[attr-defined]


class EncodedResult(BaseModel):
    """A result set in its JSON encoding (values typed by ``types``)."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]

    def decode(self) -> ResultSet:
        return ResultSet.from_json(self.model_dump())


class Expected(EncodedResult):
    """The frozen expected result; ``alternatives`` are further accepted readings."""

    alternatives: list[EncodedResult] = Field(default_factory=list)

    def accepted(self) -> list[ResultSet]:
        """Every accepted result, the primary reading first."""
        primary = ResultSet.from_json(
            {"columns": self.columns, "types": self.types, "rows": self.rows}
        )
        return [primary, *(alt.decode() for alt in self.alternatives)]


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    author: str
    reviewer: str | None = None
    date: _dt.date | None = None


class Case(BaseModel):
    """One golden-set triple: question → reference SQL → expected result, with metadata."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{1,63}$")
    question: str = Field(min_length=3)
    reference_sql: str | None = None
    alternative_sqls: list[str] = Field(
        default_factory=list,
        description="further reference queries for legitimate alternative readings; "
        "each is frozen into expected.alternatives",
    )
    expected: Expected | None = None
    snapshot_id: str | None = None
    difficulty: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,47}$",
                            description="one of the project's difficulties (taxonomy)")
    band: Band
    traps: list[str] = Field(default_factory=list)
    order_matters: bool = False
    order_keys: list[str] = Field(default_factory=list)
    cluster: str = Field(min_length=1)
    split: Split
    status: Status
    provenance: Provenance
    notes: str | None = None

    @field_validator("question")
    @classmethod
    def _strip_question(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is empty")
        return v.strip()

    @model_validator(mode="after")
    def _check_consistency(self) -> Case:
        if self.band == "should_refuse":
            if self.reference_sql is not None:
                raise ValueError(
                    "a should_refuse case has no reference_sql (answering is the failure): "
                    "set reference_sql to null"
                )
            if self.alternative_sqls:
                raise ValueError("a should_refuse case has no alternative_sqls")
        elif self.status == "verified" and not self.reference_sql:
            raise ValueError(
                "a verified answerable case needs reference_sql; mark it 'unverified' "
                "until a person writes one"
            )
        if self.alternative_sqls and not self.reference_sql:
            raise ValueError("alternative_sqls need a reference_sql first")
        if self.expected is not None and self.expected.alternatives and (
            len(self.expected.alternatives) != len(self.alternative_sqls)
        ):
            raise ValueError(
                "expected.alternatives does not match alternative_sqls: re-run "
                "`sqleval golden freeze`"
            )
        return self

    @property
    def answerable(self) -> bool:
        return self.band != "should_refuse"

    def accepted_results(self) -> list[ResultSet]:
        """Every accepted expected result (empty for should_refuse or unfrozen cases)."""
        return self.expected.accepted() if self.expected is not None else []

    def to_json_line(self) -> str:
        import json

        data = self.model_dump(mode="json", exclude_none=False)
        return json.dumps(data, ensure_ascii=False, sort_keys=False)
