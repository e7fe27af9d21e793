"""Audit the golden set: every reviewed reference answered as if a system had written it.

``sqleval golden audit`` (docs/golden-set.md, "Auditing the golden set") runs each reference
query, and each alternative, down the evaluation's own path: an :class:`~sqleval_pipeline.pipeline.records.Attempt`
of kind ``sql`` executed by :func:`~sqleval_pipeline.pipeline.streams.execute_stream` through the
project's guard (statement filter, pinned clock, sandbox, result cap), then graded by
:func:`~sqleval_pipeline.grading.grade_attempt` against the case, once per run (three runs by
default). A reference that does not grade CORRECT against itself every time is an error, and so
is one whose frozen result no longer reproduces (:func:`~sqleval_pipeline.golden.verify.verify_cases`).
The audit also flags weak references: empty, single-NULL or all-zero results, results near the
row cap, clock dependence that the question's wording does not explain (and the reverse), a
LIMIT cut through tied rows or a LIMIT without ORDER BY, and runs that disagree.

Every finding has a reason code (:data:`CODES`: which check, and whether it is an ``error`` or
a ``warning``), the reading it concerns and a sentence. :func:`audit_cases` returns an
:class:`AuditReport`; its :meth:`~AuditReport.exit_code` is 0 when there is no error (1 with
``strict`` when there is a warning too).

>>> relative_time_phrase("How many orders were placed in the last 7 days?")
'last 7 days'
>>> relative_time_phrase("What was our revenue in November 2025?") is None
True
>>> unordered_cuts("SELECT city FROM dim_customers LIMIT 5")
['LIMIT 5']
>>> unordered_cuts("SELECT city, count(*) AS n FROM c GROUP BY city ORDER BY n DESC LIMIT 5")
[]
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import sqlglot
from pydantic import BaseModel, Field
from sqlglot import exp

from sqleval_pipeline.golden.freeze import MAX_REFERENCE_ROWS, run_reference
from sqleval_pipeline.golden.verify import same_result, verify_cases
from sqleval_pipeline.golden.infer import limit_without_order
from sqleval_pipeline.golden.model import Case, EncodedResult, TieAtCut
from sqleval_pipeline.grading import grade_attempt
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.pipeline.records import Attempt, Execution
from sqleval_pipeline.results import ResultSet, encode_value
from sqleval_pipeline.snapshot import open_readonly
from sqleval_pipeline.pipeline.streams import execute_stream

Severity = Literal["error", "warning"]

#: reason code -> (check, severity, what it means); docs/golden-set.md lists the same table
CODES: dict[str, tuple[str, Severity, str]] = {
    # self-grade: the reference answered as a system, three runs, each must grade CORRECT
    "refused_by_guard": ("self_grade", "error", "the guard refuses the reference"),
    "timed_out": ("self_grade", "error", "the reference hits the statement timeout"),
    "sql_error": ("self_grade", "error", "the reference fails on the snapshot"),
    "harness_error": ("self_grade", "error", "the harness failed running it"),
    "truncated_by_cap": ("self_grade", "error", "the result cap truncates the result"),
    "not_self_consistent": ("self_grade", "error", "it does not grade CORRECT against its own "
                            "frozen result"),
    # reproduce: golden verify's drift check
    "not_frozen": ("reproduce", "error", "a verified case without a frozen result"),
    "other_snapshot": ("reproduce", "error", "frozen against another snapshot"),
    "not_reproduced": ("reproduce", "error", "the frozen result no longer reproduces"),
    # determinism: the runs compared with one another
    "nondeterministic_values": ("determinism", "error", "the runs return different rows"),
    "nondeterministic_order": ("determinism", "error", "an order_matters case whose runs "
                               "order rows differently beyond ties"),
    # weak results
    "empty_result": ("weak_result", "warning", "the result has no rows"),
    "single_null": ("weak_result", "warning", "one row, every value NULL"),
    "all_zero": ("weak_result", "warning", "every numeric value is zero"),
    "near_row_cap": ("row_cap", "warning", "the result is close to the row cap"),
    # clock
    "clock_dependent_without_relative_time": ("clock", "warning", "the result moves with the "
                                              "clock; the question names no relative time"),
    "relative_time_ignores_clock": ("clock", "warning", "the question names a relative time; "
                                    "the result does not move with the clock"),
    # ties and cuts
    "tie_at_cut": ("ties", "warning", "the LIMIT cuts through rows tied on the ORDER BY keys"),
    "limit_without_order": ("ties", "warning", "a LIMIT/OFFSET without ORDER BY"),
}

#: the audit's attempts are named with this configuration version
AUDIT_CONFIG = "golden-audit"
#: runs of every reading (the evaluation's default number of runs)
DEFAULT_RUNS = 3
#: the clock is moved this many days from the as-of date (each way) for the clock check
DEFAULT_SHIFTS_DAYS: tuple[int, ...] = (400, -400)
#: a result with at least this share of the row cap is "near" it
NEAR_CAP_FRACTION = 0.8

_NUMBER = r"(?:\d+|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|few|couple of)"
_UNIT = r"(?:days?|weeks?|weekends?|fortnights?|months?|quarters?|years?|hours?)"
_QUALIFIER = r"(?:(?:full|complete|whole|calendar|fiscal|business|working)\s+)*"
#: wording that ties a question to "now" (matched case-insensitively on word boundaries)
RELATIVE_TIME_PATTERNS: tuple[str, ...] = (
    r"today'?s?", r"tonight", r"yesterday'?s?", r"tomorrow'?s?", r"now", r"current(?:ly)?",
    r"recent(?:ly)?", r"lately", r"ago", r"so far",
    r"(?:year|quarter|month|week)[- ]to[- ]date", r"ytd", r"qtd", r"mtd", r"wtd",
    rf"(?:this|last|past|previous|prior|next|coming|trailing|rolling|current)\s+"
    rf"(?:{_NUMBER}\s+)?{_QUALIFIER}{_UNIT}",
)
_RELATIVE = re.compile(r"\b(?:" + "|".join(RELATIVE_TIME_PATTERNS) + r")\b", re.IGNORECASE)


def relative_time_phrase(question: str) -> str | None:
    """The first relative-time phrase of ``question`` ("last month", "today", "YTD" …), or
    None. Bare "to date" is not one (all-time totals: the snapshot bounds them).

    >>> relative_time_phrase("Show net revenue for each of the last three complete calendar months")
    'last three complete calendar months'
    >>> relative_time_phrase("What is this year's gross revenue so far?")
    'this year'
    >>> relative_time_phrase("What is our total revenue to date?") is None
    True
    """
    m = _RELATIVE.search(question)
    return m.group(0) if m else None


# --------------------------------------------------------------------------- static checks


def unordered_cuts(sql: str) -> list[str]:
    """The LIMIT/OFFSET clauses of ``sql`` that cut rows with no ORDER BY deciding which
    (which rows come back is up to the database), outermost first. The outermost query follows
    the importer's rule (:func:`sqleval_pipeline.golden.infer.limit_without_order`); every
    subquery and CTE is checked the same way. An aggregate without GROUP BY (one row) is not
    counted. Raises :class:`sqlglot.errors.ParseError` on text that does not parse.

    >>> unordered_cuts("SELECT * FROM (SELECT a FROM t LIMIT 2 OFFSET 1) x ORDER BY a")
    ['LIMIT 2 OFFSET 1']
    >>> unordered_cuts("SELECT max(a) FROM t LIMIT 1")
    []
    """
    tree = sqlglot.parse_one(sql, read="duckdb")
    top = tree.unnest() if isinstance(tree, exp.Subquery) else tree
    found: list[str] = []
    for node in tree.walk():
        if not isinstance(node, exp.Select | exp.SetOperation):
            continue
        cut = [node.args.get(k) for k in ("limit", "offset") if node.args.get(k) is not None]
        if not cut:
            continue
        unordered = (limit_without_order(sql, "duckdb") if node is top
                     else node.args.get("order") is None)
        if not unordered or (isinstance(node, exp.Select) and _single_row(node)):
            continue
        found.append(" ".join(c.sql("duckdb") for c in cut))
    return found


def _single_row(select: exp.Select) -> bool:
    """An aggregate query without GROUP BY returns exactly one row."""
    if select.args.get("group") is not None:
        return False
    for proj in select.expressions:
        for agg in proj.find_all(exp.AggFunc):
            if agg.find_ancestor(exp.Window) is None:
                return True
    return False


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def weak_result(rs: ResultSet) -> tuple[str, str] | None:
    """(code, sentence) when a frozen result is too weak to tell answers apart, else None.

    >>> weak_result(ResultSet(columns=["n"], types=["BIGINT"], rows=[[0]]))[0]
    'all_zero'
    >>> weak_result(ResultSet(columns=["k", "n"], types=["VARCHAR", "BIGINT"], rows=[["a", 0], ["b", 3]])) is None
    True
    """
    if not rs.rows:
        return "empty_result", "the result has no rows: any query returning nothing passes"
    if len(rs.rows) == 1 and all(v is None for v in rs.rows[0]):
        return "single_null", (f"the result is a single row of NULL ({', '.join(rs.columns)}): "
                               "any query matching nothing passes")
    numbers = [v for row in rs.rows for v in row if _is_number(v)]
    if numbers and all(v == 0 for v in numbers):
        return "all_zero", (f"every numeric value of the {len(rs.rows)} row(s) is 0: a query "
                            "matching nothing (count(*) of an empty filter) passes")
    return None


# --------------------------------------------------------------------------- the report


class Finding(BaseModel):
    """One flag raised on a case: a reason code of :data:`CODES`, the reading, a sentence."""

    code: str
    check: str
    severity: Severity
    reading: str | None = Field(None, description="reference_sql, alternative_sqls[i], or None "
                                "for the whole case")
    detail: str

    @classmethod
    def of(cls, code: str, detail: str, reading: str | None = None) -> Finding:
        check, severity, _ = CODES[code]
        return cls(code=code, check=check, severity=severity, reading=reading, detail=detail)


class CaseAudit(BaseModel):
    """The findings of one audited case (none: the case passed every check)."""

    case_id: str
    readings: int = Field(description="reference plus alternatives")
    findings: list[Finding] = Field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]


class Skipped(BaseModel):
    """A case the audit did not run, and why (``unreviewed`` or ``should_refuse``)."""

    case_id: str
    code: Literal["unreviewed", "should_refuse"]
    detail: str


class AuditReport(BaseModel):
    """What ``sqleval golden audit`` found (``--json`` writes this)."""

    snapshot_id: str
    as_of: dt.date
    runs: int
    shifts_days: list[int]
    row_cap: int
    near_cap_rows: int
    cases: list[CaseAudit]
    skipped: list[Skipped] = Field(default_factory=list)
    queries: int = Field(0, description="guarded executions made (every reading x runs)")
    seconds: float = 0.0

    @property
    def errors(self) -> int:
        return sum(len(c.errors) for c in self.cases)

    @property
    def warnings(self) -> int:
        return sum(len(c.warnings) for c in self.cases)

    def flagged(self) -> list[CaseAudit]:
        """The cases with at least one finding, those with errors first (file order kept)."""
        return sorted((c for c in self.cases if c.findings), key=lambda c: not c.errors)

    def codes(self) -> Counter:
        return Counter(f.code for c in self.cases for f in c.findings)

    def exit_code(self, strict: bool = False) -> int:
        """0 with no error (and, when ``strict``, no warning); else 1."""
        return 1 if self.errors or (strict and self.warnings) else 0

    def summary(self) -> str:
        n_err = sum(1 for c in self.cases if c.errors)
        n_warn = sum(1 for c in self.cases if c.warnings and not c.errors)
        clean = sum(1 for c in self.cases if not c.findings)
        unreviewed = sum(1 for s in self.skipped if s.code == "unreviewed")
        refuse = sum(1 for s in self.skipped if s.code == "should_refuse")
        return (f"audited {len(self.cases)} case(s) ({self.queries} guarded runs, {self.runs} per "
                f"reading) on {self.snapshot_id} (as of {self.as_of}) in {self.seconds:.1f} s: "
                f"{clean} clean, {n_err} with errors ({self.errors} error(s)), {n_warn} with "
                f"warnings only ({self.warnings} warning(s) in all); skipped {unreviewed} "
                f"unreviewed and {refuse} should_refuse case(s)")


# --------------------------------------------------------------------------- the audit


def _label(i: int) -> str:
    return "reference_sql" if i == 0 else f"alternative_sqls[{i - 1}]"


def _runs_text(runs: list[int], total: int) -> str:
    if len(runs) == total:
        return f"all {total} runs" if total > 1 else "the run"
    return f"run{'s' if len(runs) > 1 else ''} {', '.join(str(r + 1) for r in runs)} of {total}"


def _self_grade_code(ex: Execution, grade) -> str:
    if grade.outcome == "ERROR":
        return "harness_error"
    if ex.status == "refused":
        return "refused_by_guard"
    if ex.status == "timeout":
        return "timed_out"
    if ex.status == "error":
        return "harness_error" if ex.error_source == "harness" else "sql_error"
    if ex.truncated:
        return "truncated_by_cap"
    return "not_self_consistent"


def _self_grade_detail(code: str, ex: Execution, grade) -> str:
    if code == "refused_by_guard":
        return f"refused by the guard's {ex.layer} ({ex.reason}): {ex.message}"
    if code == "timed_out":
        return f"timed out ({ex.layer}: {ex.reason}): {ex.message}"
    if code in ("sql_error", "harness_error"):
        return f"{grade.reason}: {ex.error_message or grade.mismatch}"
    if code == "truncated_by_cap":
        return f"truncated by the result cap at {ex.result.row_count if ex.result else 0} rows"
    return f"graded {grade.outcome} ({grade.reason}) against its own case: {grade.mismatch}"


def _row_keys(rs: ResultSet) -> list[str]:
    return [json.dumps([encode_value(v) for v in row], sort_keys=True) for row in rs.rows]


def _explained_by_tie(a: ResultSet, b: ResultSet, tie: TieAtCut | None, types: list[str]) -> bool:
    """Two runs that differ only in which rows of a recorded tie group they keep."""
    if tie is None or a.row_count != b.row_count:
        return False
    group = set(_row_keys(ResultSet.from_json({"columns": a.columns, "types": types,
                                               "rows": tie.rows})))
    ka, kb = _row_keys(a), _row_keys(b)
    outside_a = Counter(k for k in ka if k not in group)
    outside_b = Counter(k for k in kb if k not in group)
    return outside_a == outside_b


def _determinism(case: Case, label: str, results: list[ResultSet | None],
                 frozen: EncodedResult | None) -> Finding | None:
    tie = frozen.tie if frozen is not None else None
    ran = [(i, rs) for i, rs in enumerate(results) if rs is not None]
    if len(ran) < 2:
        return None
    i0, first = ran[0]
    for i, rs in ran[1:]:
        why = same_result(first, rs, False, [])
        if why is not None:
            if tie is not None and _explained_by_tie(first, rs, tie, frozen.types):
                continue
            return Finding.of("nondeterministic_values",
                              f"run {i + 1} differs from run {i0 + 1}: {why} (random(), any_value(), "
                              "a LIMIT without ORDER BY or a tie at a cut make the answer arbitrary)",
                              label)
    if case.order_matters:
        for i, rs in ran[1:]:
            why = same_result(first, rs, True, case.order_keys)
            if why is not None:
                return Finding.of("nondeterministic_order",
                                  f"run {i + 1} orders rows differently from run {i0 + 1} beyond "
                                  f"ties on {case.order_keys or 'no order keys'}: {why}; make the "
                                  "ORDER BY total (add a tie-breaker output column)", label)
    return None


def _describe_tie(tie: TieAtCut) -> str:
    return (f"the LIMIT cuts through {len(tie.rows)} rows tied on {', '.join(tie.keys)} "
            f"(after {tie.before} row(s) ranked above them, {tie.take} of the group are kept): "
            f"any {tie.take} of the {len(tie.rows)} are a right answer; add a tie-breaker or "
            "reword the question if one answer is meant")


def _clock_check(con, case: Case, sqls: list[str], as_of: dt.date, shifts: Sequence[int]
                 ) -> list[Finding]:
    phrase = relative_time_phrase(case.question)
    found: list[Finding] = []
    for i, sql in enumerate(sqls):
        label = _label(i)
        dates = [as_of + dt.timedelta(days=d) for d in shifts]
        try:
            texts = {pin_clock(sql, d) for d in (as_of, *dates)}
        except Exception:  # noqa: BLE001 - untokenizable: the self-grade reports it
            continue
        moved: str | None = None
        if len(texts) > 1:  # a clock call: run it at the as-of date and at each shifted date
            try:
                base = run_reference(con, sql, as_of)
            except Exception:  # noqa: BLE001 - the reproduce check reports the failure
                continue
            for d in dates:
                try:
                    shifted = run_reference(con, sql, d)
                except Exception as exc:  # noqa: BLE001 - fails at another date: it moved
                    moved = f"at {d} it fails: {str(exc).splitlines()[0][:200]}"
                    break
                why = same_result(base, shifted, False, [])
                if why is not None:
                    moved = f"at {d} instead of {as_of}: {why}"
                    break
        if moved and phrase is None:
            hint = (" (a needs_definition case: check that the definition states the window)"
                    if case.band == "needs_definition" else "")
            found.append(Finding.of(
                "clock_dependent_without_relative_time",
                f"the result moves with the clock ({moved}) but the question names no relative "
                f"time{hint}: if a window is meant, say it in the question; if not, take the "
                "clock out of the reference", label))
        elif not moved and phrase is not None:
            how = ("its dates are fixed" if len(texts) == 1 else
                   f"it gives the same rows with the clock moved {', '.join(f'{d:+d}' for d in shifts)} days")
            found.append(Finding.of(
                "relative_time_ignores_clock",
                f"the question says {phrase!r} but the reference does not follow the clock ({how}): "
                "it answers a fixed window, which goes stale when the snapshot is re-pinned; "
                "use current_date (pinned to the as-of date)", label))
    return found


def audit_cases(cases: Sequence[Case], *, serving: Path, snapshot_id: str, as_of: dt.date,
                guard, runs: int = DEFAULT_RUNS, shifts_days: Sequence[int] = DEFAULT_SHIFTS_DAYS,
                near_cap_fraction: float = NEAR_CAP_FRACTION,
                progress: Callable[[str, int, int], None] | None = None) -> AuditReport:
    """Audit ``cases`` on the serving snapshot (see module doc).

    ``guard`` is the evaluation's :class:`~sqleval_pipeline.guard.executor.GuardedExecutor`
    over ``serving`` (the project's policy, clock pinned to ``as_of``): every reading is
    executed through it ``runs`` times and graded like a system's answer. ``shifts_days``
    move the clock for the clock check. ``progress(stage, done, total)`` is told each stage.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    started = time.perf_counter()
    skipped: list[Skipped] = []
    todo: list[Case] = []
    for c in cases:
        if not c.answerable:
            skipped.append(Skipped(case_id=c.id, code="should_refuse",
                                   detail="should_refuse: no reference SQL (answering is the failure)"))
        elif c.status != "verified":
            skipped.append(Skipped(case_id=c.id, code="unreviewed", detail=(
                f"status {c.status}: not reviewed, so never graded; audited once "
                "`sqleval golden review` accepts it")))
        elif not c.reference_sql:  # the model makes this impossible for a verified case
            skipped.append(Skipped(case_id=c.id, code="unreviewed", detail="no reference_sql"))
        else:
            todo.append(c)
    findings: dict[str, list[Finding]] = {c.id: [] for c in todo}
    readings = [(c, i, sql) for c in todo for i, sql in enumerate([c.reference_sql, *c.alternative_sqls])]
    row_cap = int(guard.policy.row_cap)
    cap = min(row_cap, MAX_REFERENCE_ROWS)
    near = max(1, math.ceil(near_cap_fraction * cap))

    # self-grade: each reading answered as a system would, `runs` passes of the pipeline's
    # executions stream (a pass executes each distinct text once; every pass executes again)
    results: list[list[ResultSet | None]] = [[None] * runs for _ in readings]
    failures: list[dict[str, tuple[list[int], str]]] = [{} for _ in readings]
    for r in range(runs):
        if progress:
            progress("self-grade", r, runs)
        attempts = [Attempt(config_version=AUDIT_CONFIG, case_id=c.id, run_index=r, kind="sql", sql=sql)
                    for c, _i, sql in readings]
        executions = execute_stream(attempts, guard, workers=guard.pool.size)
        for k, (attempt, ex) in enumerate(zip(attempts, executions, strict=True)):
            case = readings[k][0]
            ran = ex.status == "ok" and not ex.truncated
            if ran:
                results[k][r] = ex.result
                if case.expected is None:
                    continue  # nothing to grade against: the reproduce check says not_frozen
            grade = grade_attempt(case, attempt, ex)
            if grade.outcome == "CORRECT":
                continue
            code = _self_grade_code(ex, grade)
            runs_failed, detail = failures[k].get(code, ([], _self_grade_detail(code, ex, grade)))
            failures[k][code] = ([*runs_failed, r], detail)
    for k, (case, i, _sql) in enumerate(readings):
        for code, (failed, detail) in failures[k].items():
            findings[case.id].append(Finding.of(code, f"{_runs_text(failed, runs)}: {detail}", _label(i)))

    # reproduce: the frozen results against the pinned snapshot (golden verify's check)
    if progress:
        progress("reproduce", 0, 1)
    drift_codes = {"expected": "not_frozen", "snapshot_id": "other_snapshot"}
    for d in verify_cases(list(todo), serving, snapshot_id, as_of):
        code = drift_codes.get(d.reading, "not_reproduced")
        findings[d.case_id].append(Finding.of(code, d.detail, None if code != "not_reproduced"
                                              else d.reading))

    # per reading: determinism, weak results, the row cap, ties
    for k, (case, i, sql) in enumerate(readings):
        label = _label(i)
        frozen: EncodedResult | None = None
        if case.expected is not None:
            frozen = case.expected if i == 0 else (
                case.expected.alternatives[i - 1] if i - 1 < len(case.expected.alternatives) else None)
        tie = frozen.tie if frozen is not None else None
        if (f := _determinism(case, label, results[k], frozen)) is not None:
            findings[case.id].append(f)
        if frozen is not None and (weak := weak_result(frozen.decode())) is not None:
            findings[case.id].append(Finding.of(weak[0], weak[1], label))
        rows = max([len(frozen.rows) if frozen is not None else 0,
                    *(rs.row_count for rs in results[k] if rs is not None)])
        if rows >= near:
            which = (f"the guard's row cap ({row_cap})" if row_cap <= MAX_REFERENCE_ROWS else
                     f"the {MAX_REFERENCE_ROWS} rows a frozen reference may hold")
            findings[case.id].append(Finding.of(
                "near_row_cap", f"{rows} rows: at least {near_cap_fraction:.0%} of {which}; a "
                "right answer risks truncation, and a reviewer cannot check that many rows", label))
        if tie is not None:
            findings[case.id].append(Finding.of("tie_at_cut", _describe_tie(tie), label))
        try:
            cuts = unordered_cuts(sql)
        except sqlglot.errors.SqlglotError:
            cuts = []  # the guard's parser decides; the self-grade reports a refusal
        if cuts:
            findings[case.id].append(Finding.of(
                "limit_without_order", f"{', '.join(cuts)} without ORDER BY in the same query: "
                "which rows it keeps is up to the database; add an ORDER BY", label))

    # clock: run again with the clock moved, compare with the question's wording
    if progress:
        progress("clock", 0, 1)
    con = open_readonly(serving)
    try:
        for c in todo:
            findings[c.id].extend(_clock_check(con, c, [c.reference_sql, *c.alternative_sqls],
                                               as_of, shifts_days))
    finally:
        con.close()

    audits = [CaseAudit(case_id=c.id, readings=1 + len(c.alternative_sqls), findings=findings[c.id])
              for c in todo]
    return AuditReport(snapshot_id=snapshot_id, as_of=as_of, runs=runs, shifts_days=list(shifts_days),
                       row_cap=row_cap, near_cap_rows=near, cases=audits, skipped=skipped,
                       queries=len(readings) * runs, seconds=round(time.perf_counter() - started, 3))


__all__ = ["AUDIT_CONFIG", "CODES", "AuditReport", "CaseAudit", "Finding", "Skipped", "audit_cases",
           "relative_time_phrase", "unordered_cuts", "weak_result"]
