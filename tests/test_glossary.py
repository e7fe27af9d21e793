import sqlglot

from sqleval_pipeline.demo import location
from sqleval_pipeline.semantic.glossary import GlossaryError, load_glossary
from sqleval_pipeline.guard.clock import pin_clock

import pytest


def test_glossary_loads_and_covers_the_traps():
    g = load_glossary(location.GLOSSARY_PATH)
    names = {t.term for t in g.terms}
    assert {"completed orders", "net revenue", "gross revenue", "UPI", "active customers",
            "premium customers", "last month", "last 30 days"} <= names
    upi = next(t for t in g.terms if t.term == "UPI")
    assert "unified_payments" in upi.sql


def test_every_glossary_expression_runs_on_the_snapshot(serving_snapshot):
    from sqleval_pipeline.snapshot import open_readonly

    g = load_glossary(location.GLOSSARY_PATH)
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


def test_key_terms_compute_what_their_definitions_say(serving_snapshot):
    """The glossary's SQL for the trap terms, run on the snapshot, equals the same number
    computed in Python from the rows themselves, following each term's written definition."""
    import datetime as dt
    from decimal import Decimal

    from sqleval_pipeline.snapshot import open_readonly

    as_of = serving_snapshot.manifest.as_of
    terms = {t.term: t for t in load_glossary(location.GLOSSARY_PATH).terms}
    con = open_readonly(serving_snapshot.path)
    cols = ["order_id", "customer_id", "order_date", "status", "payment_method", "net_revenue_inr",
            "gross_revenue_inr"]

    def glossary_value(term: str, table: str = "fct_orders"):
        t = terms[term]
        if t.kind == "filter":
            sql = f"SELECT count(*) FROM {table} WHERE {t.sql}"
        else:
            sql = f"SELECT {t.sql} FROM {table}" + (f" WHERE {t.filter}" if t.filter else "")
        return con.execute(pin_clock(sql, as_of)).fetchone()[0]

    try:
        orders = [dict(zip(cols, r, strict=True)) for r in
                  con.execute(f"SELECT {', '.join(cols)} FROM fct_orders").fetchall()]
        not_cancelled = [o for o in orders if o["status"] != "cancelled"]
        assert glossary_value("net revenue") == sum((o["net_revenue_inr"] for o in not_cancelled), Decimal(0))
        assert glossary_value("gross revenue") == sum((o["gross_revenue_inr"] for o in not_cancelled), Decimal(0))
        assert glossary_value("order count") == len(orders)
        assert glossary_value("UPI") == sum(o["payment_method"] == "unified_payments" for o in orders)
        assert glossary_value("completed orders") == sum(o["status"] == "delivered" for o in orders)
        assert glossary_value("cancelled orders") == sum(o["status"] == "cancelled" for o in orders)
        assert glossary_value("open orders") == sum(o["status"] in ("placed", "shipped") for o in orders)
        # distinct customers with a non-cancelled order in the 90 days up to and including as-of
        window = {o["customer_id"] for o in not_cancelled
                  if as_of - dt.timedelta(days=90) < o["order_date"] <= as_of}
        assert glossary_value("active customers") == len(window)
        returned = sum(o["status"] == "returned" for o in orders)
        delivered_or_returned = sum(o["status"] in ("delivered", "returned") for o in orders)
        assert float(glossary_value("return rate")) == pytest.approx(returned / delivered_or_returned, rel=1e-12)
        assert len(window) > 0 and returned > 0  # the checks above compared real, non-empty sets
    finally:
        con.close()


def test_a_configuration_version_never_runs_dbt_on_an_edited_project(serving_snapshot, monkeypatch):
    """The glossary part of a curated configuration's version reads the semantic layer from the
    manifest of the last parse or build, even when the dbt project was edited since: computing a
    version never runs dbt (the next `sqleval build` brings both up to date)."""
    import os

    from sqleval_pipeline import project as project_module
    from sqleval_pipeline import semantic
    from sqleval_pipeline.configs import load_config
    from sqleval_pipeline.warehouse import dbt

    monkeypatch.setenv("SQLEVAL_HOME", str(serving_snapshot.home.root))
    proj = project_module.load_project(location.REPO_ROOT)
    manifest = dbt.manifest_path(proj)
    assert manifest.exists()
    stat = manifest.stat()
    calls = []
    monkeypatch.setattr(dbt, "run_dbt", lambda *a, **k: calls.append(a))
    semantic._DIGESTS.clear()
    try:
        os.utime(manifest, (1, 1))  # older than every file of the dbt project: "edited since"
        loaded = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml", project=proj)
        again = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml", project=proj)
    finally:
        os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert calls == []
    assert loaded.version == again.version
