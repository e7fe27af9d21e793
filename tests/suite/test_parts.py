"""The parts of neighbour generation on their own: data tests read from a dbt manifest, the
probes of a reference, the header seal of a DuckDB file, the repair of staged rows."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import duckdb
import numpy as np

from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.suite.constraints import (
    AcceptedValues, Constraints, NotNull, Relationship, Unique, constraints_from_dbt, load_dbt_constraints, violations,
)
from sqleval_pipeline.suite.files import IDENTIFIER_BYTES, identifier_span, repair, seal, span_of, stage
from sqleval_pipeline.suite.generate import PROFILES, draw, placements
from sqleval_pipeline.suite.probes import Boundary, analyse
from sqleval_pipeline.suite.source import Domain, TableInfo


def _test_node(name, model, column, **kwargs):
    return {"resource_type": "test", "attached_node": f"model.p.{model}", "column_name": column,
            "test_metadata": {"name": name, "kwargs": {"column_name": column, **kwargs}},
            "depends_on": {"nodes": [f"model.p.{model}", *([f"model.p.{kwargs['parent']}"] if "parent" in kwargs else [])]}}


def test_constraints_come_from_the_generic_tests_that_passed():
    nodes = {
        "test.p.u": _test_node("unique", "orders", "order_id"),
        "test.p.ue": _test_node("unique", "daily", "day || '|' || kind"),
        "test.p.nn": _test_node("not_null", "orders", "status"),
        "test.p.av": _test_node("accepted_values", "orders", "status", values=["a", "b"]),
        "test.p.rel": _test_node("relationships", "orders", "customer_id", to="ref('customers')", field="id",
                                 parent="customers"),
        "test.p.hidden": _test_node("relationships", "orders", "x", to="ref('secret')", field="id", parent="secret"),
        "test.p.failed": _test_node("not_null", "orders", "channel"),
        "test.p.other": _test_node("not_null", "unserved", "x"),
    }
    served = {"model.p.orders": "orders", "model.p.customers": "customers", "model.p.daily": "daily"}
    results = {"results": [{"unique_id": u, "status": "fail" if u == "test.p.failed" else "pass"} for u in nodes]}
    c = constraints_from_dbt({"nodes": nodes}, served, results)
    assert c.unique == (Unique("orders", "order_id", '"order_id"'), Unique("daily", None, "day || '|' || kind"))
    assert c.not_null == (NotNull("orders", "status"),)
    assert c.accepted_values("orders", "status") == ("a", "b")
    assert c.relationships == (Relationship("orders", "customer_id", "customers", "id"),)
    assert any("test.p.failed" in s for s in c.skipped) and any("test.p.hidden" in s for s in c.skipped)
    assert Constraints.from_json(c.to_json()) == c
    assert constraints_from_dbt({"nodes": nodes}, served).not_null == (NotNull("orders", "channel"),
                                                                       NotNull("orders", "status"))


def test_no_dbt_manifest_means_no_constraint(tmp_path):
    c = load_dbt_constraints(tmp_path, {"orders": "marts.orders"})
    assert c == Constraints() and "no dbt manifest" in c.skipped[0]


def test_repair_makes_every_constraint_hold():
    tables = {"parents": TableInfo("parents", ("id", "kind"), ("INTEGER", "VARCHAR"), 0),
              "kids": TableInfo("kids", ("kid", "parent_id", "day", "kind"), ("INTEGER", "INTEGER", "DATE", "VARCHAR"), 0)}
    d = dt.date(2025, 1, 1)
    data = {"parents": [[1, "a"], [2, "zz"], [2, "b"], [None, "a"]],
            "kids": [[1, 1, d, "x"], [1, 2, d, "x"], [2, 9, d, "x"], [3, None, d, "x"], [4, 2, d, "x"], [5, 2, d, "x"]]}
    c = Constraints(unique=(Unique("parents", "id", '"id"'), Unique("kids", "kid", '"kid"'),
                            Unique("kids", None, "CAST(day AS VARCHAR) || kind || parent_id")),
                    not_null=(NotNull("parents", "id"),),
                    accepted=(AcceptedValues("parents", "kind", ("a", "b")),),
                    relationships=(Relationship("kids", "parent_id", "parents", "id"),))
    con = stage(tables, data)
    assert violations(con, c)
    repair(con, c, list(tables))
    assert violations(con, c) == []
    assert con.execute("SELECT kid, parent_id FROM kids ORDER BY __ord").fetchall() == [(1, 1), (3, None), (4, 2)]  # kid 2 re-pointed to parent 1, then a duplicate of kid 1 on the expression
    assert con.execute("SELECT id, kind FROM parents ORDER BY __ord").fetchall() == [(1, "a"), (2, "a")]


def _tiny(path, n):
    con = duckdb.connect(str(path), config={"threads": "1"})
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(?)", [n])
    con.execute("CHECKPOINT")
    con.close()


def test_sealing_makes_the_bytes_depend_on_the_content_only(tmp_path):
    a, b = tmp_path / "a" / "neighbour.duckdb", tmp_path / "b" / "neighbour.duckdb"
    a.parent.mkdir()
    b.parent.mkdir()
    _tiny(a, 10)
    _tiny(b, 10)
    assert a.read_bytes() != b.read_bytes()  # DuckDB writes a random identifier
    assert seal(a, "nbr-000000000001") and seal(b, "nbr-000000000001")
    assert a.read_bytes() == b.read_bytes()
    con = duckdb.connect(str(a), read_only=True)
    assert con.execute("SELECT sum(x) FROM t").fetchone()[0] == 45
    con.close()
    assert seal(b, "nbr-000000000002") and a.read_bytes() != b.read_bytes()  # another id, another header


def test_the_identifier_is_found_whole_when_two_fresh_files_happen_to_share_its_edge_bytes(tmp_path):
    # DuckDB's identifier is random: two files agree on its first or last byte once in 256, and
    # a span taken from those two alone is a byte short (that byte then stays random when sealed)
    p = tmp_path / "neighbour.duckdb"
    _tiny(p, 1)
    real = p.read_bytes()
    lo, hi = identifier_span()
    assert hi - lo == IDENTIFIER_BYTES
    rng = np.random.default_rng(7)
    ids = [bytearray(rng.bytes(IDENTIFIER_BYTES)) for _ in range(4)]
    ids[1][0] = ids[0][0]       # the first two share the first byte,
    ids[2][-1] = ids[0][-1]     # the first and third the last one
    heads = [real[:lo] + bytes(i) + real[hi:] for i in ids]
    assert span_of(heads[:2]) is None                                  # one byte short: not trusted
    assert span_of(heads[:3]) == span_of(heads) == (lo, hi)            # a third file differs there
    assert span_of([heads[0], heads[1][:-1] + b"x"]) is None           # a difference past the header


def test_a_header_that_does_not_check_out_is_left_alone(tmp_path):
    p = tmp_path / "neighbour.duckdb"
    _tiny(p, 3)
    raw = bytearray(p.read_bytes())
    struct.pack_into("<Q", raw, 0, 12345)
    p.write_bytes(bytes(raw))
    assert seal(p, "nbr-000000000001") is False
    assert p.read_bytes() == bytes(raw)


def test_probes_read_boundaries_witnesses_and_literals():
    cols = {"orders": {"order_id": "INTEGER", "order_date": "DATE", "amount": "DECIMAL(12,2)", "status": "VARCHAR"},
            "customers": {"customer_id": "INTEGER", "city": "VARCHAR"}}
    sql = ("SELECT count(*) FROM orders o WHERE o.status IN ('a', 'b') AND o.amount > 5000 "
           "AND o.order_date > current_date - INTERVAL 7 DAY AND o.order_date <= current_date")
    p = analyse([("c1", sql)], cols, dt.date(2025, 12, 15))
    values = {(b.table, b.column, b.value) for b in p.boundaries}
    assert ("orders", "amount", Decimal("5000.00")) in values
    assert ("orders", "order_date", dt.date(2025, 12, 8)) in values
    assert ("orders", "order_date", dt.date(2025, 12, 15)) in values
    assert p.literals[("orders", "status")] == ["a", "b"]
    assert len(p.witnesses) == 5 and sum(w.complete for w in p.witnesses) == 1  # all, and not each of 4
    con = duckdb.connect()
    con.execute("CREATE TABLE orders AS SELECT 1 AS __rn, 1 AS order_id, DATE '2025-12-10' AS order_date, "
                "5000.50::DECIMAL(12,2) AS amount, 'a' AS status")
    complete = next(w for w in p.witnesses if w.complete)
    assert con.execute(pin_clock(complete.sql, dt.date(2025, 12, 15))).fetchall() == [(1,)]
    assert analyse([("bad", "SELECT FROM (")], cols, dt.date(2025, 12, 15)).skipped


def test_placements_and_draws_stay_in_the_domain():
    dom = Domain("decimal", "DECIMAL(12,2)", Decimal("0.00"), Decimal("9999.99"))
    b = Boundary("t", "c", Decimal("0.00"), "x")
    assert placements(b, dom) == [Decimal("0.00"), Decimal("0.01"), Decimal("1.00")]
    day = Domain("date", "DATE", dt.date(2024, 6, 1), dt.date(2025, 12, 15))
    assert placements(Boundary("t", "d", dt.date(2025, 12, 15), "x"), day)[-1] == dt.date(2025, 12, 16)
    rng = np.random.default_rng(1)
    for dom in (Domain("integer", "INTEGER", 3, 9), day, Domain("decimal", "DECIMAL(12,2)", Decimal("1.10"), Decimal("1.20")),
                Domain("category", "VARCHAR", values=("a", "b"))):
        for _ in range(50):
            v = draw(dom, rng, [])
            assert (v in dom.values) if dom.values else dom.low <= v <= dom.high
    assert {k for k in PROFILES} == {"boundary", "nulls", "duplicates", "perturbed", "sparse", "mixed"}
