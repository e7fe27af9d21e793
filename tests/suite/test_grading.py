"""Grading on the test suite (issue 25.3): an answer right on the snapshot and wrong on a
neighbour of its case's suite is WRONG (accidental_match); the scorecard shows both accuracies;
a configuration can turn it off; no reference is ever flagged; an answer that takes its values
from another table than the case's readings is not judged (suite/routes.py)."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest

from sqleval_pipeline.configs import load_config
from sqleval_pipeline.demo import location
from sqleval_pipeline.golden.freeze import run_reference
from sqleval_pipeline.grading import GRADER_VERSION
from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline.pipeline.records import Attempt, Grade, load_records
from sqleval_pipeline.pipeline.suite_checks import SuiteChecker, current_suite, grader_for
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.suite.routes import Routes

from tests.suite.test_corpus import COINCIDENTAL, EQUIVALENT, _id

SCHEMA = {
    "fct_orders": {"order_id": "INT", "customer_id": "INT", "units": "INT", "status": "VARCHAR"},
    "fct_order_items": {"order_id": "INT", "product_id": "INT", "quantity": "INT"},
    "dim_products": {"product_id": "INT", "category": "VARCHAR"},
    "mart_orders_daily": {"order_date": "DATE", "orders": "INT"},
}
PARENTS = {("fct_order_items", "fct_orders"), ("fct_order_items", "dim_products")}


# ---- which tables an answer takes its values from (pure) ----------------------------------


@pytest.mark.parametrize("sql, expected", [
    ("SELECT sum(units) FROM fct_orders", {"fct_orders"}),
    # a lookup parent of the counted table adds no rows: count(*) counts the child's
    ("SELECT count(*) FROM fct_order_items i JOIN dim_products p USING (product_id) WHERE p.category = 'x'",
     {"fct_order_items"}),
    # ... but a column of the parent in the output is a value taken from it
    ("SELECT p.category, count(*) FROM fct_order_items i JOIN dim_products p USING (product_id) GROUP BY 1",
     {"fct_order_items", "dim_products"}),
    # a CTE named like nothing served, read by the outer query: the CTE's own scope counts
    ("WITH t AS (SELECT order_id, quantity FROM fct_order_items) SELECT sum(quantity) FROM t", {"fct_order_items"}),
    # a subquery in FROM, unqualified columns resolved with the schema
    ("SELECT max(q) FROM (SELECT order_id, sum(quantity) AS q FROM fct_order_items GROUP BY order_id)",
     {"fct_order_items"}),
    # a filter on another table is not a value taken from it
    ("SELECT sum(quantity) FROM fct_order_items WHERE order_id IN (SELECT order_id FROM fct_orders "
     "WHERE status = 'x')", {"fct_order_items"}),
    # ... but a scalar subquery in the output is
    ("SELECT (SELECT sum(units) FROM fct_orders) - sum(quantity) FROM fct_order_items",
     {"fct_order_items", "fct_orders"}),
    ("SELECT * FROM mart_orders_daily", {"mart_orders_daily"}),
])
def test_value_tables(sql, expected):
    assert Routes(SCHEMA, PARENTS).value_tables(sql) == expected


def test_an_answer_from_another_route_is_not_judged_one_from_the_same_tables_is():
    routes = Routes(SCHEMA, PARENTS)
    refs = ["SELECT sum(quantity) AS units FROM fct_order_items"]
    assert routes.judgeable("SELECT sum(units) AS units FROM fct_orders", refs)[0] is False
    assert routes.judgeable("SELECT sum(quantity) AS units FROM fct_order_items WHERE quantity > 0", refs) == (True, None)
    # joining a parent to filter keeps the route; unparseable SQL is left to the neighbours
    assert routes.judgeable("SELECT sum(i.quantity) FROM fct_order_items i JOIN fct_orders o USING (order_id) "
                            "WHERE o.status <> 'x'", refs) == (True, None)
    assert routes.judgeable("SELEC nonsense", refs) == (True, None)
    # counting the rows of a join with a table the reference reads counts that table's rows
    count_refs = ["SELECT count(*) FROM fct_order_items"]
    assert routes.judgeable("SELECT count(*) FROM fct_order_items i JOIN mart_orders_daily m ON true",
                            count_refs) == (True, None)
    assert routes.judgeable("SELECT count(*) FROM fct_orders", count_refs)[0] is False


# ---- the corpus, with the routes rule the pipeline applies ----------------------------------


def _routes(suite_env) -> Routes:
    cols = {t: {c.name: c.type for c in info.columns} for t, info in suite_env.snapshot.manifest.tables.items()}
    return Routes(cols, {(r.table, r.parent) for r in suite_env.constraints.relationships})


@pytest.mark.parametrize("entry", COINCIDENTAL, ids=_id)
def test_the_routes_rule_keeps_every_coincidental_answer_caught(suite_env, run, entry):
    case = suite_env.cases[entry["case"]]
    assert suite_env.suite.check(entry["sql"], case, run, routes=_routes(suite_env)) is not None


@pytest.mark.parametrize("entry", EQUIVALENT, ids=_id)
def test_the_routes_rule_flags_no_equivalent_rewrite(suite_env, run, entry):
    case = suite_env.cases[entry["case"]]
    assert suite_env.suite.check(entry["sql"], case, run, routes=_routes(suite_env)) is None


# ---- through the pipeline ---------------------------------------------------------------------


def test_no_reading_of_any_case_is_an_accidental_match(env):
    """Every reference and alternative, checked through the guard on its case's suite."""
    handle = current_suite(env)
    flagged = []
    with SuiteChecker(env, handle, env.policy(None)) as checker:
        for case in env.cases:
            for sql in [case.reference_sql, *case.alternative_sqls]:
                if case.answerable and sql:
                    status, info = checker.check(case, sql)
                    if status == "accidental_match":
                        flagged.append((case.id, info["summary"]))
    assert not flagged
    assert checker.checked > 0


def _rows(path, sql, as_of) -> Counter:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rs: ResultSet = run_reference(con, sql, as_of)
    finally:
        con.close()
    return Counter(tuple(str(v) for v in r) for r in rs.rows)


def test_accidental_matches_are_wrong_with_their_evidence_and_both_accuracies_are_shown(env):
    loaded = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    res = cmp.evaluate(env, loaded)
    folder = env.store.batch_dir(loaded.partition_key, res.batch.batch_id)
    grades = load_records(folder / "grades.parquet", Grade)
    attempts = {a.key: a for a in load_records(folder / "attempts.parquet", Attempt)}
    assert {g.grader_version for g in grades} == {grader_for(env).version}
    assert GRADER_VERSION + "+suite-" in grades[0].grader_version
    handle = current_suite(env)
    cases = {c.id: c for c in env.cases}
    accidental = [g for g in grades if g.suite_check == "accidental_match"]
    for g in accidental:
        assert g.outcome == "WRONG" and g.reason == "accidental_match"
        assert g.snapshot_outcome in ("CORRECT", "CORRECT_FACTS")
        d = g.suite_detail
        nb = {n.id: n for n in handle.suite.suite_for(g.case_id)}
        assert d["neighbour"] in nb and (d["missing"] or d["unexpected"] or d["got"] is None)
        # independently: the answer and the reference give other rows on that neighbour
        n = nb[d["neighbour"]]
        assert _rows(n.path, attempts[g.key].sql, n.as_of) != _rows(n.path, cases[g.case_id].reference_sql, n.as_of)
    # a check is made only of answers right on the snapshot
    for g in grades:
        if g.suite_check is not None:
            assert (g.snapshot_outcome or g.outcome) in ("CORRECT", "CORRECT_FACTS")
    # the scorecard: suite accuracy is the accuracy; the snapshot's counts accidental matches as right
    answerable = [g for g in grades if g.band in ("answerable", "needs_definition") and g.outcome not in (None, "ERROR")]
    right = sum((g.snapshot_outcome or g.outcome) in ("CORRECT", "CORRECT_FACTS") for g in answerable)
    t = res.scorecard.test_suite
    assert t is not None
    assert (t.snapshot_accuracy.num, t.snapshot_accuracy.den) == (right, len(answerable))
    assert t.suite_accuracy.num == right - sum(g in accidental for g in answerable)
    assert res.scorecard.overall.accuracy == t.suite_accuracy
    assert t.n_accidental == len(accidental)
    assert t.accidental_cases == sorted({g.case_id for g in accidental})


def test_a_configuration_can_turn_the_suite_off(env, tmp_path):
    text = (location.EVALS_DIR / "configs" / "baseline_raw.yaml").read_text(encoding="utf-8")
    off_file = tmp_path / "baseline_raw.yaml"
    off_file.write_text(text + "\ntest_suite: false\n", encoding="utf-8")
    on = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    off = load_config(off_file)
    assert off.version == on.version  # how it is graded is not what the system is
    ids = ["com-005", "com-012", "com-001"]
    res_off = cmp.evaluate(env, off, case_ids=ids)
    grades = load_records(env.store.batch_dir(off.partition_key, res_off.batch.batch_id) / "grades.parquet", Grade)
    assert {g.grader_version for g in grades} == {GRADER_VERSION}
    assert all(g.suite_check is None and g.snapshot_outcome is None for g in grades)
    assert res_off.scorecard.test_suite is None


def test_the_diff_and_the_gate_compare_suite_accuracy(env):
    """The declared baseline is re-graded under the candidate's grader when needed, and the
    gate compares the accuracies on the suite (what each scorecard's accuracy is)."""
    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    cur = load_config(location.EVALS_DIR / "configs" / "baseline_curated.yaml")
    base = cmp.evaluate(env, raw)
    res = cmp.evaluate(env, cur)
    assert cur.config.baseline == raw.config.name
    comparison = next(c for c in res.report.comparisons if c.kind == "baseline")
    assert res.scorecard.test_suite is not None and base.scorecard.test_suite is not None
    assert comparison.candidate_accuracy == pytest.approx(res.scorecard.test_suite.suite_accuracy.value)
    assert comparison.baseline_accuracy == pytest.approx(base.scorecard.test_suite.suite_accuracy.value)
    assert res.diff is not None and res.diff.baseline_grader_version == res.diff.candidate_grader_version
    assert "+suite-" in res.diff.candidate_grader_version
