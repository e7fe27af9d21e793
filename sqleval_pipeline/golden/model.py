"""The golden-set case model (docs/golden-set.md).

One case per JSON line. ``expected`` holds the *encoded* result (see
:mod:`sqleval_pipeline.results`) frozen by ``sqleval golden freeze``; never type it by hand.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Literal
import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.textfiles import encodable

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
    """The rows tied at a LIMIT (or OFFSET) cut (docs/golden-set.md, "Ties at a LIMIT cut").

    The reference's ``ORDER BY … LIMIT k`` cut through rows tied on *all* its ORDER BY keys:
    the frozen ``rows`` hold ``before`` rows ranked strictly above the tie group, then ``take``
    rows of the group; ``rows`` here holds the *whole* tie group as far as freezing fetched it
    (``len(rows) > take``; the kept rows are among them), projected on the result's columns
    and encoded with its ``types``. Any ``take`` rows of the group are a right answer.

    ``truncated``: the group continues beyond the rows freezing fetches
    (:data:`sqleval_pipeline.golden.freeze.MAX_TIE_EXTRA_ROWS` after the cut); only the rows
    recorded here are accepted, so an answer keeping a tied row that is not recorded is graded
    WRONG (freezing says so; add a tie-breaker to the ORDER BY).

    >>> TieAtCut(keys=["n"], before=1, take=1, rows=[["Delhi", 3], ["Kochi", 3]]).truncated
    False
    """

    model_config = ConfigDict(extra="forbid")

    keys: list[str] = Field(description="the reference's ORDER BY keys: an output column's name, or "
                                        "the SQL text of a key that is not an output column")
    before: int = Field(ge=0, description="rows of the frozen result ranked above the tie group")
    take: int = Field(ge=1, description="rows of the tie group the LIMIT keeps")
    rows: list[list[Any]] = Field(description="every recorded row of the tie group (more than take)")
    truncated: bool = Field(default=False, description="the tie group has more rows than recorded")

    def decoded_rows(self, types: list[str]) -> list[list[Any]]:
        """The tie group's rows decoded with the result's column ``types``."""
        return ResultSet.from_json({"columns": [f"c{i}" for i in range(len(types))], "types": types,
                                    "rows": self.rows}).rows


class EncodedResult(BaseModel):
    """A result set in its JSON encoding (values typed by ``types``).

    Besides the rows, freezing records how far they are a reference
    (docs/golden-set.md, "Ties at a LIMIT cut"):

    - ``tie``: the LIMIT cut through a tie group (any ``take`` rows of it are right);
    - ``tie_at_offset``: the OFFSET cut through the tie group the result starts with (its
      ``before`` is 0) while the result goes on past that group; when one tie group holds the
      whole result and is cut at both ends, it is ``tie`` alone;
    - ``order_groups``: for an ``order_matters`` case whose ORDER BY keys are not all output
      columns, the rank group of each row (rows with equal keys share one, numbered 0, 1, …
      in order); the grader accepts any order within a group;
    - ``limit_without_order``: the query has a top-level LIMIT/OFFSET but no ORDER BY, so which
      rows it keeps is up to the database: the rows are not a reference (the case is flagged).
    """

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    #: set when the reference's LIMIT cut through a tie group (any selection from it is right)
    tie: TieAtCut | None = None
    #: set when the reference's OFFSET cut through the tie group the result starts with
    tie_at_offset: TieAtCut | None = None
    #: rank group per row, when the ORDER BY keys are not all output columns (order_matters)
    order_groups: list[int] | None = None
    #: a top-level LIMIT/OFFSET without ORDER BY: the rows are not a reference
    limit_without_order: bool = False

    @model_validator(mode="after")
    def _check_ties(self) -> EncodedResult:
        n, width = len(self.rows), len(self.columns)
        hint = "re-run `sqleval golden freeze` instead of editing it by hand"
        if self.order_groups is not None:
            g = self.order_groups
            if len(g) != n:
                raise ValueError(f"order_groups has {len(g)} entries for {n} rows; {hint}")
            if g and (g[0] != 0 or any(b - a not in (0, 1) for a, b in zip(g, g[1:], strict=False))):
                raise ValueError(f"order_groups must count 0, 1, 2, … in row order; {hint}")
        for name, tie in (("tie", self.tie), ("tie_at_offset", self.tie_at_offset)):
            if tie is None:
                continue
            if tie.before + tie.take > n:
                raise ValueError(f"{name}: before + take = {tie.before + tie.take} exceeds the "
                                 f"{n} frozen rows; {hint}")
            if len(tie.rows) < tie.take:
                raise ValueError(f"{name}: {len(tie.rows)} tied rows recorded, fewer than take = "
                                 f"{tie.take}; {hint}")
            if any(len(r) != width for r in tie.rows):
                raise ValueError(f"{name}: every tied row needs {width} values; {hint}")
        if self.tie_at_offset is not None:
            if self.tie_at_offset.before != 0:
                raise ValueError(f"tie_at_offset.before must be 0 (the result starts with it); {hint}")
            if self.tie is not None and self.tie.before < self.tie_at_offset.take:
                raise ValueError(f"tie and tie_at_offset overlap; {hint}")
        return self

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

    @field_validator("question", "notes", mode="before")
    @classmethod
    def _writable_text(cls, v: Any) -> Any:
        """A question (or note) from any file can be written back whatever code point it holds:
        a lone surrogate becomes its escape (``textfiles.encodable``)."""
        return encodable(v) if isinstance(v, str) else v

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
        data = self.model_dump(mode="json", exclude_none=False)
        # fields added in revision 4 are written only when set: older files (and the content
        # hashes computed from their lines) stay as they were
        for name in ("tags", "facets", "inferred"):
            if not data[name]:
                del data[name]
        if data.get("expected") is not None:
            for enc in (data["expected"], *data["expected"]["alternatives"]):
                for name in ("tie", "tie_at_offset", "order_groups"):
                    if enc.get(name) is None:
                        enc.pop(name, None)
                if not enc.get("limit_without_order"):
                    enc.pop("limit_without_order", None)
        return json.dumps(data, ensure_ascii=False, sort_keys=False)


def golden_hash(cases) -> str:
    """12 hex digits of the cases' content, in id order: what a batch was made for (a batch is
    reused only for the same hash) and what a derived file's digest covers."""
    h = hashlib.sha256()
    for c in sorted(cases, key=lambda c: c.id):
        h.update(c.to_json_line().encode())
    return h.hexdigest()[:12]
