"""Column summaries and snapping (docs/grading.md).

:class:`_Col` holds the canonical keys of one result column and lazily computed codes and
signatures; :func:`_snap` codes candidate values by the expected value(s) they are compatible
with (by key, or by a sorted range search plus the precise rule near DOUBLE/DECIMAL values).
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import repeat
from typing import Any

import numpy as np

from sqleval_pipeline.grading.values import (
    _TRAILING_WS,
    ABS_TOL,
    REAL_REL_TOL,
    REL_TOL,
    _is_num,
    _is_tolerant_key,
    _num_match,
    canonical_key,
    is_real,
    within,
)
from sqleval_pipeline.results import ResultSet


# --------------------------------------------------------------------------- columns

_NUMERIC_KINDS = ("int", "num")


class _Col:
    """Canonical keys of one column plus lazily computed signatures.

    ``kind``: int (integer-typed numbers only), str, date, num (numbers with DOUBLE/DECIMAL,
    finite, below 2**53), other. ``tol``: holds DOUBLE/DECIMAL numbers (tolerance applies);
    ``nonint``: holds non-integral ones (roundings apply); ``ints``: holds integer-typed ones.
    """

    __slots__ = ("keys", "kind", "tol", "nonint", "ints", "inexact", "farr", "real", "decimal", "_codes", "_emap",
                 "_temap", "_tcodes", "_sig", "_num", "_ident", "_info")

    def __init__(self, values: Sequence[Any], *, real: bool = False, decimal: bool = False):
        #: storage type of the column (the tolerance follows it): REAL (float32), DECIMAL
        self.real, self.decimal = real, decimal
        types_ = set(map(type, values))
        keys: Sequence[Any] | None = None
        self.kind = "other"
        self.tol = self.nonint = self.ints = self.inexact = False
        self.farr: np.ndarray | None = None  # float64 of every value, for all-numeric columns
        if types_ <= {int}:
            keys = values
            self.kind, self.ints = "int", bool(values)
        elif types_ == {str}:
            keys = values if not _TRAILING_WS.search("\x00".join(values)) else [v.rstrip() for v in values]
            self.kind = "str"
        elif types_ == {_dt.date}:
            keys = values
            self.kind = "date"
        elif types_ <= {float, int} or types_ == {Decimal}:
            try:
                arr = np.array(values, dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                arr = None
            if arr is not None and np.all(np.isfinite(arr)) and np.all(np.abs(arr) < 2.0**53):
                whole = arr == np.floor(arr)
                self.farr = arr
                self.kind = "num"
                if Decimal in types_:
                    keys = arr.tolist()
                    inexact = False
                    for i in np.flatnonzero(whole).tolist():  # keep inexact integral doubles exact
                        if values[i] != keys[i]:
                            keys[i] = values[i]
                            inexact = True
                    self.tol, self.nonint, self.inexact = True, inexact or bool((~whole).any()), inexact
                else:
                    keys = values
                    self.ints = int in types_
                    self.tol = float in types_
                    self.nonint = bool((~whole).any())
        if keys is None:
            keys = [canonical_key(v) for v in values]
            tk = [k for k in keys if _is_tolerant_key(k)]
            self.tol = bool(tk)
            self.nonint = any(type(k) is Decimal or not k.is_integer() for k in tk)
            self.ints = any(type(k) is int for k in keys)
        self.keys = keys
        self._codes: np.ndarray | None = None
        self._emap: dict[Any, int] | None = None
        self._temap: dict[Any, int] | None = None
        self._tcodes: np.ndarray | None = None
        self._sig: tuple[int, int, Counter] | None = None
        self._num: np.ndarray | None = None
        self._ident: int | None = None
        self._info: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def mixed(self) -> bool:
        """Integer-typed and DOUBLE/DECIMAL numbers in one column (equal keys, different rules)."""
        return self.ints and self.tol

    def emap(self) -> dict[Any, int]:
        if self._emap is None:
            self._emap = dict(zip(dict.fromkeys(self.keys), itertools.count()))
        return self._emap

    def codes(self) -> np.ndarray:
        if self._codes is None:
            self._codes = np.fromiter(map(self.emap().__getitem__, self.keys), np.int64, len(self.keys))
        return self._codes

    def tkeys(self) -> Sequence[Any]:
        """Keys that also separate an integer-typed value from an equal DOUBLE/DECIMAL one."""
        if not self.mixed:
            return self.keys
        return [("int", k) if type(k) is int else k for k in self.keys]

    def temap(self) -> dict[Any, int]:
        if self._temap is None:
            self._temap = self.emap() if not self.mixed else dict(zip(dict.fromkeys(self.tkeys()), itertools.count()))
        return self._temap

    def tcodes(self) -> np.ndarray:
        if self._tcodes is None:
            if not self.mixed:
                self._tcodes = self.codes()
            else:
                self._tcodes = np.fromiter(map(self.temap().__getitem__, self.tkeys()), np.int64, len(self.keys))
        return self._tcodes

    def info(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per row: float value (NaN if not a finite number), tolerant?, integer-typed?, non-integral?"""
        if self._info is None:
            n = len(self.keys)
            if self.kind == "int":
                vals = np.array(self.keys, dtype=np.float64) if n else np.zeros(0)
                self._info = (vals, np.zeros(n, bool), np.ones(n, bool), np.zeros(n, bool))
            elif self.kind == "num":
                vals = self.farr
                isint = np.fromiter((type(k) is int for k in self.keys), bool, n) if self.ints else np.zeros(n, bool)
                nonint = ~isint & (vals != np.floor(vals))
                if self.inexact:
                    nonint |= np.fromiter((type(k) is Decimal for k in self.keys), bool, n)
                self._info = (vals, ~isint, isint, nonint)
            elif self.kind in ("str", "date") or not (self.tol or self.ints):
                self._info = (np.full(n, np.nan), np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool))
            else:
                vals = np.full(n, np.nan)
                tol = np.zeros(n, bool)
                isint = np.zeros(n, bool)
                nonint = np.zeros(n, bool)
                for i, k in enumerate(self.keys):
                    t = type(k)
                    if t is int:
                        isint[i] = True
                        vals[i] = float(k)
                    elif _is_tolerant_key(k):
                        tol[i] = True
                        vals[i] = float(k)
                        nonint[i] = t is Decimal or not k.is_integer()
                self._info = (vals, tol, isint, nonint)
        return self._info

    def numeric(self) -> np.ndarray:
        """Sorted float values of the (finite or infinite) numbers in the column."""
        if self._num is None and self.farr is not None:
            self._num = np.sort(self.farr)
        if self._num is None and self.kind == "int":
            self._num = np.sort(np.array(self.keys, dtype=np.float64)) if self.keys else np.zeros(0)
        if self._num is None and self.kind in ("str", "date"):
            self._num = np.zeros(0)
        if self._num is None:
            vals = [float(k) for k in self.keys if _is_num(k)]
            self._num = np.sort(np.asarray(vals, dtype=np.float64))
        return self._num

    def signature(self) -> tuple[int, int, Counter]:
        """(hash of non-numeric key multiset, numeric count, non-numeric key multiset)."""
        if self._sig is None:
            if self.kind in _NUMERIC_KINDS:
                nonnum: Counter = Counter()
            elif self.kind in ("str", "date"):
                nonnum = Counter(self.keys)
            else:
                nonnum = Counter(k for k in self.keys if not _is_num(k))
            h = hash(frozenset(nonnum.items()))
            self._sig = (h, len(self.keys) - sum(nonnum.values()), nonnum)
        return self._sig

    def ident(self) -> int:
        if self._ident is None:
            self._ident = hash(tuple(self.keys))
        return self._ident


def _rigid(e: _Col, g: _Col, facts: bool) -> bool:
    """Is compatibility in this column pair plain key equality (no tolerance, no rounding)?"""
    return not e.tol or (not g.tol and not (facts and e.nonint))


def _columns(rs: ResultSet) -> list[_Col]:
    if not rs.columns:
        return []
    if not rs.rows:
        return [column(rs, j, []) for j in range(len(rs.columns))]
    k = len(rs.columns)
    if set(map(len, rs.rows)) != {k}:
        raise ValueError(f"rows must have {k} values")
    # one list per column (``zip(*rows)`` is slow on many rows)
    return [column(rs, j, [r[j] for r in rs.rows]) for j in range(k)]


def column(rs: ResultSet, j: int, values: Sequence[Any]) -> _Col:
    """A column summary of ``values`` (column ``j`` of ``rs``, or some of its rows) that
    knows the column's storage type."""
    t = str(rs.types[j]).upper() if j < len(rs.types) else ""
    return _Col(values, real=is_real(t), decimal=t.startswith(("DECIMAL", "NUMERIC")))


# --------------------------------------------------------------------------- snapping


@dataclass
class _Snap:
    exp: np.ndarray  # expected codes per row
    got: np.ndarray  # candidate codes per row (-1: compatible with nothing, -2: ambiguous)
    amb: dict[int, frozenset[int]]  # candidate row -> compatible expected codes (ambiguous rows)
    guess: dict[int, int] | None = None  # ambiguous row -> nearest compatible code (examples only)


def _reach(g: np.ndarray, facts: bool) -> np.ndarray:
    """A generous bound on |e - g| for any compatible expected value e (superset search)."""
    base = np.maximum(ABS_TOL, REL_TOL * (np.abs(g) + 0.02)) * (1 + 1e-4) + 1e-12 * (1 + np.abs(g))
    return base + 0.005 * (1 + 1e-9) if facts else base


def _snap(e: _Col, g: _Col, facts: bool, exact_only: bool = False) -> _Snap:
    """Code candidate values by the expected value(s) they are compatible with.

    ``exact_only`` codes by canonical key only (a sufficient, not necessary, condition: used
    as a fast first pass whose success proves equality).
    """
    if exact_only or _rigid(e, g, facts):
        fast = _numeric_codes(e, g)
        if fast is not None:
            return _Snap(*fast, {})
        emap = e.emap()
        gcodes = np.fromiter(map(emap.get, g.keys, repeat(-1)), np.int64, len(g.keys))
        return _Snap(e.codes(), gcodes, {})
    # expected holds DOUBLE/DECIMAL numbers: candidate numbers may match them within the
    # tolerance (or, for got-the-facts, as a rounding), possibly several distinct ones.
    emap = e.temap()
    ecodes = e.tcodes()
    gcodes = np.fromiter(map(emap.get, g.keys, repeat(-1)), np.int64, len(g.keys))
    etol = [k for k in emap if _is_tolerant_key(k)]
    E = np.asarray([float(k) for k in etol], dtype=np.float64)
    order = np.argsort(E, kind="stable")
    E = E[order]
    Ecodes = np.asarray([emap[etol[i]] for i in order], dtype=np.int64)
    gvals, gtol, gint, _ = g.info()
    real, exact = e.real or g.real, e.decimal and g.decimal  # the storage types' tolerance
    # candidate rows holding a number that may match a DOUBLE/DECIMAL expected value
    relevant = gtol | (gint & np.isfinite(gvals) & (facts or e.mixed))
    rows_idx = np.flatnonzero(relevant)
    G = gvals[rows_idx]
    if not len(rows_idx):
        return _Snap(ecodes, gcodes, {})
    reach = _reach(G, facts)
    lo = np.searchsorted(E, G - reach, side="left")
    hi = np.searchsorted(E, G + reach, side="right")
    hit = gcodes[rows_idx]  # code of the identical expected value, or -1
    cnt = hi - lo
    g_int = gint[rows_idx]
    # tolerance candidates, vectorised over the (few) expected values in reach of each value;
    # an integer-typed candidate is compatible only with an expected value of its exact value
    ncompat = np.where(g_int & (hit >= 0), 1, 0)
    first = np.where(g_int & (hit >= 0), hit, -1)
    pairs_r: list[np.ndarray] = []
    pairs_c: list[np.ndarray] = []
    last_e = len(E) - 1
    for k in range(int(cnt.max(initial=0))):
        j = np.minimum(lo + k, last_e)
        ev = E[j]
        ok = (lo + k < hi) & ~g_int & within(ev, G, real=real, exact=exact)
        first = np.where(ok & (first < 0), Ecodes[j], first)
        ncompat += ok
        pairs_r.append(np.flatnonzero(ok))
        pairs_c.append(Ecodes[j][ok])
    # got-the-facts roundings: only values with at most 6 decimals can be a rounding that is
    # not already within the absolute tolerance (a rounding to >= 7 decimals moves <= 5e-8);
    # a column mixing integer-typed and DOUBLE/DECIMAL values is checked value by value
    if e.mixed:
        check_round = np.ones(len(G), dtype=bool)
    elif facts:
        # (within the candidate's storage tolerance of such a value: round(x, 2)::REAL carries
        # float32 noise far beyond the 7th decimal)
        noise = REAL_REL_TOL if real else 1e-9
        check_round = (cnt > 0) & (np.abs(G - np.round(G, 6)) <= noise * np.maximum(1.0, np.abs(G)))
    else:
        check_round = np.zeros(len(G), dtype=bool)
    settled = ~check_round & (ncompat <= 1)
    gcodes[rows_idx[settled]] = first[settled]
    amb: dict[int, frozenset[int]] = {}
    guess: dict[int, int] = {}
    # several tolerance-compatible expected values: the candidate sets from the vectorised pass
    multi = ~check_round & (ncompat > 1)
    if multi.any():
        pr = np.concatenate(pairs_r)
        pc = np.concatenate(pairs_c)
        sel = multi[pr]
        sets: dict[int, set[int]] = {}
        for r, c in zip(pr[sel].tolist(), pc[sel].tolist(), strict=True):
            sets.setdefault(r, set()).add(c)
        for r, cs in sets.items():
            row = int(rows_idx[r])
            gcodes[row] = -2
            amb[row] = frozenset(cs)
            guess[row] = _nearest(E, Ecodes, lo[r], hi[r], G[r], cs)
    # values checked one by one (roundings, mixed columns): the precise rule per distinct value
    cache: dict[Any, frozenset[int]] = {}
    for r in np.flatnonzero(check_round).tolist():
        row = int(rows_idx[r])
        gk = g.keys[row]
        ck = (type(gk) is int, gk)
        cands = cache.get(ck)
        if cands is None:
            cs = set()
            if e.mixed:
                c = emap.get(("int", gk))  # an integer-typed expected value of exactly this value
                if c is not None:
                    cs.add(c)
            for j in range(lo[r], hi[r]):
                c = int(Ecodes[j])
                if c not in cs and _num_match(etol[order[j]], gk, facts, real=real, exact=exact,
                                                  decimal_expected=e.decimal):
                    cs.add(c)
            cands = cache[ck] = frozenset(cs)
        if len(cands) == 1:
            gcodes[row] = next(iter(cands))
        elif not cands:
            gcodes[row] = -1
        else:
            gcodes[row] = -2
            amb[row] = cands
            guess[row] = _nearest(E, Ecodes, lo[r], hi[r], G[r], cands)
    return _Snap(ecodes, gcodes, amb, guess)


def _numeric_codes(e: _Col, g: _Col) -> tuple[np.ndarray, np.ndarray] | None:
    """Key codes for two plain numeric columns by sorting (keys equal iff their doubles are)."""
    if e.kind == "num" and g.kind in _NUMERIC_KINDS and not _decimal_keys(e) and not _decimal_keys(g):
        a = e.farr
        b = g.farr if g.kind == "num" else _int_array(g)
    elif e.kind == "int" and g.kind in _NUMERIC_KINDS and not (g.kind == "num" and _decimal_keys(g)):
        a = _int_array(e)
        b = _int_array(g) if g.kind == "int" else g.farr
        if a is not None and b is not None and b.dtype != a.dtype:
            a = a.astype(np.float64) if np.all(np.abs(a) < 2**53) else None
    else:
        return None
    if a is None or b is None:
        return None
    u, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    inv = inv.astype(np.int64, copy=False)
    ce, cg = inv[: len(a)], inv[len(a):].copy()
    present = np.zeros(len(u), dtype=bool)
    present[ce] = True
    cg[~present[cg]] = -1  # candidate values absent from the expected column
    return ce, cg


def _int_array(c: _Col) -> np.ndarray | None:
    try:
        return np.array(c.keys, dtype=np.int64) if c.keys else np.zeros(0, dtype=np.int64)
    except OverflowError:
        return None


def _decimal_keys(c: _Col) -> bool:
    """Does a numeric column keep an exact Decimal key (a double that is an inexact integer)?"""
    return c.inexact


def _nearest(E: np.ndarray, Ecodes: np.ndarray, lo: int, hi: int, g: float, cands) -> int:
    if hi > lo:
        near = min(range(lo, hi), key=lambda j: abs(E[j] - g))
        if int(Ecodes[near]) in cands:
            return int(Ecodes[near])
    return min(cands)
