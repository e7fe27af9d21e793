import shutil

import duckdb
import pytest

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.validation import SnapshotValidationError, default_suites, validate_marts
from sqleval_pipeline.demo.rawgen import AS_OF, FIRST_DAY


def test_great_expectations_pass_on_the_built_marts(built_warehouse):
    report = validate_marts(built_warehouse.warehouse, default_suites(FIRST_DAY, AS_OF))
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
    report = validate_marts(broken_warehouse, default_suites(FIRST_DAY, AS_OF))
    failed = {(f.table, f.expectation) for f in report.failures}
    assert ("fct_orders", "expect_column_pair_values_to_be_equal") in failed
    assert ("dim_customers", "expect_column_values_to_be_in_set") in failed
    with pytest.raises(SnapshotValidationError) as exc:
        snap.freeze_snapshot(broken_warehouse, tmp_path / "snaps", tmp_path / "manifests", AS_OF)
    msg = str(exc.value)
    assert "fct_orders" in msg and "column_A='_net_paise'" in msg and "1 unexpected" in msg
    assert "segment_cd" in msg
    # nothing was frozen
    assert not list((tmp_path / "snaps").glob("snap-*.duckdb"))
    assert not (tmp_path / "manifests").exists() or not list((tmp_path / "manifests").glob("*.json"))
