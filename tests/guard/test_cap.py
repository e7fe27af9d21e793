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
    r = guard.execute("SELECT repeat('x', 40000000) AS big")  # one value over the per-cell cap
    assert (r.status, r.layer, r.reason) == ("refused", "cap", "cell_too_large")
    r = guard.execute("SELECT repeat('x', 50000) AS big FROM fct_orders LIMIT 900")  # 45 MB, small cells
    assert (r.status, r.layer, r.reason) == ("refused", "cap", "result_too_large")


def test_estimate_size_stops_at_budget():
    assert 50 < estimate_size(["x" * 10] * 1000, budget=50) < 12 * 1000
    # a long list is not walked element by element once its framing alone is over budget
    assert estimate_size([""] * 10_000_000, budget=1000) <= 10_000_002


# --------------------------------------------------------------------------- bytes, not rows

from sqleval_pipeline.guard.cap import CapExceeded, encoded_size, fetch_capped  # noqa: E402


def test_encoded_size_counts_utf8_bytes_and_framing():
    assert encoded_size("é" * 10) == 2 + 20          # UTF-8 bytes, not code points
    assert encoded_size("€" * 100) == 2 + 300
    assert encoded_size([""] * 1000) >= 3000        # an empty string still costs framing
    assert encoded_size([None] * 1000) >= 5000      # so does a NULL element
    assert encoded_size({"k": [[""]] * 10}) > encoded_size({"k": []}) + 40  # every nesting level counts
    assert encoded_size(b"\x00" * 300) >= 400       # bytes are encoded in base64
    assert encoded_size("x" * 10_000_000, budget=100) <= 10_000_002  # ASCII: no copy, stops at once


class _Cursor:
    """A DB-API cursor double that records how many rows were materialized."""

    def __init__(self, rows):
        self.rows = list(rows)
        self.fetched = 0

    def fetchmany(self, n):
        out, self.rows = self.rows[:n], self.rows[n:]
        self.fetched += len(out)
        return out


def test_fetch_capped_stops_at_the_byte_cap_while_fetching():
    cur = _Cursor([("x" * 1000,)] * 100_000)
    with pytest.raises(CapExceeded) as info:
        fetch_capped(cur, 1_000_000, max_bytes=50_000)
    assert info.value.reason == "result_too_large"
    assert cur.fetched * 1000 <= 2 * 50_000 + 1000, cur.fetched  # never far more than the cap


def test_fetch_capped_refuses_one_huge_cell_and_keeps_row_truncation():
    with pytest.raises(CapExceeded) as info:
        fetch_capped(_Cursor([(1, "€" * 400_000)]), 10, max_bytes=10 << 20, max_cell_bytes=1 << 20)
    assert info.value.reason == "cell_too_large"
    with pytest.raises(CapExceeded):  # a list of empty strings is not free
        fetch_capped(_Cursor([([""] * 400_000,)]), 10, max_bytes=10 << 20, max_cell_bytes=1 << 20)
    rows, truncated = fetch_capped(_Cursor([(i,) for i in range(50)]), 10, max_bytes=10 << 20,
                                   max_cell_bytes=1 << 20)
    assert rows == [(i,) for i in range(10)] and truncated


@pytest.mark.parametrize("sql, reason", [
    # one cell carrying a whole table
    ("SELECT string_agg(order_id::VARCHAR || repeat('x', 20), ',') FROM fct_orders", "cell_too_large"),
    ("SELECT list(t) FROM fct_orders t", "cell_too_large"),
    # 400,000 code points, 1.2 MB of UTF-8
    ("SELECT repeat('€', 400000)", "cell_too_large"),
    # 900 rows x 15,000 code points: 13.5 M code points, 40.5 MB of UTF-8 (over the 32 MiB cap),
    # each cell 45 KB (under the 64 KiB cell cap)
    ("SELECT repeat('€', 15000) AS s FROM fct_orders LIMIT 900", "result_too_large"),
    # lists of empty strings: 101,860 lists of 6, each element still framed
    ("SELECT list(['', '', '', '', '', '']) FROM fct_order_items", "cell_too_large"),
])
def test_bytes_not_rows_are_capped(guard, sql, reason):
    r = guard.execute(sql)
    assert (r.status, r.layer, r.reason) == ("refused", "cap", reason), r.describe()
    assert r.result is None and not r.truncated
    ok = guard.execute("SELECT count(*) FROM dim_customers")
    assert ok.ok and ok.result.rows == [[8000]]


def test_many_rows_of_empty_lists_are_capped(serving_snapshot, guard_policy):
    from sqleval_pipeline.guard.sandbox import WorkerPool

    policy = guard_policy.with_overrides({"limits": {"max_result_bytes": 2 << 20}})
    with WorkerPool(serving_snapshot.path, policy, size=1) as pool:
        # 1,000 rows of 1,000 empty strings: 0 bytes by length, ~3 MB encoded
        r = pool.run("SELECT list('') FROM range(1000000) GROUP BY range % 1000")
        assert not r.ok and r.sandbox_reason == "result_too_large" and r.rows == []
        ok = pool.run("SELECT list('') FROM range(100000) GROUP BY range % 1000")
        assert ok.ok and len(ok.rows) == 1000


# --------------------------------------------------------------------------- nested values measured by DuckDB


def _precheck(sql: str, *, row_cap: int = 1000, max_bytes: int | None = 1 << 20, max_cell: int | None = 1 << 10):
    import duckdb

    from sqleval_pipeline.guard.cap import precheck_nested

    con = duckdb.connect()
    st = con.extract_statements(sql)[0]
    desc = con.execute(st).description
    precheck_nested(con, st.query, desc, row_cap, max_bytes=max_bytes, max_cell_bytes=max_cell)


def test_nested_columns_are_found_by_type():
    import duckdb

    from sqleval_pipeline.guard.cap import nested_columns

    desc = duckdb.connect().execute(
        "SELECT 1 AS a, [1] AS b, {'x': 1} AS c, MAP {'k': 1} AS d, 'x' AS e, [1, 2]::INT[2] AS f").description
    assert nested_columns(desc) == [1, 2, 3, 5]


@pytest.mark.parametrize("sql, reason", [
    # one list of 2,000 ints: about 12 KB of text, over the 1 KiB cell cap
    ("SELECT list(range) AS l FROM range(2000)", "cell_too_large"),
    # duplicate output names and a trailing comment cannot break the wrapper
    ("SELECT 1 AS l, list(range) AS l FROM range(2000) -- the end", "cell_too_large"),
    # a struct of a big string
    ("SELECT {'s': repeat('x', 5000)} AS s", "cell_too_large"),
    # 600 rows of 500-byte lists: each under the cell cap, 300 KB together, over a 100 KB cap
    ("SELECT list(repeat('y', 20)) AS l FROM range(600 * 20) GROUP BY range % 600", "result_too_large"),
])
def test_nested_precheck_refuses_before_conversion(sql, reason):
    max_bytes = 100_000 if reason == "result_too_large" else 1 << 20
    with pytest.raises(CapExceeded) as info:
        _precheck(sql, max_bytes=max_bytes)
    assert info.value.reason == reason


@pytest.mark.parametrize("sql", [
    "SELECT list(range) AS l FROM range(50)",            # small list
    "SELECT range AS n, 'x' AS s FROM range(5000)",      # no nested column: nothing measured
    "SELECT list(repeat('y', 20)) FROM range(600 * 20) GROUP BY range % 600",  # 300 KB, under 1 MiB
])
def test_nested_precheck_lets_results_within_the_caps_through(sql):
    _precheck(sql)


def test_nested_precheck_measures_only_the_rows_kept():
    # 10 rows under the row cap of 10, the 11th row's list is huge: not measured (truncated away)
    sql = ("SELECT CASE WHEN range < 10 THEN ['a'] ELSE list_value(repeat('z', 100000)) END AS l "
           "FROM range(11) ORDER BY range")
    _precheck(sql, row_cap=10)
    with pytest.raises(CapExceeded):
        _precheck(sql, row_cap=11)


def test_a_table_in_one_window_cell_is_refused_by_the_cap(guard):
    """A table packed into one list cell by a window aggregate: the cap refuses it (DuckDB
    measures the cell before Python converts it), and the worker answers the next query."""
    r = guard.execute("SELECT list(t) OVER () AS l FROM fct_order_items t LIMIT 1")
    assert (r.status, r.layer, r.reason) == ("refused", "cap", "cell_too_large"), r.describe()
    ok = guard.execute("SELECT [1, 2] AS l, {'a': 'b'} AS s")
    assert ok.ok and ok.result.rows == [[[1, 2], {"a": "b"}]], ok.describe()


@pytest.mark.parametrize("sql", ["SELECT list(range) AS l FROM range(2000);",
                                 "SELECT list(range) AS l FROM range(2000) ; -- the end",
                                 "SELECT list(range) AS l FROM range(2000) /* a */ ; ;"])
def test_nested_precheck_copes_with_trailing_semicolons(sql):
    # DuckDB keeps the semicolon in the statement's text; the wrapper must not choke on it
    with pytest.raises(CapExceeded) as info:
        _precheck(sql)
    assert info.value.reason == "cell_too_large"


@pytest.mark.parametrize("sql", ["SELECT [1, 2] AS l;", "SELECT [1, 2] AS l; -- done"])
def test_a_small_nested_result_with_a_semicolon_comes_back(guard, sql):
    r = guard.execute(sql)
    assert r.ok and r.result.rows == [[[1, 2]]], r.describe()
