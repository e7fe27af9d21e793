"""Human explanations of a mismatch: formatted values, example rows and per-column hints."""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from typing import Any

import numpy as np

from sqleval_pipeline.grading.bags import _bags, _card, _Match, _Rows, _unmatched
from sqleval_pipeline.grading.columns import _Col, _rigid, _snap
from sqleval_pipeline.results import ResultSet

#: whether a mismatch is explained (False inside :func:`verdicts_only`)
_EXPLAIN: ContextVar[bool] = ContextVar("sqleval_explain_mismatches", default=True)
#: the mismatch text of a comparison made inside :func:`verdicts_only`
NOT_EXPLAINED = "rows differ (not explained: only the verdict was asked for)"


@contextmanager
def verdicts_only() -> Iterator[None]:
    """Comparisons made inside (in this thread or task) skip the example rows and column hints
    of a mismatch, whose text is then :data:`NOT_EXPLAINED`; the verdicts are the same. For
    callers that keep only whether a result passes (distillation runs thousands of mutants,
    and explaining them was two fifths of comparing them)."""
    token = _EXPLAIN.set(False)
    try:
        yield
    finally:
        _EXPLAIN.reset(token)


def _fmt(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, Decimal):
        return f"{v}"
    if isinstance(v, _dt.date | _dt.time):
        return v.isoformat()
    return repr(v)


def _fmt_row(row: Sequence[Any]) -> str:
    return "(" + ", ".join(_fmt(v) for v in row) + ")"


def _row_diff_examples(expected: ResultSet, got: ResultSet, rows: _Rows, limit: int = 3) -> str:
    e, g = rows.e, rows.g
    u, inv = np.unique(np.concatenate([e, g]), return_inverse=True)
    ce = np.bincount(inv[: len(e)], minlength=len(u))
    cg = np.bincount(inv[len(e):], minlength=len(u))
    surplus_e = np.maximum(ce - cg, 0)
    surplus_g = np.maximum(cg - ce, 0)
    n_missing, n_extra = int(surplus_e.sum()), int(surplus_g.sum())
    miss_idx = _surplus_rows(inv[: len(e)], surplus_e, limit)
    extra_idx = _surplus_rows(inv[len(e):], surplus_g, limit)
    parts = [f"{n_missing} expected row(s) missing, {n_extra} unexpected row(s)"]
    if miss_idx:
        parts.append("missing e.g. " + "; ".join(_fmt_row(expected.rows[i]) for i in miss_idx))
    if extra_idx:
        parts.append("unexpected e.g. " + "; ".join(_fmt_row(got.rows[i]) for i in extra_idx))
    return "; ".join(parts)


def _surplus_rows(codes: np.ndarray, surplus: np.ndarray, limit: int) -> list[int]:
    """First rows (at most ``limit``) that are not matched, honouring each code's surplus."""
    left = surplus.copy()
    out: list[int] = []
    for i in np.flatnonzero(surplus[codes] > 0):
        if left[codes[i]] > 0:
            left[codes[i]] -= 1
            out.append(int(i))
            if len(out) >= limit:
                break
    return out


def _column_hints(expected: ResultSet, got: ResultSet, ecols: list[_Col], gcols: list[_Col],
                  gmap: Sequence[int], e_idx: np.ndarray, g_idx: np.ndarray, limit: int = 3) -> list[str]:
    """Per-column hints computed on the unmatched rows only (``e_idx`` / ``g_idx``)."""
    hints: list[str] = []
    e_idx, g_idx = e_idx[:_HINT_ROWS], g_idx[:_HINT_ROWS]
    if not len(e_idx) and not len(g_idx):
        return hints
    ei, gi = e_idx.tolist(), g_idx.tolist()
    for i, ec in enumerate(ecols):
        j = gmap[i]
        gc = gcols[j]
        sub_e = _Col([expected.rows[r][i] for r in ei])
        sub_g = _Col([got.rows[r][j] for r in gi])
        if len(ei) == len(gi):
            if _bags(_Rows(len(ei), len(gi)), [_snap(sub_e, sub_g, False, exact_only=True)])[0]:
                continue
            if not _rigid(sub_e, sub_g, False) and _bags(_Rows(len(ei), len(gi)), [_snap(sub_e, sub_g, False)])[0]:
                continue
        ev, gv = Counter(sub_e.keys), Counter(sub_g.keys)
        first_e = {k: r for k, r in zip(reversed(sub_e.keys), reversed(ei), strict=True)}
        first_g = {k: r for k, r in zip(reversed(sub_g.keys), reversed(gi), strict=True)}
        only_e = [_fmt(expected.rows[first_e[k]][i]) for k in ev if k not in gv][:limit]
        only_g = [_fmt(got.rows[first_g[k]][j]) for k in gv if k not in ev][:limit]
        name = expected.columns[i]
        msg = f"column {i + 1} ({name!r}) differs"
        if only_e or only_g:
            msg += f": expected values like {', '.join(only_e) or '-'}, got {', '.join(only_g) or '-'}"
        elif ev.keys() == gv.keys():
            msg += ": same values, different counts"
        tg = got.types[j] if j < len(got.types) else "?"
        if expected.types[i] != tg:
            msg += f" (types {expected.types[i]} vs {tg})"
        hints.append(msg)
    return hints


_HINT_ROWS = 5000


def _mismatch_text(expected: ResultSet, got: ResultSet, ecols, gcols, gmap, m: _Match) -> str:
    if not _EXPLAIN.get():
        return NOT_EXPLAINED
    parts = []
    if m.diag is not None:
        parts.append(_row_diff_examples(expected, got, m.diag))
        e_idx, g_idx = _unmatched(m.diag)
        parts.extend(_column_hints(expected, got, ecols, gcols, gmap, e_idx, g_idx))
    return "; ".join(parts) or "rows differ"


def _first_out_of_order(expected, got, snaps, seg) -> str:
    # first position whose candidate row cannot belong to the expected tie group at that position
    for s in snaps:
        if s.amb:
            return ""
    rows = _Rows(len(seg), len(seg))
    for s in snaps:
        rows = rows.add(s.exp, s.got, _card(s))
    e, g = rows.e, rows.g
    start = 0
    n = len(seg)
    while start < n:
        end = start
        while end < n and seg[end] == seg[start]:
            end += 1
        if not np.array_equal(np.sort(e[start:end]), np.sort(g[start:end])):
            left = Counter(e[start:end].tolist())
            pos = start
            for p in range(start, end):
                if left[int(g[p])] > 0:
                    left[int(g[p])] -= 1
                else:
                    pos = p
                    break
            tie = f" (rows {start + 1}-{end} are tied on the order keys)" if end - start > 1 else ""
            return (
                f": first misplaced row at position {pos + 1}: expected {_fmt_row(expected.rows[pos])}, "
                f"got {_fmt_row(got.rows[pos])}{tie}"
            )
        start = end
    return ""
