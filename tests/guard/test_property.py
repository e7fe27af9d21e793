"""Property: golden queries mutated with injected fragments never write, read sensitive data or escape.

Mutations (composed, 1–3 per example): stacked statements appended, a table replaced by a
sensitive table / introspection view / file or SQL-in-string function, a sensitive source
joined, unioned or hidden in a CTE or subquery, and comments (including comments that hide
a statement) inserted at token boundaries. Whatever the mutation:

* no write: the snapshot file is byte-identical afterwards, and nothing was created at the
  canary paths the fragments name;
* no sensitive read: a result that comes back holds none of the sensitive values (names,
  emails, phones of hr / pii rows in the warehouse);
* no escape: the caller is alive, the pool is full, the workers' directory is empty;
* and a mutation that injects a hostile fragment never returns rows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.snapshot import file_checksum

REFS = [c.reference_sql for c in load_golden(location.GOLDEN_DIR).cases if c.reference_sql]
CANARY = Path("/tmp/sqleval_property_canary")
TABLE_RE = re.compile(r"\b(fct_orders|fct_order_items|fct_returns|dim_customers|dim_products|dim_segments|"
                      r"mart_orders_daily|mart_revenue_monthly)\b")

STACKED = [
    "; DROP TABLE fct_orders", ";DELETE FROM fct_orders", f"; COPY fct_orders TO '{CANARY}.csv'",
    f"; ATTACH '{CANARY}.duckdb' AS x", "; SET enable_external_access = true",
    "; CREATE TEMP VIEW fct_orders AS SELECT 1", "\n;INSERT INTO fct_orders SELECT * FROM fct_orders",
    "; SELECT * FROM hr.salaries", "; CALL enable_logging()", "; LOAD httpfs",
]
SOURCES = [
    "hr.salaries", "hr.employees", "pii.customer_contacts", "raw_hr.salaries", "raw_pii.customer_contacts",
    '"HR"."Salaries"', "Pii.Customer_Contacts", "salaries", "customer_contacts", "information_schema.tables",
    "duckdb_tables()", "duckdb_settings()", f"read_csv('{CANARY}.csv')", f"'{CANARY}.csv'",
    "read_text('/etc/hostname')", "glob('/*')", "query('SELECT * FROM hr.salaries')",
    "query_table('pii.customer_contacts')", "expected_df", "wh.hr.salaries", "pg_catalog.pg_tables",
]
COMMENTS = ["/* x */", "-- c\n", "/* ; DROP TABLE fct_orders */", "--; DELETE FROM fct_orders\n", "/**/"]


@st.composite
def mutated(draw):
    sql = draw(st.sampled_from(REFS))
    hostile = False
    for kind in draw(st.lists(st.sampled_from(["stack", "replace", "join", "cte", "union", "subquery",
                                               "comment"]), min_size=1, max_size=3)):
        if kind == "stack":
            sql += draw(st.sampled_from(STACKED))
            hostile = True
        elif kind == "replace" and TABLE_RE.search(sql):
            sql = TABLE_RE.sub(draw(st.sampled_from(SOURCES)), sql, count=1)
            hostile = True
        elif kind == "join":
            src = draw(st.sampled_from(SOURCES))
            sql = f"SELECT * FROM ({sql}) q, {src} s"
            hostile = True
        elif kind == "cte":
            src = draw(st.sampled_from(SOURCES))
            sql = f"WITH leak AS (SELECT * FROM {src}) SELECT * FROM ({sql}) q WHERE EXISTS (SELECT 1 FROM leak)"
            hostile = True
        elif kind == "union":
            src = draw(st.sampled_from(SOURCES))
            sql = f"SELECT * FROM ({sql}) q UNION ALL SELECT * FROM {src}"
            hostile = True
        elif kind == "subquery":
            src = draw(st.sampled_from(SOURCES))
            sql = f"SELECT *, (SELECT count(*) FROM {src}) AS n FROM ({sql}) q"
            hostile = True
        elif kind == "comment":
            words = sql.split(" ")
            i = draw(st.integers(min_value=1, max_value=len(words)))
            # never split a quoted literal: only insert between words outside quotes
            if words[:i] and " ".join(words[:i]).count("'") % 2 == 0:
                sql = " ".join(words[:i]) + " " + draw(st.sampled_from(COMMENTS)) + " " + " ".join(words[i:])
    return sql, hostile


@pytest.fixture(scope="module")
def sensitive_values(built_warehouse):
    con = duckdb.connect(str(built_warehouse.warehouse), read_only=True)
    try:
        values = set()
        for sql in ["SELECT full_name, email, phone FROM pii.customer_contacts",
                    "SELECT full_name, title FROM hr.employees",
                    "SELECT CAST(annual_ctc_inr AS VARCHAR) FROM hr.salaries"]:
            for row in con.execute(sql).fetchall():
                values.update(str(v) for v in row if v is not None)
    finally:
        con.close()
    return values


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=mutated())
def test_mutations_never_write_leak_or_escape(case, guard, sensitive_values, serving_snapshot):
    sql, hostile = case
    snap_stat = os.stat(serving_snapshot.path)
    r = guard.execute(sql, timeout_s=1.0)
    if hostile:
        assert not r.ok, f"hostile mutation returned rows: {sql!r}"
    if r.ok:
        for row in r.result.rows:
            for v in row:
                assert str(v) not in sensitive_values, f"sensitive value {v!r} leaked by {sql!r}"
    after = os.stat(serving_snapshot.path)
    assert (after.st_size, after.st_mtime_ns) == (snap_stat.st_size, snap_stat.st_mtime_ns)
    assert not any(Path(str(CANARY) + ext).exists() for ext in (".csv", ".duckdb"))
    assert os.listdir(guard.pool.workdir) == []
    assert len(guard.pool.worker_pids()) == guard.pool.size


def test_snapshot_unchanged_after_property_run(serving_snapshot, checksum_before, guard):
    assert file_checksum(serving_snapshot.path) == checksum_before
