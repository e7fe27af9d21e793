"""Size limits for the table functions untrusted SQL may use: ``range``, ``generate_series``
and ``unnest`` in FROM.

A date spine (``FROM generate_series(DATE '2025-01-01', DATE '2025-12-31', INTERVAL 1 DAY)``)
is ordinary analytical SQL; ``FROM range(1e12)`` is a resource bomb whose first ``row_cap``
rows would come back truncated. When every bound of a series is a constant the statement
filter computes its length (:func:`series_length`) and refuses one longer than the policy's
``max_series_rows`` (``series_too_large``). A series whose bounds are computed (a scalar
subquery, a column) cannot be sized from the text: it streams, so the statement timeout,
the memory limit, the worker's address-space limit and the row cap bound it like any other
scan. ``unnest`` of a list is bounded by the list, which is built in memory under the same
limits.

>>> import sqlglot
>>> from sqlglot import exp
>>> def n(sql):
...     return series_length(sqlglot.parse_one(sql, read="duckdb").find(exp.GenerateSeries))
>>> n("SELECT * FROM range(10)"), n("SELECT * FROM generate_series(1, 10)"), n("SELECT * FROM range(0, 10, 3)")
(10, 10, 4)
>>> n("SELECT * FROM generate_series(DATE '2025-01-01', DATE '2025-12-31', INTERVAL 1 DAY)")
365
>>> n("SELECT * FROM range(TIMESTAMP '2025-01-01', TIMESTAMP '2025-01-02', INTERVAL '1 hour')")
24
>>> n("SELECT * FROM generate_series(1, (SELECT 10))") is None
True

Literals are inspected as text before any arithmetic (``Decimal('1e999999')`` converted to an
integer builds a million-digit number: 36 s). A bound too large to size — more than 100
characters, an exponent beyond ±1000, or a count beyond DuckDB's BIGINT range — sizes the
series at :data:`UNSIZEABLE` rows, which no policy allows:

>>> n("SELECT * FROM range(1e999999)") == UNSIZEABLE, n("SELECT * FROM range(0, 10, 1e-300)") == UNSIZEABLE
(True, True)
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Context, Decimal, DivisionByZero, InvalidOperation, Overflow

from sqlglot import exp

from sqleval_pipeline.guard.bounds import number_problem

#: seconds per interval unit; months and years at their *shortest* (28 and 365 days), so a
#: computed length is never below the real one
_UNIT_SECONDS = {
    "MICROSECOND": 1e-6, "MICROSECONDS": 1e-6, "MILLISECOND": 1e-3, "MILLISECONDS": 1e-3,
    "SECOND": 1, "SECONDS": 1, "MINUTE": 60, "MINUTES": 60, "HOUR": 3600, "HOURS": 3600,
    "DAY": 86400, "DAYS": 86400, "WEEK": 7 * 86400, "WEEKS": 7 * 86400,
    "MONTH": 28 * 86400, "MONTHS": 28 * 86400, "QUARTER": 3 * 28 * 86400, "QUARTERS": 3 * 28 * 86400,
    "YEAR": 365 * 86400, "YEARS": 365 * 86400,
}

#: the length given to a series whose constant bounds are too large to size (DuckDB's range
#: counts in BIGINT: no series is longer)
UNSIZEABLE = 2**63
#: decimal arithmetic on bounded literals (at most 100 characters, exponents up to ±1000):
#: every result fits, and anything unexpected raises instead of growing
_CTX = Context(prec=120, Emax=100_000, Emin=-100_000, traps=[InvalidOperation, DivisionByZero, Overflow])


class _Huge:
    """A constant bound too large to handle (see module doc)."""


_HUGE = _Huge()


def series_length(node: exp.Expression | None) -> int | None:
    """Rows produced by a ``range`` / ``generate_series`` call with constant bounds, or None
    when a bound is not a constant (or not understood). ``range`` excludes its end,
    ``generate_series`` includes it; the step defaults to 1 (1 day for dates is not a
    default in DuckDB: a date series without a step is an error, so it is not sized).
    At most :data:`UNSIZEABLE` (also for bounds too large to size)."""
    if not isinstance(node, exp.GenerateSeries):
        return None
    start, end, step = node.args.get("start"), node.args.get("end"), node.args.get("step")
    exclusive = bool(node.args.get("is_end_exclusive"))
    a, b = _number(start), _number(end)
    if a is not None and b is not None:
        s = _number(step) if step is not None else Decimal(1)
        if _HUGE in (a, b, s):
            return UNSIZEABLE
        return _count(a, b, s, exclusive)  # type: ignore[arg-type]
    ta, tb = _timestamp(start), _timestamp(end)
    if ta is not None and tb is not None and step is not None:
        secs = _interval_seconds(step)
        if secs is None:
            return None
        if secs is _HUGE:
            return UNSIZEABLE
        return _count(Decimal(str((tb - ta).total_seconds())), Decimal(0), secs, exclusive,  # type: ignore[arg-type]
                      from_zero=True)
    return None


def _count(a: Decimal, b: Decimal, step: Decimal | None, exclusive: bool, *, from_zero: bool = False) -> int | None:
    """Elements of a series from ``a`` to ``b`` (or over the span ``a`` when ``from_zero``),
    computed in a bounded decimal context and compared with :data:`UNSIZEABLE` before any
    conversion to an integer."""
    if step is None or step == 0:
        return None
    try:
        steps = _CTX.divide(a if from_zero else _CTX.subtract(b, a), step)
    except (InvalidOperation, DivisionByZero, Overflow, ArithmeticError):
        return UNSIZEABLE
    if steps < 0:
        return 0
    if steps >= UNSIZEABLE:
        return UNSIZEABLE
    return min(UNSIZEABLE, math.ceil(steps) if exclusive else math.floor(steps) + 1)


def _number(node: exp.Expression | None) -> Decimal | _Huge | None:
    if isinstance(node, exp.Neg):
        inner = _number(node.this)
        return -inner if isinstance(inner, Decimal) else inner
    if isinstance(node, exp.Paren):
        return _number(node.this)
    if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.NUMERIC_TYPES):
        return _number(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        text = str(node.this)
        if number_problem(text):  # judged on the text, before any arithmetic
            return _HUGE
        try:
            return _CTX.create_decimal(text)
        except (InvalidOperation, ArithmeticError):
            return None
    return None


def _timestamp(node: exp.Expression | None) -> dt.datetime | None:
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string \
            and node.to.is_type(*exp.DataType.TEMPORAL_TYPES):
        text = str(node.this.this).strip()
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            try:
                value = dt.datetime.combine(dt.date.fromisoformat(text), dt.time())
            except ValueError:
                return None
        return value.replace(tzinfo=None)
    return None


def _interval_seconds(node: exp.Expression) -> Decimal | _Huge | None:
    if not isinstance(node, exp.Interval):
        return None
    value, unit = node.this, node.args.get("unit")
    text = str(value.this).strip() if isinstance(value, exp.Literal) else None
    if text is None:
        return None
    unit_name = unit.name.upper() if unit is not None else None
    if unit_name is None:  # INTERVAL '1 hour'
        parts = text.split()
        if len(parts) != 2:
            return None
        text, unit_name = parts[0], parts[1].upper()
    per = _UNIT_SECONDS.get(unit_name)
    if per is None:
        return None
    if number_problem(text):  # judged on the text, before any arithmetic
        return _HUGE
    try:
        amount = _CTX.create_decimal(text)
        if not amount.is_finite():
            return None
        return _CTX.multiply(amount, _CTX.create_decimal(repr(float(per))))
    except (InvalidOperation, ArithmeticError):
        return None


__all__ = ["UNSIZEABLE", "series_length"]
