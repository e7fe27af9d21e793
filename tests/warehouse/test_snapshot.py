import shutil

import duckdb
import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.demo.rawgen import AS_OF


def test_snapshot_id_is_the_committed_pinned_id(serving_snapshot):
    """Built from scratch on this machine, the id equals the one committed from another."""
    assert serving_snapshot.snapshot_id == snap.read_pinned(location.SNAPSHOT_MANIFEST_DIR)
    committed = snap.SnapshotManifest.from_file(
        snap.manifest_path(location.SNAPSHOT_MANIFEST_DIR, serving_snapshot.snapshot_id))
    assert committed.tables == serving_snapshot.manifest.tables


def test_serving_file_holds_only_the_marts(serving_snapshot):
    objects = snap.list_serving_objects(serving_snapshot.path)
    assert objects and all(o[1] == "main" for o in objects)
    names = {o[2] for o in objects}
    assert names == set(serving_snapshot.manifest.tables)
    for forbidden in ("employees", "salaries", "customer_contacts"):
        assert forbidden not in names
    con = snap.open_readonly(serving_snapshot.path)
    try:
        for sql in ("SELECT * FROM hr.salaries", "SELECT * FROM pii.customer_contacts",
                    "SELECT * FROM salaries", "SELECT * FROM raw_hr.employees"):
            with pytest.raises(duckdb.CatalogException):
                con.execute(sql)
        (n,), = con.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name IN "
                            "('hr','pii','raw','raw_hr','raw_pii','staging')").fetchall()
        assert n == 0
    finally:
        con.close()


def test_serving_file_is_read_only(serving_snapshot):
    con = snap.open_readonly(serving_snapshot.path)
    try:
        with pytest.raises(duckdb.Error):
            con.execute("DELETE FROM fct_orders")
    finally:
        con.close()


def test_rehash_is_stable_and_verify_passes(serving_snapshot):
    assert snap.verify_snapshot(serving_snapshot.path, serving_snapshot.manifest) == []
    again = snap.fingerprint_serving(serving_snapshot.path)
    assert snap.compute_snapshot_id(AS_OF, again) == serving_snapshot.snapshot_id


def test_rebuilding_gives_the_same_id(built_warehouse, serving_snapshot, tmp_path):
    m = snap.freeze_snapshot(built_warehouse.warehouse, tmp_path / "s", tmp_path / "m", AS_OF)
    assert m.snapshot_id == serving_snapshot.snapshot_id


def test_drift_is_detected_and_named(serving_snapshot, tmp_path):
    copy = tmp_path / "drifted.duckdb"
    shutil.copy(serving_snapshot.path, copy)
    copy.chmod(0o644)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE fct_orders SET discount_inr = discount_inr + 1 WHERE order_id = 1")
    con.execute("DELETE FROM dim_segments WHERE segment_cd = 'C'")
    con.close()
    problems = snap.verify_snapshot(copy, serving_snapshot.manifest)
    assert any(p.startswith("fct_orders: same shape, different values") for p in problems)
    assert any(p.startswith("dim_segments: rows 3 → 2") for p in problems)


def test_declared_sensitive_schemas_can_never_be_served(built_warehouse, tmp_path):
    with pytest.raises(snap.SnapshotError, match="'hr' is declared sensitive"):
        snap.freeze_snapshot(built_warehouse.warehouse, tmp_path, tmp_path, AS_OF,
                             schemas=("marts", "hr"), sensitive_schemas=("HR", "pii"))
    assert not list(tmp_path.glob("*.duckdb")) and not list(tmp_path.glob("*.json"))


def test_views_are_served_as_tables_in_the_serving_schema(built_warehouse, tmp_path):
    """A served relation may be a dbt view (the demo's staging models are views); the
    snapshot holds it as a table, in the serving schema the project names."""
    m = snap.freeze_snapshot(built_warehouse.warehouse, tmp_path / "s", tmp_path / "m", AS_OF,
                             schemas=("staging",), serving_schema="analytics")
    path = snap.serving_path(tmp_path / "s", m.snapshot_id)
    objects = snap.list_serving_objects(path)
    assert {o[1] for o in objects} == {"analytics"} and "stg_orders" in {o[2] for o in objects}
    con = snap.open_readonly(path)
    try:
        kinds = {r[0] for r in con.execute("SELECT table_type FROM information_schema.tables "
                                           "WHERE table_schema = 'analytics'").fetchall()}
        (n,), = con.execute("SELECT count(*) FROM analytics.stg_orders").fetchall()
    finally:
        con.close()
    wh = duckdb.connect(str(built_warehouse.warehouse), read_only=True)
    try:
        (expected,), = wh.execute("SELECT count(*) FROM staging.stg_orders").fetchall()
        (view_kind,), = wh.execute("SELECT table_type FROM information_schema.tables WHERE "
                                   "table_schema = 'staging' AND table_name = 'stg_orders'").fetchall()
    finally:
        wh.close()
    assert view_kind == "VIEW" and kinds == {"BASE TABLE"} and n == expected
    assert m.serving_schema == "analytics" and m.sources["stg_orders"] == "staging.stg_orders"
    assert snap.verify_snapshot(path, m) == []


def test_type_family_is_version_independent():
    assert snap.type_family("BIGINT") == snap.type_family("HUGEINT") == "integer"
    assert snap.type_family("DECIMAL(12,2)") == snap.type_family("DECIMAL(38,2)") == "decimal(2)"


def test_a_serving_schema_of_its_own_is_what_the_guard_reads(built_warehouse, tmp_path):
    """Unqualified names resolve in the project's serving schema; qualified with it too; the
    rest of the guard is unchanged."""
    from sqleval_pipeline.guard.executor import GuardedExecutor
    from sqleval_pipeline.guard.policy import load_policy

    m = snap.freeze_snapshot(built_warehouse.warehouse, tmp_path / "s", tmp_path / "m", AS_OF,
                             schemas=("staging",), serving_schema="analytics")
    path = snap.serving_path(tmp_path / "s", m.snapshot_id)
    policy = load_policy(served=list(m.tables), schemas=["analytics"],
                         overrides={"limits": {"statement_timeout_s": 5}})
    with GuardedExecutor(path, as_of=AS_OF, policy=policy, pool_size=1) as guard:
        plain = guard.execute("SELECT count(*) AS n FROM stg_orders")
        qualified = guard.execute("SELECT count(*) AS n FROM analytics.stg_orders")
        other = guard.execute("SELECT count(*) AS n FROM main.stg_orders")
    assert plain.status == "ok" and qualified.status == "ok"
    assert plain.result.rows == qualified.result.rows == [[m.tables["stg_orders"].rows]]
    assert other.status != "ok"
