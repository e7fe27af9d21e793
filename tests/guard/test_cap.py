"""Result cap and LIMIT injection (UNION / ORDER BY / OFFSET / FETCH)."""

from __future__ import annotations

import pytest

from sqleval_pipeline.guard.cap import WRAP_ALIAS, estimate_size, inject_limit

WRAP = f"SELECT * FROM (\n{{}}\n) AS {WRAP_ALIAS} LIMIT 100"

CASES = [
    ("SELECT a FROM t", "SELECT a FROM t\nLIMIT 100"),
    ("SELECT a FROM t;", "SELECT a FROM t\nLIMIT 100"),
    ("SELECT a FROM t -- trailing comment", "SELECT a FROM t\nLIMIT 100"),
    ("SELECT a FROM t ORDER BY a DESC", "SELECT a FROM t ORDER BY a DESC\nLIMIT 100"),
    ("SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1", "SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1\nLIMIT 100"),
    ("SELECT a FROM t UNION SELECT b FROM u", "SELECT a FROM t UNION SELECT b FROM u\nLIMIT 100"),
    ("(SELECT a FROM t) UNION (SELECT b FROM u) LIMIT 5000", "(SELECT a FROM t) UNION (SELECT b FROM u) LIMIT 100"),
    ("SELECT a FROM t OFFSET 5", "SELECT a FROM t OFFSET 5\nLIMIT 100"),
    ("SELECT a FROM t LIMIT 5000", "SELECT a FROM t LIMIT 100"),
    ("SELECT a FROM t LIMIT 5000 OFFSET 10", "SELECT a FROM t LIMIT 100 OFFSET 10"),
    ("SELECT a FROM t ORDER BY a LIMIT 7 OFFSET 3", "SELECT a FROM t ORDER BY a LIMIT 7 OFFSET 3"),
    ("SELECT a FROM t LIMIT 100", "SELECT a FROM t LIMIT 100"),
    ("SELECT a FROM t FETCH FIRST 5 ROWS ONLY", "SELECT a FROM t FETCH FIRST 5 ROWS ONLY"),
    ("SELECT a FROM t ORDER BY a FETCH FIRST 5000 ROWS ONLY", WRAP.format("SELECT a FROM t ORDER BY a FETCH FIRST 5000 ROWS ONLY")),
    ("SELECT a FROM t LIMIT 10%", WRAP.format("SELECT a FROM t LIMIT 10%")),
    ("SELECT a FROM t LIMIT (SELECT 5)", WRAP.format("SELECT a FROM t LIMIT (SELECT 5)")),
    ("SELECT a FROM (SELECT a FROM t LIMIT 5000) s", "SELECT a FROM (SELECT a FROM t LIMIT 5000) s\nLIMIT 100"),
    ("WITH x AS (SELECT 1 LIMIT 9999) SELECT * FROM x LIMIT 2000", "WITH x AS (SELECT 1 LIMIT 9999) SELECT * FROM x LIMIT 100"),
    ("(SELECT a FROM t)", WRAP.format("(SELECT a FROM t)")),
]


@pytest.mark.parametrize("sql, expected", CASES, ids=[c[0][:40] for c in CASES])
def test_inject_limit(sql, expected):
    assert inject_limit(sql, 100) == expected


@pytest.mark.parametrize("sql", ["DROP TABLE t", "SELECT 1; SELECT 2", "SET x = 1"])
def test_inject_limit_refuses_non_queries(sql):
    with pytest.raises(ValueError):
        inject_limit(sql, 10)


SEMANTIC = [
    "SELECT order_id FROM fct_orders ORDER BY order_id DESC",
    "SELECT order_id FROM fct_orders UNION ALL SELECT order_id FROM fct_returns ORDER BY 1 DESC",
    "SELECT customer_id FROM fct_orders UNION SELECT customer_id FROM fct_returns ORDER BY 1",
    "SELECT order_id FROM fct_orders ORDER BY order_id OFFSET 7",
    "SELECT order_id FROM fct_orders ORDER BY order_id LIMIT 50000 OFFSET 11",
    "SELECT order_id FROM fct_orders ORDER BY order_id FETCH FIRST 5000 ROWS ONLY",
    "SELECT order_id FROM fct_orders ORDER BY order_id LIMIT 3",
]


@pytest.mark.parametrize("sql", SEMANTIC, ids=[s[-40:] for s in SEMANTIC])
def test_injected_limit_returns_the_first_rows(guard, sql):
    """With LIMIT injected the guard returns exactly the first n rows of the capped result."""
    full = guard.execute(sql)
    limited = guard.execute(sql, limit=25)
    assert full.ok and limited.ok, (full.describe(), limited.describe())
    assert limited.result.rows == full.result.rows[:25]
    assert not limited.truncated


def test_cap_truncates_and_flags(guard):
    r = guard.execute("SELECT order_id FROM fct_orders ORDER BY order_id")
    assert r.ok and r.truncated and len(r.result.rows) == guard.policy.row_cap
    assert (r.layer, r.reason) == ("cap", "row_cap")
    assert r.result.rows[0] == [1]
    exact = guard.execute(f"SELECT order_id FROM fct_orders LIMIT {guard.policy.row_cap}")
    assert exact.ok and not exact.truncated and len(exact.result.rows) == guard.policy.row_cap


def test_oversized_result_is_refused_by_the_cap(guard):
    r = guard.execute("SELECT repeat('x', 40000000) AS big")
    assert (r.status, r.layer, r.reason) == ("refused", "cap", "result_too_large")


def test_estimate_size_stops_at_budget():
    assert estimate_size(["x" * 10] * 1000, budget=50) <= 60
