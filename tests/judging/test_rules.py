import pytest

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.rules import RulesJudge, shape
from sqleval_pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.results import ResultSet

REF = ("SELECT sum(net_revenue_inr) AS revenue FROM fct_orders "
       "WHERE status <> 'cancelled' AND payment_method = 'unified_payments' "
       "AND order_date >= date_trunc('month', current_date) - INTERVAL 1 MONTH "
       "AND order_date < date_trunc('month', current_date)")


def case(**kw):
    base = dict(id="c-1", question="Net revenue from UPI orders last month?", reference_sql=REF,
                difficulty="time_window", band="needs_definition", cluster="orders", split="dev",
                status="verified", provenance={"source": "t", "author": "t"})
    base.update(kw)
    return Case(**base)


def item(sql=None, *, c=None, kind="sql", refusal=None, ex_status="ok", outcome="WRONG",
         reason="result_mismatch:values", mismatch=None, why=None, **ex):
    c = c or case()
    a = Attempt(config_version="v", case_id=c.id, run_index=0, kind=kind, sql=sql, refusal_reason=refusal)
    e = None
    if kind == "sql":
        kw = dict(config_version="v", case_id=c.id, run_index=0, status=ex_status)
        if ex_status == "ok":
            kw["result"] = ResultSet(columns=["x"], types=["BIGINT"], rows=[[1]])
        kw.update(ex)
        if why:
            kw["reason"] = why
        e = Execution(**kw)
    g = Grade(config_version="v", case_id=c.id, run_index=0, outcome=outcome, reason=reason,
              mismatch=mismatch, grader_version="r", band=c.band, difficulty=c.difficulty,
              split=c.split, cluster=c.cluster)
    return JudgeInput(case=c, attempt=a, execution=e, grade=g)


J = RulesJudge()


@pytest.mark.parametrize("sql,category", [
    (REF.replace("net_revenue_inr", "gross_revenue_inr"), "wrong_metric"),
    (REF.replace("payment_method = 'unified_payments'", "payment_method = 'upi'"), "wrong_filter"),
    (REF.replace(" AND payment_method = 'unified_payments'", ""), "wrong_filter"),
    (REF.replace("fct_orders", "mart_orders_daily"), "wrong_table"),
    ("SELECT payment_method, sum(net_revenue_inr) FROM fct_orders GROUP BY payment_method", "wrong_grain"),
])
def test_structural_differences(sql, category):
    assert J.diagnose(item(sql)).category == category


def test_a_different_reading_of_the_time_window_is_ambiguous_when_the_case_says_so():
    trailing = REF.split(" AND order_date")[0] + " AND order_date > current_date - INTERVAL 30 DAY"
    plain = J.diagnose(item(trailing))
    assert plain.category == "wrong_filter"
    c = case(traps=["calendar month vs trailing 30 days"])
    assert J.diagnose(item(trailing, c=c)).category == "ambiguous_question"


def test_refusals_errors_and_guard_outcomes():
    assert J.diagnose(item(kind="refusal", refusal="unsure", outcome="DEFERRED_WRONGLY",
                           reason="over_refusal")).category == "ambiguous_question"
    assert J.diagnose(item("SELECT * FROM hr.salaries", ex_status="refused", layer="filter",
                           why="qualifier_not_allowed")).category == "wrong_table"
    assert J.diagnose(item("SELECT nope FROM fct_orders", ex_status="error", error_source="sql",
                           why="binder_error", error_message="Referenced column nope")).category == "wrong_table"
    assert J.diagnose(item("SELECT 1", ex_status="error", error_source="harness",
                           why="sandbox_unavailable")).category == "harness_bug"
    assert J.diagnose(item("SELECT 1", ex_status="timeout", layer="database",
                           why="statement_timeout")).category == "wrong_grain"


def test_answering_a_should_refuse_question():
    c = case(band="should_refuse", reference_sql=None)
    d = J.diagnose(item("SELECT count(*) FROM dim_customers", c=c, reason="answered_should_refuse"))
    assert d.category == "wrong_table" and "should have declined" in d.explanation


def test_same_structure_different_result_points_at_the_harness():
    d = J.diagnose(item(REF))
    assert d.category == "harness_bug" and d.judge == "rules" and d.judge_version.startswith("rules-r")


def test_shape_ignores_qualifiers_and_ctes():
    s = shape("WITH t AS (SELECT o.customer_id FROM fct_orders o WHERE o.status = 'delivered') "
              "SELECT count(*) FROM t JOIN dim_customers c ON c.customer_id = t.customer_id")
    assert s.tables == {"fct_orders", "dim_customers"}
    assert s.predicates == {"status = 'delivered'"}
