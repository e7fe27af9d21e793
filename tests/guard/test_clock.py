"""Pinned clock: every clock spelling DuckDB accepts is rewritten; nothing else changes."""

from __future__ import annotations

from datetime import date

import pytest
import sqlglot

from sqleval_pipeline.guard.clock import pin_clock, residual_clock_calls

AS_OF = date(2025, 12, 15)
D, TS, T = "DATE '2025-12-15'", "TIMESTAMP '2025-12-15 23:59:59'", "TIME '23:59:59'"

CASES = [
    ("SELECT current_date", f"SELECT {D}"),
    ("SELECT CURRENT_DATE()", f"SELECT {D}"),
    ("SELECT today()", f"SELECT {D}"),
    ("SELECT now()", f"SELECT {TS}"),
    ("SELECT NOW()", f"SELECT {TS}"),
    ("SELECT current_timestamp", f"SELECT {TS}"),
    ("SELECT get_current_timestamp(), transaction_timestamp()", f"SELECT {TS}, {TS}"),
    ("SELECT current_localtimestamp(), localtimestamp", f"SELECT {TS}, {TS}"),
    ("SELECT current_time, localtime, get_current_time(), current_localtime()", f"SELECT {T}, {T}, {T}, {T}"),
    ('SELECT "now"()', f"SELECT {TS}"),
    ("SELECT main.now()", f"SELECT {TS}"),
    ('SELECT "main"."now"()', f"SELECT {TS}"),
    ("SELECT system.main.current_date()", f"SELECT {D}"),
    ("SELECT date_trunc('month', current_date) - INTERVAL 1 MONTH",
     f"SELECT date_trunc('month', {D}) - INTERVAL 1 MONTH"),
    # untouched: strings, comments, qualified columns, bare identifiers, calls with arguments
    ("SELECT 'now()', \"now\" FROM t -- today()", "SELECT 'now()', \"now\" FROM t -- today()"),
    ("SELECT /* current_date */ t.current_date FROM t", "SELECT /* current_date */ t.current_date FROM t"),
    ("SELECT now AS x FROM t", "SELECT now AS x FROM t"),
    ("SELECT now(1)", "SELECT now(1)"),
]


@pytest.mark.parametrize("sql, pinned", CASES, ids=[c[0][:40] for c in CASES])
def test_pin_clock(sql, pinned):
    assert pin_clock(sql, AS_OF) == pinned


@pytest.mark.parametrize("sql", [c[0] for c in CASES if "now(1)" not in c[0]])
def test_nothing_left_after_pinning(sql):
    assert residual_clock_calls(sqlglot.parse_one(pin_clock(sql, AS_OF), read="duckdb")) == []


def test_residual_detects_unpinnable_call():
    assert residual_clock_calls(sqlglot.parse_one("SELECT now(1)", read="duckdb")) == ["now"]


def test_guard_pins_the_clock(guard, serving_snapshot):
    as_of = serving_snapshot.manifest.as_of
    r = guard.execute("SELECT current_date AS d, now()::DATE AS n, main.now()::DATE AS q")
    assert r.ok, r.describe()
    assert r.result.rows == [[as_of, as_of, as_of]]
    assert "current_date" not in r.executed_sql.lower()


def test_guard_refuses_an_unpinnable_clock(guard):
    r = guard.execute("SELECT now(1)")
    assert (r.status, r.layer, r.reason) == ("refused", "filter", "unpinned_clock")
