"""The two readings on whole columns (docs/grading.md).

- exact (:func:`_compare_exact`): the same number of columns compared by position;
- got-the-facts (:func:`_compare_facts`): every expected column matched by a distinct
  candidate column, found by a backtracking search pruned by column signatures.
"""

from __future__ import annotations

import numpy as np

from sqleval_pipeline.grading.bags import _bags, _card, _Match, _match_rows, _Rows
from sqleval_pipeline.grading.columns import _Col, _rigid, _Snap, _snap
from sqleval_pipeline.grading.explain import _first_out_of_order, _fmt, _mismatch_text
from sqleval_pipeline.grading.values import ABS_TOL, REL_TOL
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.errors import SqlevalError


def _compare_exact(expected: ResultSet, got: ResultSet, ecols, gcols, seg) -> tuple[bool, str, str | None]:
    ne, ng = len(expected.columns), len(got.columns)
    if ne != ng:
        extra = f"candidate has {ng - ne} extra" if ng > ne else f"candidate lacks {ne - ng}"
        return False, "column_count", f"expected {ne} columns, got {ng} ({extra} column(s))"
    n_e, n_g = len(expected.rows), len(got.rows)
    if n_e != n_g:
        return False, "row_count", f"expected {n_e} rows, got {n_g}"
    ident = list(range(ne))
    m = _match_rows(expected, got, ecols, gcols, ident, False, seg)
    if m.ok:
        return True, "match", None
    if seg is not None:
        m2 = _match_rows(expected, got, ecols, gcols, ident, False, None)
        if m2.ok:
            snaps = [_snap(ec, gc, False) for ec, gc in zip(ecols, gcols, strict=True)]
            first = _first_out_of_order(expected, got, snaps, seg)
            return False, "order", f"same rows in a different order{first}"
        m = m2
    return False, "values", _mismatch_text(expected, got, ecols, gcols, ident, m)


def _num_compatible(ec: _Col, gc: _Col) -> bool:
    """Necessary condition on numbers: sorted values pair up within the widest facts bound."""
    a, b = ec.numeric(), gc.numeric()
    if len(a) != len(b):
        return False
    if not len(a):
        return True
    out = _sorted_compatible(ec, a, b, _rigid(ec, gc, True))
    assert out is not None
    return out


def _sorted_compatible(ec: _Col, a: np.ndarray, b: np.ndarray, rigid: bool | None) -> bool | None:
    """:func:`_num_compatible` on the sorted numbers ``a`` (of ``ec``) and ``b`` (same length,
    not empty). ``rigid`` is ``_rigid(ec, gc, True)``; None when unknown: the answer is then
    None unless both readings agree."""
    fin_a, fin_b = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(a[~fin_a], b[~fin_b]) and (np.any(~fin_a) or np.any(~fin_b)):
        # infinities must coincide (NaN keys are non-numeric and handled by the signature)
        return False
    a, b = a[fin_a], b[fin_b]
    if len(a) != len(b):
        return False
    if rigid or rigid is None:
        equal = bool(np.array_equal(a, b))
        if rigid or equal:
            return equal
    bound = np.maximum(ABS_TOL, REL_TOL * (np.maximum(np.abs(a), np.abs(b)) + 0.02)) * 1.001
    if ec.nonint:
        bound = bound + 0.005 * (1 + 1e-9)
    within = bool(np.all(np.abs(a - b) <= bound))
    if rigid is None and within:
        return None  # equal as a tolerant pair, not as a rigid one
    return within


def _compatible(ec: _Col, gc: _Col) -> bool:
    hs_e, nn_e, non_e = ec.signature()
    hs_g, nn_g, non_g = gc.signature()
    if nn_e != nn_g or hs_e != hs_g or non_e != non_g:
        return False
    return _num_compatible(ec, gc)


#: above this many rows a lone tolerant column is not matched on its own while searching
#: (only the signatures prune; the full check at each complete assignment decides)
_SINGLE_TOLERANT_MAX_ROWS = 20_000


def _compare_facts(expected: ResultSet, got: ResultSet, ecols, gcols, seg) -> tuple[bool, str, str | None, tuple[int, ...] | None]:
    ne, ng = len(ecols), len(gcols)
    n_e, n_g = len(expected.rows), len(got.rows)
    if n_e != n_g:
        return False, "row_count", f"expected {n_e} rows, got {n_g}", None
    if ng < ne:
        return False, "missing_column", f"expected {ne} columns, candidate has only {ng}", None
    if ne == 0:
        return True, "match", None, ()
    cands: list[list[int]] = []
    for i, ec in enumerate(ecols):
        c = [j for j, gc in enumerate(gcols) if _compatible(ec, gc)]
        if not c:
            sample = ", ".join(dict.fromkeys(_fmt(r[i]) for r in expected.rows[:5]))
            return (
                False,
                "missing_column",
                f"no candidate column holds the values of expected column {expected.columns[i]!r}"
                f" (e.g. {sample})",
                None,
            )
        cands.append(c)
    gident = [gc.ident() for gc in gcols]
    eident = [ec.ident() for ec in ecols]
    order = sorted(range(ne), key=lambda i: (len(cands[i]), eident[i], i))
    base = _Rows(n_e, n_g)
    if seg is not None:
        base = base.add(seg, seg, int(seg.max(initial=-1)) + 1)
    snap_cache: dict[tuple[int, int, bool], _Snap] = {}
    single_ok: dict[tuple[int, int, bool], bool] = {}

    def snap(i: int, j: int, exact_only: bool) -> _Snap:
        key = (i, j, exact_only)
        s = snap_cache.get(key)
        if s is None:
            s = snap_cache[key] = _snap(ecols[i], gcols[j], True, exact_only)
        return s

    def rigid(i: int, j: int) -> bool:
        return _rigid(ecols[i], gcols[j], True)

    def single(i: int, j: int, exact_only: bool) -> bool:
        key = (i, j, exact_only)
        if key not in single_ok:
            if not exact_only and single_ok.get((i, j, True)):
                single_ok[key] = True  # an exact-key match is also a match under the tolerance
            elif exact_only or rigid(i, j):
                single_ok[key] = _bags(base, [snap(i, j, True)])[0]
            elif n_e <= _SINGLE_TOLERANT_MAX_ROWS:
                single_ok[key] = _match_rows(expected, got, ecols, gcols, [j], True, seg, eidx=[i]).ok
            else:
                single_ok[key] = True  # not decided alone: the complete assignment is checked
        return single_ok[key]

    assign: dict[int, int] = {}
    used: set[int] = set()
    budget = [0]
    failed_leaf: list[tuple[list[int], _Match]] = []

    def search(depth: int, rows: _Rows, exact_only: bool) -> bool:
        if depth == ne:
            if exact_only:
                return True  # every column was added to ``rows`` and the bags are equal
            gmap = [assign[i] for i in range(ne)]
            m = _match_rows(expected, got, ecols, gcols, gmap, True, seg)
            if not m.ok and not failed_leaf:
                failed_leaf.append((gmap, m))
            return m.ok
        i = order[depth]
        tried: dict[int, list[int]] = {}
        prev_same = None
        p = order[depth - 1] if depth else None
        if p is not None and eident[p] == eident[i] and tuple(ecols[p].keys) == tuple(ecols[i].keys):
            prev_same = assign[p]  # identical expected columns: assign in increasing order
        for j in cands[i]:
            if j in used or (prev_same is not None and j < prev_same):
                continue
            if any(tuple(gcols[t].keys) == tuple(gcols[j].keys) for t in tried.get(gident[j], ())):
                continue  # identical to a candidate column that already failed here
            budget[0] += 1
            if budget[0] > 200_000:
                raise _SearchBudget
            if not single(i, j, exact_only):
                continue
            tried.setdefault(gident[j], []).append(j)  # an identical column would fail the same way
            if exact_only or rigid(i, j):
                s = snap(i, j, True)
                nxt_rows = rows.add(s.exp, s.got, _card(s))
                if not nxt_rows.bag_equal():
                    continue
            else:
                nxt_rows = rows  # tolerant column: decided with the complete assignment
            assign[i] = j
            used.add(j)
            if search(depth + 1, nxt_rows, exact_only):
                return True
            used.discard(j)
            del assign[i]
        return False

    modes = (True, False) if any(ec.tol for ec in ecols) else (True,)
    found = False
    try:
        for exact_only in modes:
            assign.clear()
            used.clear()
            if search(0, base, exact_only):
                found = True
                break
    except _SearchBudget:  # pragma: no cover - pathological inputs only
        found = False
    if found:
        return True, "match", None, tuple(assign[i] for i in range(ne))
    last = modes[-1]
    lonely = [expected.columns[i] for i in range(ne) if not any(single(i, j, last) for j in cands[i])]
    unordered = seg is not None and _compare_facts(expected, got, ecols, gcols, None)[0]
    if unordered:
        return False, "order", "the expected columns are present but rows come in a different order", None
    if lonely:
        return (
            False,
            "missing_column",
            f"no candidate column matches expected column(s) {', '.join(map(repr, lonely))}",
            None,
        )
    if failed_leaf:
        gmap, m = failed_leaf[0]
        if gmap == list(range(ne)) and ng == ne:
            # the natural assignment: the exact reading already describes the differing rows
            return False, "no_alignment", None, None
        return (
            False,
            "no_alignment",
            f"no column assignment lines the rows up; with candidate columns {gmap}: "
            + _mismatch_text(expected, got, ecols, gcols, gmap, m),
            None,
        )
    return (
        False,
        "no_alignment",
        "every expected column has a matching candidate column on its own, but no assignment "
        "lines the rows up (values paired with the wrong rows, e.g. columns sorted independently)",
        None,
    )


class _SearchBudget(SqlevalError):
    pass
