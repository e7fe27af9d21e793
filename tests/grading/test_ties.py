"""Ties at a LIMIT cut and rank groups in grading (docs/grading.md, "Rows, order and ties").

Expected verdicts are worked out by hand from the tables below. Hand-built cases check the
grader alone; the end-to-end tests freeze references on a small DuckDB file (opened read-only
the way freezing opens the snapshot) and grade answers produced by other SQL on the same file.
"""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import pytest
from pydantic import ValidationError

from sqleval_pipeline.golden.freeze import freeze_case
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.grading import Cut, Shape, compare, compare_any, grade_against, grade_attempt
from sqleval_pipeline.pipeline.records import Attempt, Execution
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import open_readonly
from tests.conftest import cpu_time_of

NAME_AGE = (["name", "age"], ["VARCHAR", "INTEGER"])


def make_case(columns, types, rows, *, tie=None, tie_at_offset=None, order_groups=None, order_matters=False,
              order_keys=(), alternatives=()) -> Case:
    expected = {"columns": list(columns), "types": list(types), "rows": rows,
                "alternatives": list(alternatives)}
    for name, value in (("tie", tie), ("tie_at_offset", tie_at_offset), ("order_groups", order_groups)):
        if value is not None:
            expected[name] = value
    return Case.model_validate(dict(
        id="tie-01", question="Who is the oldest singer?", reference_sql="SELECT 1",
        alternative_sqls=["SELECT 2"] * len(alternatives), expected=expected, difficulty="top_k",
        band="answerable", cluster="singer", split="dev", status="verified", order_matters=order_matters,
        order_keys=list(order_keys), provenance={"source": "test", "author": "me"}, snapshot_id="snap1"))


def rs(rows, columns=NAME_AGE[0], types=NAME_AGE[1]) -> ResultSet:
    return ResultSet(columns=list(columns), types=list(types), rows=[list(r) for r in rows])


def verdict(case: Case, got: ResultSet) -> tuple[bool, bool]:
    c = grade_against(case, got)
    return c.exact, c.facts


# --------------------------------------------------------------------------- the oldest singer
# ORDER BY age DESC LIMIT 1 over Ann 40, Bob 40, Cy 35: Ann or Bob

OLDEST = make_case(*NAME_AGE, [["Ann", 40]],
                   tie={"keys": ["age"], "before": 0, "take": 1, "rows": [["Ann", 40], ["Bob", 40]]})


def test_the_frozen_row_and_the_other_tied_row_are_both_correct():
    assert verdict(OLDEST, rs([["Ann", 40]])) == (True, True)
    assert verdict(OLDEST, rs([["Bob", 40]])) == (True, True)


def test_a_row_outside_the_tie_group_is_wrong():
    c = grade_against(OLDEST, rs([["Cy", 35]]))
    assert (c.exact, c.facts) == (False, False)
    assert "may be any 1 of the 2 recorded rows tied at the cut" in c.mismatch


def test_too_few_or_too_many_rows_are_wrong():
    assert verdict(OLDEST, rs([])) == (False, False)
    c = grade_against(OLDEST, rs([["Ann", 40], ["Bob", 40]]))  # the whole tie group: not LIMIT 1
    assert (c.exact, c.facts, c.exact_reason) == (False, False, "row_count")


def test_got_the_facts_with_extra_and_reordered_columns():
    got = rs([["FR", 40, "Bob"]], ["country", "age", "name"], ["VARCHAR", "INTEGER", "VARCHAR"])
    c = grade_against(OLDEST, got)
    assert (c.exact, c.facts, c.column_map) == (False, True, (2, 1))
    wrong = rs([["US", 35, "Cy"]], ["country", "age", "name"], ["VARCHAR", "INTEGER", "VARCHAR"])
    assert verdict(OLDEST, wrong) == (False, False)


def test_grade_attempt_on_a_tie_case():
    attempt = Attempt(config_version="cfg", case_id="tie-01", run_index=0, kind="sql", sql="SELECT 1")
    ex = Execution(config_version="cfg", case_id="tie-01", run_index=0, status="ok",
                   result=rs([["Bob", 40.0]], types=["VARCHAR", "DOUBLE"]))
    g = grade_attempt(OLDEST, attempt, ex)
    assert (g.outcome, g.reason, g.cluster, g.case_id) == ("CORRECT", "match", "singer", "tie-01")
    ex = ex.model_copy(update={"result": rs([["Cy", 35]])})
    assert grade_attempt(OLDEST, attempt, ex).outcome == "WRONG"


# --------------------------------------------------------------------------- rows above the cut
# ORDER BY age DESC LIMIT 4 over Ann 40, Bob 40, Cy 35, Dee 30, Eve 30, Fay 30

TOP4 = dict(tie={"keys": ["age"], "before": 3, "take": 1, "rows": [["Dee", 30], ["Eve", 30], ["Fay", 30]]})
TOP4_ROWS = [["Ann", 40], ["Bob", 40], ["Cy", 35], ["Dee", 30]]


def test_rows_above_the_tie_group_are_still_required():
    case = make_case(*NAME_AGE, TOP4_ROWS, **TOP4)
    assert verdict(case, rs([["Cy", 35], ["Fay", 30], ["Bob", 40], ["Ann", 40]])) == (True, True)
    # two tied rows instead of Cy
    assert verdict(case, rs([["Ann", 40], ["Bob", 40], ["Eve", 30], ["Fay", 30]])) == (False, False)
    # a tied row twice
    assert verdict(case, rs([["Ann", 40], ["Bob", 40], ["Cy", 35], ["Ann", 40]])) == (False, False)


def test_order_matters_with_a_tie_at_the_cut():
    case = make_case(*NAME_AGE, TOP4_ROWS, **TOP4, order_matters=True, order_keys=["age"])
    # Ann/Bob in either order (tied on age), then Cy, then any 30-year-old
    assert verdict(case, rs([["Bob", 40], ["Ann", 40], ["Cy", 35], ["Eve", 30]])) == (True, True)
    c = grade_against(case, rs([["Cy", 35], ["Ann", 40], ["Bob", 40], ["Eve", 30]]))
    assert (c.exact, c.facts, c.exact_reason) == (False, False, "order")
    c = grade_against(case, rs([["Ann", 40], ["Bob", 40], ["Eve", 30], ["Cy", 35]]))
    assert (c.exact, c.facts) == (False, False)


def test_order_matters_with_rank_groups_instead_of_output_keys():
    # SELECT name ... ORDER BY age DESC LIMIT 4: the key is not an output column
    case = make_case(["name"], ["VARCHAR"], [[r[0]] for r in TOP4_ROWS], order_matters=True,
                     order_groups=[0, 0, 1, 2],
                     tie={"keys": ["age"], "before": 3, "take": 1, "rows": [["Dee"], ["Eve"], ["Fay"]]})
    one = ["VARCHAR"]
    assert verdict(case, rs([["Bob"], ["Ann"], ["Cy"], ["Fay"]], ["name"], one)) == (True, True)
    assert verdict(case, rs([["Fay"], ["Ann"], ["Bob"], ["Cy"]], ["name"], one)) == (False, False)
    assert verdict(case, rs([["Ann"], ["Cy"], ["Bob"], ["Fay"]], ["name"], one)) == (False, False)


def test_rank_groups_without_a_cut():
    names = [["Ann"], ["Bob"], ["Cy"], ["Dee"], ["Eve"], ["Fay"]]
    case = make_case(["name"], ["VARCHAR"], names, order_matters=True, order_groups=[0, 0, 1, 2, 2, 2])
    one = (["name"], ["VARCHAR"])
    assert verdict(case, rs([["Bob"], ["Ann"], ["Cy"], ["Fay"], ["Dee"], ["Eve"]], *one)) == (True, True)
    assert verdict(case, rs([["Ann"], ["Cy"], ["Bob"], ["Dee"], ["Eve"], ["Fay"]], *one)) == (False, False)
    # facts with an extra column keeps the rank groups
    got = rs([["Bob", 1], ["Ann", 1], ["Cy", 2], ["Eve", 3], ["Fay", 3], ["Dee", 3]], ["name", "r"],
             ["VARCHAR", "BIGINT"])
    assert verdict(case, got) == (False, True)


def test_cuts_at_the_offset_and_at_the_limit():
    # ORDER BY age DESC LIMIT 4 OFFSET 1 over Ann 40, Bob 40, Cy 35, Dee 30, Eve 30, Fay 30, Gus 20:
    # one of Ann/Bob, Cy, then two of Dee/Eve/Fay
    case = make_case(["name"], ["VARCHAR"], [["Bob"], ["Cy"], ["Dee"], ["Eve"]],
                     tie_at_offset={"keys": ["age"], "before": 0, "take": 1, "rows": [["Ann"], ["Bob"]]},
                     tie={"keys": ["age"], "before": 2, "take": 2, "rows": [["Dee"], ["Eve"], ["Fay"]]})
    one = (["name"], ["VARCHAR"])
    assert verdict(case, rs([["Fay"], ["Ann"], ["Cy"], ["Dee"]], *one)) == (True, True)
    assert verdict(case, rs([["Ann"], ["Bob"], ["Cy"], ["Dee"]], *one)) == (False, False)
    assert verdict(case, rs([["Gus"], ["Ann"], ["Cy"], ["Dee"]], *one)) == (False, False)


def test_a_truncated_tie_group_accepts_only_recorded_rows():
    case = make_case(["id"], ["INTEGER"], [[1]],
                     tie={"keys": ["k"], "before": 0, "take": 1, "rows": [[1], [2], [3]], "truncated": True})
    one = (["id"], ["INTEGER"])
    assert verdict(case, rs([[3]], *one)) == (True, True)
    c = grade_against(case, rs([[9]], *one))  # tied too, but not recorded: not accepted
    assert (c.exact, c.facts) == (False, False) and "not recorded: those are not accepted" in c.mismatch


def test_value_tolerances_apply_to_tied_rows():
    # tied on a key that is not shown; the averages differ
    case = make_case(["team", "avg"], ["VARCHAR", "DOUBLE"], [["a", 1 / 3]],
                     tie={"keys": ["year"], "before": 0, "take": 1, "rows": [["a", 1 / 3], ["b", 2 / 3]]})
    types = ["VARCHAR", "DOUBLE"]
    assert verdict(case, rs([["b", (2 / 3) * (1 + 1e-12)]], ["team", "avg"], types)) == (True, True)  # noise
    assert verdict(case, rs([["b", 0.67]], ["team", "avg"], types)) == (False, True)  # a rounding: facts
    assert verdict(case, rs([["b", 0.7]], ["team", "avg"], types)) == (False, False)
    # a candidate matching only by its number: nearest tied row chosen, then the rules decide
    only_num = make_case(["avg"], ["DOUBLE"], [[1 / 3]],
                         tie={"keys": ["year"], "before": 0, "take": 1, "rows": [[1 / 3], [2 / 3], [0.9]]})
    assert verdict(only_num, rs([[(2 / 3) * (1 - 1e-12)]], ["avg"], ["DOUBLE"])) == (True, True)


def test_an_alternative_reading_with_a_tie():
    alt = {"columns": ["name"], "types": ["VARCHAR"], "rows": [["Dee"]],
           "tie": {"keys": ["age"], "before": 0, "take": 1, "rows": [["Dee"], ["Eve"]]}}
    case = make_case(["name"], ["VARCHAR"], [["Ann"]], alternatives=[alt],
                     tie={"keys": ["age"], "before": 0, "take": 1, "rows": [["Ann"], ["Bob"]]})
    c = grade_against(case, rs([["Eve"]], ["name"], ["VARCHAR"]))
    assert (c.exact, c.alternative) == (True, 1)
    c = grade_against(case, rs([["Bob"]], ["name"], ["VARCHAR"]))
    assert (c.exact, c.alternative) == (True, 0)
    assert grade_against(case, rs([["Cy"]], ["name"], ["VARCHAR"])).exact is False


def test_compare_and_compare_any_take_the_tie_directly():
    e = rs([["Ann", 40]])
    cut = Cut(before=0, take=1, pool=[["Ann", 40], ["Bob", 40]])
    assert compare(e, rs([["Bob", 40]])).exact is False  # without the cut: the frozen row only
    assert compare(e, rs([["Bob", 40]]), cuts=[cut]).exact is True
    assert compare_any([e], rs([["Bob", 40]]), shapes=[Shape(cuts=(cut,))]).exact is True
    assert compare_any([e], rs([["Bob", 40]]), shapes=[None]).exact is False


def test_a_large_tie_group_grades_quickly():
    # LIMIT 500 cutting through 1,500 rows tied on a key that is not shown; the answer keeps the
    # last 500 of them
    pool = [[i, f"n{i}"] for i in range(1500)]
    case = make_case(["id", "name"], ["BIGINT", "VARCHAR"], pool[:500],
                     tie={"keys": ["k"], "before": 0, "take": 500, "rows": pool})
    got = rs(list(reversed(pool[1000:])), ["id", "name"], ["BIGINT", "VARCHAR"])
    bad = rs(pool[999:1499], ["id", "name"], ["BIGINT", "VARCHAR"])
    bad.rows[0] = [5000, "n5000"]
    (good_verdict, bad_verdict), secs = cpu_time_of(lambda: (verdict(case, got), verdict(case, bad)))
    assert good_verdict == (True, True) and bad_verdict == (False, False)
    assert secs < 2.0


# --------------------------------------------------------------------------- the model


def test_json_line_keeps_ties_only_when_recorded():
    line = OLDEST.to_json_line()
    data = json.loads(line)
    assert data["expected"]["tie"]["rows"] == [["Ann", 40], ["Bob", 40]]
    assert "order_groups" not in data["expected"] and "tie_at_offset" not in data["expected"]
    assert Case.model_validate(data) == OLDEST
    plain = make_case(*NAME_AGE, [["Ann", 40]])
    assert set(json.loads(plain.to_json_line())["expected"]) == {"columns", "types", "rows", "alternatives"}


@pytest.mark.parametrize("extra,message", [
    ({"order_groups": [0, 0]}, "order_groups has 2 entries for 1 rows"),
    ({"order_groups": [1]}, "order_groups must count 0, 1, 2"),
    ({"tie": {"keys": ["age"], "before": 1, "take": 1, "rows": [["Ann", 40], ["Bob", 40]]}}, "exceeds the 1 frozen"),
    ({"tie": {"keys": ["age"], "before": 0, "take": 1, "rows": [["Ann"]]}}, "every tied row needs 2 values"),
])
def test_inconsistent_tie_records_are_refused(extra, message):
    with pytest.raises(ValidationError, match=message):
        make_case(*NAME_AGE, [["Ann", 40]], **extra)


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "singers.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE singer (name VARCHAR, age INTEGER, country VARCHAR)")
    con.executemany("INSERT INTO singer VALUES (?, ?, ?)",
                    [("Ann", 40, "FR"), ("Bob", 40, "FR"), ("Cy", 35, "US"), ("Dee", 30, "US"),
                     ("Eve", 30, "UK"), ("Fay", 30, "DE")])
    con.close()
    con = open_readonly(path)
    yield con
    con.close()


def _frozen(con, sql, order_matters=False) -> Case:
    case = Case(id="tie-e2e", question="Which one is it?", reference_sql=sql, difficulty="top_k",
                band="answerable", cluster="singer", split="dev", status="verified",
                order_matters=order_matters, provenance={"source": "t", "author": "t"})
    return freeze_case(case, con, "snap-t", dt.date(2025, 6, 30))


def _run(con, sql) -> ResultSet:
    cur = con.execute(sql)
    return ResultSet(columns=[d[0] for d in cur.description], types=[str(d[1]) for d in cur.description],
                     rows=[list(r) for r in cur.fetchall()])


@pytest.mark.parametrize("reference,answer,expected", [
    # the other 40-year-old, whichever the reference kept
    ("SELECT name FROM singer ORDER BY age DESC LIMIT 1",
     "SELECT name FROM singer WHERE age = 40 ORDER BY name DESC LIMIT 1", (True, True)),
    ("SELECT name FROM singer ORDER BY age DESC LIMIT 1",
     "SELECT name FROM singer WHERE age = 40 ORDER BY name LIMIT 1", (True, True)),
    ("SELECT name FROM singer ORDER BY age DESC LIMIT 1", "SELECT name FROM singer ORDER BY age LIMIT 1",
     (False, False)),
    ("SELECT name FROM singer ORDER BY age DESC LIMIT 1",
     "SELECT name, age FROM singer WHERE name = 'Bob'", (False, True)),
    # Spider's most common shape: the group with the most rows (FR and US have two each)
    ("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1",
     "SELECT 'US' AS country", (True, True)),
    ("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1",
     "SELECT 'FR' AS country", (True, True)),
    ("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1",
     "SELECT 'UK' AS country", (False, False)),
    ("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1",
     "SELECT country, count(*) AS n FROM singer WHERE country = 'US' GROUP BY country", (False, True)),
])
def test_end_to_end(db, reference, answer, expected):
    case = _frozen(db, reference)
    assert verdict(case, _run(db, answer)) == expected


def test_end_to_end_order_matters_on_a_hidden_key(db):
    case = _frozen(db, "SELECT name FROM singer ORDER BY age DESC LIMIT 4", order_matters=True)
    # any order within the 40s, Cy, then any one of the 30s
    assert verdict(case, _run(db, "SELECT name FROM singer ORDER BY age DESC, name DESC LIMIT 4")) == (True, True)
    assert verdict(case, _run(db, "SELECT name FROM singer ORDER BY age DESC, country, name LIMIT 4")) == (True, True)
    assert verdict(case, _run(db, "SELECT name FROM singer ORDER BY age LIMIT 4")) == (False, False)
