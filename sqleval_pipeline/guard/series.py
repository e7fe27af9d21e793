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
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal, InvalidOperation

from sqlglot import exp

#: seconds per interval unit; months and years at their *shortest* (28 and 365 days), so a
#: computed length is never below the real one
_UNIT_SECONDS = {
    "MICROSECOND": 1e-6, "MICROSECONDS": 1e-6, "MILLISECOND": 1e-3, "MILLISECONDS": 1e-3,
    "SECOND": 1, "SECONDS": 1, "MINUTE": 60, "MINUTES": 60, "HOUR": 3600, "HOURS": 3600,
    "DAY": 86400, "DAYS": 86400, "WEEK": 7 * 86400, "WEEKS": 7 * 86400,
    "MONTH": 28 * 86400, "MONTHS": 28 * 86400, "QUARTER": 3 * 28 * 86400, "QUARTERS": 3 * 28 * 86400,
    "YEAR": 365 * 86400, "YEARS": 365 * 86400,
}


def series_length(node: exp.Expression | None) -> int | None:
    """Rows produced by a ``range`` / ``generate_series`` call with constant bounds, or None
    when a bound is not a constant (or not understood). ``range`` excludes its end,
    ``generate_series`` includes it; the step defaults to 1 (1 day for dates is not a
    default in DuckDB: a date series without a step is an error, so it is not sized)."""
    if not isinstance(node, exp.GenerateSeries):
        return None
    start, end, step = node.args.get("start"), node.args.get("end"), node.args.get("step")
    exclusive = bool(node.args.get("is_end_exclusive"))
    a, b = _number(start), _number(end)
    if a is not None and b is not None:
        s = _number(step) if step is not None else Decimal(1)
        return _count(a, b, s, exclusive)
    ta, tb = _timestamp(start), _timestamp(end)
    if ta is not None and tb is not None and step is not None:
        secs = _interval_seconds(step)
        if secs is None:
            return None
        return _count(Decimal(str((tb - ta).total_seconds())), Decimal(0), Decimal(str(secs)), exclusive,
                      from_zero=True)
    return None


def _count(a: Decimal, b: Decimal, step: Decimal | None, exclusive: bool, *, from_zero: bool = False) -> int | None:
    """Elements of a series from ``a`` to ``b`` (or over the span ``a`` when ``from_zero``)."""
    if step is None or step == 0:
        return None
    steps = (a if from_zero else b - a) / step
    if steps < 0:
        return 0
    return math.ceil(steps) if exclusive else math.floor(steps) + 1


def _number(node: exp.Expression | None) -> Decimal | None:
    if isinstance(node, exp.Neg):
        inner = _number(node.this)
        return -inner if inner is not None else None
    if isinstance(node, exp.Paren):
        return _number(node.this)
    if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.NUMERIC_TYPES):
        return _number(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return Decimal(str(node.this))
        except InvalidOperation:
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


def _interval_seconds(node: exp.Expression) -> float | None:
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
    try:
        amount = float(text)
    except ValueError:
        return None
    per = _UNIT_SECONDS.get(unit_name)
    return amount * per if per is not None else None


__all__ = ["series_length"]
