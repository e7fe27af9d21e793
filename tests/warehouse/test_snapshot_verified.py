"""Verified inputs: the serving file is checked against its pinned manifest before any stage
reads it. A tampered file (a valid DuckDB file with other rows) stops the evaluation with
"snapshot drift"; an intact one costs one SHA-256 of the file per process."""

from __future__ import annotations

import datetime as dt
import shutil

import duckdb
import pytest

from sqleval_pipeline.pipeline import environment as ev
from sqleval_pipeline import paths
from sqleval_pipeline import snapshot as snap


def _serving(root, rows=100):
    path = root / "build.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE orders AS SELECT i AS order_id, i % 7 AS status FROM range({rows}) t(i)")
    tables = {"orders": snap.table_fingerprint(con, "main.orders")}
    con.close()
    as_of = dt.date(2025, 1, 31)
    manifest = snap.SnapshotManifest(snapshot_id=snap.compute_snapshot_id(as_of, tables), as_of=as_of,
                                     source_schemas=["marts"], tables=tables)
    final = root / f"{manifest.snapshot_id}.duckdb"
    path.rename(final)
    return final, manifest


def _tamper(path, sql="UPDATE orders SET status = -1 WHERE order_id % 7 = 0"):
    path.chmod(0o644)
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def test_an_intact_file_is_verified_by_content_once_then_by_digest(tmp_path):
    path, manifest = _serving(tmp_path)
    assert not snap.stamp_path(path).exists()
    assert snap.ensure_verified(path, manifest) == "content"
    assert snap.ensure_verified(path, manifest) == "digest"
    # the same content in other bytes (rebuilt elsewhere): verified by content again, restamped
    copy = tmp_path / "copy"
    copy.mkdir()
    other, _ = _serving(copy)
    shutil.copyfile(other, path)
    assert snap.ensure_verified(path, manifest) == "content"
    assert snap.ensure_verified(path, manifest) == "digest"


def test_a_tampered_file_is_snapshot_drift_naming_the_file_and_the_table(tmp_path):
    path, manifest = _serving(tmp_path)
    snap.ensure_verified(path, manifest)
    _tamper(path)
    with pytest.raises(snap.SnapshotDrift) as err:
        snap.ensure_verified(path, manifest)
    msg = str(err.value)
    assert "snapshot drift" in msg and str(path) in msg and "orders" in msg and manifest.snapshot_id in msg
    assert "sqleval snapshot build" in msg
    with pytest.raises(snap.SnapshotDrift):          # never stamped as verified: still refused
        snap.ensure_verified(path, manifest)


def test_a_forged_stamp_does_not_pass_a_changed_file(tmp_path):
    path, manifest = _serving(tmp_path)
    snap.ensure_verified(path, manifest)
    stamp = snap.stamp_path(path).read_text()
    _tamper(path, "DELETE FROM orders WHERE order_id = 3")
    snap.stamp_path(path).write_text(stamp)         # the old stamp: its digest no longer matches
    with pytest.raises(snap.SnapshotDrift):
        snap.ensure_verified(path, manifest)


def test_the_evaluation_environment_refuses_a_tampered_serving_file(serving_snapshot, tmp_path):
    home = paths.Home(tmp_path / "home")
    home.snapshot_dir.mkdir(parents=True)
    copy = home.snapshot_dir / serving_snapshot.path.name
    shutil.copyfile(serving_snapshot.path, copy)
    env = ev.environment(home=home, manifest_dir=serving_snapshot.manifest_dir)
    assert env.snapshot_id == serving_snapshot.snapshot_id
    table = sorted(serving_snapshot.manifest.tables)[0]
    _tamper(copy, f'DELETE FROM main."{table}" WHERE rowid % 7 = 0')
    with pytest.raises(ev.EvaluationError) as err:
        ev.environment(home=home, manifest_dir=serving_snapshot.manifest_dir)
    assert "snapshot drift" in str(err.value) and table in str(err.value)
