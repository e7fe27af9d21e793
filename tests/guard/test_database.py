"""Database layer: read-only, locked, a fresh connection per query (tested below the filter)."""

from __future__ import annotations

import duckdb
import pytest

from sqleval_pipeline.guard.database import (
    DatabaseSetupError, classify_error, fresh_connection, open_guarded_database, verify_settings,
)


@pytest.fixture(scope="module")
def root(serving_snapshot, guard_policy):
    con = open_guarded_database(serving_snapshot.path, guard_policy)
    yield con
    con.close()


def test_settings_are_applied_and_locked(root, guard_policy):
    assert verify_settings(root, guard_policy) == []
    with fresh_connection(root) as con:
        assert verify_settings(con, guard_policy) == []  # inherited by every fresh connection
        for stmt in ["SET enable_external_access = true", "SET GLOBAL memory_limit = '100GB'",
                     "SET max_execution_time = 0", "RESET threads", "SET lock_configuration = false",
                     "SET python_enable_replacements = true"]:
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute(stmt)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM glob('/*')", "COPY (SELECT 1) TO 'x.csv'",
    "SELECT * FROM '/etc/hostname'", "INSTALL httpfs", "ATTACH '/tmp/sqleval_attach_test.duckdb' AS x",
])
def test_external_access_is_off(root, sql):
    with fresh_connection(root) as con, pytest.raises(duckdb.Error):
        con.execute(sql).fetchall()


def test_writes_fail_on_the_read_only_file(root):
    with fresh_connection(root) as con:
        for sql in ["DROP TABLE fct_orders", "DELETE FROM fct_orders", "CREATE TABLE main.x AS SELECT 1"]:
            with pytest.raises(duckdb.Error):
                con.execute(sql)


def test_temp_objects_do_not_survive_the_connection(root):
    """Measured: a temp view named like a real table poisons the connection — not the next one."""
    with fresh_connection(root) as con:
        con.execute("CREATE TEMP VIEW fct_orders AS SELECT 0 AS order_id")
        con.execute("CREATE TEMP MACRO today() AS DATE '1999-01-01'")
        con.execute("SET VARIABLE leak = 42")
        con.execute("SET search_path = 'temp'")
        assert con.execute("SELECT count(*) FROM fct_orders").fetchone() == (1,)
    with fresh_connection(root) as con:
        assert con.execute("SELECT count(*) FROM fct_orders").fetchone()[0] > 1
        assert con.execute("SELECT getvariable('leak')").fetchone() == (None,)
        assert con.execute("SELECT current_setting('search_path')").fetchone() == ("",)


def test_missing_file(tmp_path, guard_policy):
    with pytest.raises(DatabaseSetupError, match="missing"):
        open_guarded_database(tmp_path / "nope.duckdb", guard_policy)


@pytest.mark.parametrize("cls, msg, expected", [
    ("InterruptException", "INTERRUPT Error: Interrupted!", ("timeout", "database", "statement_timeout")),
    ("OutOfMemoryException", "Out of Memory Error: could not allocate block (1/1 used)", ("refused", "database", "memory_limit")),
    ("OutOfMemoryException", "Out of Memory Error: Failed to allocate (bad allocation)", ("refused", "sandbox", "address_space_limit")),
    ("MemoryError", "", ("refused", "sandbox", "address_space_limit")),
    ("InvalidInputException", "Cannot change configuration option - the configuration has been locked", ("refused", "database", "configuration_locked")),
    ("BinderException", "Binder Error: Referenced column x not found", ("error", None, "binder_error")),
    ("ParserException", "Parser Error: syntax error", ("error", None, "parser_error")),
])
def test_classify_error(cls, msg, expected):
    assert classify_error(cls, msg) == expected
