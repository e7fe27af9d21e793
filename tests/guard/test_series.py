"""range / generate_series / unnest as table functions: allowed, within the series size limit.

The statement filter sizes a series with constant bounds (guard/series.py); the lengths are
checked against what DuckDB itself produces for the same call.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from sqleval_pipeline.guard.series import UNSIZEABLE, series_length
from tests.conftest import cpu_time_of


def _length(sql: str) -> int | None:
    return series_length(sqlglot.parse_one(sql, read="duckdb").find(exp.GenerateSeries))


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    yield c
    c.close()


@settings(max_examples=150, deadline=None)
@given(fn=st.sampled_from(["range", "generate_series"]), a=st.integers(-50, 50), b=st.integers(-50, 50),
       step=st.integers(-7, 7).filter(bool), with_step=st.booleans())
def test_integer_series_length_is_what_duckdb_produces(fn, a, b, step, with_step):
    call = f"{fn}({a}, {b}, {step})" if with_step else f"{fn}({a}, {b})"
    sql = f"SELECT count(*) FROM {call}"
    with duckdb.connect() as c:
        expected = c.execute(sql).fetchone()[0]
    assert _length(sql) == expected, call


@settings(max_examples=100, deadline=None)
@given(fn=st.sampled_from(["range", "generate_series"]), start=st.dates(dt.date(2020, 1, 1), dt.date(2026, 1, 1)),
       days=st.integers(-40, 400), unit=st.sampled_from(["DAY", "HOUR", "WEEK"]), amount=st.integers(1, 5))
def test_date_series_length_is_what_duckdb_produces(fn, start, days, unit, amount):
    end = start + dt.timedelta(days=days)
    call = f"{fn}(TIMESTAMP '{start}', TIMESTAMP '{end}', INTERVAL {amount} {unit})"
    sql = f"SELECT count(*) FROM {call}"
    with duckdb.connect() as c:
        expected = c.execute(sql).fetchone()[0]
    assert _length(sql) == expected, call


def test_months_are_never_undercounted(con):
    # months are sized at 28 days: never fewer than DuckDB's real count
    sql = "SELECT count(*) FROM generate_series(DATE '2020-01-01', DATE '2025-12-01', INTERVAL 1 MONTH)"
    assert _length(sql) >= con.execute(sql).fetchone()[0]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM generate_series(1, (SELECT 10))",
    "SELECT * FROM range(x)",
    "SELECT * FROM generate_series(DATE '2025-01-01', DATE '2025-01-05')",  # no step: DuckDB refuses it
])
def test_computed_bounds_are_not_sized(sql):
    assert _length(sql) is None


def test_a_date_spine_runs_through_the_guard(guard, serving_snapshot):
    sql = ("SELECT g.d, count(o.order_id) AS n FROM generate_series(DATE '2025-11-01', DATE '2025-11-30', "
           "INTERVAL 1 DAY) AS g(d) LEFT JOIN fct_orders o ON o.order_date = g.d GROUP BY g.d ORDER BY g.d")
    r = guard.execute(sql)
    assert r.ok, r.describe()
    with duckdb.connect(str(serving_snapshot.path), read_only=True) as raw:
        per_day = dict(raw.execute("SELECT order_date, count(*) FROM fct_orders WHERE order_date "
                                   "BETWEEN DATE '2025-11-01' AND DATE '2025-11-30' GROUP BY 1").fetchall())
    expected = [[dt.datetime(2025, 11, d), per_day.get(dt.date(2025, 11, d), 0)] for d in range(1, 31)]
    got = [[row[0] if isinstance(row[0], dt.datetime) else dt.datetime.combine(row[0], dt.time()), row[1]]
           for row in r.result.rows]
    assert got == expected


@pytest.mark.parametrize("sql, rows", [
    ("SELECT * FROM range(5)", [[0], [1], [2], [3], [4]]),
    ("SELECT x FROM unnest([3, 1, 2]) AS t(x) ORDER BY x", [[1], [2], [3]]),
])
def test_small_series_return_their_rows(guard, sql, rows):
    r = guard.execute(sql)
    assert r.ok and r.result.rows == rows, r.describe()


@pytest.mark.parametrize("sql, layer, reason", [
    ("SELECT * FROM range(1000000000000)", "filter", "series_too_large"),
    ("SELECT * FROM read_csv('x.csv')", "filter", "denied_function"),
    ("SELECT * FROM generate_series(1, (SELECT count(*) FROM hr.salaries)) AS g(i)", "filter",
     "qualifier_not_allowed"),
])
def test_series_that_are_refused(guard, sql, layer, reason):
    r = guard.execute(sql)
    assert (r.status, r.layer, r.reason) == ("refused", layer, reason), r.describe()


# ----------------------------------------------------------------------------- literal sizes (issue 21)

def test_huge_bounds_are_judged_on_their_text_before_any_arithmetic():
    """Decimal('1e999999') converted to an integer builds a million-digit number (36 s); the
    text is inspected first and the series is sized at UNSIZEABLE at once."""
    for call in ("range(1e999999)", "range(-1e999999, 0)", "generate_series(0, 10, 1e-99999)",
                 "range(" + "9" * 5000 + ")", "range(0, 1, 0." + "0" * 5000 + "1)"):
        length, secs = cpu_time_of(lambda: _length(f"SELECT * FROM {call}"))
        assert length == UNSIZEABLE and secs < 0.5, call


def test_counts_beyond_bigint_are_clamped_and_exact_below():
    assert _length("SELECT * FROM range(1e300)") == UNSIZEABLE
    assert _length("SELECT * FROM range(0, 1e18, 1e-300)") == UNSIZEABLE
    big = "1" + "0" * 40
    assert _length(f"SELECT * FROM generate_series({big}, {big[:-1]}5)") == 6  # 41 digits, exact
    assert _length("SELECT * FROM generate_series(1, 2, 0.5)") == 3


@pytest.mark.parametrize("interval, expected", [
    ("INTERVAL '1e-300 second'", "huge"), ("INTERVAL '1e-3000 second'", "huge"),
    ("INTERVAL 'nan second'", None), ("INTERVAL 'inf second'", None), ("INTERVAL '1 fortnight'", None),
])
def test_interval_steps_are_bounded(interval, expected):
    got = _length(f"SELECT * FROM range(TIMESTAMP '2025-01-01', TIMESTAMP '2025-01-02', {interval})")
    assert got == (UNSIZEABLE if expected == "huge" else expected)
