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


# --------------------------------------------------------------------------- clock closed by construction

import re  # noqa: E402

import duckdb  # noqa: E402

from sqleval_pipeline.guard.clock import CLOCK_FUNCTIONS  # noqa: E402
from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS, FUNCTION_MIN_ARGS  # noqa: E402

_CLOCK_NAME = re.compile(r"now|today|(get_)?current_(date|time|timestamp|localtime|localtimestamp)|"
                         r"localtime(stamp)?|transaction_timestamp|statement_timestamp|current_datetime|"
                         r"uuidv7|ago|.*_start_time|.*_load_time")
_CLOCK_WORD = re.compile(r"\b(now|today|current_date|current_time|current_timestamp|localtime|"
                         r"localtimestamp|get_current_\w+|transaction_timestamp|uuidv7)\b", re.I)


def _clock_readers() -> set[str]:
    """Every scalar function or macro whose name or (transitively) macro body reads the clock,
    plus zero-argument overloads of date/time-typed functions."""
    con = duckdb.connect()
    rows = con.execute("SELECT DISTINCT lower(function_name), function_type, macro_definition, "
                       "len(parameters), return_type FROM duckdb_functions() "
                       "WHERE function_type IN ('scalar', 'macro')").fetchall()
    readers = {n for n, *_ in rows if _CLOCK_NAME.fullmatch(n)}
    # a zero-argument overload returning a date/time reads the clock (epoch_ms() would be one;
    # epoch_ms(x) converts its argument and stays allowed)
    readers |= {n for n, t, _b, k, rt in rows
                if t == "scalar" and k == 0 and rt and re.search(r"DATE|TIME", str(rt))}
    changed = True
    while changed:
        changed = False
        for n, t, body, *_ in rows:
            if t == "macro" and n not in readers and body and (
                    _CLOCK_WORD.search(body) or any(re.search(rf"\b{re.escape(r)}\s*\(", body) for r in readers)):
                readers.add(n)
                changed = True
    return readers


def test_no_clock_reader_is_on_the_allowlist():
    readers = _clock_readers()
    assert {"now", "today", "get_current_timestamp", "current_localtimestamp", "ago", "uuidv7",
            "transaction_timestamp", "pg_postmaster_start_time"} <= readers
    on_allowlist = sorted(readers & ALLOWED_FUNCTIONS)
    assert on_allowlist == [], f"clock readers on the allowlist: {on_allowlist}"
    # the ones users write are rewritten by pin_clock before DuckDB sees the text
    assert {"now", "today", "current_date", "get_current_timestamp"} <= CLOCK_FUNCTIONS
    assert "uuid_extract_timestamp" not in ALLOWED_FUNCTIONS  # would read uuidv7's clock back
    assert FUNCTION_MIN_ARGS.get("age") == 2  # age(x) = age(now(), x)


CLOCK_PROBES = ['SELECT "current_timestamp"::DATE AS d', 'SELECT "current_date" AS d', 'SELECT "localtime" AS d',
                'SELECT "localtimestamp"::DATE AS d', 'SELECT ago(INTERVAL 1 DAY)::DATE AS d',
                "SELECT age(DATE '2020-01-01') AS d", "SELECT uuid_extract_timestamp(uuidv7())::DATE AS d",
                "SELECT current_timestamp::DATE AS d", "SELECT now()::DATE AS d", "SELECT today() AS d",
                'SELECT "now"()::DATE AS d', "SELECT get_current_timestamp()::DATE AS d",
                "SELECT transaction_timestamp()::DATE AS d", "SELECT pg_postmaster_start_time()::DATE AS d"]


@pytest.mark.parametrize("sql", CLOCK_PROBES)
def test_clock_probe_gives_the_as_of_date_or_is_refused(sql, guard, serving_snapshot):
    r = guard.execute(sql)
    if r.ok:
        assert r.result.rows == [[serving_snapshot.manifest.as_of]], r.result.rows
    else:
        assert r.status == "refused", r.describe()
    machine = date.today()
    assert not (r.ok and machine in (r.result.rows[0] if r.result.rows else [])) or \
        machine == serving_snapshot.manifest.as_of
