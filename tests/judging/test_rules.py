"""The rules judge on hand-written SQL pairs (generic tables, not the demo's): for each pair the
expected category is the one the rules in ``judging/rules.py`` give when read by a person."""

import datetime as dt

import pytest

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.rules import RULES_REVISION, RulesJudge, shape
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.results import ResultSet

REF = ("SELECT sum(net_amount) AS revenue FROM sales "
       "WHERE state <> 'void' AND channel = 'web_store' "
       "AND sold_on >= date_trunc('month', current_date) - INTERVAL 1 MONTH "
       "AND sold_on < date_trunc('month', current_date)")


def case(**kw):
    base = dict(id="c-1", question="Net sales from the web shop last month?", reference_sql=REF,
                difficulty="time_window", band="needs_definition", cluster="sales", split="dev",
                status="verified", provenance={"source": "t", "author": "t"})
    base.update(kw)
    return Case(**base)


def item(sql=None, *, c=None, kind="sql", refusal=None, ex_status="ok", outcome="WRONG",
         reason="result_mismatch:values", mismatch=None, why=None, result=None, catalog=None, **ex):
    c = c or case()
    a = Attempt(config_version="v", case_id=c.id, run_index=0, kind=kind, sql=sql, refusal_reason=refusal)
    e = None
    if kind == "sql":
        kw = dict(config_version="v", case_id=c.id, run_index=0, status=ex_status)
        if ex_status == "ok":
            kw["result"] = result or ResultSet(columns=["x"], types=["BIGINT"], rows=[[1]])
        kw.update(ex)
        if why:
            kw["reason"] = why
        e = Execution(**kw)
    g = Grade(config_version="v", case_id=c.id, run_index=0, outcome=outcome, reason=reason,
              mismatch=mismatch, grader_version="r", band=c.band, difficulty=c.difficulty,
              split=c.split, cluster=c.cluster)
    return JudgeInput(case=c, attempt=a, execution=e, grade=g, catalog=catalog)


def refusal(text, **kw):
    return item(kind="refusal", refusal=text, outcome="DEFERRED_WRONGLY", reason="over_refusal", **kw)


J = RulesJudge()


def test_interface_and_revision():
    d = J.diagnose(item(REF.replace("net_amount", "gross_amount")))
    assert (d.judge, d.case_id, d.run_index) == ("rules", "c-1", 0)
    # revision 3: the cause table (the rules changed, so the version did)
    assert RULES_REVISION >= 3 and d.judge_version == J.version and J.version.startswith("rules-r3-")


@pytest.mark.parametrize("sql,category", [
    (REF.replace("net_amount", "gross_amount"), "wrong_metric"),
    (REF.replace("channel = 'web_store'", "channel = 'web'"), "wrong_filter"),
    (REF.replace(" AND channel = 'web_store'", ""), "wrong_filter"),
    (REF.replace("FROM sales", "FROM sales_daily_summary").replace("net_amount", "net_total"),
     "wrong_table"),
    ("SELECT channel, sum(net_amount) FROM sales GROUP BY channel", "wrong_grain"),
])
def test_structural_differences(sql, category):
    assert J.diagnose(item(sql)).category == category


def test_a_different_reading_of_the_time_window_is_ambiguous_when_the_case_says_so():
    trailing = REF.split(" AND sold_on")[0] + " AND sold_on > current_date - INTERVAL 30 DAY"
    assert J.diagnose(item(trailing)).category == "wrong_filter"
    c = case(alternative_sqls=[trailing])
    assert J.diagnose(item(trailing, c=c)).category == "ambiguous_question"


# ---------------------------------------------------------------- 1. wrong refusals

TWO_TABLES = ("SELECT w.region, sum(s.net_amount) AS revenue FROM sales s "
              "JOIN warehouses w ON w.warehouse_id = s.warehouse_id GROUP BY w.region")
RATIO = ("SELECT count(*) FILTER (WHERE state = 'returned') / count(*) AS return_rate "
         "FROM shipments")
WEEKLY = ("SELECT date_trunc('week', sold_on) AS week, sum(net_amount) FROM sales GROUP BY 1")
CODED = ("SELECT count(*) FROM members m JOIN tiers t ON t.tier_cd = m.tier_cd "
         "WHERE t.tier_name = 'Gold'")


@pytest.mark.parametrize("ref,reason,category", [
    (TWO_TABLES, "cannot map the question: no join path from sales to 'region'", "wrong_table"),
    (TWO_TABLES, "The warehouses table cannot be joined to sales.", "wrong_table"),
    (WEEKLY, "cannot map the question: sales_archive has no date column for the time window",
     "wrong_table"),
    (RATIO, "cannot map the question: no metric, count or column matched", "wrong_metric"),
    (RATIO, "I don't know how to compute a return rate from these tables", "wrong_metric"),
    (WEEKLY, "no dimension matched 'week'", "wrong_grain"),
    (WEEKLY, "Cannot group sales by week with the columns given", "wrong_grain"),
    (CODED, "could not map the value 'gold members' to a tier code", "wrong_filter"),
    (CODED, "'gold' is not available in the served data (per the glossary: sensitive or not "
            "collected)", "wrong_filter"),
    (CODED, "The question is ambiguous: 'gold' could mean a tier or a spend band",
     "ambiguous_question"),
    (WEEKLY, "It is unclear which of the two date columns is meant", "ambiguous_question"),
    (RATIO, "There is no returns data in the schema", "wrong_table"),
])
def test_a_wrong_refusal_is_judged_by_its_reason(ref, reason, category):
    d = J.diagnose(refusal(reason, c=case(reference_sql=ref)))
    assert d.category == category, d.explanation
    assert reason in d.explanation


@pytest.mark.parametrize("ref,category", [
    (TWO_TABLES, "wrong_table"),   # needs a join
    (RATIO, "wrong_metric"),       # a derived measure
    (REF, "wrong_filter"),         # a coded value
    (WEEKLY, "wrong_grain"),       # a time bucket
])
def test_a_refusal_without_a_recognisable_reason_is_judged_by_what_the_reference_needs(ref, category):
    for reason in (None, "unsure", "the model declined (stop_reason=refusal)"):
        d = J.diagnose(refusal(reason, c=case(reference_sql=ref)))
        assert d.category == category, (reason, d.explanation)
        assert d.category != "ambiguous_question"


def test_a_refusal_explanation_says_what_the_reference_needs():
    d = J.diagnose(refusal("no join path from sales to 'region'", c=case(reference_sql=TWO_TABLES)))
    assert "the reference reads sales, warehouses" in d.explanation


# ---------------------------------------------------------------- 2. table or filter

def test_a_missing_coded_value_filter_with_the_right_table_is_a_filter_mistake():
    d = J.diagnose(item("SELECT count(*) FROM members", c=case(reference_sql=CODED)))
    assert d.category == "wrong_filter"
    assert "missing tier_name = 'Gold'" in d.explanation and "tiers" in d.explanation


def test_a_missing_status_exclusion_is_a_filter_mistake():
    ref = "SELECT sum(net_amount) FROM sales WHERE state <> 'void' AND channel = 'shop'"
    d = J.diagnose(item("SELECT sum(net_amount) FROM sales WHERE channel = 'shop'",
                        c=case(reference_sql=ref)))
    assert d.category == "wrong_filter" and "missing state <> 'void'" in d.explanation


def _monthly(rows):
    return dict(columns=["sale_month", "net_amount"], types=["DATE", "DOUBLE"],
                rows=[[m, v] for m, v in rows])


def test_a_table_that_can_express_the_reference_and_counts_more_rows_is_a_filter_mistake():
    """The reference reads a summary table that leaves void sales out; the query sums the fact
    table at the same grain: same keys, every value larger — it counts rows the reference's
    table excludes."""
    ref = "SELECT sale_month, net_amount FROM sales_monthly ORDER BY sale_month"
    sql = ("SELECT sale_month, sum(net_amount) AS net_amount FROM sales GROUP BY sale_month "
           "ORDER BY sale_month")
    expected = _monthly([("2025-01-01", 10.0), ("2025-02-01", 20.0)])
    got = ResultSet(columns=["sale_month", "net_amount"], types=["DATE", "DOUBLE"],
                    rows=[[dt.date(2025, 1, 1), 12.0], [dt.date(2025, 2, 1), 25.0]])
    c = case(reference_sql=ref, expected=expected, order_matters=True)
    d = J.diagnose(item(sql, c=c, result=got))
    assert d.category == "wrong_filter", d.explanation
    assert "larger than expected" in d.explanation
    # without evidence about the rows, another table is the table's fault
    same = ResultSet(columns=["sale_month", "net_amount"], types=["DATE", "DOUBLE"],
                     rows=[[dt.date(2025, 1, 1), 12.0], [dt.date(2025, 2, 1), 5.0]])
    assert J.diagnose(item(sql, c=c, result=same)).category == "wrong_table"


def test_a_filter_on_an_entity_the_query_cannot_reach_is_a_table_mistake():
    ref = ("SELECT sum(l.net_amount) FROM sale_lines l JOIN items i ON i.item_id = l.item_id "
           "WHERE i.family = 'Garden' AND l.state = 'shipped'")
    d = J.diagnose(item("SELECT sum(net_amount) FROM sales WHERE state = 'shipped'",
                        c=case(reference_sql=ref)))
    assert d.category == "wrong_table" and "family" in d.explanation


def test_counting_rows_of_another_table_is_a_table_mistake():
    ref = "SELECT count(*) FROM sale_lines WHERE qty > 1"
    d = J.diagnose(item("SELECT count(*) FROM sales WHERE qty > 1", c=case(reference_sql=ref)))
    assert d.category == "wrong_table" and "rows of sale_lines" in d.explanation


def test_the_catalog_decides_which_columns_a_table_has_when_the_input_carries_it():
    ref = "SELECT count(DISTINCT member_id) FROM visits WHERE kind = 'paid'"
    sql = "SELECT count(*) FROM members"
    assert J.diagnose(item(sql, c=case(reference_sql=ref))).category == "wrong_table"
    catalog = {"members": ["member_id", "kind", "joined_on"], "visits": ["member_id", "kind"]}
    d = J.diagnose(item(sql, c=case(reference_sql=ref), catalog=catalog))
    assert d.category == "wrong_metric" and "also:" in d.explanation  # measure first, then filter


def test_a_missing_measure_column_is_a_table_mistake():
    ref = "SELECT sum(refund_amount) FROM refunds"
    d = J.diagnose(item("SELECT sum(paid_amount) FROM sales", c=case(reference_sql=ref)))
    assert d.category == "wrong_table" and "refund_amount" in d.explanation


# ---------------------------------------------------------------- 3. wrong output columns

LIST = "SELECT account_id, opened_on FROM accounts WHERE branch = 'north' ORDER BY account_id"


def _accounts(column, value):
    return ResultSet(columns=["account_id", column], types=["BIGINT", "DATE"],
                     rows=[[1, value]])


def test_another_date_column_in_the_output_is_a_metric_mistake_not_the_harness():
    c = case(reference_sql=LIST, expected={"columns": ["account_id", "opened_on"],
                                           "types": ["BIGINT", "DATE"], "rows": [[1, "2024-01-02"]]})
    sql = LIST.replace("opened_on", "closed_on")
    d = J.diagnose(item(sql, c=c, result=_accounts("closed_on", dt.date(2025, 3, 4))))
    assert d.category == "wrong_metric"
    assert "outputs closed_on where the reference outputs opened_on (both DATE)" in d.explanation


def test_another_id_column_in_the_output_is_a_grain_mistake():
    sql = LIST.replace("SELECT account_id", "SELECT customer_id")
    assert J.diagnose(item(sql, c=case(reference_sql=LIST))).category == "wrong_grain"


def test_grouping_by_another_date_column_is_a_grain_mistake():
    ref = "SELECT date_trunc('month', opened_on), count(*) FROM accounts GROUP BY 1"
    sql = "SELECT date_trunc('month', closed_on), count(*) FROM accounts GROUP BY 1"
    d = J.diagnose(item(sql, c=case(reference_sql=ref)))
    assert d.category == "wrong_grain" and "closed_on" in d.explanation


# ---------------------------------------------------------------- harness_bug, and only then

def test_rows_equal_to_the_expected_ones_point_at_the_grader():
    c = case(expected={"columns": ["revenue"], "types": ["DECIMAL(18,2)"], "rows": [["10.50"]]})
    got = ResultSet(columns=["revenue"], types=["DOUBLE"], rows=[[10.5]])
    d = J.diagnose(item(REF.replace("sales", "sales_v2"), c=c, result=got))
    assert d.category == "harness_bug" and "grader" in d.explanation


def test_same_structure_different_result_points_at_the_reference():
    d = J.diagnose(item(REF.replace("sum(net_amount) AS revenue", "SUM(net_amount)")))
    assert d.category == "harness_bug" and "reference" in d.explanation


def test_a_plausible_query_refused_for_size_is_the_harness_and_an_implausible_one_is_not():
    assert J.diagnose(item(REF, ex_status="refused", layer="cap", why="result_too_large",
                           message="too big")).category == "harness_bug"
    rows = "SELECT net_amount FROM sales WHERE state <> 'void' AND channel = 'web_store'"
    d = J.diagnose(item(rows, ex_status="refused", layer="cap", why="result_too_large"))
    assert d.category == "wrong_grain" and "refused" in d.explanation  # no aggregation


def test_guard_errors_and_timeouts():
    assert J.diagnose(item("SELECT * FROM hr.salaries", ex_status="refused", layer="filter",
                           why="qualifier_not_allowed")).category == "wrong_table"
    # a column no table has is not a table mistake (revision 2 filed every SQL error as
    # wrong_table): it is judged by where the query uses it, here as an output -> wrong_metric
    nope = 'Binder Error: Referenced column "nope" not found in FROM clause!'
    d = J.diagnose(item("SELECT nope FROM sales", ex_status="error", error_source="sql",
                        why="binder_error", error_code="binder_error", error_message=nope))
    assert d.category == "wrong_metric" and "[cause: column_nowhere]" in d.explanation
    d = J.diagnose(item("SELECT nope FROM sales", ex_status="error", error_source="sql",
                        why="binder_error", error_code="binder_error", error_message=nope,
                        catalog={"sales": ["net_amount"], "stock": ["nope"]}))
    assert d.category == "wrong_table" and "column nope is in table stock, not sales" in d.explanation
    assert J.diagnose(item("SELECT 1", ex_status="error", error_source="harness",
                           why="sandbox_unavailable")).category == "harness_bug"
    cross = REF.replace("FROM sales", "FROM sales, sales_archive")
    d = J.diagnose(item(cross, ex_status="timeout", layer="database", why="statement_timeout"))
    assert d.category == "wrong_table" and "ran out of time" in d.explanation
    assert J.diagnose(item(REF, ex_status="timeout", layer="database",
                           why="statement_timeout")).category == "harness_bug"


def test_answering_a_should_refuse_question():
    c = case(band="should_refuse", reference_sql=None)
    d = J.diagnose(item("SELECT count(*) FROM members", c=c, reason="answered_should_refuse"))
    assert d.category == "wrong_table" and "should have declined" in d.explanation


# ---------------------------------------------------------------- 4. positions, all differences

def test_positional_group_by_month_versus_year_names_the_expressions():
    ref = ("SELECT date_trunc('month', order_date) AS m, sum(amount) FROM orders "
           "GROUP BY 1 ORDER BY 1")
    sql = ("SELECT date_trunc('year', o.order_date), sum(o.amount) FROM orders o "
           "GROUP BY 1 ORDER BY 1")
    d = J.diagnose(item(sql, c=case(reference_sql=ref)))
    assert d.category == "wrong_grain"
    assert ("groups by date_trunc('year', order_date) where the reference groups by "
            "date_trunc('month', order_date)") in d.explanation


def test_an_alias_and_a_position_that_name_the_same_expression_agree():
    ref = "SELECT date_trunc('month', order_date) AS m, sum(amount) FROM orders GROUP BY m"
    sql = "SELECT date_trunc('month', order_date), sum(amount) FROM orders GROUP BY 1"
    d = J.diagnose(item(sql, c=case(reference_sql=ref)))
    assert d.category == "harness_bug"  # the same query: nothing of the system's to blame


def test_every_difference_is_listed_and_the_first_decides():
    sql = ("SELECT channel, sum(gross_amount) FROM sales_archive WHERE state <> 'void' "
           "GROUP BY 1 LIMIT 5")
    d = J.diagnose(item(sql))
    assert d.category == "wrong_table"
    head, also = d.explanation.split("; also: ", 1)
    assert "sales_archive" in head
    for part in ("groups by channel", "at most 5 rows", "sum(gross_amount)",
                 "missing channel = 'web_store'"):
        assert part in also, part


def test_measure_before_filter_when_both_differ():
    d = J.diagnose(item("SELECT sum(gross_amount) FROM sales WHERE channel = 'web_store'"))
    assert d.category == "wrong_metric"
    assert "also: filters differ from the reference: missing state <> 'void'" in d.explanation


# ---------------------------------------------------------------- 5. parse once

def test_the_reference_is_parsed_once_for_many_attempts():
    from sqleval_pipeline.judging.sql_facts import facts

    ref = REF + " AND region = 'east'"
    c = case(reference_sql=ref)
    facts.cache_clear()
    for i in range(20):
        J.diagnose(item(REF.replace("'web_store'", f"'w{i % 2}'"), c=c))
    info = facts.cache_info()
    assert info.misses == 3 and info.hits == 37  # one reference, two distinct candidates


def test_shape_ignores_qualifiers_and_ctes():
    s = shape("WITH t AS (SELECT o.member_id FROM visits o WHERE o.kind = 'paid') "
              "SELECT count(*) FROM t JOIN members c ON c.member_id = t.member_id")
    assert s.tables == {"visits", "members"}
    assert s.filters == ("kind = 'paid'",)
