import sqlglot

from sqleval_pipeline.glossary import GlossaryError, load_glossary
from sqleval_pipeline.guard.clock import pin_clock

import pytest


def test_glossary_loads_and_covers_the_traps():
    g = load_glossary()
    names = {t.term for t in g.terms}
    assert {"completed orders", "net revenue", "gross revenue", "UPI", "active customers",
            "premium customers", "last month", "last 30 days"} <= names
    upi = next(t for t in g.terms if t.term == "UPI")
    assert "unified_payments" in upi.sql


def test_every_glossary_expression_runs_on_the_snapshot(serving_snapshot):
    from sqleval_pipeline.snapshot import open_readonly

    g = load_glossary()
    con = open_readonly(serving_snapshot.path)
    try:
        for t in g.terms:
            if t.kind in ("metric", "dimension", "filter") and t.tables:
                table = t.tables[0]
                where = " AND ".join(x for x in (t.filter, t.sql if t.kind == "filter" else None) if x)
                select = "count(*)" if t.kind == "filter" else t.sql
                sql = f"SELECT {select} FROM {table}" + (f" WHERE {where}" if where else "")
                if t.kind == "dimension":
                    sql += f" GROUP BY {t.sql}"
                con.execute(pin_clock(sql, serving_snapshot.manifest.as_of)).fetchall()
            elif t.kind == "time_window":
                sqlglot.parse_one(f"SELECT 1 FROM fct_orders WHERE {t.sql}", read="duckdb")
                con.execute(pin_clock(f"SELECT count(*) FROM fct_orders WHERE {t.sql}",
                                      serving_snapshot.manifest.as_of)).fetchall()
    finally:
        con.close()


def test_a_bad_glossary_names_the_term(tmp_path):
    p = tmp_path / "g.yml"
    p.write_text("version: 1\nas_of_note: x\nterms:\n  - term: revenue\n    kind: metricz\n    definition: d\n")
    with pytest.raises(GlossaryError, match=r"terms\[0\] \('revenue'\)\.kind"):
        load_glossary(p)
