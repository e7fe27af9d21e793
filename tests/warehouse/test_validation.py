import shutil

import duckdb
import pytest

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.demo import location
from sqleval_pipeline.demo.rawgen import AS_OF
from sqleval_pipeline.warehouse.validation import SnapshotValidationError, load_suites, validate_tables

DEMO_SUITES = location.REPO_ROOT / "dbt_project" / "expectations.yml"


def test_great_expectations_pass_on_the_built_marts(built_warehouse):
    report = validate_tables(built_warehouse.warehouse, load_suites(DEMO_SUITES), "marts")
    assert report.success, [str(f) for f in report.failures]
    assert report.evaluated >= 60
    assert {"fct_orders", "mart_orders_daily", "dim_customers"} <= set(report.tables)


@pytest.fixture()
def broken_warehouse(built_warehouse, tmp_path):
    copy = tmp_path / "broken.duckdb"
    shutil.copy(built_warehouse.warehouse, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE marts.fct_orders SET net_revenue_inr = net_revenue_inr + 1 WHERE order_id = 42")
    con.execute("UPDATE marts.dim_customers SET segment_cd = 'Z' WHERE customer_id = 7")
    con.close()
    return copy


def test_a_broken_identity_stops_the_freeze_and_names_the_expectation(broken_warehouse, tmp_path):
    suites = load_suites(DEMO_SUITES)
    report = validate_tables(broken_warehouse, suites, "marts")
    failed = {(f.table, f.expectation) for f in report.failures}
    assert ("fct_orders", "expect_column_pair_values_to_be_equal") in failed
    assert ("dim_customers", "expect_column_values_to_be_in_set") in failed
    with pytest.raises(SnapshotValidationError) as exc:
        snap.freeze_snapshot(broken_warehouse, tmp_path / "snaps", tmp_path / "manifests", AS_OF,
                             validator=lambda path, schema: validate_tables(path, suites, schema))
    msg = str(exc.value)
    assert "fct_orders" in msg and "column_A='_net_paise'" in msg and "1 unexpected" in msg
    assert "segment_cd" in msg
    # nothing was frozen
    assert not list((tmp_path / "snaps").glob("snap-*.duckdb"))
    assert not list((tmp_path / "manifests").glob("*.json"))
    assert not list((tmp_path / "snaps").glob(".building-*"))


@pytest.mark.slow
def test_an_expectations_file_with_a_typo_names_the_entry(tmp_path):
    from sqleval_pipeline.warehouse.validation import SuitesError

    bad = tmp_path / "expectations.yml"
    bad.write_text("version: 1\ntables:\n  claims:\n    expectations:\n"
                   "      - {expect: ExpectColumnValuesToBeUniq, column: id}\n")
    with pytest.raises(SuitesError, match=r"tables.claims.expectations\[0\].*ExpectColumnValuesToBeUniq"):
        load_suites(bad)


def test_suites_derived_from_dbt_tests_only_for_served_models_that_ran():
    from sqleval_pipeline.warehouse.validation import suites_from_dbt_tests

    def test_node(uid, name, model, column, **kwargs):
        return uid, {"resource_type": "test", "attached_node": model, "column_name": column,
                     "test_metadata": {"name": name, "kwargs": {"column_name": column, **kwargs}}}

    nodes = dict([
        test_node("test.p.nn_a", "not_null", "model.p.claims", "claim_id"),
        test_node("test.p.u_a", "unique", "model.p.claims", "claim_id"),
        test_node("test.p.av_a", "accepted_values", "model.p.claims", "status", values=["O", "S"]),
        test_node("test.p.rel", "relationships", "model.p.claims", "policy_id", to="ref('p')", field="id"),
        test_node("test.p.nn_hidden", "not_null", "model.p.notes", "note"),
        test_node("test.p.failed", "not_null", "model.p.claims", "amount"),
    ])
    run_results = {"results": [{"unique_id": u, "status": "pass"} for u in nodes if u != "test.p.failed"]}
    suites, skipped = suites_from_dbt_tests({"nodes": nodes}, {"model.p.claims": "claims"}, run_results)
    assert [s.table for s in suites] == ["claims"]
    got = sorted((e.kind, tuple(sorted(e.kwargs.items(), key=str))) for e in suites[0].expectations)
    assert got == sorted([
        ("ExpectColumnValuesToNotBeNull", (("column", "claim_id"),)),
        ("ExpectColumnValuesToBeUnique", (("column", "claim_id"),)),
        ("ExpectColumnValuesToBeInSet", (("column", "status"), ("value_set", ["O", "S"]))),
    ])
    assert any("test.p.rel" in s and "relationships" in s for s in skipped)
    assert any("test.p.failed" in s for s in skipped)
    assert not any("nn_hidden" in s for s in skipped)  # not served: not even considered
