"""Multisets of rows (docs/grading.md).

Integer row codes combined column by column (:class:`_Rows`), multiset equality with ambiguous
candidate values (maximum flow), the order tie groups, and :func:`_match_rows`: do the candidate
rows, on a given assignment of columns, equal the expected rows as a multiset?
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sqleval_pipeline.grading.columns import _Col, _rigid, _Snap, _snap, column
from sqleval_pipeline.grading.values import _rounding_matches, within
from sqleval_pipeline.results import ResultSet


# --------------------------------------------------------------------------- multisets of rows

_LIMIT = 1 << 62


def _refactor(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    u, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    inv = inv.astype(np.int64, copy=False)
    return inv[: len(a)], inv[len(a):], len(u)


class _Rows:
    """Incrementally combined integer row codes for the expected and candidate sides."""

    __slots__ = ("e", "g", "bound")

    def __init__(self, n_e: int, n_g: int):
        self.e = np.zeros(n_e, dtype=np.int64)
        self.g = np.zeros(n_g, dtype=np.int64)
        self.bound = 1

    def add(self, ce: np.ndarray, cg: np.ndarray, card: int) -> _Rows:
        """Return a new state with one more column (codes in [-2, card))."""
        width = card + 3
        e, g, bound = self.e, self.g, self.bound
        if bound * width >= _LIMIT:
            e, g, bound = _refactor(e, g)
        out = _Rows.__new__(_Rows)
        out.e = e * width + (ce + 2)
        out.g = g * width + (cg + 2)
        out.bound = bound * width
        return out

    def bag_equal(self) -> bool:
        return len(self.e) == len(self.g) and np.array_equal(np.sort(self.e), np.sort(self.g))


def _bag_equal_ambiguous(base: _Rows, snaps: list[_Snap]) -> bool:
    """Multiset equality when some candidate values are compatible with several expected codes.

    Rows are keyed by their codes on the unambiguous columns; expected rows add their codes on
    the ambiguous columns (a *pattern*), candidate rows their sets of compatible codes. A
    candidate row may take an expected row with the same key whose pattern lies in the product
    of its sets. Identical patterns and identical candidate sets are aggregated and a perfect
    assignment is decided by maximum flow (scipy, Dinic): source → candidate groups (their
    counts) → compatible expected patterns → sink (their multiplicities).
    """
    # scipy.sparse (~0.2 s to import): only for the bags that need a maximum flow
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    plain = base
    amb_snaps = [s for s in snaps if s.amb]
    for s in snaps:
        if not s.amb:
            plain = plain.add(s.exp, s.got, _card(s))
    if len(plain.e) != len(plain.g):
        return False
    if not np.array_equal(np.sort(plain.e), np.sort(plain.g)):
        return False  # the unambiguous columns alone already differ
    right = Counter(zip(plain.e.tolist(), *(s.exp.tolist() for s in amb_snaps), strict=True))
    amb_rows = sorted(set().union(*(s.amb.keys() for s in amb_snaps)))
    concrete = np.ones(len(plain.g), dtype=bool)
    concrete[amb_rows] = False
    # rows without an ambiguous value can only take identical expected rows: assign them first
    for key, cnt in Counter(zip(plain.g[concrete].tolist(), *(s.got[concrete].tolist() for s in amb_snaps),
                                strict=True)).items():
        have = right.get(key, 0)
        if have < cnt:
            return False
        right[key] = have - cnt
    right = Counter({k: v for k, v in right.items() if v > 0})
    left: Counter = Counter()
    for r in amb_rows:
        left[(int(plain.g[r]), *((s.amb[r] if r in s.amb else (int(s.got[r]),)) for s in amb_snaps))] += 1
    if sum(left.values()) != sum(right.values()):
        return False
    if not left:
        return True
    pg = amb_rows
    r_index = {k: i for i, k in enumerate(right)}
    nl, nr = len(left), len(right)
    src, sink = 0, 1 + nl + nr
    rows_, cols_, caps = [], [], []
    for li, (key, cnt) in enumerate(left.items()):
        rows_.append(src)
        cols_.append(1 + li)
        caps.append(cnt)
        n_edges = 0
        for combo in itertools.product(*key[1:]):
            ri = r_index.get((key[0], *combo))
            if ri is not None:
                rows_.append(1 + li)
                cols_.append(1 + nl + ri)
                caps.append(cnt)
                n_edges += 1
        if n_edges == 0:
            return False
    for ri, cnt in enumerate(right.values()):
        rows_.append(1 + nl + ri)
        cols_.append(sink)
        caps.append(cnt)
    graph = csr_matrix((np.asarray(caps, dtype=np.int32), (rows_, cols_)), shape=(sink + 1, sink + 1))
    flow = maximum_flow(graph, src, sink, method="dinic").flow_value
    return int(flow) == len(pg)


def _approx_rows(base: _Rows, snaps: list[_Snap]) -> _Rows:
    """Row codes with each ambiguous candidate value given its smallest compatible code
    (for mismatch examples only; never for a verdict)."""
    rows = base
    for s in snaps:
        got = s.got
        if s.amb:
            got = got.copy()
            for r, cands in s.amb.items():
                got[r] = (s.guess or {}).get(r, min(cands))
        rows = rows.add(s.exp, got, _card(s))
    return rows


def _card(s: _Snap) -> int:
    return int(max(s.exp.max(initial=-1), s.got.max(initial=-1))) + 1


def _bags(base: _Rows, snaps: list[_Snap]) -> tuple[bool, _Rows | None]:
    if any(s.amb for s in snaps):
        return _bag_equal_ambiguous(base, snaps), None
    rows = base
    for s in snaps:
        rows = rows.add(s.exp, s.got, _card(s))
    return rows.bag_equal(), rows


# --------------------------------------------------------------------------- order


def _segments(expected: ResultSet, ecols: list[_Col], order_keys: Sequence[str]) -> np.ndarray:
    """Tie-group id per expected row: consecutive rows equal on ``order_keys`` share one."""
    n = len(expected.rows)
    if not order_keys:
        return np.arange(n, dtype=np.int64)
    idx = []
    for k in order_keys:
        if k not in expected.columns:
            raise ValueError(
                f"order key {k!r} is not an expected column {expected.columns}: re-freeze the case"
            )
        idx.append(expected.columns.index(k))
    keys = list(zip(*(ecols[i].keys for i in idx), strict=True))
    seg = np.empty(n, dtype=np.int64)
    cur = -1
    prev: Any = object()
    for r, k in enumerate(keys):
        if k != prev:
            cur += 1
            prev = k
        seg[r] = cur
    return seg


# --------------------------------------------------------------------------- matching rows


@dataclass
class _Match:
    ok: bool
    diag: _Rows | None = None  # row codes whose bag difference names the unmatched rows
    exact_snaps: list[_Snap] | None = None


def _pair_ok(ec: _Col, gc: _Col, xs: _Snap, ie: np.ndarray, ig: np.ndarray, facts: bool) -> np.ndarray:
    """Row-by-row value rule for forced pairs (expected row ``ie[k]`` vs candidate row ``ig[k]``)."""
    ok = xs.exp[ie] == xs.got[ig]  # equal keys: compatible
    if ok.all():
        return ok
    ev, et, _, en = ec.info()
    gv, gt, gi, _ = gc.info()
    a, b = ev[ie], gv[ig]
    real, exact = ec.real or gc.real, ec.decimal and gc.decimal
    close = within(a, b, real=real, exact=exact)
    ok |= et[ie] & gt[ig] & close  # two DOUBLE/DECIMAL values within their storage types' tolerance
    if facts:
        for k in np.flatnonzero(~ok & en[ie] & (gt[ig] | (gi[ig] & np.isfinite(b)))).tolist():
            ok[k] = _rounding_matches(ec.keys[ie[k]], gc.keys[ig[k]], real=real, exact=exact,
                                      decimal_expected=ec.decimal)
    return ok


def _match_rows(expected: ResultSet, got: ResultSet, ecols: list[_Col], gcols: list[_Col], gmap: Sequence[int],
                facts: bool, seg: np.ndarray | None, eidx: Sequence[int] | None = None) -> _Match:
    """Do the candidate rows (columns ``gmap``) equal the expected rows as a multiset (exactly)?

    1. Code every column by canonical key: equal bags of row codes prove equality (common case).
    2. Compatible rows agree exactly on the *rigid* columns (plain key equality) and the tie
       group: the bipartite compatibility graph splits into groups by those codes, each solved
       alone. Groups where the exact codes already balance are matched. A group with one row on
       each side is a forced pair (checked value by value, vectorised). Larger unbalanced
       groups go through tolerant snapping and matching restricted to their rows.
    """
    n = len(expected.rows)
    if eidx is None:
        eidx = range(len(gmap))
    ecols = [ecols[i] for i in eidx]
    gsel = [gcols[j] for j in gmap]
    base = _Rows(n, n)
    if seg is not None:
        base = base.add(seg, seg, int(seg.max(initial=-1)) + 1)
    xs = [_snap(ec, gc, facts, True) for ec, gc in zip(ecols, gsel, strict=True)]
    full = base
    for s in xs:
        full = full.add(s.exp, s.got, _card(s))
    if full.bag_equal():
        return _Match(True, None, xs)
    rigid = [_rigid(ec, gc, facts) for ec, gc in zip(ecols, gsel, strict=True)]
    if all(rigid):
        return _Match(False, full, xs)
    rr = base
    for s, r in zip(xs, rigid, strict=True):
        if r:
            rr = rr.add(s.exp, s.got, _card(s))
    u, inv = np.unique(np.concatenate([rr.e, rr.g]), return_inverse=True)
    inv = inv.astype(np.int64, copy=False)
    ge, gg = inv[:n], inv[n:]
    ng = len(u)
    ce, cg = np.bincount(ge, minlength=ng), np.bincount(gg, minlength=ng)
    balanced = ce == cg
    uf, finv = np.unique(np.concatenate([full.e, full.g]), return_inverse=True)
    fe, fg = finv[:n], finv[n:]
    fbad = np.bincount(fe, minlength=len(uf)) != np.bincount(fg, minlength=len(uf))
    dirty = np.zeros(ng, dtype=bool)
    dirty[ge[fbad[fe]]] = True
    dirty[gg[fbad[fg]]] = True
    dirty &= balanced
    ok = bool(balanced.all())
    fail_e = np.zeros(n, dtype=bool)
    fail_g = np.zeros(n, dtype=bool)
    # forced pairs: one row on each side of a group
    single = dirty & (ce == 1)
    if single.any():
        ie = np.flatnonzero(single[ge])
        ig = np.flatnonzero(single[gg])
        ie = ie[np.argsort(ge[ie], kind="stable")]
        ig = ig[np.argsort(gg[ig], kind="stable")]
        good = np.ones(len(ie), dtype=bool)
        for c, r in enumerate(rigid):
            if not r:
                sel = np.flatnonzero(good)
                good[sel] = _pair_ok(ecols[c], gsel[c], xs[c], ie[sel], ig[sel], facts)
        if not good.all():
            ok = False
            fail_e[ie[~good]] = True
            fail_g[ig[~good]] = True
    # groups of several rows: tolerant snapping and matching on their rows only
    multi = dirty & (ce > 1)
    if multi.any():
        ie = np.flatnonzero(multi[ge])
        ig = np.flatnonzero(multi[gg])
        sub = _Rows(len(ie), len(ig)).add(ge[ie], gg[ig], ng)
        el, gl = ie.tolist(), ig.tolist()
        snaps = []
        for c, r in enumerate(rigid):
            if not r:
                i, j = eidx[c], gmap[c]
                se = column(expected, i, [expected.rows[x][i] for x in el])
                sg = column(got, j, [got.rows[x][j] for x in gl])
                snaps.append(_snap(se, sg, facts))
        sub_ok, rows = _bags(sub, snaps)
        if not sub_ok:
            ok = False
            rows = rows if rows is not None else _approx_rows(sub, snaps)
            u2, inv2 = np.unique(np.concatenate([rows.e, rows.g]), return_inverse=True)
            c2e = np.bincount(inv2[: len(ie)], minlength=len(u2))
            c2g = np.bincount(inv2[len(ie):], minlength=len(u2))
            fail_e[ie[_surplus_mask(inv2[: len(ie)], np.maximum(c2e - c2g, 0))]] = True
            fail_g[ig[_surplus_mask(inv2[len(ie):], np.maximum(c2g - c2e, 0))]] = True
    if ok:
        return _Match(True, None, xs)
    # diagnostic codes: the group, or a code of its own for a row known to be unmatched
    de, dg = ge.copy(), gg.copy()
    de[fail_e] = ng + np.arange(int(fail_e.sum()))
    dg[fail_g] = ng + n + np.arange(int(fail_g.sum()))
    diag = _Rows.__new__(_Rows)
    diag.e, diag.g, diag.bound = de, dg, ng + 2 * n
    return _Match(False, diag, xs)


def _surplus_mask(codes: np.ndarray, surplus: np.ndarray) -> np.ndarray:
    """Rows carrying a surplus code (as many per code as its surplus)."""
    out = np.zeros(len(codes), dtype=bool)
    left = surplus.copy()
    for i in np.flatnonzero(surplus[codes] > 0).tolist():
        if left[codes[i]] > 0:
            left[codes[i]] -= 1
            out[i] = True
    return out


def _unmatched(rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    e, g = rows.e, rows.g
    u, inv = np.unique(np.concatenate([e, g]), return_inverse=True)
    ce = np.bincount(inv[: len(e)], minlength=len(u))
    cg = np.bincount(inv[len(e):], minlength=len(u))
    me = _surplus_mask(inv[: len(e)], np.maximum(ce - cg, 0))
    mg = _surplus_mask(inv[len(e):], np.maximum(cg - ce, 0))
    return np.flatnonzero(me), np.flatnonzero(mg)
