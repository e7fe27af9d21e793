"""Neighbour databases: reproducible, reused, small, and plausible under the demo's dbt tests
(checked here with SQL written from the dbt manifest, not with the generator's own code)."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from decimal import Decimal

import pytest

from sqleval_pipeline.snapshot import compute_snapshot_id, fingerprint_serving, open_readonly
from sqleval_pipeline.suite.generate import KINDS
from sqleval_pipeline.suite.neighbours import ensure_neighbours, load_set, readings, served_columns
from sqleval_pipeline.suite.probes import analyse
from sqleval_pipeline.suite.source import decimal_scale


def _con(path):
    return open_readonly(path)  # the settings every in-process reader of these files uses


def test_a_second_build_gives_the_same_ids_and_the_same_bytes(suite_env, tmp_path):
    first = suite_env.report.nset
    again = ensure_neighbours(suite_env.snapshot.path, suite_env.snapshot.manifest, list(suite_env.cases.values()),
                              suite_env.constraints, root=tmp_path, params=suite_env.params)
    assert not again.reused and again.set_id == first.set_id
    assert [e.id for e in again.manifest.neighbours] == [e.id for e in first.manifest.neighbours]
    assert len({e.id for e in first.manifest.neighbours}) == suite_env.params.neighbours
    for a, b in zip(first.refs(), again.refs(), strict=True):
        assert a.path.read_bytes() == b.path.read_bytes(), f"{a.id}: the files differ"
    assert all(e.sealed for e in again.manifest.neighbours)


def test_a_set_present_and_intact_is_reused_and_a_damaged_file_rebuilt(suite_env, tmp_path):
    args = (suite_env.snapshot.path, suite_env.snapshot.manifest, list(suite_env.cases.values()),
            suite_env.constraints)
    # the set the session built, copied as it is (files, modes, set.json): present and intact
    session = suite_env.report.nset
    shutil.copytree(session.directory, tmp_path / session.set_id)
    built = load_set(tmp_path / session.set_id)
    stamps = {r.id: r.path.stat().st_mtime_ns for r in built.refs()}
    reused = ensure_neighbours(*args, root=tmp_path, params=suite_env.params)
    assert reused.reused and {r.id: r.path.stat().st_mtime_ns for r in reused.refs()} == stamps
    victim = built.refs()[1]
    victim.path.chmod(0o644)
    victim.path.write_bytes(b"not a database")
    repaired = ensure_neighbours(*args, root=tmp_path, params=suite_env.params)
    assert not repaired.reused
    assert repaired.ref(victim.id).path.read_bytes() == suite_env.report.nset.ref(victim.id).path.read_bytes()


def test_each_neighbour_is_content_addressed_like_the_snapshot(suite_env):
    manifest = suite_env.snapshot.manifest
    for e, ref in zip(suite_env.report.nset.manifest.neighbours, suite_env.neighbours, strict=True):
        infos = fingerprint_serving(ref.path, manifest.serving_schema)
        assert ref.id == "nbr-" + compute_snapshot_id(manifest.as_of, infos)[5:]
        assert {t: i.checksum for t, i in infos.items()} == e.checksums
        assert {t: i.rows for t, i in infos.items()} == e.rows
        assert sorted(infos) == sorted(manifest.tables)  # every served table, nothing else
        for t, info in infos.items():
            assert [(c.name, c.type) for c in info.columns] == [(c.name, c.type) for c in manifest.tables[t].columns]
    assert [r.kind for r in suite_env.neighbours] == [KINDS[i % len(KINDS)] for i in range(len(suite_env.neighbours))]


def test_neighbours_are_small(suite_env):
    total = sum(t.rows for t in suite_env.snapshot.manifest.tables.values())
    for ref in suite_env.neighbours:
        con = _con(ref.path)
        try:
            n = sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in suite_env.snapshot.manifest.tables)
        finally:
            con.close()
        assert 0 < n < total / 4


def _dbt_tests(manifest: dict, served: set[str]) -> list[tuple[str, str, str, dict]]:
    out = []
    for node in manifest["nodes"].values():
        if node.get("resource_type") != "test":
            continue
        meta = node.get("test_metadata") or {}
        model = manifest["nodes"].get(node.get("attached_node") or "", {}).get("name")
        if meta.get("name") in ("unique", "not_null", "accepted_values", "relationships") and model in served:
            kwargs = meta.get("kwargs") or {}
            out.append((meta["name"], model, node.get("column_name") or kwargs["column_name"], kwargs))
    return out


def _violations(con, test: tuple[str, str, str, dict]) -> int:
    name, model, col, kwargs = test
    if name == "unique":
        sql = f"SELECT count(*) FROM (SELECT {col} FROM {model} WHERE {col} IS NOT NULL GROUP BY 1 HAVING count(*) > 1)"
    elif name == "not_null":
        sql = f"SELECT count(*) FROM {model} WHERE {col} IS NULL"
    elif name == "accepted_values":
        values = ", ".join("'" + str(v).replace("'", "''") + "'" for v in kwargs["values"])
        sql = f"SELECT count(*) FROM {model} WHERE {col} IS NOT NULL AND {col} NOT IN ({values})"
    else:
        parent = re.fullmatch(r"ref\('([^']+)'\)", kwargs["to"].strip()).group(1)
        field = kwargs["field"]
        sql = (f"SELECT count(*) FROM {model} c WHERE c.{col} IS NOT NULL AND NOT EXISTS "
               f"(SELECT 1 FROM {parent} p WHERE p.{field} = c.{col})")
    return con.execute(sql).fetchone()[0]


def test_every_dbt_test_of_the_demo_holds_on_every_neighbour(suite_env):
    served = set(suite_env.snapshot.manifest.tables)
    tests = _dbt_tests(suite_env.dbt_manifest, served)
    assert {t[0] for t in tests} == {"unique", "not_null", "accepted_values", "relationships"}
    for ref in suite_env.neighbours:
        con = _con(ref.path)
        try:
            broken = [t[:3] for t in tests if _violations(con, t)]
        finally:
            con.close()
        assert not broken, f"{ref.id} ({ref.kind}) breaks {broken}"


def test_the_data_tests_are_not_vacuous_on_the_neighbours(suite_env):
    """NULLs where allowed, duplicates of non-key values, orphans nowhere: the neighbours vary
    the data the tests allow."""
    nulls = next(r for r in suite_env.neighbours if r.kind == "nulls")
    con = _con(nulls.path)
    try:  # a nullable foreign key and a nullable measure do get NULLs
        assert con.execute("SELECT count(*) FROM fct_order_items WHERE order_id IS NULL").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM dim_customers WHERE city IS NULL").fetchone()[0] > 0
    finally:
        con.close()


def _placements(value, type_: str, low, high):
    if isinstance(value, dt.date):
        return [value - dt.timedelta(days=1), value, value + dt.timedelta(days=1)]
    step = Decimal(1).scaleb(-decimal_scale(type_)) if isinstance(value, Decimal) else 1
    return [v for v in (value - step, value, value + step) if low <= v <= high]


def test_rows_sit_on_just_below_and_just_above_every_boundary_of_the_references(suite_env):
    snap = suite_env.snapshot
    columns = served_columns(snap.manifest)
    probes = analyse(readings(list(suite_env.cases.values())), columns, snap.manifest.as_of)
    assert probes.boundaries
    cons = [_con(r.path) for r in suite_env.neighbours]
    src = _con(snap.path)
    try:
        for b in probes.boundaries:
            low, high = src.execute(f'SELECT min("{b.column}"), max("{b.column}") FROM "{b.table}"').fetchone()
            for v in _placements(b.value, columns[b.table][b.column], low, high):
                found = sum(c.execute(f'SELECT count(*) FROM "{b.table}" WHERE "{b.column}" = ?', [v]).fetchone()[0]
                            for c in cons)
                assert found, f"no neighbour has {b.table}.{b.column} = {v} ({b.origin})"
    finally:
        for c in [*cons, src]:
            c.close()


def test_every_neighbour_has_rows_after_the_as_of_date(suite_env):
    as_of = suite_env.snapshot.manifest.as_of
    for ref in suite_env.neighbours:
        con = _con(ref.path)
        try:
            assert con.execute("SELECT count(*) FROM fct_orders WHERE order_date > ?", [as_of]).fetchone()[0] > 0
            assert con.execute("SELECT count(*) FROM dim_customers WHERE signup_date > ?", [as_of]).fetchone()[0] > 0
        finally:
            con.close()


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_built(suite_env, kind):
    assert any(r.kind == kind for r in suite_env.neighbours)
