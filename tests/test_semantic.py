"""The glossary derived from the dbt semantic layer (sqleval_pipeline.semantic).

Most tests read the manifest of the insurance fixture project (tests/fixtures/projects/insurance,
from the session's `sqleval build` of it); one checks every metric term's SQL, run on the
warehouse that build wrote, against values computed independently in Python from the seed CSVs.
"""

from __future__ import annotations

import csv
import json
import statistics
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb
import pytest

from sqleval_pipeline.semantic.glossary import Glossary, Term
from sqleval_pipeline.semantic import (
    ColumnRef, UnsupportedFilter, glossary_from_manifest, merge_glossaries, render_filter,
)

pytestmark = pytest.mark.slow  # the insurance example's build (dbt) gives the manifest and the warehouse

PROJECT = Path(__file__).parent / "fixtures" / "projects" / "insurance"
AS_OF = date(2024, 6, 30)


@pytest.fixture(scope="module")
def manifest(built_insurance) -> dict:
    """The manifest of the session's `sqleval build` of the insurance example (its `dbt build`
    into the build dir: tests.conftest.BuiltInsurance)."""
    return json.loads((built_insurance.project / ".sqleval" / "dbt_target" / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def semantic(manifest):
    return glossary_from_manifest(manifest)


@pytest.fixture(scope="module")
def warehouse(built_insurance) -> Path:
    """The warehouse that build's `dbt build` wrote (seeds, models, data and unit tests): read only."""
    return built_insurance.project / ".sqleval" / "warehouse.duckdb"


def _terms(semantic) -> dict[str, Term]:
    return {t.term: t for t in semantic.glossary.terms}


# ---- pure: filter rendering ------------------------------------------------------------------

def test_render_filter_dimension_reference():
    assert render_filter("{{ Dimension('claim__status_cd') }} = 'S'") == "status_cd = 'S'"
    assert render_filter('{{Dimension("claim__status_cd")}} IN (\'S\', \'D\')') == \
        "status_cd IN ('S', 'D')"


def test_render_filter_resolves_through_lookup_and_grains():
    exprs = {"claim__line_of_business": "lob_cd"}
    assert render_filter("{{ Dimension('claim__line_of_business') }} = 'AUTO'", exprs) == \
        "lob_cd = 'AUTO'"
    assert render_filter("{{ TimeDimension('claim__loss_date', 'month') }} >= '2024-01-01'") \
        == "date_trunc('month', loss_date) >= '2024-01-01'"
    # no truncation at the dimension's own grain
    day = lambda kind, name: ColumnRef("loss_date", "claims", "day")  # noqa: E731
    assert render_filter("{{ TimeDimension('claim__loss_date', 'day') }} > '2024-01-01'",
                         day) == "loss_date > '2024-01-01'"
    assert render_filter("{{ Dimension('claim__loss_date').grain('year') }} = '2024-01-01'") \
        == "date_trunc('year', loss_date) = '2024-01-01'"
    assert render_filter("{{ Dimension('claim__loss_date').date_part('month') }} = 6") == \
        "date_part('month', loss_date) = 6"
    assert render_filter("{{ Entity('policy') }} IS NOT NULL",
                         lambda kind, name: "policy_id") == "policy_id IS NOT NULL"


@pytest.mark.parametrize("bad", [
    "{{ Metric('claim_count', group_by=['customer']) }} > 2",
    "{{ Dimension(name) }} = 'S'",
    "{% if x %}status_cd = 'S'{% endif %}",
    "{{ TimeDimension('claim__loss_date', 'fortnight') }} = '2024-01-01'",
    "{{ Dimension('claim__status_cd') = 'S'",
])
def test_render_filter_refuses_what_it_cannot_render(bad):
    with pytest.raises(UnsupportedFilter):
        render_filter(bad)


# ---- pure: merging ----------------------------------------------------------------------------

def test_merge_glossaries_overrides_by_normalised_name_and_extends():
    base = Glossary(version=1, as_of_note="semantic", terms=[
        Term(term="loss_ratio", kind="metric", definition="derived", sql="x"),
        Term(term="status_cd", kind="dimension", definition="code", sql="status_cd"),
    ])
    override = Glossary(version=2, as_of_note="curated", terms=[
        Term(term="Loss ratio", kind="metric", definition="curated", sql="y"),
        Term(term="settled claims", kind="filter", definition="S", sql="status_cd = 'S'"),
    ])
    merged = merge_glossaries(base, override)
    assert [t.term for t in merged.terms] == ["Loss ratio", "status_cd", "settled claims"]
    assert merged.terms[0].sql == "y" and merged.version == 2 and merged.as_of_note == "curated"
    assert merge_glossaries(None, None) is None
    assert merge_glossaries(base, None) == base
    assert merge_glossaries(None, override) == override


# ---- synthetic manifests: what is handled and what is skipped --------------------------------

def _manifest(measures, metrics, dimensions=(), entities=None, extra_models=()) -> dict:
    def sm(name, model, measures, dimensions, entities):
        return {"name": name, "model": f"ref('{model}')",
                "node_relation": {"alias": model}, "depends_on": {"nodes": [f"model.p.{model}"]},
                "defaults": {"agg_time_dimension": "day"},
                "entities": entities, "measures": measures,
                "dimensions": [{"name": "day", "type": "time",
                                "type_params": {"time_granularity": "day"}}, *dimensions]}
    sms = {"semantic_model.p.facts": sm(
        "facts", "fct", measures, dimensions,
        entities or [{"name": "fact", "type": "primary", "expr": "fact_id"}])}
    for name, model, ms, dims, ents in extra_models:
        sms[f"semantic_model.p.{name}"] = sm(name, model, ms, dims, ents)
    nodes = {f"model.p.{s['model'][5:-2]}": {"name": s["model"][5:-2],
                                            "alias": s["model"][5:-2]} for s in sms.values()}
    return {"nodes": nodes, "semantic_models": sms,
            "metrics": {f"metric.p.{m['name']}": m for m in metrics}}


def _metric(name, type_, **tp):
    flt = tp.pop("filter", None)
    return {"name": name, "label": name.title(), "type": type_, "description": "",
            "type_params": tp, "filter": flt and {"where_filters": [
                {"where_sql_template": f} for f in ([flt] if isinstance(flt, str) else flt)]}}


def test_synthetic_manifest_covers_aggregations_and_records_skips():
    measures = [
        {"name": "amount", "agg": "sum", "expr": "amt"},
        {"name": "n", "agg": "count", "expr": "1"},
        {"name": "p90", "agg": "percentile", "expr": "amt",
         "agg_params": {"percentile": 0.9, "use_discrete_percentile": True}},
        {"name": "p50_approx", "agg": "percentile", "expr": "amt",
         "agg_params": {"percentile": 0.5, "use_approximate_percentile": True}},
        {"name": "mid", "agg": "median", "expr": "amt"},
        {"name": "balance", "agg": "sum", "expr": "bal",
         "non_additive_dimension": {"name": "day", "window_choice": "max"}},
        {"name": "weird", "agg": "mode", "expr": "amt"},
    ]
    other_ms = [{"name": "budget", "agg": "sum", "expr": "budget"}]
    metrics = [
        _metric("big_amount", "simple", measure={"name": "amount", "fill_nulls_with": 0},
                filter="{{ Dimension('fact__kind') }} = 'big' or {{ Dimension('fact__kind') }} = 'huge'"),
        _metric("needs_join", "simple", measure={"name": "amount"},
                filter="{{ Dimension('team__team_name') }} = 'A'"),
        _metric("metric_filter", "simple", measure={"name": "amount"},
                filter="{{ Metric('n', group_by=['fact']) }} > 1"),
        _metric("big_share", "ratio", numerator={"name": "big_amount"},
                denominator={"name": "all_amount"}, filter="{{ TimeDimension('metric_time', 'year') }} = '2024-01-01'"),
        _metric("all_amount", "simple", measure={"name": "amount"}),
        _metric("x_share", "ratio",
                numerator={"name": "all_amount", "filter": {"where_filters": [
                    {"where_sql_template": "{{ Dimension('fact__kind') }} = 'x'"}]}},
                denominator="all_amount"),
        _metric("new_style", "simple", measure=None, metric_aggregation_params={
            "semantic_model": "facts", "agg": "count_distinct", "expr": "fact_id"}),
        _metric("vs_budget", "derived", expr="all_amount - budget_total",
                metrics=[{"name": "all_amount"}, {"name": "budget_total"}]),
        _metric("budget_total", "simple", measure={"name": "budget"}),
        _metric("conv", "conversion", conversion_type_params={}),
    ]
    dims = [{"name": "kind", "type": "categorical"}]
    teams = ("teams", "dim_team", other_ms, [{"name": "team_name", "type": "categorical"}],
             [{"name": "team", "type": "primary", "expr": "team_id"}])
    res = glossary_from_manifest(_manifest(measures, metrics, dims, extra_models=[teams]))
    t = _terms(res)
    skipped = {(s.kind, s.name): s.reason for s in res.skipped}

    assert t["p90"].sql == "quantile_disc(amt, 0.9)"
    assert t["p50_approx"].sql == "approx_quantile(amt, 0.5)"
    assert t["mid"].sql == "median(amt)" and t["n"].sql == "count(1)"
    assert t["big_amount"].sql == "coalesce(sum(amt), 0)"
    assert t["big_amount"].filter == "(kind = 'big' or kind = 'huge')"
    assert t["big_amount"].time_column == "day"
    # a filter every part shares is hoisted; the rest is pushed into the parts
    assert t["big_share"].sql == \
        "(coalesce(sum(amt) FILTER (WHERE (kind = 'big' or kind = 'huge')), 0)) / nullif(sum(amt), 0)"
    assert t["big_share"].filter == "date_trunc('year', day) = '2024-01-01'"
    assert t["x_share"].sql == "sum(amt) FILTER (WHERE kind = 'x') / nullif(sum(amt), 0)"
    assert t["new_style"].sql == "count(DISTINCT fact_id)" and t["new_style"].tables == ["fct"]
    assert t["vs_budget"].sql == "(SELECT sum(amt) FROM fct) - (SELECT sum(budget) FROM dim_team)"
    assert t["vs_budget"].tables == ["fct", "dim_team"] and t["vs_budget"].filter is None
    assert any("vs_budget" in n for n in res.notes)

    # every produced expression is valid DuckDB over tables of that shape
    con = duckdb.connect()
    con.execute("CREATE TABLE fct AS SELECT * FROM (VALUES (1, 10.0, 'big', DATE '2024-02-01', 1),"
                " (2, 30.0, 'x', DATE '2023-05-01', 2)) v(fact_id, amt, kind, day, bal)")
    con.execute("CREATE TABLE dim_team AS SELECT 1 AS team_id, 'A' AS team_name, 5.0 AS budget")
    for term in res.glossary.terms:
        if term.kind == "metric" and len(term.tables) == 1:
            where = f" WHERE {term.filter}" if term.filter else ""
            con.execute(f"SELECT {term.sql} FROM {term.tables[0]}{where}").fetchall()
    assert con.execute(f"SELECT {t['vs_budget'].sql}").fetchone()[0] == 35
    assert con.execute(f"SELECT {t['big_share'].sql} FROM fct WHERE {t['big_share'].filter}"
                       ).fetchone()[0] == 1

    assert "non_additive" in skipped[("measure", "balance")]
    assert "'mode'" in skipped[("measure", "weird")]
    assert "join" in skipped[("metric", "needs_join")]
    assert "Metric(" in skipped[("metric", "metric_filter")]
    assert "conversion" in skipped[("metric", "conv")]
    for name in ("balance", "weird", "needs_join", "metric_filter", "conv"):
        assert name not in t


# ---- the insurance project's manifest ---------------------------------------------------------

def test_manifest_has_the_fixture_semantic_layer(manifest):
    assert {s["name"] for s in manifest["semantic_models"].values()} == \
        {"claims", "policies", "premiums"}
    spine = manifest["nodes"]["model.insurance.metricflow_time_spine"]
    assert spine["time_spine"]["standard_granularity_column"] == "date_day"
    assert "serving" not in spine["tags"]


def test_insurance_terms(semantic):
    t = _terms(semantic)
    assert t["claims_paid"].kind == "metric"
    assert t["claims_paid"].sql == "sum(paid_amount)" and t["claims_paid"].tables == ["fct_claims"]
    assert t["claims_paid"].time_column == "loss_date"
    assert t["claimants"].sql == "count(DISTINCT customer_id)"
    assert t["avg_claim_amount"].sql == "avg(claim_amount)"
    assert t["median_claim_amount"].sql == "quantile_cont(claim_amount, 0.5)"
    assert t["settled_claims"].sql == "sum(CASE WHEN status_cd = 'S' THEN 1 ELSE 0 END)"
    assert t["earned_premium"].tables == ["fct_premiums"]
    assert t["earned_premium"].time_column == "premium_month"

    settled = t["settled_claim_count"]
    assert (settled.sql, settled.filter) == ("count(claim_id)", "status_cd = 'S'")
    assert settled.aliases == ["Settled claims", "settled claim count"]
    assert settled.definition == "Number of settled claims (status code S)."
    auto = t["auto_claims_paid_2024"]
    assert auto.filter == "lob_cd = 'AUTO' AND date_trunc('year', loss_date) = '2024-01-01'"

    loss = t["loss_ratio"]
    assert loss.sql == ("(SELECT sum(paid_amount) FROM fct_claims) / "
                        "nullif((SELECT sum(earned_premium) FROM fct_premiums), 0)")
    assert loss.tables == ["fct_claims", "fct_premiums"] and loss.filter is None
    assert "Loss ratio" in loss.aliases and "self-contained" in loss.definition
    assert t["settlement_rate"].sql == \
        "count(claim_id) FILTER (WHERE status_cd = 'S') / nullif(count(claim_id), 0)"
    assert t["denial_rate"].sql == \
        "count(claim_id) FILTER (WHERE status_cd = 'D') / nullif(count(claim_id), 0)"
    assert t["outstanding_claims"].sql == "sum(claim_amount) - sum(paid_amount)"
    assert t["unearned_premium"].sql == "sum(written_premium) - sum(earned_premium)"
    assert t["unearned_premium"].tables == ["fct_premiums"]

    lob = t["line_of_business"]
    assert (lob.kind, lob.sql) == ("dimension", "lob_cd")
    assert sorted(lob.tables) == ["fct_claims", "fct_policies", "fct_premiums"]
    assert t["status_cd"].kind == "dimension" and t["status_cd"].time_column is None
    assert t["loss_date"].time_column == "loss_date" and "granularity day" in t["loss_date"].definition
    assert t["premium_month"].time_column == "premium_month"
    # nothing from the restricted area or the time spine
    for term in t.values():
        assert not set(term.tables) & {"adjuster_notes", "customer_contacts",
                                       "metricflow_time_spine"}


def test_insurance_skips_carry_reasons(semantic):
    skipped = {(s.kind, s.name): s.reason for s in semantic.skipped}
    assert set(skipped) == {("metric", "claims_paid_mom_change"),
                            ("metric", "cumulative_claims_paid"), ("measure", "claim_count")}
    assert "offset" in skipped[("metric", "claims_paid_mom_change")]
    assert "cumulative" in skipped[("metric", "cumulative_claims_paid")]
    assert "same name" in skipped[("measure", "claim_count")]
    assert all(reason.strip() for reason in skipped.values())
    names = {t.term for t in semantic.glossary.terms}
    assert not names & {"claims_paid_mom_change", "cumulative_claims_paid"}
    assert len(names) == len(semantic.glossary.terms)


def test_served_mapping_renames_tables_and_leaves_out_unserved_models(manifest, tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    res = glossary_from_manifest(path, served={"model.insurance.fct_claims": "claims",
                                               "fct_policies": "policies"})
    t = _terms(res)
    assert t["claims_paid"].tables == ["claims"]
    assert sorted(t["line_of_business"].tables) == ["claims", "policies"]
    assert "earned_premium" not in t and "loss_ratio" not in t and "premium_month" not in t
    skipped = {(s.kind, s.name): s.reason for s in res.skipped}
    assert "not served" in skipped[("semantic_model", "premiums")]
    assert "not served" in skipped[("metric", "loss_ratio")]
    assert "not served" in skipped[("metric", "unearned_premium")]


# ---- every metric term, executed on the built warehouse ---------------------------------------

def _seed(name: str) -> list[dict[str, str]]:
    with open(PROJECT / "seeds" / f"{name}.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _expected() -> dict[str, float]:
    """Every metric value, computed from the seed CSVs in plain Python."""
    claims = _seed("raw_claims")
    policies = {p["policy_id"]: p for p in _seed("raw_policies")}
    lob = {p["product_id"]: p["lob_cd"] for p in _seed("raw_products")}
    amount = [Decimal(c["claim_amount"]) for c in claims]
    paid = [Decimal(c["paid_amount"]) for c in claims]
    status = [c["status_cd"] for c in claims]

    written = earned = Decimal(0)
    for p in policies.values():
        eff, exp = date.fromisoformat(p["effective_date"]), date.fromisoformat(p["expiration_date"])
        cancel = date.fromisoformat(p["cancellation_date"]) if p["cancellation_date"] else exp
        end, term_days = min(exp, cancel, AS_OF), (exp - eff).days + 1
        written += Decimal(p["written_premium"])
        month = date(eff.year, eff.month, 1)
        while month <= end:
            nxt = date(month.year + month.month // 12, month.month % 12 + 1, 1)
            days = (min(end, nxt - timedelta(days=1)) - max(eff, month)).days + 1
            earned += (Decimal(p["written_premium"]) * days / term_days).quantize(
                Decimal("0.01"), ROUND_HALF_UP)
            month = nxt

    n = len(claims)
    incurred, total_paid = sum(amount), sum(paid)
    auto_2024 = sum(Decimal(c["paid_amount"]) for c in claims
                    if lob[policies[c["policy_id"]]["product_id"]] == "AUTO"
                    and c["loss_date"].startswith("2024-"))
    values = {
        "claim_count": n,
        "claims_incurred": incurred, "total_claims_incurred": incurred,
        "claims_paid": total_paid, "total_claims_paid": total_paid,
        "avg_claim_amount": incurred / n,
        "median_claim_amount": statistics.median(amount),
        "claimants": len({policies[c["policy_id"]]["customer_id"] for c in claims}),
        "settled_claims": status.count("S"), "settled_claim_count": status.count("S"),
        "open_claims_incurred": sum(a for a, s in zip(amount, status) if s == "O"),
        "auto_claims_paid_2024": auto_2024,
        "policy_count": len(policies), "policies_written": len(policies),
        "policyholders": len({p["customer_id"] for p in policies.values()}),
        "written_premium": written, "written_premium_total": written,
        "earned_premium": earned, "earned_premium_total": earned,
        "loss_ratio": total_paid / earned,
        "settlement_rate": Decimal(status.count("S")) / n,
        "denial_rate": Decimal(status.count("D")) / n,
        "outstanding_claims": incurred - total_paid,
        "unearned_premium": written - earned,
    }
    return {k: float(v) for k, v in values.items()}


@pytest.mark.slow
def test_every_metric_term_computes_the_independent_value(semantic, warehouse):
    expected = _expected()
    metrics = [t for t in semantic.glossary.terms if t.kind == "metric"]
    assert {t.term for t in metrics} == set(expected)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        con.execute("SET search_path = 'analytics'")
        for t in metrics:
            if len(t.tables) == 1:
                sql = f"SELECT {t.sql} FROM {t.tables[0]}" + (
                    f" WHERE {t.filter}" if t.filter else "")
            else:  # a self-contained expression over several tables
                assert t.filter is None
                sql = f"SELECT {t.sql}"
            got = con.execute(sql).fetchone()[0]
            # earned premium is rounded to cents per policy-month on both sides
            tol = 0.05 if "premium" in t.term or t.term == "loss_ratio" else 1e-6
            assert float(got) == pytest.approx(expected[t.term], rel=1e-6, abs=tol), (t.term, sql)
        for t in semantic.glossary.terms:
            if t.kind == "dimension":
                for table in t.tables:
                    rows = con.execute(f"SELECT {t.sql}, count(*) FROM {table} GROUP BY 1").fetchall()
                    assert rows, (t.term, table)
    finally:
        con.close()
