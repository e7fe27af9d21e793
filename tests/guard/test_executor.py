"""The guarded executor: typed results, pipeline records, structured logs, setup checks."""

from __future__ import annotations

import json
import logging

import duckdb
import pytest

from sqleval_pipeline.guard.executor import (
    GuardedExecutor, GuardSetupError, close_shared_executors, execute_guarded,
)
from sqleval_pipeline.pipeline.records import Execution


def test_ok_result_is_typed(guard):
    r = guard.execute("SELECT status, count(*) AS n FROM fct_orders GROUP BY status ORDER BY status")
    assert r.ok and r.layer is None and not r.truncated
    assert r.result.columns == ["status", "n"] and r.result.types == ["VARCHAR", "BIGINT"]
    assert r.tables == ("fct_orders",) and r.elapsed_ms > 0 and r.filter_ms > 0
    ex = r.to_execution("cfg", "q1", 0)
    assert isinstance(ex, Execution) and ex.status == "ok" and ex.result.rows == r.result.rows


def test_exists_subqueries_run_through_every_layer(guard):
    """EXISTS is syntax, not a function: a semi-join over served tables runs (it was refused
    as 'function exists() not on the allowlist'); over an unserved table it is refused."""
    sql = ("SELECT count(*) AS n FROM fct_orders o WHERE {} (SELECT 1 FROM fct_orders p "
           "WHERE p.order_id = o.order_id AND p.status = 'cancelled')")
    yes, no, total = (guard.execute(sql.format("EXISTS")), guard.execute(sql.format("NOT EXISTS")),
                      guard.execute("SELECT count(*) AS n FROM fct_orders"))
    assert yes.ok and no.ok, (yes.describe(), no.describe())
    assert yes.result.rows[0][0] + no.result.rows[0][0] == total.result.rows[0][0] > 0
    hidden = guard.execute("SELECT count(*) FROM fct_orders WHERE EXISTS (SELECT 1 FROM hr.salaries)")
    assert (hidden.status, hidden.layer) == ("refused", "filter")


@pytest.mark.parametrize("sql, status, layer, reason", [
    ("DROP TABLE fct_orders", "refused", "filter", "ddl_statement"),
    ("SELECT * FROM hr.salaries", "refused", "filter", "qualifier_not_allowed"),
    ("SELECT nope FROM fct_orders", "error", None, "binder_error"),
    ("SELECT 1/0::INTEGER, 'x'::INTEGER", "error", None, "conversion_error"),
    ("SELECT count(*) FROM fct_orders a, fct_orders b, fct_orders c", "timeout", "database", "statement_timeout"),
])
def test_outcomes_convert_to_pipeline_records(guard, sql, status, layer, reason):
    r = guard.execute(sql)
    assert (r.status, r.layer, r.reason) == (status, layer, reason), r.describe()
    ex = r.to_execution("cfg", "q1", 2)
    assert ex.status == status and ex.layer == layer and ex.reason == reason and ex.key == ("cfg", "q1", 2)
    if status == "error":
        assert ex.error_source == "sql" and ex.error_code == reason
    assert json.loads(Execution.model_validate_json(ex.model_dump_json()).model_dump_json())["status"] == status


def test_per_call_timeout(guard):
    r = guard.execute("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
                      timeout_s=0.3)
    assert r.status == "timeout" and r.elapsed_ms < 1500


def test_structured_log_records(serving_snapshot, guard_policy, tmp_path, caplog):
    log = tmp_path / "guard.jsonl"
    with GuardedExecutor(serving_snapshot.path, as_of=serving_snapshot.manifest.as_of, policy=guard_policy,
                         log_path=log, pool_size=1) as g, caplog.at_level(logging.INFO, "sqleval_pipeline.guard"):
        g.execute("SELECT count(*) FROM fct_orders", log_extra={"case_id": "c1"})
        g.execute("SELECT 1; DROP TABLE fct_orders")
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["status"] for r in recs] == ["ok", "refused"]
    assert recs[0]["case_id"] == "c1" and recs[0]["rows"] == 1 and recs[0]["tables"] == ["fct_orders"]
    assert recs[1]["layer"] == "filter" and recs[1]["reason"] == "multiple_statements"
    assert all(len(r["sql_sha256"]) == 64 and r["snapshot_id"] == serving_snapshot.snapshot_id for r in recs)
    guard_logs = [rec.guard for rec in caplog.records if hasattr(rec, "guard")]
    assert [g["status"] for g in guard_logs] == ["ok", "refused"]
    json.dumps(guard_logs)


def test_execute_guarded_shares_a_warm_executor(serving_snapshot):
    try:
        kw = {"as_of": serving_snapshot.manifest.as_of, "policy_overrides": {"sandbox": {"workers": 1}}}
        a = execute_guarded("SELECT count(*) FROM dim_products", serving_snapshot.path, **kw)
        b = execute_guarded("SELECT 1; SELECT 2", serving_snapshot.path, **kw)
        assert a.ok and a.result.rows == [[420]]
        assert b.reason == "multiple_statements"
    finally:
        close_shared_executors()


def test_setup_refuses_a_file_with_sensitive_schemas(tmp_path, serving_snapshot):
    bad = tmp_path / "snap-bad.duckdb"
    con = duckdb.connect(str(bad))
    con.execute("CREATE SCHEMA hr; CREATE TABLE hr.salaries AS SELECT 1 AS x; CREATE TABLE fct_orders AS SELECT 1 AS x")
    con.close()
    with pytest.raises(GuardSetupError, match=r"outside \['main'\]"):
        GuardedExecutor(bad, as_of=serving_snapshot.manifest.as_of)
    with pytest.raises(GuardSetupError, match="missing"):
        GuardedExecutor(tmp_path / "nope.duckdb", as_of=serving_snapshot.manifest.as_of)


# --------------------------------------------------------------------------- no paths in messages

import os  # noqa: E402
import tempfile  # noqa: E402

from sqleval_pipeline.guard.executor import GuardResult, scrub_paths  # noqa: E402
from sqleval_pipeline.guard.sandbox import WorkerReply  # noqa: E402


def _paths(serving_snapshot) -> list[str]:
    return [str(serving_snapshot.path), str(serving_snapshot.path.parent), os.path.expanduser("~"),
            os.path.expanduser("~/.duckdb/extensions/v1.2.0/linux_amd64/httpfs.duckdb_extension"),
            "~/.duckdb/extensions/v1.2.0/linux_amd64/httpfs.duckdb_extension", tempfile.gettempdir(),
            "/etc/passwd", "/var/lib/x"]


@pytest.mark.parametrize("error_class, template, reason", [
    ("IOException", 'IO Error: Cannot open file "{p}": No such file or directory', "i_o_error"),
    ("PermissionException", "Permission Error: Cannot access file '{p}' - disabled", "permission_denied"),
    ("OutOfMemoryException", "Out of Memory Error: could not spill to {p}/tmp.block", "memory_limit"),
    ("InvalidInputException", "Invalid Input Error: extension {p} not found ({p})", "invalid_input_error"),
])
def test_error_messages_carry_no_paths(guard, serving_snapshot, error_class, template, reason):
    for path in _paths(serving_snapshot):
        reply = WorkerReply(False, error_class=error_class, error_message=template.format(p=path))
        r = guard._from_reply(reply, {"sql": "SELECT 1"}, 0.0, "SELECT 1", ())
        assert r.reason == reason and "<path>" in r.message, r.message
        for leak in (str(serving_snapshot.path.parent), os.path.expanduser("~"), tempfile.gettempdir(),
                     "/etc", ".duckdb/extensions", "/var/lib"):
            assert leak not in r.message, (path, r.message)
        assert leak not in json.dumps(r.to_record())
    # the sandbox's own messages too
    crash = WorkerReply(False, sandbox_reason="worker_crashed",
                        error_message=f"the worker died in {serving_snapshot.path.parent}")
    assert str(serving_snapshot.path.parent) not in guard._from_reply(crash, {"sql": "x"}, 0, "x", ()).message


def test_any_result_message_is_scrubbed(serving_snapshot):
    r = GuardResult("error", sql="SELECT 1", message=f"failed on {serving_snapshot.path}")
    assert r.message == "failed on <path>"
    assert scrub_paths("Division by zero: 1/0 and a/b") == "Division by zero: 1/0 and a/b"


def test_a_real_database_error_is_scrubbed(guard, serving_snapshot):
    path = serving_snapshot.path
    r = guard.execute(f"SELECT error('cannot open {path} or ~/.duckdb/extensions/x.duckdb_extension')")
    if r.layer == "filter":
        pytest.skip(f"error() is refused by the filter here: {r.message}")
    assert r.status == "error" and "<path>" in r.message and str(path.parent) not in r.message, r.message


def test_decide_checks_everything_before_execution_and_runs_nothing(guard):
    ok = guard.decide("SELECT count(*) FROM fct_orders")
    assert ok.ok and ok.result is None and ok.tables == ("fct_orders",), ok.describe()
    # a cross join that would outlast the timeout: deciding it executes nothing, so it is not a timeout
    bomb = guard.decide("SELECT count(*) FROM fct_order_items a, fct_order_items b, fct_order_items c")
    assert bomb.ok and bomb.result is None, bomb.describe()
    # DuckDB's view refuses what sqlglot's lets through (a quoted keyword bound to the clock)
    clock = guard.decide('SELECT "current_timestamp" AS t')
    assert (clock.status, clock.layer, clock.reason) == ("refused", "filter", "duckdb_function_not_allowed")
    # the clock rewrite is reported as the text that would run
    pinned = guard.decide("SELECT current_date AS d")
    assert pinned.ok and "DATE '" in pinned.executed_sql
    after = guard.execute("SELECT count(*) FROM fct_orders")  # the worker still answers
    assert after.ok and after.result.rows[0][0] > 0, after.describe()
