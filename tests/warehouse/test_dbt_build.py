import duckdb
from sqleval_pipeline.demo import location
import pytest

from tests.conftest import run_dbt


def q(home, sql):
    con = duckdb.connect(str(home.warehouse), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_dbt_built_every_schema(built_warehouse):
    schemas = {r[0] for r in q(built_warehouse, "SELECT DISTINCT schema_name FROM duckdb_tables() "
                                                "UNION SELECT DISTINCT schema_name FROM duckdb_views() WHERE NOT internal")}
    assert {"raw", "raw_hr", "raw_pii", "staging", "marts", "hr", "pii"} <= schemas
    marts = {r[0] for r in q(built_warehouse, "SELECT table_name FROM duckdb_tables() WHERE schema_name='marts'")}
    assert {"mart_orders_daily", "fct_orders", "dim_customers", "dim_products",
            "mart_revenue_monthly", "dim_segments"} <= marts


def test_sensitive_staging_views_live_in_their_own_schemas(built_warehouse):
    """HR and PII staging views are kept apart from the ordinary staging schema (which a
    project might one day serve), in schemas the demo declares sensitive."""
    views = {(s, n) for s, n in q(built_warehouse, "SELECT schema_name, view_name FROM duckdb_views() "
                                                   "WHERE NOT internal AND view_name LIKE 'stg_%'")}
    assert {("staging_hr", "stg_employees"), ("staging_hr", "stg_salaries"),
            ("staging_pii", "stg_customer_contacts")} <= views
    assert not {n for s, n in views if s == "staging"} & {"stg_employees", "stg_salaries", "stg_customer_contacts"}
    from sqleval_pipeline import paths
    from sqleval_pipeline.project import load_project

    declared = set(load_project(location.REPO_ROOT / "sqleval.yaml").spec.sensitive_schemas)
    assert {"hr", "pii", "staging_hr", "staging_pii"} <= declared


def test_marts_are_consistent(built_warehouse):
    (orders, daily, monthly), = q(built_warehouse, """
        SELECT (SELECT count(*) FROM marts.fct_orders),
               (SELECT sum(orders) FROM marts.mart_orders_daily),
               (SELECT sum(orders) FROM marts.mart_revenue_monthly)""")
    assert orders == daily == monthly >= 50_000
    (bad,), = q(built_warehouse, "SELECT count(*) FROM marts.fct_orders "
                                 "WHERE net_revenue_inr <> gross_revenue_inr - discount_inr")
    assert bad == 0


def test_dbt_tests_and_unit_tests_ran(built_warehouse, tmp_path):
    proc = run_dbt(["test", "--select", "test_type:unit"], built_warehouse.warehouse, tmp_path / "t")
    assert proc.returncode == 0, proc.stdout
    assert "PASS=3" in proc.stdout


def test_a_failing_data_test_fails_the_build(built_warehouse, tmp_path):
    import shutil

    copy = tmp_path / "wh.duckdb"
    shutil.copy(built_warehouse.warehouse, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE raw.orders SET status = 'lost' WHERE order_id = 1")
    con.close()
    proc = run_dbt(["test", "--select", "stg_orders"], copy, tmp_path / "t")
    assert proc.returncode != 0
    assert "accepted_values_stg_orders_status" in proc.stdout
