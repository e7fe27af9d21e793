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


class TieAtCut(BaseModel):
    """The rows tied at a LIMIT cut (docs/golden-set.md, "Ties at a LIMIT cut").

    The reference's ``ORDER BY … LIMIT k`` cut through rows tied on its ORDER BY keys: the
    frozen ``rows`` hold ``before`` rows ranked strictly above the tie group, then ``take``
    rows of the group; ``rows`` here holds the *whole* tie group (``len(rows) > take``),
    encoded with the result's ``types``. Any ``take`` rows of the group are a right answer.
    """

    model_config = ConfigDict(extra="forbid")

    keys: list[str] = Field(description="the output columns of the reference's ORDER BY")
    before: int = Field(ge=0, description="rows of the frozen result ranked above the tie group")
    take: int = Field(ge=1, description="rows of the tie group the LIMIT keeps")
    rows: list[list[Any]] = Field(description="every row of the tie group (more than take)")


class EncodedResult(BaseModel):
    """A result set in its JSON encoding (values typed by ``types``)."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    #: set when the reference's LIMIT cut through a tie group (any selection from it is right)
    tie: TieAtCut | None = None

    def decode(self) -> ResultSet:
        return ResultSet.from_json(self.model_dump(include={"columns", "types", "rows"}))


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
    #: free labels; each one is a scorecard slice (``by_tag``)
    tags: list[str] = Field(default_factory=list)
    #: named slices kept from the source, e.g. ``{"database": "flight_2", "hardness": "extra"}``
    #: (Spider's db_id and hardness, BIRD's difficulty); each name is a scorecard breakdown
    facets: dict[str, str] = Field(default_factory=dict)
    #: which metadata sqleval inferred rather than read from the source: any of
    #: ``difficulty``, ``cluster``, ``order_matters``, ``facets.<name>`` (docs/golden-set.md)
    inferred: list[str] = Field(default_factory=list)

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
        # fields added in revision 4 are written only when set: older files (and the content
        # hashes computed from their lines) stay as they were
        for name in ("tags", "facets", "inferred"):
            if not data[name]:
                del data[name]
        if data.get("expected") is not None:
            for enc in (data["expected"], *data["expected"]["alternatives"]):
                if enc.get("tie") is None:
                    enc.pop("tie", None)
        return json.dumps(data, ensure_ascii=False, sort_keys=False)
