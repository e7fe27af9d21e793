"""DuckDB's own view of a statement (guard/duckdb_view.py) and the function allowlist.

Three tables:

* ``ATTACKS`` through the real guard: every attack class of the outside review is refused
  (by whichever layer sees it first) and never returns rows;
* ``VIEW_CASES`` straight through :func:`compute_view` / :func:`decide` on a locked, read-only
  connection, *without* the sqlglot filter or the character scan in front: DuckDB's view
  alone refuses each class (defence in depth: a parser differential that fools sqlglot
  still meets DuckDB's own parse tree and bound plan);
* the golden references: all still allowed, with their frozen results.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.grading import compare_any
from sqleval_pipeline.guard import duckdb_view
from sqleval_pipeline.guard.database import fresh_connection, open_guarded_database
from sqleval_pipeline.guard.duckdb_view import compute_view, decide, inspect

ZWSP, LSEP = "\u200b", "\u2028"

#: (sql, accepted reason codes) through the whole guard; None = any refusal code
ATTACKS = [
    (f"SELECT *{ZWSP}FROM{ZWSP}duckdb_settings()", None),
    (f"SELECT 1 --{LSEP} , (SELECT count(*) FROM duckdb_settings())", None),
    (f"SELECT 1 --{ZWSP}\n, (SELECT value FROM duckdb_settings() LIMIT 1)", None),
    ("SELECT * FROM pg_settings", {"table_not_allowed", "duckdb_table_not_allowed"}),
    ("SELECT * FROM duckdb_databases()", {"denied_function", "table_function", "duckdb_function_not_allowed"}),
    ("SELECT * FROM query('SELECT 1')", {"denied_function", "table_function", "duckdb_function_not_allowed"}),
    ("SELECT * FROM query_table('fct_orders')",
     {"denied_function", "table_function", "duckdb_function_not_allowed"}),
    ("SELECT * FROM pragma_database_size()", {"denied_function", "table_function", "duckdb_function_not_allowed"}),
    ("SELECT * FROM read_blob('*.duckdb')", {"denied_function", "table_function", "duckdb_function_not_allowed"}),
    ("SELECT current_setting('threads')", {"denied_function", "duckdb_function_not_allowed"}),
    ("WITH RECURSIVE sqlite_master AS (SELECT * FROM sqlite_master) SELECT * FROM sqlite_master",
     {"table_not_allowed", "duckdb_table_not_allowed"}),
    ("WITH RECURSIVE duckdb_columns AS (SELECT * FROM duckdb_columns UNION ALL "
     "SELECT * FROM duckdb_columns WHERE false) SELECT * FROM duckdb_columns",
     {"table_not_allowed", "duckdb_table_not_allowed"}),
    ("SELECT get_block_size('main')", {"function_not_allowed", "duckdb_function_not_allowed"}),
    ("SELECT age(DATE '2020-01-01')", {"function_not_allowed", "duckdb_function_not_allowed"}),
    ("SELECT d.age() FROM (SELECT DATE '2020-01-01' AS d)", {"function_not_allowed", "duckdb_function_not_allowed"}),
    ("SELECT ago(INTERVAL 1 DAY)", {"function_not_allowed", "duckdb_function_not_allowed"}),
    ("SELECT uuid_extract_timestamp(uuidv7())", {"function_not_allowed", "duckdb_function_not_allowed"}),
    ('SELECT "current_timestamp"', {"duckdb_function_not_allowed"}),
    ('SELECT "current_date"', {"duckdb_function_not_allowed"}),
    ('SELECT "localtime"', {"duckdb_function_not_allowed"}),
    ('SELECT "localtimestamp"', {"duckdb_function_not_allowed"}),
    ('SELECT "current_time"', {"duckdb_function_not_allowed"}),
    ("SELECT gen_random_uuid()", {"function_not_allowed", "duckdb_function_not_allowed"}),
    ("SELECT version()", {"denied_function", "function_not_allowed", "duckdb_function_not_allowed"}),
]


@pytest.mark.parametrize("sql, codes", ATTACKS, ids=[repr(a[0])[:60] for a in ATTACKS])
def test_attack_is_refused_through_the_guard(sql, codes, guard):
    r = guard.execute(sql)
    assert r.status != "ok" and r.result is None, r.describe()
    assert r.status == "refused", r.describe()
    if codes is not None:
        assert r.reason in codes, r.describe()


# ----------------------------------------------------------------------------- the view alone

#: (sql, code from DuckDB's view alone; None = allowed)
VIEW_CASES = [
    ("SELECT count(*) FROM fct_orders", None),
    ("SELECT o.order_id FROM fct_orders o JOIN dim_customers c USING (customer_id) LIMIT 1", None),
    ("SELECT * FROM range(3) r, generate_series(1, 2) g, unnest([1, 2]) u", None),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT sum(n) FROM r", None),
    ("SELECT age(TIMESTAMP '2025-01-01', TIMESTAMP '2020-01-01')", None),
    # parser differentials: what sqlglot may not see, DuckDB does
    (f"SELECT *{ZWSP}FROM{ZWSP}duckdb_settings()", "duckdb_function_not_allowed"),  # ZWSP is a space
    (f"SELECT 1 --{LSEP} , (SELECT count(*) FROM duckdb_settings())", None),  # DuckDB: all comment
    ("SELECT 1 --x\n, (SELECT count(*) FROM duckdb_settings())", "duckdb_function_not_allowed"),
    ("SELECT * FROM pg_settings", "duckdb_table_not_allowed"),
    ("SELECT * FROM duckdb_databases()", "duckdb_function_not_allowed"),
    ("SELECT * FROM query('SELECT 1')", "duckdb_function_not_allowed"),
    ("SELECT * FROM query_table('fct_orders')", "duckdb_function_not_allowed"),
    ("SELECT * FROM pragma_database_size()", "duckdb_function_not_allowed"),
    ("SELECT * FROM pragma_table_info('fct_orders')", "duckdb_function_not_allowed"),
    ("SELECT * FROM read_blob('*.duckdb')", "duckdb_function_not_allowed"),
    ("SELECT current_setting('threads')", "duckdb_function_not_allowed"),
    ("SELECT * FROM sqlite_master", "duckdb_table_not_allowed"),
    ("SELECT * FROM information_schema.tables", "duckdb_table_not_allowed"),
    ("SELECT * FROM duckdb_columns", "duckdb_table_not_allowed"),
    # scope differential: a recursive CTE's own anchor reads the catalog object of that name
    ("WITH RECURSIVE sqlite_master AS (SELECT * FROM sqlite_master) SELECT * FROM sqlite_master",
     "duckdb_table_not_allowed"),
    ("WITH RECURSIVE t AS (SELECT * FROM duckdb_columns UNION ALL SELECT * FROM t WHERE false) "
     "SELECT * FROM t", "duckdb_table_not_allowed"),
    ("WITH RECURSIVE duckdb_columns AS (SELECT * FROM duckdb_columns) SELECT * FROM duckdb_columns",
     "duckdb_table_not_allowed"),
    # denylist gaps: macros over metadata or the clock, one-argument age, uuidv7, quoted keywords
    ("SELECT get_block_size('main')", "duckdb_function_not_allowed"),
    ("SELECT ago(INTERVAL 1 DAY)", "duckdb_function_not_allowed"),
    ("SELECT age(DATE '2020-01-01')", "duckdb_function_not_allowed"),
    ("SELECT d.age() FROM (SELECT DATE '2020-01-01' AS d)", "duckdb_function_not_allowed"),
    ("SELECT uuid_extract_timestamp(uuidv7())", "duckdb_function_not_allowed"),
    ('SELECT "current_timestamp"', "duckdb_function_not_allowed"),
    ('SELECT "current_date"', "duckdb_function_not_allowed"),
    ('SELECT "localtime"', "duckdb_function_not_allowed"),
    ('SELECT "localtimestamp"', "duckdb_function_not_allowed"),
    ("SELECT now()", "duckdb_function_not_allowed"),  # never rewritten here: refused, not the date
    ("SELECT current_date", "duckdb_function_not_allowed"),
    ("SELECT pg_postmaster_start_time()", "duckdb_function_not_allowed"),
    ("SELECT format_type(1, 1)", "duckdb_function_not_allowed"),
    ("SELECT nextval('s')", "duckdb_function_not_allowed"),
    ("SELECT * FROM main.sqlite_master", "duckdb_table_not_allowed"),
    ("SELECT * FROM system.main.duckdb_settings()", "duckdb_function_not_allowed"),
    ('SELECT "current_catalog" AS c', "duckdb_function_not_allowed"),  # alias hides it in EXPLAIN
    ("SELECT 1 FROM fct_orders, LATERAL (SELECT * FROM duckdb_tables())", "duckdb_function_not_allowed"),
    ("SELECT * FROM (DESCRIBE sqlite_master)", "duckdb_table_not_allowed"),
    ("SELECT * FROM (SUMMARIZE SELECT * FROM duckdb_settings())", "duckdb_function_not_allowed"),
    ("SELECT * FROM (SHOW TABLES)", "duckdb_table_not_allowed"),
    ("SELECT x FROM (SELECT 1 AS x) WHERE x IN (FROM pg_tables SELECT 1)", "duckdb_table_not_allowed"),
    ("WITH t AS MATERIALIZED (SELECT * FROM sqlite_master) SELECT * FROM t", "duckdb_table_not_allowed"),
    ("SELECT count(*) FROM system.main.fct_orders", "duckdb_table_not_allowed"),
    ("SELECT getvariable('x')", "duckdb_function_not_allowed"),
    ("PRAGMA database_size", "duckdb_not_single_select"),
    ("EXPLAIN SELECT 1", "duckdb_not_single_select"),
    ("SELECT 1; SELECT 2", "duckdb_not_single_select"),
]


@pytest.fixture(scope="module")
def locked_root(serving_snapshot, guard_policy):
    root = open_guarded_database(serving_snapshot.path, guard_policy)
    yield root
    root.close()


@pytest.mark.parametrize("sql, code", VIEW_CASES, ids=[repr(c[0])[:60] for c in VIEW_CASES])
def test_duckdb_view_alone(sql, code, locked_root, guard_policy):
    with fresh_connection(locked_root) as con:
        try:
            view, refusal = inspect(con, sql, con.extract_statements(sql), guard_policy, guard_policy.tables,
                                    allowed_schemas=guard_policy.schemas)
        except Exception as exc:  # noqa: BLE001 - a DuckDB error: the statement would fail anyway
            assert code == "duckdb_not_single_select", f"{type(exc).__name__}: {exc}"
            return
    got = refusal.code if refusal else None
    assert got == code, (refusal, view)


def test_view_reports_scans_and_bound_functions(locked_root, guard_policy):
    with fresh_connection(locked_root) as con:
        view = compute_view(con, "SELECT upper(c.customer_id::VARCHAR), count(*) FROM fct_orders o "
                                 "JOIN dim_customers c USING (customer_id) GROUP BY 1")
    assert view.tables == ("dim_customers", "fct_orders")
    assert {"upper", "count_star"} <= set(view.functions)
    assert ("", "", "fct_orders") in view.parse_tables
    assert view.parse_ms > 0 and view.plan_ms > 0


def test_alias_does_not_hide_a_clock_read(locked_root, guard_policy):
    """EXPLAIN prints a projection's alias; the serialized plan shows the bound function."""
    with fresh_connection(locked_root) as con:
        view = compute_view(con, 'SELECT "current_timestamp" AS t, "current_date" AS d')
    assert {"get_current_timestamp", "current_date"} <= view.plan_functions
    assert decide(view, guard_policy, guard_policy.tables).code == "duckdb_function_not_allowed"


def test_refusal_reply_carries_names_not_plans(locked_root, guard_policy):
    with fresh_connection(locked_root) as con:
        view = compute_view(con, "SELECT * FROM sqlite_master")
    refusal = decide(view, guard_policy, guard_policy.tables)
    reply = duckdb_view.refusal_reply(refusal, view, 1.0)
    assert reply["guard_refusal"] == "duckdb_table_not_allowed"
    assert "duckdb_tables" in reply and "duckdb_functions" in reply
    assert "CREATE" not in json.dumps(reply)  # no catalog content leaves the worker


def test_views_disagree(guard, monkeypatch):
    """DuckDB scanning a table the statement filter did not see is refused (layer filter)."""
    real = guard.filter.check

    def blind(sql):
        v = real(sql)
        return dataclasses.replace(v, tables=tuple(t for t in v.tables if t != "dim_customers"))

    monkeypatch.setattr(guard.filter, "check", blind)
    r = guard.execute("SELECT count(*) FROM fct_orders JOIN dim_customers USING (customer_id)")
    assert (r.status, r.layer, r.reason) == ("refused", "filter", "views_disagree"), r.describe()
    assert r.result is None


def test_duckdb_refusal_is_layer_filter(guard):
    r = guard.execute('SELECT "current_timestamp" AS t')
    assert (r.status, r.layer, r.reason) == ("refused", "filter", "duckdb_function_not_allowed")


def test_unused_cte_is_not_a_disagreement(guard):
    r = guard.execute("WITH unused AS (SELECT * FROM dim_customers) SELECT count(*) AS n FROM fct_orders")
    assert r.ok, r.describe()


# ----------------------------------------------------------------------------- golden regression

GOLDEN = [c for c in load_golden(location.GOLDEN_DIR).cases if c.reference_sql and c.expected is not None]


@pytest.mark.parametrize("case", GOLDEN, ids=[c.id for c in GOLDEN])
def test_golden_reference_allowed_with_frozen_result(case, guard):
    r = guard.execute(case.reference_sql)
    assert r.ok and not r.truncated, f"{case.id}: {r.describe()}"
    cmp = compare_any(case.accepted_results(), r.result, case.order_matters, case.order_keys)
    assert cmp.exact, f"{case.id}: {cmp.mismatch}"


def test_a_repeated_text_gets_the_same_decision(guard):
    """Decisions are cached per text (filter and worker): a repeat must decide identically."""
    for _ in range(3):  # more repeats than workers, so each worker sees the text again
        r = guard.execute('SELECT "current_timestamp" AS t')
        assert (r.status, r.layer, r.reason) == ("refused", "filter", "duckdb_function_not_allowed")
        e = guard.execute("SELECT nope FROM fct_orders")  # a binder error is never a cached verdict
        assert (e.status, e.reason) == ("error", "binder_error"), e.describe()
        ok = guard.execute("SELECT count(*) AS n FROM dim_segments")
        assert ok.ok and ok.result.rows[0][0] > 0, ok.describe()
        assert ok.tables == ("dim_segments",)
