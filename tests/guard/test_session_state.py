"""No session state (issue 21, class 5): a pinned time zone, and an allowlist audited by rules.

* The worker's connection pins ``TimeZone`` (UTC) and ``Calendar`` (gregorian): the zone the
  machine runs in never reaches an answer (``strftime(TIMESTAMPTZ ..., '%Z')``).
* The allowlist generator's purity rules read DuckDB's own metadata: a function DuckDB marks
  volatile or side-effecting, or one that looks a catalog object / function up by a text
  argument, is excluded unless reviewed. Checked here against ``duckdb_functions()`` directly
  (not through the generator), and the rules themselves on a UDF registered for the test.
* ``list_aggregate`` and its kind call the aggregate their text names: only a string constant
  naming an allowed aggregate passes, in a lambda body too (where the plan folds it away).
"""

from __future__ import annotations

import os
import time

import duckdb
import pytest
import yaml

from sqleval_pipeline.guard import allowlist_gen
from sqleval_pipeline.guard.database import open_guarded_database, fresh_connection
from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS

TZ_PROBE = "SELECT strftime(TIMESTAMPTZ '2025-07-01 12:00:00+00', '%Z') AS z, " \
           "strftime(TIMESTAMPTZ '2025-07-01 12:00:00+00', '%H') AS h"


@pytest.fixture()
def machine_zone(monkeypatch):
    """The process runs in New York time (DuckDB's ICU reads TZ when a database opens)."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield "America/New_York"
    monkeypatch.undo()
    time.tzset()


def test_an_unpinned_connection_would_show_the_machine_zone(machine_zone):
    """The premise: without the pin, the zone leaks (else the next test proves nothing)."""
    assert duckdb.connect().execute(TZ_PROBE).fetchone() == (machine_zone, "08")


def test_the_guarded_connection_pins_utc(machine_zone, serving_snapshot, guard_policy):
    root = open_guarded_database(serving_snapshot.path, guard_policy)
    try:
        with fresh_connection(root) as con:
            assert con.execute(TZ_PROBE).fetchone() == ("UTC", "12")
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute("SET TimeZone = 'Europe/Paris'")
    finally:
        root.close()


def test_the_guard_answers_in_utc(guard):
    r = guard.execute(TZ_PROBE)
    assert r.ok, r.describe()
    assert r.result.rows == [["UTC", "12"]]


# --------------------------------------------------------------------------- allowlist purity

_NAME_PARAMS = {"name", "sequence_name", "catalog", "schema", "table", "table_name", "index_name",
                "type_name", "function_name", "setting", "variable"}


def _metadata():
    con = duckdb.connect()
    return con.execute("SELECT lower(function_name), has_side_effects, stability, parameters, parameter_types, "
                       "function_type FROM duckdb_functions()").fetchall()


def test_no_allowed_function_writes_or_is_volatile_unless_reviewed():
    bad = sorted({n for n, effects, stability, *_ in _metadata()
                  if n in ALLOWED_FUNCTIONS and (effects or stability == "VOLATILE")})
    assert bad == sorted(allowlist_gen.REVIEWED_VOLATILE), bad


def test_no_allowed_function_looks_a_name_up_unless_reviewed():
    bad = sorted({n for n, _e, _s, params, types, ftype in _metadata()
                  if n in ALLOWED_FUNCTIONS and ftype not in ("table", "table_macro", "pragma")
                  and any(str(p).lower() in _NAME_PARAMS and str(t).upper() in ("VARCHAR", "STRUCT", "ANY")
                          for p, t in zip(params or [], types or []))})
    assert set(bad) <= set(allowlist_gen.REVIEWED_NAME_PARAMETERS), bad


@pytest.mark.parametrize("name", ["index_key", "setval", "nextval", "currval", "make_type",
                                  "to_aggregate_state", "vector_type", "current_setting"])
def test_named_offenders_are_off_the_allowlist(name):
    assert name not in ALLOWED_FUNCTIONS


def test_the_checked_in_allowlist_is_what_the_generator_writes():
    from importlib.resources import files

    checked_in = yaml.safe_load(files("sqleval_pipeline.data").joinpath("functions.yaml").read_text(encoding="utf-8"))
    assert checked_in["allowed"] == allowlist_gen.generate()["allowed"]


def test_the_purity_rules_judge_a_new_function():
    """A function DuckDB gains (here a UDF) is judged by its metadata, not by its name."""
    con = duckdb.connect()
    con.create_function("probe_writes_state", lambda x: x, ["VARCHAR"], "VARCHAR", side_effects=True)
    con.create_function("probe_pure", lambda x: x, ["VARCHAR"], "VARCHAR")
    rules = allowlist_gen.impure(con)
    assert rules.get("probe_writes_state") == "state_and_volatile"
    assert "probe_pure" not in rules
    doc = allowlist_gen.generate(con)
    assert "probe_writes_state" in doc["excluded"]["state_and_volatile"]
    assert "probe_pure" in doc["allowed"]
    assert rules.get("index_key") == "names_looked_up" and rules.get("setval") == "state_and_volatile"


# --------------------------------------------------------------------------- aggregates named in text

@pytest.mark.parametrize("sql, ok", [
    ("SELECT list_aggregate([1, 2], 'sum') AS s", True),
    ("SELECT list_sum([1, 2]) AS s", True),
    ("SELECT list_aggregate([1, 2], 'SUM') AS s", True),
    ("SELECT list_aggregate([1, 2], 'reservoir_quantile', 0.5) AS s", False),
    ("SELECT list_transform([1], lambda x: list_aggregate([1, 2], 'reservoir_quantile', 0.5))[1] AS s", False),
    ("SELECT list_aggregate([1, 2], lower('SUM')) AS s", False),
    ("SELECT aggregate([1, 2], 'sum') AS s", True),
])
def test_aggregates_named_in_text(sql, ok, guard):
    r = guard.execute(sql)
    assert r.ok is ok, r.describe()
    if not ok:
        assert r.status == "refused", r.describe()
