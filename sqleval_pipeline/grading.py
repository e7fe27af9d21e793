"""Result comparison and outcomes (docs/grading.md).

Two readings, both always computed:

- **exact**: same number of columns compared by position (names ignored), same rows as a
  multiset; row order matters only when the case says ``order_matters``.
- **got-the-facts**: every expected column is matched by a *distinct* candidate column such
  that the candidate rows, projected on the matched columns, equal the expected rows; extra
  candidate columns, column order and (unless ``order_matters``) row order are tolerated.

>>> from sqleval_pipeline.results import ResultSet
>>> exp = ResultSet(columns=["region", "revenue"], types=["VARCHAR", "DOUBLE"],
...                 rows=[["north", 10.5], ["south", 7.25]])
>>> got = ResultSet(columns=["n", "revenue", "region"], types=["BIGINT", "DOUBLE", "VARCHAR"],
...                 rows=[[3, 7.25, "south"], [4, 10.5, "north"]])
>>> c = compare(exp, got, order_matters=False)
>>> (c.exact, c.facts, c.column_map)
(False, True, (2, 1))

Value rules (both readings): a *whole number* is an integer-typed value (a Python ``int``
from an INTEGER/BIGINT/HUGEINT... column), not a DOUBLE or DECIMAL that happens to be
integral. An integer-typed value equals another number only when they are exactly equal
(``5 == 5.0 == Decimal('5.00')`` but ``5 != 5.0000001``: a count is right or wrong, on either
side). Two DOUBLE/DECIMAL values, integral or not, are equal within 5e-7 absolute or 1e-5
relative (``|a-b| <= max(5e-7, 1e-5*max(|a|,|b|))``), so ``Decimal('58920.00')`` equals
``58920.000000000004``. A bool is not a number; NULL, 0, '' and false all differ;
``'4' != 4``; a date equals the timestamp at its midnight but not its ISO string; strings
compare exactly after removing trailing whitespace. Got-the-facts additionally accepts, for a
non-integral expected value, that value rounded half-up or half-even to 2 or more decimals.
DOUBLE/DECIMAL values are compared at double precision; numbers nested inside LIST/STRUCT
values compare exactly (no tolerance).

How multiset matching stays correct and fast with a tolerance (which is not transitive)
---------------------------------------------------------------------------------------
First pass (exact rule): every row is hashed (the leading column first; only rows whose
leading value repeats are hashed in full), the hashes sorted and the rows paired by that order
verified with Python equality (sufficient: Python equality of plain DuckDB scalars implies
compatibility; a hash collision can only leave rows unpaired). On a large result the unpaired
rows (the residue) are closed over rigid int/str/date columns (every row sharing a residue
value there is kept), which keeps every row that could be compatible with them; the rows left
out are identical pairs, so the exact verdict on the kept rows is the verdict on the whole
result, and got-the-facts first looks for an expected column without any candidate column
(refuted on sampled values, confirmed by the signature test; the
candidate column at the same position is summarised from the expected column and the residue,
since its other values are Python-equal to expected ones, instead of being re-read). Otherwise every column is coded by canonical key (numeric columns by
sorting, others by dictionary); equal bags of row codes prove equality. Otherwise compatible
rows must agree exactly on the *rigid* columns (where compatibility is key equality: no
DOUBLE/DECIMAL on one side) and on the order tie group, so the compatibility graph splits
into groups by those codes. Groups whose exact codes balance are matched; a group with one row
per side is a forced pair checked value by value (vectorised); only larger unbalanced groups
go through the tolerant machinery below, restricted to their rows.

Each value gets a canonical *key* (exact equality modulo representation). Expected values of
a column are coded by their distinct keys. Every candidate value is then *snapped* to the set
of expected codes it is compatible with: by key for exact values, and by a sorted range search
plus the precise rule for numbers near a non-integral expected value. If every candidate value
is compatible with at most one distinct expected value, two rows are compatible iff their code
vectors are equal, so multiset equality is an exact comparison of sorted integer row codes
(numpy). Only when some candidate value is compatible with two or more distinct expected
values (values closer than the tolerance or the rounding step) are the rows grouped by their
unambiguous columns and matched within each group by augmenting paths (bipartite matching).

Got-the-facts column matching never tries every permutation: per-column signatures (null
count, multiset of non-numeric keys, numeric count, sorted numeric values within the widest
possible tolerance) prune candidate columns; a backtracking search assigns expected columns
(most constrained first) to distinct compatible candidates, checks after every assignment that
the partial projections are equal multisets of rows (so independently re-sorted columns fail
at the second column), and skips candidate columns identical to one already tried.
"""

from __future__ import annotations

import datetime as _dt
import gc
import hashlib
import json
import math
import operator
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
import itertools
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from sqleval_pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.results import ResultSet

if TYPE_CHECKING:  # pragma: no cover
    from sqleval_pipeline.golden.model import Case

# --------------------------------------------------------------------------- rule parameters

ABS_TOL = 5e-7
REL_TOL = 1e-5
MIN_ROUND_DECIMALS = 2
ROUNDING_MODES = ("half_up", "half_even")
#: bump by hand whenever a rule's *logic* changes (parameters are hashed automatically)
RULE_REVISION = 2  # 2: "whole number" means integer-typed (a whole DECIMAL/DOUBLE takes the tolerance)

RULES: dict[str, Any] = {
    "revision": RULE_REVISION,
    "abs_tol": ABS_TOL,
    "rel_tol": REL_TOL,
    "whole_numbers": "integer-typed values (INTEGER/BIGINT/HUGEINT...) compare exactly with any number; "
                     "DOUBLE/DECIMAL values, integral or not, compare with each other within the tolerance",
    "facts_rounding": {"min_decimals": MIN_ROUND_DECIMALS, "modes": list(ROUNDING_MODES)},
    "strings": "exact, case-sensitive, trailing whitespace ignored",
    "dates": "by value; date == timestamp at midnight; aware timestamps compared in UTC",
    "nulls": "NULL only equals NULL; NULL != 0 != '' != false",
    "bool": "not a number",
    "rows": "multiset; order only with order_matters, ties on order_keys free",
    "facts_columns": "distinct candidate per expected column, rows aligned",
    "truncated_result": "wrong",
}


def _grader_version(rules: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(rules, sort_keys=True).encode()).hexdigest()[:12]
    return f"r{rules['revision']}-{digest}"


#: changes whenever a rule parameter or the rule revision changes
GRADER_VERSION = _grader_version(RULES)

# --------------------------------------------------------------------------- value keys


class _Null:
    """Sentinel key for NULL (never equal to 0, '', false or NaN)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL"

    def __reduce__(self) -> str:
        return "_NULL"


_NULL = _Null()
_NAN = ("nan",)
_NoneType = type(None)
_TRAILING_WS = re.compile(r"\s(?:\x00|\Z)")


def _decimal_key(v: Decimal) -> Any:
    if not v.is_finite():
        return _NAN if v.is_nan() else float(v)
    f = float(v)
    if not math.isfinite(f) or (f.is_integer() and f != v):
        return v  # beyond double precision around an integer: keep it exact
    return f  # a DECIMAL is a non-integer-typed number: keyed (and compared) as a double


def canonical_key(v: Any) -> Any:
    """Hashable key with exact value equality (before tolerance).

    Integer-typed values key as ``int``; DOUBLE and DECIMAL values as ``float`` (a Decimal
    whose double is an inexact integer keeps its exact Decimal). Equal keys always mean
    compatible values; the key's type says whether the tolerance applies.

    >>> canonical_key(Decimal("3.00")) == canonical_key(3) == canonical_key(3.0)
    True
    >>> type(canonical_key(Decimal("3.00"))).__name__, type(canonical_key(3)).__name__
    ('float', 'int')
    >>> canonical_key(True) == canonical_key(1), canonical_key("a  ") == canonical_key("a")
    (False, True)
    >>> canonical_key(_dt.date(2025, 1, 2)) == canonical_key(_dt.datetime(2025, 1, 2))
    True
    """
    if v is None:
        return _NULL
    t = type(v)
    if t is int or t is str:
        return v.rstrip() if t is str else v
    if t is float:
        return _NAN if v != v else v
    if t is bool:
        return ("bool", v)
    if isinstance(v, bool):
        return ("bool", bool(v))
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        return str(v).rstrip()
    if isinstance(v, float):
        return _NAN if v != v else float(v)
    if isinstance(v, Decimal):
        return _decimal_key(v)
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(_dt.UTC).replace(tzinfo=None)
        if v.hour == v.minute == v.second == v.microsecond == 0:
            return _dt.date(v.year, v.month, v.day)  # a timestamp at midnight is its date
        return v
    if isinstance(v, _dt.date):
        return v if type(v) is _dt.date else _dt.date(v.year, v.month, v.day)
    if isinstance(v, _dt.time):
        return ("time", v)
    if isinstance(v, _dt.timedelta):
        return ("interval", v)
    if isinstance(v, uuid.UUID):
        return ("uuid", v.int)
    if isinstance(v, bytes | bytearray | memoryview):
        return ("bytes", bytes(v))
    if isinstance(v, list | tuple):
        return ("list", tuple(canonical_key(x) for x in v))
    if isinstance(v, dict):
        return ("struct", tuple(sorted((str(k), canonical_key(x)) for k, x in v.items())))
    if isinstance(v, np.generic):
        return canonical_key(v.item())
    return ("other", type(v).__name__, repr(v))


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    """An integer-typed value (INTEGER/BIGINT/HUGEINT...): a whole number that compares exactly."""
    return isinstance(v, int) and not isinstance(v, bool)


def _is_tolerant_key(k: Any) -> bool:
    """A key that takes part in tolerance: a finite DOUBLE/DECIMAL (integral or not)."""
    t = type(k)
    return (t is float and math.isfinite(k)) or (t is Decimal and k.is_finite())


def _numbers_equal(a: Any, b: Any) -> bool:
    """Exact-rule equality of two numbers (not bools).

    An integer-typed value equals only a number of exactly its value; two DOUBLE/DECIMAL
    values (integral or not) are equal within the tolerance, at double precision.
    """
    if a == b:
        return True
    if _is_int(a) or _is_int(b):
        return False
    fa, fb = float(a), float(b)
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return False
    return abs(fa - fb) <= max(ABS_TOL, REL_TOL * max(abs(fa), abs(fb)))


def _as_decimal(v: Any) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(repr(float(v)))


def _rounding_matches(expected: Any, got: Any) -> bool:
    """Is ``got`` a rounding of the non-integral ``expected`` to >= 2 decimals (half-up/half-even)?

    Rounding to ``d`` decimals moves a value by at most half a unit of the ``d``-th decimal,
    so the loop stops at the first ``d`` whose half-unit (plus the tolerance) is smaller than
    the distance between the two values.
    """
    if _is_int(expected):
        return False
    try:
        e = _as_decimal(expected)
        fg = float(got)
    except (InvalidOperation, ValueError, OverflowError):
        return False
    if not e.is_finite() or not math.isfinite(fg) or e == e.to_integral_value():
        return False
    dist = abs(float(e) - fg)
    slack = max(ABS_TOL, REL_TOL * (abs(fg) + 0.01)) * 1.001
    exp10 = e.as_tuple().exponent
    decimals = -exp10 if isinstance(exp10, int) else 0
    for d in range(MIN_ROUND_DECIMALS, decimals):
        if dist > 0.5 * 10.0**-d + slack:
            break
        q = Decimal(1).scaleb(-d)
        for mode in (ROUND_HALF_UP, ROUND_HALF_EVEN):
            if _numbers_equal(e.quantize(q, rounding=mode), got):  # the rounding is a DECIMAL
                return True
    return False


def _num_match(ek: Any, gk: Any, facts: bool) -> bool:
    return _numbers_equal(ek, gk) or (facts and _rounding_matches(ek, gk))


def values_equal(expected: Any, got: Any, *, facts: bool = False) -> bool:
    """Compare two single values under the exact rule (``facts=True``: got-the-facts rule).

    >>> values_equal(1, 1.0), values_equal(0.1 + 0.2, Decimal("0.3")), values_equal("4", 4)
    (True, True, False)
    >>> values_equal(None, 0), values_equal(True, 1), values_equal(_dt.date(2025, 1, 1), "2025-01-01")
    (False, False, False)
    >>> values_equal(1.2345678, 1.23), values_equal(1.2345678, 1.23, facts=True)
    (False, True)
    >>> values_equal(Decimal("58920.00"), 58920.000000000004), values_equal(5, 5.0000001)
    (True, False)
    """
    ke, kg = canonical_key(expected), canonical_key(got)
    if type(ke) is type(kg) or (_is_num(ke) and _is_num(kg)):
        if ke == kg:
            return True
    if _is_num(expected) and _is_num(got):
        if _numbers_equal(expected, got):
            return True
        return facts and _rounding_matches(expected, got)
    return False


# --------------------------------------------------------------------------- columns

_NUMERIC_KINDS = ("int", "num")


class _Col:
    """Canonical keys of one column plus lazily computed signatures.

    ``kind``: int (integer-typed numbers only), str, date, num (numbers with DOUBLE/DECIMAL,
    finite, below 2**53), other. ``tol``: holds DOUBLE/DECIMAL numbers (tolerance applies);
    ``nonint``: holds non-integral ones (roundings apply); ``ints``: holds integer-typed ones.
    """

    __slots__ = ("keys", "kind", "tol", "nonint", "ints", "inexact", "farr", "_codes", "_emap", "_temap", "_tcodes",
                 "_sig", "_num", "_ident", "_info")

    def __init__(self, values: Sequence[Any]):
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
        return [_Col([]) for _ in rs.columns]
    k = len(rs.columns)
    if set(map(len, rs.rows)) != {k}:
        raise ValueError(f"rows must have {k} values")
    # one list per column (``zip(*rows)`` is slow on many rows)
    return [_Col([r[j] for r in rs.rows]) for j in range(k)]


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
        ok = (lo + k < hi) & ~g_int & (
            np.abs(ev - G) <= np.maximum(ABS_TOL, REL_TOL * np.maximum(np.abs(ev), np.abs(G)))
        )
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
        check_round = (cnt > 0) & (np.abs(G - np.round(G, 6)) <= 1e-9 * np.maximum(1.0, np.abs(G)))
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
                if c not in cs and _num_match(etol[order[j]], gk, facts):
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
    with np.errstate(invalid="ignore"):
        within = np.abs(a - b) <= np.maximum(ABS_TOL, REL_TOL * np.maximum(np.abs(a), np.abs(b)))
    ok |= et[ie] & gt[ig] & within  # two DOUBLE/DECIMAL values within the tolerance
    if facts:
        for k in np.flatnonzero(~ok & en[ie] & (gt[ig] | (gi[ig] & np.isfinite(b)))).tolist():
            ok[k] = _rounding_matches(ec.keys[ie[k]], gc.keys[ig[k]])
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
                se = _Col([expected.rows[x][i] for x in el])
                sg = _Col([got.rows[x][j] for x in gl])
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


def _mismatch_text(expected: ResultSet, got: ResultSet, ecols, gcols, gmap, m: _Match) -> str:
    parts = []
    if m.diag is not None:
        parts.append(_row_diff_examples(expected, got, m.diag))
        e_idx, g_idx = _unmatched(m.diag)
        parts.extend(_column_hints(expected, got, ecols, gcols, gmap, e_idx, g_idx))
    return "; ".join(parts) or "rows differ"


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



class _SearchBudget(Exception):
    pass


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

#: results with fewer rows go straight to the full comparison
_RESIDUE_MIN_ROWS = 2_000
#: give up on the residue path when the residue exceeds this fraction of the rows
_RESIDUE_MAX_FRACTION = 0.05
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
) -> Comparison:
    """Compare a candidate result with an expected one under both rules (see module doc).

    >>> e = ResultSet(columns=["k", "v"], types=["VARCHAR", "BIGINT"], rows=[["a", 1], ["b", 1]])
    >>> g = ResultSet(columns=["k", "v"], types=["VARCHAR", "BIGINT"], rows=[["b", 1], ["a", 1]])
    >>> compare(e, g).exact, compare(e, g, order_matters=True).exact
    (True, False)
    >>> compare(e, g, order_matters=True, order_keys=["v"]).exact  # tied on v: any order
    True
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # many short-lived tuples and no cycles: the collector only costs time here
    try:
        return _compare(expected, got, order_matters, order_keys)
    finally:
        if gc_was_enabled:
            gc.enable()


def _compare(expected: ResultSet, got: ResultSet, order_matters: bool, order_keys: Sequence[str]) -> Comparison:
    fast = _fast_exact(expected, got, order_matters)
    if fast.ok:
        return Comparison(True, True, "match", "match", tuple(range(len(expected.columns))), None)
    if fast.res_e is not None:
        c = _compare_residue(expected, got, fast)
        if c is not None:
            return c
    ecols = _columns(expected)
    gcols = _columns(got)
    seg = _segments(expected, ecols, order_keys) if order_matters else None
    if seg is not None and len(expected.rows) != len(got.rows):
        seg = None  # row counts differ: reported as such below
    exact, exact_reason, exact_msg = _compare_exact(expected, got, ecols, gcols, seg)
    if exact:
        return Comparison(True, True, "match", "match", tuple(range(len(ecols))), None)
    facts, facts_reason, facts_msg, cmap = _compare_facts(expected, got, ecols, gcols, seg)
    return _comparison(False, facts, exact_reason, facts_reason, cmap, exact_msg, facts_msg)


def compare_any(
    accepted: Sequence[ResultSet], got: ResultSet, order_matters: bool = False, order_keys: Sequence[str] = ()
) -> Comparison:
    """Compare against every accepted result; an exact pass anywhere beats a facts pass.

    The returned comparison records the index of the accepted result used (``alternative``);
    when nothing passes it is the comparison with the primary reading.
    """
    if not accepted:
        raise ValueError("no accepted result to compare with")
    best: Comparison | None = None
    for idx, exp in enumerate(accepted):
        keys = [k for k in order_keys if k in exp.columns] if idx else order_keys
        c = compare(exp, got, order_matters, keys)
        c = Comparison(c.exact, c.facts, c.exact_reason, c.facts_reason, c.column_map, c.mismatch, idx)
        if c.exact:
            return c
        if best is None or (c.facts and not best.facts):
            best = c
    assert best is not None
    return best


def grade_against(case: Case, got: ResultSet) -> Comparison:
    """Compare ``got`` with every accepted result of ``case`` (passing any one passes)."""
    return compare_any(case.accepted_results(), got, case.order_matters, case.order_keys)


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
    - a case without a frozen expected result gets no outcome (execution-only score).
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
    c = compare_any(accepted, execution.result, case.order_matters, case.order_keys)
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
