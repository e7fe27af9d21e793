"""The declarative guard policy and its per-configuration overrides."""

from __future__ import annotations

import pytest

from sqleval_pipeline.guard.policy import BASELINE_DENIED_NAMES, PolicyError, load_policy
from sqleval_pipeline.snapshot import list_serving_objects


def test_defaults():
    p = load_policy()
    assert p.row_cap == 1000 and p.statement_timeout_s == 30 and p.schemas == {"main"}
    assert BASELINE_DENIED_NAMES <= p.denied_function_names
    assert p.function_denied("DUCKDB_SETTINGS") and p.function_denied("read_parquet")
    assert not p.function_denied("sum") and not p.function_denied("date_trunc")


def test_allowlist_is_the_snapshot_main_schema(serving_snapshot):
    tables = {o[2] for o in list_serving_objects(serving_snapshot.path) if o[1] == "main"}
    assert load_policy().tables == tables


def test_overrides_apply_and_are_versioned():
    base = load_policy()
    p = base.with_overrides({"limits": {"row_cap": 10, "statement_timeout_s": 5}})
    assert (p.row_cap, p.statement_timeout_s) == (10, 5)
    assert p.version != base.version and load_policy().version == base.version


@pytest.mark.parametrize("overrides, match", [
    ({"allowlist": {"tables": ["fct_orders", "salaries"]}}, "widen"),
    ({"allowlist": {"schemas": ["main", "hr"]}}, "widen"),
    ({"limits": {"row_cap": 0}}, "row_cap"),
    ({"limits": {"nope": 1}}, "unknown"),
    ({"bogus": {}}, "unknown"),
    ({"denied_functions": {"patterns": ["("]}}, "regular expression"),
])
def test_bad_overrides_are_refused(overrides, match):
    with pytest.raises(PolicyError, match=match):
        load_policy(overrides=overrides)


def test_baseline_denylist_cannot_be_removed(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("allowlist: {tables: [fct_orders]}\ndenied_functions: {names: [], patterns: []}\n")
    p = load_policy(f)
    assert p.function_denied("query") and p.function_denied("read_csv") and p.function_denied("duckdb_tables")


def test_missing_or_empty_policy(tmp_path):
    with pytest.raises(PolicyError, match="no guard policy"):
        load_policy(tmp_path / "missing.yaml")
    f = tmp_path / "p.yaml"
    f.write_text("allowlist: {tables: []}\n")
    with pytest.raises(PolicyError, match="empty"):
        load_policy(f)
