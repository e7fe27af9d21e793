"""Typed records passed between pipeline stages: attempts, executions, grades, diagnoses.

Every record carries the attempt key ``(config_version, case_id, run_index)`` so that a
scorecard number can be traced back to the question, the SQL and the rows behind it.

>>> a = Attempt(config_version="cfg1", case_id="q01", run_index=0, kind="sql", sql="SELECT 1")
>>> a.key
('cfg1', 'q01', 0)
>>> Execution(config_version="cfg1", case_id="q01", run_index=0, status="refused",
...           layer="filter", reason="not_select", message="root is an INSERT").status
'refused'

Records are persisted as JSON Lines (always available) or Parquet (written and read by
DuckDB, no pyarrow needed) with :func:`save_records` / :func:`load_records`. Nested fields
(a :class:`~sqleval_pipeline.results.ResultSet`, usage) are stored as JSON text in Parquet.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.textfiles import encodable

Outcome = Literal[
    "CORRECT", "CORRECT_FACTS", "WRONG", "DEFERRED_CORRECTLY", "DEFERRED_WRONGLY", "ERROR"
]
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]
#: outcomes that count as a success for the case's band (answer right, or refusal held)
SUCCESS_OUTCOMES = frozenset({"CORRECT", "CORRECT_FACTS", "DEFERRED_CORRECTLY"})

FailureCategory = Literal[
    "wrong_table", "wrong_filter", "wrong_metric", "wrong_grain", "ambiguous_question", "harness_bug"
]
FAILURE_CATEGORIES: tuple[str, ...] = FailureCategory.__args__  # type: ignore[attr-defined]

GuardLayer = Literal["filter", "database", "sandbox", "cap"]


class AttemptKey(BaseModel):
    """The identity of one attempt: (configuration version, case, run index)."""

    model_config = ConfigDict(extra="forbid")

    config_version: str = Field(min_length=1)
    case_id: str = Field(min_length=1)
    run_index: int = Field(ge=0)

    @field_validator("*", mode="after")
    @classmethod
    def _writable_text(cls, v: Any) -> Any:
        """Every text field can be written whatever it holds: a lone surrogate (from a
        system's SQL, a provider's reply, a message quoting them) becomes its escape."""
        return encodable(v) if isinstance(v, str) else v

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.config_version, self.case_id, self.run_index)


class Usage(BaseModel):
    """Provider usage for one attempt (all optional: not every generator reports them).

    None means *not recorded*, never zero: a provider that reports no tokens leaves them None.

    * ``input_tokens`` / ``output_tokens``: as the provider reported them (Anthropic, OpenAI,
      a service's ``usage`` block, a recorded answers file);
    * ``latency_ms``: the generator's own timing of its last, successful call (retries not
      included), or the latency a recorded answers file gives;
    * ``wall_s``: seconds from asking the question to having the answer (or giving up), as the
      attempt runner measured it around the generator, **retries and their waits included**;
      for recorded answers, the file's ``latency_ms`` (the replay itself is not timed). The
      scorecard's latency is this field. Attempts made before it existed load with None.
    * ``cost_usd``: a cost the generator itself knows (the offline baseline: 0); the
      scorecard's cost comes from the configuration's price table instead.

    >>> Usage.model_validate({"input_tokens": 12, "latency_ms": 80.5}).wall_s is None
    True
    """

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    wall_s: float | None = Field(default=None, ge=0, description="seconds around the call, "
                                 "retries and waits included (None: not measured)")


class Attempt(AttemptKey):
    """The system's answer to one case in one run: SQL, a refusal, or an error.

    ``kind="error"`` means no answer was obtained for reasons outside the system under
    test (provider outage, rate limit, harness fault); it grades as ERROR and leaves the
    denominator. A refusal is the system declining (``refusal_reason`` says why).
    """

    batch_id: str | None = None
    kind: Literal["sql", "refusal", "error"]
    sql: str | None = None
    refusal_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    model: str | None = None
    usage: Usage | None = None
    # audit trail (filled by the attempt runner)
    generator: str | None = Field(default=None, description="generator kind and name")
    prompt: str | None = Field(default=None, description="the rendered prompt, when there is one")
    raw_response: str | None = None
    retries: int = Field(default=0, description="retries the runner made (``usage.wall_s`` "
                         "includes them and their waits)")
    temperature: float | None = None
    temperature_settable: bool | None = None
    created_at: str | None = Field(default=None, description="UTC ISO timestamp of the answer")

    @model_validator(mode="after")
    def _check_kind(self) -> Attempt:
        if self.kind == "sql" and not (self.sql and self.sql.strip()):
            raise ValueError("an attempt of kind 'sql' needs non-empty sql")
        if self.kind == "error" and not self.error_code:
            raise ValueError("an attempt of kind 'error' needs an error_code (e.g. 'provider_timeout')")
        if self.kind != "sql" and self.sql is not None:
            raise ValueError(f"an attempt of kind {self.kind!r} carries no sql")
        return self


class Execution(AttemptKey):
    """An attempt's SQL run through the guard.

    - ``status="ok"``: ``result`` holds the (possibly ``truncated``) rows.
    - ``status="refused"``: the guard layer ``layer`` refused with a reason code ``reason``
      and a human ``message``.
    - ``status="timeout"``: the execution-time cap or the wall-clock kill fired.
    - ``status="error"``: ``error_source="sql"`` when the database rejected the system's SQL
      (parse/binder/runtime error: the system's fault, graded WRONG) or ``"harness"`` when the
      harness itself failed (graded ERROR, outside the denominator).
    """

    status: Literal["ok", "refused", "timeout", "error"]
    result: ResultSet | None = None
    truncated: bool = False
    elapsed_ms: float | None = None
    layer: GuardLayer | None = None
    reason: str | None = None
    message: str | None = None
    error_source: Literal["sql", "harness"] | None = None
    error_code: str | None = None
    error_message: str | None = None
    executed_sql: str | None = Field(default=None, description="the DuckDB text that ran, when the "
                                     "configuration declares another dialect (the attempt keeps "
                                     "the system's own text)")
    policy_version: str | None = Field(default=None, description="the resolved guard policy this "
                                       "execution was made under (its content hash)")
    rewrites: list[str] = Field(default_factory=list, description="the dialect fidelity rules' "
                                "changes to the system's text, ``rule: detail`` (docs/dialects.md)")

    @field_validator("result", mode="before")
    @classmethod
    def _decode_result(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return ResultSet.from_json(v)
        return v

    @field_serializer("result")
    def _encode_result(self, v: ResultSet | None) -> dict[str, Any] | None:
        return None if v is None else v.to_json()

    @model_validator(mode="after")
    def _check_status(self) -> Execution:
        if self.status == "ok" and self.result is None:
            raise ValueError("an ok execution needs a result")
        if self.status == "refused" and (self.layer is None or not self.reason):
            raise ValueError("a refused execution needs the refusing layer and a reason code")
        if self.status == "error" and self.error_source is None:
            raise ValueError(
                "an error execution needs error_source: 'sql' (the system's SQL failed) "
                "or 'harness' (the harness failed)"
            )
        return self


class Grade(AttemptKey):
    """An attempt's outcome under the grading rules, with the case metadata scoring needs.

    ``outcome`` is None only for cases that have no frozen expected result yet
    (``case_status`` unverified/generated): they get an execution-only score
    (``executed``) and stay out of every accuracy.
    """

    outcome: Outcome | None
    exact: bool | None = None
    facts: bool | None = None
    reason: str = Field(description="readable reason code, e.g. 'match', 'guard_refused:filter:not_select'")
    mismatch: str | None = None
    alternative: int | None = Field(default=None, description="index of the accepted result that matched")
    executed: bool | None = None
    grader_version: str
    band: str
    difficulty: str
    split: str
    cluster: str
    case_status: str = "verified"
    snapshot_id: str | None = None
    #: the case's named slices and tags (scorecard breakdowns beyond difficulty/band/split)
    facets: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    #: the case's metadata sqleval inferred (e.g. ``cluster``: the scorecard says the clusters
    #: were derived, not declared)
    inferred: list[str] = Field(default_factory=list)
    #: the vendor's own rows for this SQL (grading/vendor_rows.py): agree / disagree with
    #: sqleval's execution, partial, unreadable; None when the vendor sent none
    vendor_rows: Literal["agree", "disagree", "partial", "unreadable"] | None = None
    vendor_mismatch: str | None = None
    vendor_outcome: Outcome | None = None
    #: the test suite's check of an answer right on the pinned snapshot (docs/test-suite.md):
    #: passed on every neighbour of the case's suite, accidental_match (then ``outcome`` is
    #: WRONG and ``snapshot_outcome`` what the snapshot alone said), no_suite (the case has
    #: none), inconclusive (no neighbour could say: refused, timed out, cut by the row cap);
    #: None: not checked (not right on the snapshot, or the suite is off)
    suite_check: Literal["passed", "accidental_match", "no_suite", "inconclusive"] | None = None
    snapshot_outcome: Outcome | None = None
    #: the neighbour where an accidental match showed, and the rows on each side there
    suite_detail: dict[str, Any] | None = None


class Diagnosis(AttemptKey):
    """Why a failed attempt failed, from a judge (``judge`` names it, e.g. 'rules', 'llm:<model>')."""

    category: FailureCategory
    explanation: str
    judge: str = Field(min_length=1)
    judge_version: str | None = None
    #: the grader whose failing grade this diagnoses (None: recorded before diagnoses were
    #: keyed by grader; such a diagnosis is made again)
    grader_version: str | None = None
    prompt: str | None = Field(default=None, description="what an LLM judge was sent (the proof "
                               "of what left the machine, e.g. no row values in client-safe mode)")


# --------------------------------------------------------------------------- persistence
# (in sqleval_pipeline.pipeline.recordio; re-exported here, where callers have always found them)

from sqleval_pipeline.pipeline.recordio import (  # noqa: E402,F401
    RecordWriter, count_records, iter_records, load_records, save_records,
)
