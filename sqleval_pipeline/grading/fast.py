"""Fast paths (docs/grading.md): the raw-row pass and the residue path.

The raw-row pass (:func:`_fast_exact`) proves the exact rule by hashing rows and verifying the
pairs with Python equality; when it fails on a large result, the unpaired rows (the residue)
are closed over rigid columns (:func:`_close_residue`) and got-the-facts first looks for an
expected column without any candidate column (:func:`_facts_missing_column`).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
import operator
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from sqleval_pipeline.grading.columns import _Col
from sqleval_pipeline.grading.explain import _fmt
from sqleval_pipeline.grading.matching import _compatible, _sorted_compatible
from sqleval_pipeline.grading.values import _TRAILING_WS, ABS_TOL, REL_TOL, _is_num, _NoneType, canonical_key
from sqleval_pipeline.results import ResultSet


_DUCK_SCALAR = re.compile(
    r"^(BIGINT|INTEGER|INT|INT8|INT4|SMALLINT|TINYINT|HUGEINT|UBIGINT|UINTEGER|USMALLINT|UTINYINT|UHUGEINT"
    r"|DOUBLE|FLOAT|REAL|DECIMAL(\(\d+,\s*\d+\))?|NUMERIC(\(\d+,\s*\d+\))?|VARCHAR|TEXT|STRING|DATE"
    r"|TIMESTAMP( WITH TIME ZONE)?|TIMESTAMPTZ|TIMESTAMP_(S|MS|NS)|TIME|UUID|BLOB|INTERVAL|BOOLEAN)$"
)


def _hashes(items: list[Any]) -> np.ndarray:
    """Python hash of every item (equal items hash equal; collisions are possible and harmless:
    every pairing made by hash is verified with Python equality)."""
    return np.fromiter(map(hash, items), np.int64, len(items))


def _duplicated(s: np.ndarray) -> np.ndarray:
    """Values occurring more than once in the *sorted* array ``s``."""
    return s[1:][s[1:] == s[:-1]]


def _row_hashes(erows: list[list[Any]], grows: list[list[Any]]
                ) -> tuple[np.ndarray, np.ndarray, tuple | None, tuple[np.ndarray, np.ndarray] | None]:
    """A hash per row that Python-equal rows share, plus the leading column of each side and,
    when already computed, the orders sorting both hash arrays.

    The leading column is hashed first; only rows whose leading value's hash repeats (on
    either side) are hashed in full, so a result keyed by its first column costs one column.
    """
    if len(erows) < 256:  # small results: hashing whole rows is cheapest
        return _hashes(list(map(tuple, erows))), _hashes(list(map(tuple, grows))), None, None
    e0 = [r[0] for r in erows]
    g0 = [r[0] for r in grows]
    he0, hg0 = _hashes(e0), _hashes(g0)
    oe, og = np.argsort(he0), np.argsort(hg0)
    he, hg = he0, hg0
    orders: tuple[np.ndarray, np.ndarray] | None = (oe, og)
    dup = np.union1d(_duplicated(he0[oe]), _duplicated(hg0[og]))
    if len(dup):
        he, hg = he.copy(), hg.copy()
        orders = None
        for h, rows in ((he, erows), (hg, grows)):
            idx = np.flatnonzero(np.isin(h, dup))
            if len(idx):  # a function of the row alone: equal rows get the same treatment
                h[idx] = _hashes(list(map(tuple, map(rows.__getitem__, idx.tolist()))))
    return he, hg, (e0, g0, he0, hg0), orders


#: rows verified per list comparison in the raw-row pass
_VERIFY_BLOCK = 4096


@dataclass
class _Fast:
    """Outcome of the raw-row pass: ``ok`` proves the exact rule; otherwise, when available,
    ``res_e``/``res_g`` are the rows *not* paired with a Python-equal row of the other side."""

    ok: bool
    res_e: np.ndarray | None = None
    res_g: np.ndarray | None = None
    lead: tuple | None = None  # leading column of each side and the hashes of its values


def _scalar_types(expected: ResultSet, got: ResultSet) -> bool:
    for te, tg in zip(expected.types, got.types, strict=True):
        te, tg = te.upper().strip(), tg.upper().strip()
        if not (_DUCK_SCALAR.match(te) and _DUCK_SCALAR.match(tg)) or (te == "BOOLEAN") != (tg == "BOOLEAN"):
            return False
    return True


def _fast_exact(expected: ResultSet, got: ResultSet, order_matters: bool) -> _Fast:
    """Cheap sufficient test for the exact rule: equal bags of raw rows under Python equality.

    Python equality of scalars agrees with the rules (Decimal/int/float by value, NULL only
    equals NULL, str != number, aware timestamps by instant) except that True == 1: so it is
    used only when the declared DuckDB types are plain scalars and BOOLEAN columns face
    BOOLEAN columns. Anything it rejects (NaN, trailing spaces, noise, dates vs timestamps...)
    goes through the full comparison.

    Rows are hashed, both sides sorted by hash and the rows paired by rank within equal hashes;
    every pair is verified with Python equality, so a hash collision can only leave rows
    unpaired (in the residue), never pass wrongly. On failure the unpaired rows are returned.
    """
    if len(expected.columns) != len(got.columns) or len(expected.rows) != len(got.rows):
        return _Fast(False)
    if not _scalar_types(expected, got):
        return _Fast(False)
    erows, grows = expected.rows, got.rows
    if not erows or not expected.columns:
        return _Fast(erows == grows)
    try:
        if order_matters:
            return _Fast(erows == grows)
        he, hg, lead, orders = _row_hashes(erows, grows)
    except TypeError:  # unhashable values (LIST/STRUCT): full comparison
        return _Fast(False)
    n = len(erows)
    # any order among equal hashes: pairs are verified below
    oe, og = orders if orders is not None else (np.argsort(he), np.argsort(hg))
    se, sg = he[oe], hg[og]
    # partner[i]: the candidate row paired with expected row i (-1: unpaired); rows are then
    # verified in expected order (sequential access to the expected rows)
    partner = np.full(n, -1, dtype=np.int64)
    if np.array_equal(se, sg):
        partner[oe] = og
        ug = np.zeros(0, dtype=np.int64)
    else:
        # pair the k-th row of a hash value on one side with the k-th on the other
        lo = np.searchsorted(sg, se, side="left")
        if n < 2 or (np.all(se[1:] != se[:-1]) and np.all(sg[1:] != sg[:-1])):
            # distinct hashes on both sides (the common case): a row pairs with the row of
            # its hash, if any (rank 0, count 0 or 1)
            paired = sg[np.minimum(lo, n - 1)] == se
            if n:
                paired &= lo < n
            gpos = lo[paired]
        else:
            rank = np.arange(n) - np.searchsorted(se, se, side="left")
            paired = rank < np.searchsorted(sg, se, side="right") - lo
            gpos = lo[paired] + rank[paired]
        partner[oe[paired]] = og[gpos]
        gmask = np.ones(n, dtype=bool)
        gmask[gpos] = False
        ug = og[gmask]
    ue = np.flatnonzero(partner < 0)
    src = grows
    if len(ue):  # an unpaired expected row is compared with itself
        src = grows + erows
        partner[ue] = n + ue
    # verified in blocks of candidate rows gathered in expected order (still in cache when
    # compared); a failing block is then checked row by row (a comparison stops at its first
    # difference)
    take = partner.tolist()
    erows_t = tuple(erows)
    bad_blocks: list[np.ndarray] = []
    try:
        for s in range(0, n, _VERIFY_BLOCK):
            t = min(s + _VERIFY_BLOCK, n)
            lg = operator.itemgetter(*take[s:t])(src) if t - s > 1 else (src[take[s]],)
            if erows_t[s:t] != lg:
                bad_blocks.append(s + np.flatnonzero(np.fromiter(map(operator.ne, erows_t[s:t], lg), bool, t - s)))
    except TypeError:  # pragma: no cover - incomparable values
        return _Fast(False)
    if not bad_blocks and not len(ue):
        return _Fast(True)
    if bad_blocks:
        bad = np.concatenate(bad_blocks)
        ue = np.concatenate([ue, bad])
        ug = np.concatenate([ug, partner[bad]])
    return _Fast(False, np.sort(ue), np.sort(ug), lead)


# --------------------------------------------------------------------------- residue path
#
# When the raw-row pass fails on a large result, most rows are usually paired with a
# Python-equal row (hence a compatible one) and only a few are left over. Removing identical
# pairs is *not* safe by itself under a (non-transitive) tolerance, so the residue is closed
# first: rows are kept when, on a few *rigid* columns (plain int / str / date values on both
# sides, where compatibility is plain equality), their value is one of the residue's values.
# The kept set contains the residue, is closed under compatibility (compatible rows agree on
# rigid columns) and under the identical pairing (paired rows are equal), so the rows left out
# are perfectly matched among themselves and share no edge with the kept rows: the exact
# verdict on the kept rows is the verdict on the whole result.

#: rigid columns examined at most when closing the residue
_RESIDUE_FILTER_COLUMNS = 4
#: candidate rows sampled to refute a column pair in the got-the-facts column search
_FACTS_SAMPLES = 48

_INT_DUCK = re.compile(r"^(BIGINT|INTEGER|INT|INT8|INT4|SMALLINT|TINYINT|HUGEINT|UBIGINT|UINTEGER|USMALLINT|UTINYINT|UHUGEINT)$")


def _filter_keys_ok(ecol: list[Any], gcol: list[Any]) -> bool:
    """Is compatibility in this column plain Python equality (so a set lookup finds partners)?"""
    types_ = set(map(type, ecol)) | set(map(type, gcol))
    types_.discard(_NoneType)
    if types_ <= {int} or types_ == {_dt.date}:
        return True
    if types_ == {str}:
        joined = "\x00".join(v for v in itertools.chain(ecol, gcol) if v is not None)
        return not _TRAILING_WS.search(joined)
    return False


def _close_residue(expected: ResultSet, got: ResultSet, res_e: np.ndarray, res_g: np.ndarray,
                   lead: tuple | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows (expected, candidate) kept with the residue; None when no rigid column narrows it."""
    n = len(expected.rows)
    erows, grows = expected.rows, got.rows
    target = 4 * (len(res_e) + len(res_g)) + 64

    def rank(j: int) -> int:
        t = expected.types[j].upper().strip()
        return 0 if _INT_DUCK.match(t) else 1 if t in ("VARCHAR", "TEXT", "STRING") else 2 if t == "DATE" else 3

    kept_e: np.ndarray | None = None
    kept_g: np.ndarray | None = None
    if lead is not None and _filter_keys_ok(lead[0], lead[1]):
        # the leading column by hash (a superset of equal values: still closed)
        keys_h = np.concatenate([lead[2][res_e], lead[3][res_g]])
        kept_e = np.flatnonzero(np.isin(lead[2], keys_h))
        kept_g = np.flatnonzero(np.isin(lead[3], keys_h))
        if len(kept_e) + len(kept_g) <= target:
            return (kept_e, kept_g) if len(kept_e) <= n // 2 else None
    used = 0
    for j in sorted(range(len(expected.columns)), key=lambda j: (rank(j), j)):
        if used >= _RESIDUE_FILTER_COLUMNS or rank(j) == 3:
            break
        if j == 0 and lead is not None:
            continue
        ecol = [r[j] for r in erows]
        gcol = [r[j] for r in grows]
        used += 1
        if not _filter_keys_ok(ecol, gcol):
            continue
        if kept_e is not None:
            ecol = [ecol[i] for i in kept_e.tolist()]
            gcol = [gcol[i] for i in kept_g.tolist()]
        keys = {erows[i][j] for i in res_e.tolist()} | {grows[i][j] for i in res_g.tolist()}
        me = np.fromiter(map(keys.__contains__, ecol), bool, len(ecol))
        mg = np.fromiter(map(keys.__contains__, gcol), bool, len(gcol))
        kept_e = np.flatnonzero(me) if kept_e is None else kept_e[me]
        kept_g = np.flatnonzero(mg) if kept_g is None else kept_g[mg]
        if len(kept_e) + len(kept_g) <= target:
            break
    if kept_e is None or len(kept_e) > n // 2:
        return None
    return kept_e, kept_g


def _subset(rs: ResultSet, idx: np.ndarray) -> ResultSet:
    return ResultSet(columns=rs.columns, types=rs.types, rows=[rs.rows[i] for i in idx.tolist()])


def _refuted(ec: _Col, ys: list[Any]) -> bool:
    """Is some candidate value in ``ys`` without any partner in ``ec`` under the column
    signature test (:func:`_compatible`)? True proves ``_compatible(ec, gc)`` is False for
    every candidate column ``gc`` holding the values ``ys``."""
    nonnum = ec.signature()[2]
    num = ec.numeric()
    for y in ys:
        k = canonical_key(y)
        if not _is_num(k):
            if k not in nonnum:
                return True  # the non-numeric key multisets differ
            continue
        try:
            f = float(k)
        except (OverflowError, ValueError):
            continue
        if not math.isfinite(f):
            continue
        # any number within the widest pairing bound of _num_compatible lies in this window
        w = (ABS_TOL + REL_TOL * (3 * abs(f) + 1.02)) * 1.001 + 0.0051
        a = num[np.searchsorted(num, f - w, side="left"): np.searchsorted(num, f + w, side="right")]
        bound = np.maximum(ABS_TOL, REL_TOL * (np.maximum(np.abs(a), abs(f)) + 0.02)) * 1.001 + 0.005 * (1 + 1e-9)
        if not np.any(np.abs(a - f) <= bound):
            return True  # sorted pairing cannot pair this value: _num_compatible fails
    return False


def _facts_missing_column(expected: ResultSet, got: ResultSet, res_e: np.ndarray, res_g: np.ndarray) -> str | None:
    """The message of a ``missing_column`` got-the-facts failure, or None when it is not one.

    A column whose residue values are the same multiset of keys on both sides holds the same
    values as its candidate column overall (the other rows are identical pairs), so it has a
    compatible candidate. Every other expected column is checked against every candidate
    column: refuted cheaply on sampled candidate values, else by the full signature test, as
    :func:`_compare_facts` does. The first column without a candidate is reported.
    """
    k = len(expected.columns)
    if len(got.columns) != k:
        return None
    erows, grows = expected.rows, got.rows
    n = len(grows)
    samples = sorted(set(np.linspace(0, n - 1, min(n, _FACTS_SAMPLES)).astype(np.int64).tolist()))
    gcols: dict[int, _Col] = {}
    for i in range(k):
        ke = [canonical_key(erows[r][i]) for r in res_e.tolist()]
        kg = [canonical_key(grows[r][i]) for r in res_g.tolist()]
        if Counter(ke) == Counter(kg):
            continue  # same values as candidate column i
        ec = _Col([r[i] for r in erows])
        for j in range(k):
            if _refuted(ec, [grows[r][j] for r in samples]):
                continue
            if j == i and j not in gcols:
                ok = _shifted_compatible(ec, ke, kg)
                if ok is not None:
                    if ok:
                        break
                    continue
            gc = gcols.get(j)
            if gc is None:
                gc = gcols[j] = _Col([r[j] for r in grows])
            if _compatible(ec, gc):
                break
        else:
            sample = ", ".join(dict.fromkeys(_fmt(r[i]) for r in erows[:5]))
            return (f"no candidate column holds the values of expected column {expected.columns[i]!r}"
                    f" (e.g. {sample})")
    return None


def _shifted_compatible(ec: _Col, ke: list[Any], kg: list[Any]) -> bool | None:
    """``_compatible(ec, gc)`` for the candidate column ``gc`` at the same position, without
    reading it: outside the residue its rows are Python-equal to expected rows, hence hold
    the same keys, so ``gc``'s keys are ``ec``'s with the residue keys ``ke`` replaced by
    ``kg``. None when undecided (then ``gc`` is read).
    """
    # signature: the non-numeric key multisets (and so the numeric counts) agree iff the
    # residue's agree
    if Counter(k for k in ke if not _is_num(k)) != Counter(k for k in kg if not _is_num(k)):
        return False
    a = ec.numeric()
    try:
        fe = np.sort(np.asarray([float(k) for k in ke if _is_num(k)], dtype=np.float64))
        fg = np.sort(np.asarray([float(k) for k in kg if _is_num(k)], dtype=np.float64))
    except (OverflowError, ValueError, TypeError):
        return None
    if len(fe) != len(fg) or len(fe) > len(a):  # pragma: no cover - the signature agreed
        return None
    if not len(a):
        return True
    # remove the expected residue's numbers from ``a`` (each must be there), insert the
    # candidate residue's
    idx = np.searchsorted(a, fe, side="left") + (np.arange(len(fe)) - np.searchsorted(fe, fe, side="left"))
    if np.any(idx >= len(a)) or not np.array_equal(a[np.minimum(idx, len(a) - 1)], fe):
        return None
    rest = np.delete(a, idx)
    b = np.insert(rest, np.searchsorted(rest, fg, side="left"), fg)
    # _rigid(ec, gc, True) depends on gc.tol only when ec.tol and not ec.nonint: unknown here
    rigid = True if not ec.tol else (False if ec.nonint else None)
    if np.all(np.isfinite(fe)) and np.all(np.isfinite(fg)):
        # same infinities on both sides (at the ends of a and b): a and b differ only on a
        # finite stretch, and equal elements pass either test
        diff = np.flatnonzero(a != b)
        if not len(diff):
            return True
        a, b = a[diff[0]: diff[-1] + 1], b[diff[0]: diff[-1] + 1]
    return _sorted_compatible(ec, a, b, rigid)
