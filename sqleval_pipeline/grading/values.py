"""Rule parameters, canonical value keys and the equality of two values (docs/grading.md).

The bottom layer of :mod:`sqleval_pipeline.grading`: the rule parameters and the grader version
hashed from them, the canonical key of a value (exact equality modulo representation), and the
equality of two numbers under the tolerance and the got-the-facts roundings.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
import uuid
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import numpy as np


# --------------------------------------------------------------------------- rule parameters

#: the *reach* of every tolerance: a generous bound that the fast paths use to prune (a value
#: farther than this from an expected one can never match it). It is not the rule: the rule's
#: tolerances below are all tighter (REAL's 1e-6 relative included).
ABS_TOL = 5e-7
REL_TOL = 1e-5
#: the rule (revision 3): DOUBLE vs DOUBLE / DECIMAL / integer within 1e-9 relative or 1e-12
#: absolute (summation-order noise); when either side is REAL (float32), 1e-6 relative;
#: DECIMAL vs DECIMAL by exact value; two whole numbers (whatever their type) exactly
DOUBLE_REL_TOL = 1e-9
DOUBLE_ABS_TOL = 1e-12
REAL_REL_TOL = 1e-6
REAL_TYPES = frozenset({"REAL", "FLOAT", "FLOAT4"})
MIN_ROUND_DECIMALS = 2
ROUNDING_MODES = ("half_up", "half_even", "half_up_of_the_stored_double")
#: bump by hand whenever a rule's *logic* changes (parameters are hashed automatically)
RULE_REVISION = 3  # 3: tolerance by storage type; whole numbers exact whatever their type;
#                       DuckDB's round() of the stored double accepted by got-the-facts

RULES: dict[str, Any] = {
    "revision": RULE_REVISION,
    "double_rel_tol": DOUBLE_REL_TOL,
    "double_abs_tol": DOUBLE_ABS_TOL,
    "real_rel_tol": REAL_REL_TOL,
    "decimal_vs_decimal": "exact value",
    "whole_numbers": "two whole numbers (integer-typed, a DECIMAL with zero fraction, a whole DOUBLE) "
                     "compare exactly; an integer-typed value equals only a number of exactly its value",
    "facts_rounding": {"min_decimals": MIN_ROUND_DECIMALS, "modes": list(ROUNDING_MODES),
                       "noise": "the rounding compared under the candidate's storage tolerance"},
    "strings": "exact, case-sensitive, trailing whitespace ignored",
    "dates": "by value; date == timestamp at midnight; aware timestamps compared in UTC",
    "nulls": "NULL only equals NULL; NULL != 0 != '' != false",
    "bool": "not a number",
    "rows": "multiset; order only with order_matters, ties on order_keys (or the recorded rank "
            "groups) free",
    "ties_at_cut": "where the reference's ORDER BY ... LIMIT cuts through tied rows, any selection of "
                   "the kept number of rows from the recorded tie group is right (only recorded rows)",
    "facts_columns": "distinct candidate per expected column, rows aligned",
    "truncated_result": "wrong",
    "unreviewed_cases": "generated and unverified cases get no outcome: execution-only, "
                        "shown beside accuracy, never in it",
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


def _whole(v: Any) -> bool:
    if isinstance(v, Decimal):
        return v.is_finite() and v == v.to_integral_value()
    return math.isfinite(v) and float(v).is_integer()


def _numbers_equal(a: Any, b: Any, *, real: bool = False, exact: bool = False) -> bool:
    """Exact-rule equality of two numbers (not bools), revision 3.

    An integer-typed value equals only a number of exactly its value; two whole numbers
    (whatever their type) only when equal; two DECIMAL values (``exact``, or two Python
    Decimals) by exact value; otherwise within the storage type's tolerance: 1e-6 relative
    when either side is REAL (``real``), else 1e-9 relative or 1e-12 absolute.

    >>> _numbers_equal(1351.3333333333333, 1351.33), _numbers_equal(1000000.0, 1000009.0)
    (False, False)
    >>> _numbers_equal(0.1 + 0.2, 0.3), _numbers_equal(1.23, 1.2300000190734863, real=True)
    (True, True)
    """
    if a == b:
        return True
    if _is_int(a) or _is_int(b):
        return False
    if exact or (isinstance(a, Decimal) and isinstance(b, Decimal)):
        return float(a) == float(b) if exact else False
    fa, fb = float(a), float(b)
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return False
    if _whole(a) and _whole(b):
        return fa == fb
    rel = REAL_REL_TOL if real else DOUBLE_REL_TOL
    return abs(fa - fb) <= max(DOUBLE_ABS_TOL, rel * max(abs(fa), abs(fb)))


def within(a: np.ndarray, b: np.ndarray, *, real: bool = False, exact: bool = False) -> np.ndarray:
    """Vectorised :func:`_numbers_equal` for two float arrays of DOUBLE/DECIMAL values (no
    integer-typed values: callers handle those)."""
    with np.errstate(invalid="ignore"):
        if exact:
            return a == b
        rel = REAL_REL_TOL if real else DOUBLE_REL_TOL
        close = np.abs(a - b) <= np.maximum(DOUBLE_ABS_TOL, rel * np.maximum(np.abs(a), np.abs(b)))
        both_whole = (a == np.floor(a)) & (b == np.floor(b))
        return (a == b) | (close & ~both_whole)


def _as_decimal(v: Any) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(repr(float(v)))


def _rounding_matches(expected: Any, got: Any, *, real: bool = False, exact: bool = False,
                      decimal_expected: bool = False) -> bool:
    """Is ``got`` a rounding of the non-integral ``expected`` to >= 2 decimals?

    Accepted roundings: half-up and half-even of the value as printed, and half-up of the
    exact stored double (DuckDB's ``round(x, 2)`` of 0.575, stored as 0.57499999…, is 0.57).
    The rounding is compared with ``got`` under the candidate's storage tolerance (``real``:
    a rounding cast to REAL carries float32 noise). Rounding to ``d`` decimals moves a value by
    at most half a unit of the ``d``-th decimal, so the loop stops at the first ``d`` whose
    half-unit (plus the tolerance) is smaller than the distance between the two values.

    >>> _rounding_matches(0.575, 0.57), _rounding_matches(0.575, 0.58), _rounding_matches(2.675, 2.67)
    (True, True, True)
    >>> _rounding_matches(1.234, 1.2300000190734863, real=True), _rounding_matches(1.234, 1.2300000190734863)
    (True, False)
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
    # the exact stored double (a DECIMAL is stored exactly: its key's double stands for it)
    stored = None if isinstance(expected, Decimal) or decimal_expected else Decimal(float(expected))
    for d in range(MIN_ROUND_DECIMALS, decimals):
        if dist > 0.5 * 10.0**-d + slack:
            break
        q = Decimal(1).scaleb(-d)
        roundings = [e.quantize(q, rounding=ROUND_HALF_UP), e.quantize(q, rounding=ROUND_HALF_EVEN)]
        if stored is not None:
            roundings.append(stored.quantize(q, rounding=ROUND_HALF_UP))
        for r in roundings:  # the rounding is a DECIMAL; the candidate is stored as it is
            if _numbers_equal(float(r) if not exact else r, got, real=real, exact=exact):
                return True
    return False


def _num_match(ek: Any, gk: Any, facts: bool, *, real: bool = False, exact: bool = False,
               decimal_expected: bool = False) -> bool:
    return _numbers_equal(ek, gk, real=real, exact=exact) or (
        facts and _rounding_matches(ek, gk, real=real, exact=exact, decimal_expected=decimal_expected))


def is_real(type_name: str | None) -> bool:
    """A REAL (float32) column type."""
    return bool(type_name) and str(type_name).upper() in REAL_TYPES


def values_equal(expected: Any, got: Any, *, facts: bool = False, expected_type: str | None = None,
                 got_type: str | None = None) -> bool:
    """Compare two single values under the exact rule (``facts=True``: got-the-facts rule).
    The column types (optional) say whether either side is REAL (float32).

    >>> values_equal(1, 1.0), values_equal(0.1 + 0.2, Decimal("0.3")), values_equal("4", 4)
    (True, True, False)
    >>> values_equal(None, 0), values_equal(True, 1), values_equal(_dt.date(2025, 1, 1), "2025-01-01")
    (False, False, False)
    >>> values_equal(1.2345678, 1.23), values_equal(1.2345678, 1.23, facts=True)
    (False, True)
    >>> values_equal(Decimal("58920.00"), 58920.000000000004), values_equal(5, 5.0000001)
    (True, False)
    >>> values_equal(1351.3333333333333, 1351.33), values_equal(Decimal("1000000.00"), 1000009.0)
    (False, False)
    >>> values_equal(1.234, 1.2300000190734863, facts=True, got_type="REAL")
    True
    """
    ke, kg = canonical_key(expected), canonical_key(got)
    if type(ke) is type(kg) or (_is_num(ke) and _is_num(kg)):
        if ke == kg:
            return True
    if _is_num(expected) and _is_num(got):
        real = is_real(expected_type) or is_real(got_type)
        if _numbers_equal(expected, got, real=real):
            return True
        return facts and _rounding_matches(expected, got, real=real)
    return False
