"""The baseline works on any warehouse: an insurance schema it has never seen.

Nothing of the commerce demo may leak into its SQL; every table and column it names must exist
in the catalog it was given, and the answers must equal values computed here independently.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from decimal import Decimal

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from sqleval_pipeline.generation.base import GenerationContext
from sqleval_pipeline.generation.baseline import BaselineGenerator
from sqleval_pipeline.generation.context import load_catalog
from sqleval_pipeline.semantic.glossary import Glossary, Term
from sqleval_pipeline.guard.clock import pin_clock

AS_OF = dt.date(2025, 6, 15)
DEMO_NAMES = ("fct_orders", "fct_order_items", "fct_returns", "dim_customers", "dim_products",
              "dim_segments", "mart_", "order_date", "order_month", "net_revenue_inr", "units",
              "quantity", "status <> 'cancelled'", "payment_method", "segment_cd")
REGIONS = ["North", "South", "East", "West"]
PRODUCTS = ["auto", "home", "life"]
STATUSES = ["approved", "denied", "open"]


@pytest.fixture(scope="module")
def insurance(tmp_path_factory):
    """customers, dim_agents, policies and claims with made-up rows (three of them without a
    dbt prefix), the rows kept in Python for the independent answers."""
    rnd = random.Random(7)
    root = tmp_path_factory.mktemp("insurance")
    customers = [(i, f"Customer {i}", REGIONS[i % 4], dt.date(2023, 1, 1) + dt.timedelta(days=17 * i))
                 for i in range(1, 13)]
    agents = [(1, "Asha", "Pune"), (2, "Bilal", "Delhi"), (3, "Chen", "Pune"), (4, "Dara", "Goa")]
    policies, claims = [], []
    for pid in range(1, 41):
        sold = AS_OF - dt.timedelta(days=rnd.randrange(0, 600))
        premium = Decimal(rnd.randrange(5000, 90000)) / 100 + Decimal(pid) / 1000
        policies.append((pid, rnd.randrange(1, 13), 1 + pid % 4, PRODUCTS[pid % 3], premium,
                         sold + dt.timedelta(days=30), sold))
    for cid in range(1, 61):
        pol = policies[rnd.randrange(0, 40)]
        day = max(pol[6], AS_OF - dt.timedelta(days=rnd.randrange(0, 400)))
        claims.append((cid, pol[0], day, Decimal(rnd.randrange(1000, 500000)) / 100, STATUSES[cid % 3]))
    path = root / "serving.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE customers (customer_id INTEGER, customer_name VARCHAR, "
                "region VARCHAR, joined_on DATE)")
    con.execute("CREATE TABLE dim_agents (agent_id INTEGER, agent_name VARCHAR, office VARCHAR)")
    con.execute("CREATE TABLE policies (policy_id INTEGER, customer_id INTEGER, agent_id INTEGER, "
                "product VARCHAR, premium DECIMAL(12,3), effective_date DATE, sold_date DATE)")
    con.execute("CREATE TABLE claims (claim_id INTEGER, policy_id INTEGER, claim_date DATE, "
                "claim_amount DECIMAL(12,2), status VARCHAR)")
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
    con.executemany("INSERT INTO dim_agents VALUES (?, ?, ?)", agents)
    con.executemany("INSERT INTO policies VALUES (?, ?, ?, ?, ?, ?, ?)", policies)
    con.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?)", claims)
    con.close()
    (root / "models").mkdir()
    catalog = load_catalog(path, AS_OF, models_dir=root / "models")
    return path, catalog, {"customers": customers, "agents": agents, "policies": policies,
                           "claims": claims}


def ask(gen: BaselineGenerator, question: str):
    out = gen.generate(GenerationContext(case_id="x", run_index=0, question=question, as_of=AS_OF,
                                         schema_context=""))
    assert out.kind == "sql", (question, out.refusal_reason)
    return out.sql


def run(path, catalog, sql: str) -> list[tuple]:
    """Check the SQL names only what the catalog has and no demo name, then execute it."""
    tables = {t.name: {c.name for c in t.columns} for t in catalog.tables}
    tree = sqlglot.parse_one(sql, read="duckdb")
    named = {t.name for t in tree.find_all(exp.Table)}
    assert named <= set(tables), (sql, named - set(tables))
    aliases = {a.alias for a in tree.find_all(exp.Alias)}
    known = set().union(*(tables[t] for t in named)) | aliases
    cols = {c.name for c in tree.find_all(exp.Column)}
    assert cols <= known, (sql, cols - known)
    present = set(tables) | set().union(*tables.values())
    for name in DEMO_NAMES:
        if name not in present:
            assert name not in sql, (name, sql)
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(pin_clock(sql, AS_OF)).fetchall()
    finally:
        con.close()


def test_counts_filters_and_time_windows(insurance):
    path, catalog, d = insurance
    gen = BaselineGenerator(catalog, None)
    assert run(path, catalog, ask(gen, "How many claims are there?")) == [(len(d["claims"]),)]
    approved = sum(1 for c in d["claims"] if c[4] == "approved")
    assert run(path, catalog, ask(gen, "How many claims were approved?")) == [(approved,)]
    north = sum(1 for c in d["customers"] if c[2] == "North")
    assert run(path, catalog, ask(gen, "How many customers are in the North region?")) == [(north,)]
    # "last month" is May 2025 for an as-of date of 15 June 2025; "sold" picks sold_date
    may = sum(1 for p in d["policies"] if dt.date(2025, 5, 1) <= p[6] < dt.date(2025, 6, 1))
    sql = ask(gen, "How many policies were sold last month?")
    assert "sold_date" in sql and "effective_date" not in sql
    assert run(path, catalog, sql) == [(may,)]
    no_policy = len({c[0] for c in d["customers"]} - {p[1] for p in d["policies"]})
    assert run(path, catalog, ask(gen, "How many customers have never bought a policy?")) == \
        [(no_policy,)]
    sold_2024 = [p[4] for p in d["policies"] if p[6].year == 2024]
    (avg,), = run(path, catalog, ask(gen, "What is the average premium of policies sold in 2024?"))
    assert float(avg) == pytest.approx(float(sum(sold_2024) / len(sold_2024)))


def test_joins_and_grouping(insurance):
    path, catalog, d = insurance
    gen = BaselineGenerator(catalog, None)
    region_of = {c[0]: c[2] for c in d["customers"]}
    policy = {p[0]: p for p in d["policies"]}
    by_region: dict[str, Decimal] = defaultdict(Decimal)
    for c in d["claims"]:
        by_region[region_of[policy[c[1]][1]]] += c[3]
    sql = ask(gen, "Total claim amount by region")
    assert "JOIN policies" in sql and "JOIN customers" in sql
    assert dict(run(path, catalog, sql)) == dict(by_region)

    agent_name = {a[0]: a[1] for a in d["agents"]}
    premium: dict[str, Decimal] = defaultdict(Decimal)
    for p in d["policies"]:
        premium[agent_name[p[2]]] += p[4]
    top3 = sorted(premium.items(), key=lambda kv: -kv[1])[:3]
    assert run(path, catalog, ask(gen, "Top 3 agents by premium")) == top3

    # the customer key is on policies, one join away from claims
    claimants = {policy[c[1]][1] for c in d["claims"]}
    sql = ask(gen, "How many distinct customers filed a claim?")
    assert sql.startswith("SELECT count(DISTINCT customer_id)") and "FROM claims" in sql
    assert run(path, catalog, sql) == [(len(claimants),)]

    per_agent: dict[str, int] = defaultdict(int)
    for p in d["policies"]:
        per_agent[agent_name[p[2]]] += 1
    assert dict(run(path, catalog, ask(gen, "Policies per agent"))) == dict(per_agent)

    statuses: dict[str, int] = defaultdict(int)
    for c in d["claims"]:
        statuses[c[4]] += 1
    assert dict(run(path, catalog, ask(gen, "Number of claims per status"))) == dict(statuses)

    monthly: dict[dt.date, Decimal] = defaultdict(Decimal)
    for c in d["claims"]:
        if c[2] >= dt.date(2025, 1, 1):
            monthly[c[2].replace(day=1)] += c[3]
    rows = run(path, catalog, ask(gen, "Claim amount by month this year"))
    assert [(r[0].date() if isinstance(r[0], dt.datetime) else r[0], r[1]) for r in rows] == \
        sorted(monthly.items())


def test_a_glossary_extends_the_vocabulary(insurance):
    path, catalog, d = insurance
    glossary = Glossary(version=1, as_of_note="", terms=[
        Term(term="claims paid", kind="metric", aliases=["payouts"], definition="Approved claims.",
             sql="sum(claim_amount)", filter="status = 'approved'", tables=["claims"]),
        Term(term="territory", kind="dimension", aliases=["territories"], definition="Region.",
             sql="region", tables=["customers"]),
        Term(term="not available", kind="refusal", aliases=["ssn", "date of birth"],
             definition="Not collected."),
    ])
    gen = BaselineGenerator(catalog, glossary)
    region_of = {c[0]: c[2] for c in d["customers"]}
    policy = {p[0]: p for p in d["policies"]}
    paid: dict[str, Decimal] = defaultdict(Decimal)
    for c in d["claims"]:
        if c[4] == "approved":
            paid[region_of[policy[c[1]][1]]] += c[3]
    assert dict(run(path, catalog, ask(gen, "Payouts by territory"))) == dict(paid)
    out = gen.generate(GenerationContext(case_id="x", run_index=0, as_of=AS_OF, schema_context="",
                                         question="What is the SSN of customer 4?"))
    assert out.kind == "refusal"
    # without the glossary the same words do not resolve to the curated definition
    raw = BaselineGenerator(catalog, None).generate(GenerationContext(
        case_id="x", run_index=0, as_of=AS_OF, schema_context="", question="Payouts by territory"))
    assert raw.kind == "refusal" or "approved" not in (raw.sql or "")


def test_vocabulary_is_derived_from_the_schema(insurance):
    _path, catalog, _d = insurance
    vocab = BaselineGenerator(catalog, None).vocab
    assert {n: t for n, t in vocab.nouns} == {"customer": "customers", "agent": "dim_agents",
                                              "policy": "policies", "claim": "claims"}
    assert vocab.tables["claims"].fks == {"policy_id": "policies"}
    assert vocab.tables["policies"].fks == {"customer_id": "customers", "agent_id": "dim_agents"}
    assert [vocab.tables[t].role for t in vocab.order] == ["fact", "fact", "dim", "dim"]
    assert vocab.path("claims", "customers") == [("policies", "policy_id"), ("customers", "customer_id")]
    assert vocab.path("customers", "claims") is None  # one-to-many: never joined


def test_staging_tables_and_timestamps(tmp_path):
    """``stg_`` is stripped from the noun, a TIMESTAMP is read as its date, and an unprefixed
    table's role comes from its keys."""
    path = tmp_path / "events.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE stg_events (event_id INTEGER, user_id INTEGER, created_at TIMESTAMP, "
                "kind VARCHAR, amount_usd DOUBLE)")
    con.execute("CREATE TABLE users (user_id INTEGER, plan VARCHAR, signup_at TIMESTAMP)")
    events = [(1, 1, dt.datetime(2025, 6, 8, 10), "click", 1.5),
              (2, 2, dt.datetime(2025, 6, 15, 23), "view", 2.0),
              (3, 1, dt.datetime(2025, 6, 1, 9), "view", 4.0),
              (4, 3, dt.datetime(2025, 6, 14, 8), "click", 8.0)]
    con.executemany("INSERT INTO stg_events VALUES (?, ?, ?, ?, ?)", events)
    con.executemany("INSERT INTO users VALUES (?, ?, ?)", [(1, "pro", dt.datetime(2025, 1, 1)),
                                                           (2, "free", dt.datetime(2025, 5, 1)),
                                                           (3, "pro", dt.datetime(2024, 3, 1))])
    con.close()
    (tmp_path / "models").mkdir()
    catalog = load_catalog(path, AS_OF, models_dir=tmp_path / "models")
    gen = BaselineGenerator(catalog, None)
    assert gen.vocab.tables["stg_events"].role == "fact"
    # the 7 days ending on the as-of date include 15 June 23:00
    week = sum(1 for e in events if e[2].date() > AS_OF - dt.timedelta(days=7))
    assert run(path, catalog, ask(gen, "How many events in the last 7 days?")) == [(week,)]
    assert dict(run(path, catalog, ask(gen, "Total amount by plan"))) == {"pro": 13.5, "free": 2.0}
    assert run(path, catalog, ask(gen, "How many users signed up this year?")) == [(2,)]
