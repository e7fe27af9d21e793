"""What the rules judge reads off one query (sqlglot), and the refusal-reason table."""

import pytest

from sqleval_pipeline.judging import refusals
from sqleval_pipeline.judging.sql_facts import ParseFailure, facts


def test_positions_and_aliases_resolve_to_the_output_expressions():
    f = facts("SELECT date_trunc('YEAR', o.booked_on) AS y, r.name, sum(o.amount) AS total "
              "FROM orders o JOIN regions r ON r.region_id = o.region_id "
              "GROUP BY 1, 2 ORDER BY total DESC, y LIMIT 10")
    assert f.grain == ("date_trunc('year', booked_on)", "name")
    assert f.order == ("sum(amount) desc", "date_trunc('year', booked_on)")
    assert f.order_keys[0] == (frozenset({"amount"}), True)
    assert f.limit == 10 and f.measures == {"sum(amount)"}
    assert f.links == {frozenset({"orders", "regions"})}
    assert f.join_keys == {frozenset({"region_id"})}
    assert ("regions", "name") in f.roles["grain"] and ("orders", "amount") in f.roles["measure"]


def test_predicates_are_canonical():
    f = facts("SELECT count(1) FROM t WHERE NOT state = 'void' AND 'x' = kind AND tier IN ('a') "
              "AND n > 3 AND code IN ('b', 'a')")
    assert f.filters == ("state <> 'void'", "kind = 'x'", "tier = 'a'", "n > 3",
                         "code IN ('a', 'b')")
    assert f.measures == {"count(*)"} and f.count_bases == {"t"}


def test_spellings_of_one_query_have_one_text():
    a = facts("SELECT o.k AS key, SUM(o.v) AS total FROM Orders AS o GROUP BY o.k ORDER BY 2")
    b = facts("select k, sum(v) from orders group by 1 order by sum(v)")
    assert a.text == b.text


def test_columns_are_attributed_only_when_certain():
    f = facts("SELECT a, s.b FROM x JOIN y s ON s.id = x.id")
    assert (None, "a") in f.roles["output"] and ("y", "b") in f.roles["output"]
    assert f.known_columns() >= {"a", "b", "id"}
    single = facts("SELECT a FROM x WHERE b = 1")
    assert single.columns_of("x") == {"a", "b"}


def test_a_parse_error_raises_and_is_not_cached():
    with pytest.raises(ParseFailure):
        facts("SELECT FROM WHERE (")


@pytest.mark.parametrize("text,category", [
    ("NO JOIN PATH from a to b", "wrong_table"),
    ("No Metric matched", "wrong_metric"),
    ("no dimension for 'week'", "wrong_grain"),
    ("the value 'gold' is not recognised", "wrong_filter"),
    ("AMBIGUOUS wording", "ambiguous_question"),
])
def test_the_reason_table_is_case_insensitive(text, category):
    assert refusals.reason_kind(text).category == category


def test_the_reason_table_is_documented_and_compiled_once():
    assert all(r.says and r.pattern for r in refusals.REASONS)
    # harness_bug since rules revision 3: a provider failure recorded as a refusal is no decision
    assert {r.category for r in refusals.REASONS} == {
        "harness_bug", "ambiguous_question", "wrong_table", "wrong_metric", "wrong_grain", "wrong_filter"}
    assert len(refusals._COMPILED) == len(refusals.REASONS) + 1
    for r in refusals.REASONS:
        assert r.category in refusals.__doc__
