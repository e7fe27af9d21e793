"""Comparisons and outcomes (docs/grading.md): :func:`compare` (both readings, through the
fast paths, and ties at a LIMIT cut), :func:`compare_any` over accepted results, and
:func:`grade_attempt` (the outcome table)."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sqleval_pipeline.grading.bags import _segments
from sqleval_pipeline.grading.columns import _columns
from sqleval_pipeline.grading.fast import _close_residue, _facts_missing_column, _Fast, _fast_exact, _subset
from sqleval_pipeline.grading.matching import _compare_exact, _compare_facts
from sqleval_pipeline.grading.ties import Cut, Shape, case_shapes, merged_groups, selections
from sqleval_pipeline.grading.values import GRADER_VERSION
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.results import ResultSet

if TYPE_CHECKING:  # pragma: no cover
    from sqleval_pipeline.golden.model import Case


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Comparison:
    """Both readings of one comparison, with reason codes and an actionable description.

    ``exact_reason``: match | column_count | row_count | values | order.
    ``facts_reason``: match | row_count | missing_column | no_alignment | order.
    ``column_map[i]`` is the candidate column matched to expected column ``i`` (got-the-facts).
    """

    exact: bool
    facts: bool
    exact_reason: str
    facts_reason: str
    column_map: tuple[int, ...] | None = None
    mismatch: str | None = None
    alternative: int | None = None

    @property
    def reason(self) -> str:
        if self.exact:
            return "match"
        if self.facts:
            return f"facts_only:{self.exact_reason}"
        return self.facts_reason if self.exact_reason == "column_count" else self.exact_reason


# --------------------------------------------------------------------------- residue path
# (how the residue is closed and why that is safe: sqleval_pipeline/grading/fast.py)

#: results with fewer rows go straight to the full comparison
_RESIDUE_MIN_ROWS = 2_000
#: give up on the residue path when the residue exceeds this fraction of the rows
_RESIDUE_MAX_FRACTION = 0.05


def _compare_residue(expected: ResultSet, got: ResultSet, fast: _Fast) -> Comparison | None:
    """Both readings from the residue of the raw-row pass (None: use the full comparison)."""
    assert fast.res_e is not None and fast.res_g is not None
    n = len(expected.rows)
    if n < _RESIDUE_MIN_ROWS or len(fast.res_e) > _RESIDUE_MAX_FRACTION * n or not len(expected.columns):
        return None
    kept = _close_residue(expected, got, fast.res_e, fast.res_g, fast.lead)
    if kept is None:
        return None
    sub_e, sub_g = _subset(expected, kept[0]), _subset(got, kept[1])
    ecols, gcols = _columns(sub_e), _columns(sub_g)
    exact, exact_reason, exact_msg = _compare_exact(sub_e, sub_g, ecols, gcols, None)
    if exact:
        return Comparison(True, True, "match", "match", tuple(range(len(ecols))), None)
    facts_msg = _facts_missing_column(expected, got, fast.res_e, fast.res_g)
    if facts_msg is None:
        # got-the-facts needs the full column search
        facts, facts_reason, facts_msg, cmap = _compare_facts(expected, got, _columns(expected), _columns(got), None)
    else:
        facts, facts_reason, cmap = False, "missing_column", None
    return _comparison(False, facts, exact_reason, facts_reason, cmap, exact_msg, facts_msg)


def _comparison(exact: bool, facts: bool, exact_reason: str, facts_reason: str, cmap, exact_msg, facts_msg
                ) -> Comparison:
    if facts:
        msg = f"exact: {exact_msg}; got-the-facts passes with columns {list(cmap or ())}"
    elif exact_msg == facts_msg or facts_msg is None:
        msg = exact_msg
    else:
        msg = f"exact: {exact_msg}; got-the-facts: {facts_msg}"
    return Comparison(False, facts, exact_reason, facts_reason, cmap, msg)


def compare(
    expected: ResultSet,
    got: ResultSet,
    order_matters: bool = False,
    order_keys: Sequence[str] = (),
    *,
    order_groups: Sequence[int] | None = None,
    cuts: Sequence[Cut] = (),
) -> Comparison:
    """Compare a candidate result with an expected one under both rules (see module doc).

    ``order_groups`` (rank group per expected row) replaces ``order_keys`` when given: rows of
    one group may come in any order. ``cuts`` are the ties at a LIMIT cut of the expected
    result (:mod:`~sqleval_pipeline.grading.ties`): the expected rows of a cut may be any of
    its tied rows.

    >>> e = ResultSet(columns=["k", "v"], types=["VARCHAR", "BIGINT"], rows=[["a", 1], ["b", 1]])
    >>> g = ResultSet(columns=["k", "v"], types=["VARCHAR", "BIGINT"], rows=[["b", 1], ["a", 1]])
    >>> compare(e, g).exact, compare(e, g, order_matters=True).exact
    (True, False)
    >>> compare(e, g, order_matters=True, order_keys=["v"]).exact  # tied on v: any order
    True
    >>> compare(e, g, order_matters=True, order_groups=[0, 0]).exact  # the same, by rank groups
    True
    >>> top = ResultSet(columns=["k"], types=["VARCHAR"], rows=[["a"]])  # LIMIT 1 of a, c tied
    >>> other = ResultSet(columns=["k"], types=["VARCHAR"], rows=[["c"]])
    >>> compare(top, other).exact, compare(top, other, cuts=[Cut(0, 1, [["a"], ["c"]])]).exact
    (False, True)
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # many short-lived tuples and no cycles: the collector only costs time here
    try:
        c = _compare(expected, got, order_matters, order_keys, order_groups)
        if cuts and not c.exact:
            c = _compare_cuts(expected, got, order_matters, order_keys, order_groups, cuts, c)
        return c
    finally:
        if gc_was_enabled:
            gc.enable()


def _compare_cuts(expected: ResultSet, got: ResultSet, order_matters: bool, order_keys: Sequence[str],
                  order_groups: Sequence[int] | None, cuts: Sequence[Cut], first: Comparison) -> Comparison:
    """Compare ``got`` with the expected result whose cut rows are the tied rows that best match
    it (:func:`~sqleval_pipeline.grading.ties.selections`): each such result is a right answer,
    so the ordinary comparison decides. An exact pass wins; else a facts pass (the frozen rows'
    first); else the comparison with the closest right answer, its mismatch noting the tie."""
    if len(got.rows) != len(expected.rows):
        return first  # the LIMIT keeps the row count whichever tied rows it keeps
    groups: list[int] | None = None
    if order_matters:
        base = (list(order_groups) if order_groups is not None
                else _segments(expected, _columns(expected), order_keys).tolist())
        groups = merged_groups(base, cuts)
    best = first
    closest: Comparison | None = None  # against the tied rows closest to the candidate's
    for rows in selections(expected, got, cuts):
        alt = ResultSet(columns=expected.columns, types=expected.types, rows=rows)
        c = _compare(alt, got, order_matters, (), groups)
        if c.exact:
            return c
        if closest is None:
            closest = c
        if c.facts and not best.facts:
            best = c
    if best.facts:
        return best
    # nothing passes: report against the closest right answer (its reason, e.g. ``order``, and
    # its row differences describe the candidate better than the frozen rows do)
    worst = closest or first
    ties = "; ".join(
        (f"row {c.before + 1}" if c.take == 1 else f"rows {c.before + 1}-{c.before + c.take}")
        + f" may be any {c.take} of the {len(c.pool)} recorded rows tied at the cut"
        + (" (the group has more, not recorded: those are not accepted)" if c.truncated else "")
        for c in cuts)
    text = f"{worst.mismatch} ({ties}; no choice of them matches)" if worst.mismatch else (
        f"{ties}; no choice of them matches")
    return Comparison(worst.exact, worst.facts, worst.exact_reason, worst.facts_reason, worst.column_map, text,
                      first.alternative)


def _compare(expected: ResultSet, got: ResultSet, order_matters: bool, order_keys: Sequence[str],
             order_groups: Sequence[int] | None = None) -> Comparison:
    fast = _fast_exact(expected, got, order_matters)
    if fast.ok:
        return Comparison(True, True, "match", "match", tuple(range(len(expected.columns))), None)
    if fast.res_e is not None:
        c = _compare_residue(expected, got, fast)
        if c is not None:
            return c
    ecols = _columns(expected)
    gcols = _columns(got)
    seg = None
    if order_matters:
        seg = _segments(expected, ecols, order_keys) if order_groups is None else _groups(expected, order_groups)
    if seg is not None and len(expected.rows) != len(got.rows):
        seg = None  # row counts differ: reported as such below
    exact, exact_reason, exact_msg = _compare_exact(expected, got, ecols, gcols, seg)
    if exact:
        return Comparison(True, True, "match", "match", tuple(range(len(ecols))), None)
    facts, facts_reason, facts_msg, cmap = _compare_facts(expected, got, ecols, gcols, seg)
    return _comparison(False, facts, exact_reason, facts_reason, cmap, exact_msg, facts_msg)


def _groups(expected: ResultSet, order_groups: Sequence[int]) -> np.ndarray:
    if len(order_groups) != len(expected.rows):
        raise ValueError(f"order_groups has {len(order_groups)} entries for {len(expected.rows)} expected "
                         "rows: re-freeze the case")
    return np.asarray(order_groups, dtype=np.int64)


def compare_any(
    accepted: Sequence[ResultSet], got: ResultSet, order_matters: bool = False, order_keys: Sequence[str] = (),
    shapes: Sequence[Shape | None] | None = None,
) -> Comparison:
    """Compare against every accepted result; an exact pass anywhere beats a facts pass.

    ``shapes[i]`` (optional) is the tie structure of ``accepted[i]`` (rank groups, ties at a
    LIMIT cut; :func:`~sqleval_pipeline.grading.ties.case_shapes`). The returned comparison
    records the index of the accepted result used (``alternative``); when nothing passes it is
    the comparison with the primary reading.
    """
    if not accepted:
        raise ValueError("no accepted result to compare with")
    best: Comparison | None = None
    for idx, exp in enumerate(accepted):
        keys = [k for k in order_keys if k in exp.columns] if idx else order_keys
        shape = shapes[idx] if shapes is not None and idx < len(shapes) else None
        if shape is None:
            c = compare(exp, got, order_matters, keys)
        else:
            c = compare(exp, got, order_matters, keys, order_groups=shape.order_groups, cuts=shape.cuts)
        c = Comparison(c.exact, c.facts, c.exact_reason, c.facts_reason, c.column_map, c.mismatch, idx)
        if c.exact:
            return c
        if best is None or (c.facts and not best.facts):
            best = c
    assert best is not None
    return best


def grade_against(case: Case, got: ResultSet) -> Comparison:
    """Compare ``got`` with every accepted result of ``case`` (passing any one passes), with
    the ties recorded when it was frozen (rank groups, ties at a LIMIT cut)."""
    return compare_any(case.accepted_results(), got, case.order_matters, case.order_keys, case_shapes(case))


# --------------------------------------------------------------------------- outcomes


def grade_attempt(
    case: Case, attempt: Attempt, execution: Execution | None, *, grader_version: str = GRADER_VERSION
) -> Grade:
    """The outcome of one attempt (outcome table, docs/grading.md), with the reason kept.

    - provider/harness errors → ERROR (outside the denominator);
    - should-refuse case: a refusal → DEFERRED_CORRECTLY, any SQL → WRONG (even when the
      guard then blocked it: the system did not decline);
    - answerable case: a refusal → DEFERRED_WRONGLY; guard refusal, timeout, SQL error or a
      truncated result → WRONG; rows → CORRECT / CORRECT_FACTS / WRONG by :func:`compare`;
    - a case without a frozen expected result gets no outcome (execution-only score);
    - a ``generated`` or ``unverified`` case (not reviewed yet) never gets an outcome:
      execution-only, whatever its attempt did.
    """
    if attempt.key[1] != case.id:
        raise ValueError(f"attempt is for case {attempt.case_id!r}, not {case.id!r}")
    if execution is not None and execution.key != attempt.key:
        raise ValueError(f"execution {execution.key} does not belong to attempt {attempt.key}")
    meta = {
        "config_version": attempt.config_version,
        "case_id": attempt.case_id,
        "run_index": attempt.run_index,
        "grader_version": grader_version,
        "band": case.band,
        "difficulty": case.difficulty,
        "split": case.split,
        "cluster": case.cluster,
        "case_status": case.status,
        "snapshot_id": case.snapshot_id,
        "facets": dict(case.facets),
        "tags": list(case.tags),
        "inferred": list(case.inferred),
    }

    def g(outcome, reason, **kw) -> Grade:
        return Grade(outcome=outcome, reason=reason, **meta, **kw)

    if attempt.kind == "error":
        return g("ERROR", f"provider_error:{attempt.error_code}", mismatch=attempt.error_message)
    if attempt.kind == "sql":
        if execution is None:
            return g("ERROR", "harness_error:no_execution", mismatch="no execution record for this attempt")
        if execution.status == "error" and execution.error_source == "harness":
            return g("ERROR", f"harness_error:{execution.error_code or 'unknown'}", mismatch=execution.error_message)
    executed = None if attempt.kind != "sql" else execution.status == "ok"  # type: ignore[union-attr]

    if case.status in ("generated", "unverified"):
        # not reviewed (machine-written or imported without a reviewer): never graded,
        # whatever it holds (even a frozen result nobody checked); every attempt
        # goes to the execution-only line and none to an accuracy (docs/golden-set.md)
        if executed:
            return g(None, "unverified_execution_only", executed=True)
        how = "declined" if attempt.kind == "refusal" else execution.status  # type: ignore[union-attr]
        return g(None, f"generated_not_executed:{how}", executed=executed)

    if not case.answerable:
        if attempt.kind == "refusal":
            return g("DEFERRED_CORRECTLY", "declined", mismatch=None)
        assert execution is not None
        if execution.status == "refused":
            return g(
                "WRONG",
                f"answered_should_refuse:guard_blocked:{execution.layer}:{execution.reason}",
                mismatch=f"the system answered; the guard ({execution.layer}) blocked it: {execution.message or execution.reason}",
                executed=executed,
            )
        return g("WRONG", "answered_should_refuse", mismatch="the system answered a question it should have declined", executed=executed)

    if attempt.kind == "refusal":
        return g("DEFERRED_WRONGLY", "over_refusal", mismatch=attempt.refusal_reason)
    assert execution is not None
    if execution.status == "refused":
        return g(
            "WRONG", f"guard_refused:{execution.layer}:{execution.reason}", mismatch=execution.message, executed=False
        )
    if execution.status == "timeout":
        return g("WRONG", "timeout", mismatch=execution.message or "execution time cap reached", executed=False)
    if execution.status == "error":
        return g("WRONG", f"sql_error:{execution.error_code or 'unknown'}", mismatch=execution.error_message, executed=False)
    accepted = case.accepted_results()
    if not accepted:
        return g(None, "unverified_execution_only", executed=True)
    assert execution.result is not None
    if execution.truncated:
        return g(
            "WRONG", "result_truncated", exact=False, facts=False, executed=True,
            mismatch=f"result truncated at {execution.result.row_count} rows by the result cap",
        )
    c = compare_any(accepted, execution.result, case.order_matters, case.order_keys, case_shapes(case))
    if c.exact:
        return g("CORRECT", "match", exact=True, facts=True, alternative=c.alternative, executed=True)
    if c.facts:
        return g(
            "CORRECT_FACTS", f"facts_only:{c.exact_reason}", exact=False, facts=True,
            alternative=c.alternative, mismatch=c.mismatch, executed=True,
        )
    return g(
        "WRONG", f"result_mismatch:{c.facts_reason if c.exact_reason == 'column_count' else c.exact_reason}",
        exact=False, facts=False, mismatch=c.mismatch, executed=True,
    )
