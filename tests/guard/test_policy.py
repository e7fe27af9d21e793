"""The declarative guard policy and its per-configuration overrides."""

from __future__ import annotations

import pytest

from sqleval_pipeline.guard.policy import BASELINE_DENIED_NAMES, PolicyError, load_policy
from sqleval_pipeline.snapshot import list_serving_objects
from tests.conftest import demo_policy


def test_defaults():
    p = demo_policy()
    assert p.row_cap == 1000 and p.statement_timeout_s == 30 and p.schemas == {"main"}
    assert BASELINE_DENIED_NAMES <= p.denied_function_names
    assert p.function_denied("DUCKDB_SETTINGS") and p.function_denied("read_parquet")
    assert not p.function_denied("sum") and not p.function_denied("date_trunc")


def test_allowlist_defaults_to_the_served_tables(serving_snapshot):
    tables = {o[2] for o in list_serving_objects(serving_snapshot.path) if o[1] == "main"}
    assert load_policy(served=tables).tables == tables


def test_a_policy_file_can_only_narrow_what_is_served(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("allowlist: {tables: [Claims]}\n")
    assert load_policy(f, served=["claims", "policies"]).tables == {"claims"}
    f.write_text("allowlist: {tables: [claims, salaries]}\n")
    with pytest.raises(PolicyError, match=r"names \['salaries'\], which the snapshot does not serve"):
        load_policy(f, served=["claims", "policies"])
    # a project without a policy file gets every default over what it serves
    p = load_policy(tmp_path / "absent.yaml", served=["claims"], schemas=["analytics"], optional=True)
    assert p.tables == {"claims"} and p.schemas == {"analytics"} and p.row_cap == 1000


def test_overrides_apply_and_are_versioned():
    base = demo_policy()
    p = base.with_overrides({"limits": {"row_cap": 10, "statement_timeout_s": 5}})
    assert (p.row_cap, p.statement_timeout_s) == (10, 5)
    assert p.version != base.version and demo_policy().version == base.version


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
        demo_policy(overrides=overrides)


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


def test_function_allowlist_is_loaded_and_excludes_the_dangerous_families():
    from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS, ALLOWED_TABLE_FUNCTIONS

    p = demo_policy()
    assert p.allowed_functions == ALLOWED_FUNCTIONS and len(ALLOWED_FUNCTIONS) > 500
    assert ALLOWED_TABLE_FUNCTIONS == {"range", "generate_series", "unnest"}
    for name in ("sum", "date_trunc", "regexp_matches", "list_transform", "row_number", "strftime"):
        assert p.function_allowed(name), name
    for name in ("now", "current_date", "get_current_timestamp", "ago", "uuidv7", "query", "query_table",
                 "read_blob", "current_setting", "get_block_size", "duckdb_settings", "pragma_version",
                 "json_serialize_sql", "json_deserialize_sql", "json_execute_serialized_sql", "getvariable",
                 "version", "nextval", "sleep_ms", "write_log"):
        assert not p.function_allowed(name), name
    assert p.function_allowed("age", 2) and not p.function_allowed("age", 1)
    assert p.table_function_allowed("range") and not p.table_function_allowed("read_csv")


def test_an_override_can_narrow_the_function_allowlist_but_never_widen_it():
    p = demo_policy()
    narrowed = p.with_overrides({"denied_functions": {"names": ["md5"]}})
    assert not narrowed.function_allowed("md5") and p.function_allowed("md5")
    only = p.with_overrides({"allowlist": {"functions": ["sum", "count_star"]}})
    assert only.function_allowed("sum") and not only.function_allowed("avg")
    assert only.version != p.version
    with pytest.raises(PolicyError, match="allowlist"):
        only.with_overrides({"allowlist": {"functions": ["sum", "avg"]}})
    with pytest.raises(PolicyError, match="reviewed function allowlist"):
        p.with_overrides({"allowlist": {"functions": ["sum", "read_blob"]}})


def test_the_allowlist_file_is_what_the_generator_produces():
    """functions.yaml is generated from duckdb_functions(); a DuckDB upgrade shows up here."""
    from sqleval_pipeline.guard import allowlist_gen
    from sqleval_pipeline.guard.policy import FUNCTIONS_PATH

    assert allowlist_gen.render(allowlist_gen.generate()) == FUNCTIONS_PATH.read_text(encoding="utf-8")
