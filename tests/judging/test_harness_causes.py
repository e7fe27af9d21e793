"""The rules judge's cause table (judging/rules.py ``CAUSES``, docs/judging.md): one test per row
with hand-built Case/Attempt/Execution/Grade records, then a small Spider-style batch whose
labels were written by hand (before the judge was run on it) and the agreement it reaches.

Every expected category below is read off the cause table by a person, never computed by the
judge's own helpers; the messages are DuckDB's own first lines (the executor keeps only those).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.rules import CAUSES, RulesJudge
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.results import ResultSet

J = RulesJudge()
KEY = {"config_version": "cfg", "case_id": "spd-1", "run_index": 0}
CATALOG = {
    "singer": ["singer_id", "name", "country", "age", "song_name", "is_male"],
    "concert": ["concert_id", "concert_name", "theme", "stadium_id", "year"],
    "stadium": ["stadium_id", "location", "name", "capacity", "average"],
    "singer_in_concert": ["concert_id", "singer_id"],
    "airlines": ["uid", "airline", "abbreviation", "country"],
    "flights": ["airline", "flightno", "sourceairport", "destairport"],
    "airports": ["city", "airportcode", "airportname", "country"],
}


def case(ref: str, *, columns=("n",), types=("BIGINT",), rows=((1,),), tie=None, order_matters=False,
         order_keys=(), band="answerable", **kw) -> Case:
    expected = None
    if band != "should_refuse":
        expected = {"columns": list(columns), "types": list(types), "rows": [list(r) for r in rows]}
        if tie is not None:
            expected["tie"] = tie
    return Case.model_validate({
        "id": KEY["case_id"], "question": kw.pop("question", "How many singers are there?"),
        "reference_sql": ref if band != "should_refuse" else None, "expected": expected,
        "difficulty": "simple_aggregate", "band": band, "cluster": "concert_singer", "split": "dev",
        "status": "verified", "order_matters": order_matters, "order_keys": list(order_keys),
        "provenance": {"source": "spider", "author": "t"}, **kw})


def judge(c: Case, *, sql: str | None = "SELECT 1", kind: str = "sql", refusal: str | None = None,
          status: str = "ok", result: ResultSet | None = None, outcome: str = "WRONG",
          grade_reason: str = "result_mismatch:values", catalog=None, dialect=None, error_code=None,
          suite_detail=None, **ex):
    a = Attempt(**KEY, kind=kind, sql=sql if kind == "sql" else None, refusal_reason=refusal,
                error_code=error_code if kind == "error" else None,
                error_message=ex.pop("attempt_message", None))
    e = None
    if kind == "sql":
        kw = dict(KEY, status=status, **ex)
        if status == "ok":
            kw["result"] = result or ResultSet(columns=["n"], types=["BIGINT"], rows=[[99]])
        if status == "error":
            kw.setdefault("error_source", "sql")
            kw.setdefault("error_code", error_code)
            kw.setdefault("reason", error_code)
        e = Execution(**kw)
    g = Grade(**KEY, outcome=outcome, reason=grade_reason, mismatch=None, grader_version="g", band=c.band,
              difficulty=c.difficulty, split=c.split, cluster=c.cluster, suite_detail=suite_detail)
    return J.diagnose(JudgeInput(case=c, attempt=a, execution=e, grade=g, catalog=catalog, dialect=dialect))


def rs(columns, rows, types=None):
    return ResultSet(columns=list(columns), types=list(types or ["VARCHAR"] * len(columns)),
                     rows=[list(r) for r in rows])


COUNT = "SELECT count(*) FROM singer"
JOIN_REF = ("SELECT count(*) FROM airlines AS t1 JOIN flights AS t2 ON t2.airline = t1.uid "
            "WHERE t1.airline = 'United Airlines'")
TOP = "SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 2"


def expect(d, category: str, cause: str, *words: str):
    assert d.category == category, d.explanation
    assert f"[cause: {cause}]" in d.explanation, d.explanation
    for w in words:
        assert w in d.explanation, (w, d.explanation)


# --------------------------------------------------------------------------- no answer, harness


def test_provider_error():
    d = judge(case(COUNT), kind="error", error_code="rate_limited", attempt_message="429",
              outcome="ERROR", grade_reason="provider_error:rate_limited")
    expect(d, "harness_bug", "provider_error", "rate_limited", "denominator")


def test_harness_error():
    d = judge(case(COUNT), sql=COUNT, status="error", error_source="harness", error_code="sandbox_unavailable",
              error_message="BrokenPipeError", outcome="ERROR", grade_reason="harness_error:sandbox_unavailable")
    expect(d, "harness_bug", "harness_error")


def test_transpile_untranslatable_names_the_rule():
    msg = ("cannot transpile from sqlite (affinity): cannot be translated from sqlite to DuckDB without "
           "changing its meaning (affinity): airline = 'United Airlines': SQLite compares the number airline "
           "with the text 'United Airlines'")
    d = judge(case(JOIN_REF), sql="SELECT count(*) FROM flights WHERE airline = 'United Airlines'",
              status="error", error_code="transpile_failed", error_message=msg, grade_reason="sql_error:transpile_failed")
    # the cause decides; the structural difference (no join to airlines) is still said
    expect(d, "harness_bug", "transpile_untranslatable", "rule affinity", "sqlite", "also, compared")


def test_transpile_parse_error_of_valid_sqlite_is_the_evaluation():
    # sqlglot's SQLite parser has no `INDEXED BY`; SQLite parses it (it fails only on the table)
    sql = "SELECT count(*) FROM singer INDEXED BY singer_age"
    msg = "cannot transpile from sqlite (parse_error): does not parse as sqlite SQL: Invalid expression"
    d = judge(case(COUNT), sql=sql, status="error", error_code="transpile_failed", error_message=msg)
    expect(d, "harness_bug", "transpile_valid_syntax", "SQLite itself parses it")


def test_transpile_parse_error_that_sqlite_confirms_is_the_systems_syntax():
    sql = "SELECT name FROM singer WHERE age >"
    msg = "cannot transpile from sqlite (parse_error): does not parse as sqlite SQL: Required keyword"
    d = judge(case("SELECT name FROM singer WHERE age > 30", columns=["name"], types=["VARCHAR"], rows=[["a"]]),
              sql=sql, status="error", error_code="transpile_failed", error_message=msg)
    expect(d, "wrong_filter", "syntax_error", "SQLite says", "WHERE")


def test_translation_broke_query():
    ref = ("SELECT t1.make FROM car_names AS t1 JOIN model_list AS t2 ON t1.model = t2.model")
    sql = "SELECT t1.make FROM car_names AS t1 JOIN model_list AS t2 ON t1.model = t2.modelid"
    msg = ("Conversion Error: Could not convert string 'chevrolet' to DOUBLE when casting from source "
           "column Model")
    rewrite = ("affinity_numeric_cast: CAST(t1.model AS REAL) = t2.modelid: the text t1.model compared "
               "with the numeric t2.modelid is read as a number")
    d = judge(case(ref, columns=["make"], types=["VARCHAR"], rows=[["x"]]), sql=sql, status="error",
              error_code="conversion_error", error_message=msg, rewrites=[rewrite],
              executed_sql=sql.replace("t1.model =", "CAST(t1.model AS DOUBLE) ="))
    expect(d, "harness_bug", "translation_broke_query", "affinity_numeric_cast")


def test_untranslated_function():
    sql = "SELECT julianday(year) FROM concert"
    d = judge(case("SELECT year FROM concert"), sql=sql, status="error", error_code="catalog_error",
              error_message="Catalog Error: Scalar Function with name julianday does not exist!",
              executed_sql=sql, dialect="sqlite")
    expect(d, "harness_bug", "untranslated_function", "julianday")


def test_reference_broken_table_and_column():
    d = judge(case(COUNT), sql="SELECT count(singer_id) FROM singer", status="error",
              error_code="catalog_error", error_message="Catalog Error: Table with name singer does not exist!")
    expect(d, "harness_bug", "reference_broken", "snapshot")
    ref = "SELECT avg(age) FROM singer"
    d = judge(case(ref), sql="SELECT max(age) FROM singer", status="error", error_code="binder_error",
              error_message='Binder Error: Referenced column "age" not found in FROM clause!')
    expect(d, "harness_bug", "reference_broken", "column age")


def test_engine_internal_error():
    d = judge(case(COUNT), sql=COUNT, status="error", error_code="internal_error",
              error_message="INTERNAL Error: Attempted to access index 3 within vector of size 3")
    expect(d, "harness_bug", "engine_internal_error")


def test_guard_blocks_reference():
    d = judge(case(COUNT), sql="SELECT count(*) FROM singer WHERE age > 20", status="refused", layer="filter",
              reason="table_not_allowed", message="The table 'singer' is not on the allowlist.")
    expect(d, "harness_bug", "guard_blocks_reference", "singer")


def test_guard_misreads_sql():
    ref = ("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)")
    sql = ("SELECT name FROM singer s WHERE EXISTS (SELECT 1 FROM singer_in_concert c "
           "WHERE c.singer_id = s.singer_id)")
    d = judge(case(ref, columns=["name"], types=["VARCHAR"], rows=[["a"]]), sql=sql, status="refused",
              layer="filter", reason="function_not_allowed",
              message="The function exists() is not on the function allowlist.")
    expect(d, "harness_bug", "guard_misreads_sql", "EXISTS")


def test_guard_missing_alias():
    # a guard that refused `len` (an alias of `length`, which the allowlist allows)
    d = judge(case("SELECT length(name) FROM singer"), sql="SELECT len(name) FROM singer", status="refused",
              layer="filter", reason="function_not_allowed",
              message="The function len() is not on the function allowlist (or not with this number of arguments).")
    expect(d, "harness_bug", "guard_missing_alias", "length()")


def test_guard_harness():
    d = judge(case(COUNT), sql="SELECT count(*) FROM singer WHERE today() > DATE '2020-01-01'",
              status="refused", layer="filter", reason="unpinned_clock",
              message="The clock call today() could not be pinned to the snapshot's as-of date.")
    expect(d, "harness_bug", "guard_harness")


def test_limit_on_plausible_query():
    d = judge(case(COUNT), sql="SELECT COUNT(*) FROM singer", status="timeout", layer="database",
              reason="statement_timeout")
    expect(d, "harness_bug", "limit_on_plausible_query")


def test_result_cap_below_reference():
    c = case("SELECT name FROM city", columns=["name"], types=["VARCHAR"], rows=[[f"c{i}"] for i in range(5)])
    d = judge(c, sql="SELECT name FROM city", result=rs(["name"], [[f"c{i}"] for i in range(4)]), truncated=True,
              layer="cap", reason="row_cap", grade_reason="result_truncated")
    expect(d, "harness_bug", "result_cap_below_reference", "4 rows")


def test_grader_equal_rows():
    d = judge(case(COUNT, rows=[[6]]), sql="SELECT count(singer_id) FROM singer",
              result=rs(["n"], [[6.0]], ["DOUBLE"]))
    expect(d, "harness_bug", "grader_equal_rows")


def test_accidental_match():
    """Right on the snapshot, wrong on a neighbour: never the grader's fault (the rows are equal
    on the snapshot by definition); the structure says what the answer does differently."""
    ref = "SELECT count(*) FROM singer WHERE age > 30 AND age <= 60"
    d = judge(case(ref, rows=[[6]]), sql="SELECT count(*) FROM singer WHERE age > 30",
              result=rs(["n"], [[6]], ["BIGINT"]), grade_reason="accidental_match",
              suite_detail={"neighbour": "nbr-0123456789ab"})
    expect(d, "wrong_filter", "accidental_match", "nbr-0123456789ab")
    assert "grader_equal_rows" not in d.explanation
    # no structural difference the rules see: a metric difference, still not the grader's
    d = judge(case(COUNT, rows=[[6]]), sql="SELECT count(*) FROM singer s",
              result=rs(["n"], [[6]], ["BIGINT"]), grade_reason="accidental_match")
    expect(d, "wrong_metric", "accidental_match")


TIE = {"keys": ["capacity"], "before": 1, "take": 1, "rows": [["Glebe Park", 3960], ["Balmoor", 3960]]}


def test_tie_at_cut():
    c = case(TOP, columns=["name", "capacity"], types=["VARCHAR", "BIGINT"],
             rows=[["Hampden Park", 52500], ["Glebe Park", 3960]], tie=TIE, order_matters=True,
             order_keys=["capacity"])
    got = rs(["name", "capacity"], [["Hampden Park", 52500], ["Balmoor", 3960]], ["VARCHAR", "BIGINT"])
    d = judge(c, sql="SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 2", result=got)
    expect(d, "harness_bug", "tie_at_cut", "row 2", "capacity")


def test_tie_not_recorded():
    c = case(TOP, columns=["name", "capacity"], types=["VARCHAR", "BIGINT"],
             rows=[["Hampden Park", 52500], ["Glebe Park", 3960]], order_matters=True, order_keys=["capacity"])
    got = rs(["name", "capacity"], [["Hampden Park", 52500], ["Forthbank", 3960]], ["VARCHAR", "BIGINT"])
    d = judge(c, sql="SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 2", result=got)
    expect(d, "harness_bug", "tie_not_recorded", "LIMIT 2", "re-freeze")
    # the same rows differing at a rank that is not tied are a real difference
    got = rs(["name", "capacity"], [["Forthbank", 52500], ["Glebe Park", 3960]], ["VARCHAR", "BIGINT"])
    d = judge(c, sql="SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 2", result=got)
    assert "[cause: tie_not_recorded]" not in d.explanation


def test_order_within_ties():
    ref = "SELECT name, age FROM singer ORDER BY age DESC"
    c = case(ref, columns=["name", "age"], types=["VARCHAR", "BIGINT"],
             rows=[["Joe", 52], ["Ann", 41], ["Tim", 41], ["Rose", 29]], order_matters=True, order_keys=["age"])
    got = rs(["name", "age"], [["Joe", 52], ["Tim", 41], ["Ann", 41], ["Rose", 29]], ["VARCHAR", "BIGINT"])
    d = judge(c, sql="SELECT name, age FROM singer ORDER BY age DESC, singer_id", result=got,
              grade_reason="result_mismatch:order")
    expect(d, "harness_bug", "order_within_ties", "age")
    got = rs(["name", "age"], [["Rose", 29], ["Ann", 41], ["Tim", 41], ["Joe", 52]], ["VARCHAR", "BIGINT"])
    d = judge(c, sql="SELECT name, age FROM singer ORDER BY age", result=got, grade_reason="result_mismatch:order")
    assert d.category == "wrong_grain", d.explanation  # the ranks themselves are reversed


def test_nondeterministic_reference():
    ref = ("SELECT ANY_VALUE(t2.name) AS name, COUNT(*) FROM concert AS t1 JOIN stadium AS t2 "
           "ON t1.stadium_id = t2.stadium_id GROUP BY t1.stadium_id")
    c = case(ref, columns=["name", "count_star()"], types=["VARCHAR", "BIGINT"], rows=[["Park A", 2], ["Park B", 1]])
    got = rs(["name", "count_star()"], [["Park A2", 2], ["Park B", 1]], ["VARCHAR", "BIGINT"])
    d = judge(c, sql=ref, result=got)
    expect(d, "harness_bug", "nondeterministic_reference", "ANY_VALUE", "name")


def test_reference_spelling():
    d = judge(case(COUNT, rows=[[6]]), sql="select COUNT(1) from SINGER", result=rs(["n"], [[7]], ["BIGINT"]))
    expect(d, "harness_bug", "reference_spelling")


# --------------------------------------------------------------------------- the system's fault


def test_missing_table():
    d = judge(case(COUNT), sql="SELECT count(*) FROM singers", status="error", error_code="catalog_error",
              error_message="Catalog Error: Table with name singers does not exist!")
    expect(d, "wrong_table", "missing_table", "singers")
    d = judge(case(COUNT), sql="SELECT count(*) FROM hr.salaries", status="refused", layer="filter",
              reason="qualifier_not_allowed", message="The table 'hr.salaries' is not on the allowlist.")
    expect(d, "wrong_table", "missing_table")


def test_column_elsewhere_says_where_the_column_is():
    ref = "SELECT t1.name FROM singer AS t1 JOIN singer_in_concert AS t2 ON t1.singer_id = t2.singer_id " \
          "JOIN concert AS t3 ON t2.concert_id = t3.concert_id WHERE t3.year = '2014'"
    sql = "SELECT s.name FROM singer s WHERE s.year = '2014'"
    c = case(ref, columns=["name"], types=["VARCHAR"], rows=[["a"]])
    msg = 'Binder Error: Table "s" does not have a column named "year"'
    d = judge(c, sql=sql, status="error", error_code="binder_error", error_message=msg)
    expect(d, "wrong_table", "column_elsewhere", "column year is in table concert, not singer")
    d = judge(c, sql=sql, status="error", error_code="binder_error", error_message=msg, catalog=CATALOG)
    expect(d, "wrong_table", "column_elsewhere", "column year is in table concert, not singer")


def test_column_nowhere_by_where_it_is_used():
    c = case("SELECT avg(age) FROM singer")
    msg = 'Binder Error: Referenced column "{}" not found in FROM clause!'
    for sql, col, category in [("SELECT avg(years_old) FROM singer", "years_old", "wrong_metric"),
                               ("SELECT avg(age) FROM singer WHERE gender = 'F'", "gender", "wrong_filter"),
                               ("SELECT nation, avg(age) FROM singer GROUP BY nation", "nation", "wrong_grain")]:
        d = judge(c, sql=sql, status="error", error_code="binder_error", error_message=msg.format(col),
                  catalog=CATALOG)
        expect(d, category, "column_nowhere", f"column {col}", "no served table has it")


def test_grouping_error():
    d = judge(case("SELECT country, count(*) FROM singer GROUP BY country"),
              sql="SELECT country, name, count(*) FROM singer GROUP BY country", status="error",
              error_code="binder_error",
              error_message='Binder Error: column "name" must appear in the GROUP BY clause or must be part of an aggregate function.')
    expect(d, "wrong_grain", "grouping_error")


def test_ambiguous_column():
    ref = "SELECT t1.name FROM singer t1 JOIN singer_in_concert t2 ON t1.singer_id = t2.singer_id"
    c = case(ref, columns=["name"], types=["VARCHAR"], rows=[["a"]])
    sql = "SELECT name, singer_id FROM singer t1 JOIN singer_in_concert t2 ON t1.singer_id = t2.singer_id"
    d = judge(c, sql=sql.replace("name, ", "t1.name, "), status="error", error_code="binder_error",
              error_message='Binder Error: Ambiguous reference to column name "singer_id"')
    expect(d, "wrong_grain", "ambiguous_column")  # its extra singer_id output decides
    d = judge(c, sql="SELECT t1.name FROM singer t1 JOIN singer_in_concert t2 ON singer_id = t2.singer_id",
              status="error", error_code="binder_error",
              error_message='Binder Error: Ambiguous reference to column name "singer_id"')
    expect(d, "wrong_table", "ambiguous_column", "unqualified")


def test_unknown_function():
    d = judge(case("SELECT avg(age) FROM singer"), sql="SELECT mean(age) FROM singer", status="error",
              error_code="catalog_error", error_message="Catalog Error: Scalar Function with name mean does not exist!")
    expect(d, "wrong_metric", "unknown_function", "mean()", "SELECT")


def test_type_error_of_the_systems_own_text():
    d = judge(case("SELECT count(*) FROM singer WHERE country = 'France'"),
              sql="SELECT count(*) FROM singer WHERE age = 'France'", status="error", error_code="conversion_error",
              error_message="Conversion Error: Could not convert string 'France' to INT32")
    expect(d, "wrong_filter", "type_error", "WHERE")


def test_syntax_error_by_clause():
    c = case("SELECT name FROM singer ORDER BY age DESC LIMIT 3", columns=["name"], types=["VARCHAR"], rows=[["a"]])
    for sql, category, clause in [("SELECT name FROM singer ORDER BY age DESC LIMIT 3 3", "wrong_grain", "LIMIT"),
                                  ("SELECT name FROM singer WHERE age >> ORDER BY age", "wrong_filter", "WHERE"),
                                  ("SELECT name, FROM singer JOIN ON x ORDER BY age DESC LIMIT 3", "wrong_table", "JOIN")]:
        d = judge(c, sql=sql, status="error", error_code="parser_error",
                  error_message="Parser Error: syntax error at or near \"x\"")
        expect(d, category, "syntax_error", clause)
    # never wrong_table by default: an unplaceable error is counted against the SELECT list
    d = judge(c, sql="SELEC name FROM singer", status="error", error_code="parser_error",
              error_message='Parser Error: syntax error at or near "SELEC"')
    expect(d, "wrong_metric", "syntax_error")


def test_not_a_query():
    c = case("SELECT count(*) FROM singer WHERE age > 40", question="How many singers are older than 40?")
    d = judge(c, sql="DELETE FROM singer WHERE age <= 40", status="refused", layer="filter",
              reason="write_statement", message="Only SELECT statements are allowed, not a Delete.")
    expect(d, "wrong_metric", "not_a_query", "no SELECT")
    d = judge(c, sql="SELECT count(*) FROM singer; SELECT avg(age) FROM singer", status="refused",
              layer="filter", reason="multiple_statements", message="One statement only.")
    expect(d, "wrong_filter", "not_a_query", "missing age > 40")
    d = judge(c, sql="CREATE TABLE x AS SELECT count(*) FROM singer WHERE age > 40", status="refused",
              layer="filter", reason="ddl_statement", message="Only SELECT statements are allowed.")
    expect(d, "wrong_metric", "not_a_query", "reference's structure")


def test_excluded_function():
    ref = "SELECT count(*) FROM concert WHERE year = '2014'"
    d = judge(case(ref), sql="SELECT count(*) FROM concert WHERE year = current_setting('year')",
              status="refused", layer="filter", reason="function_not_allowed",
              message="The function current_setting() is not on the function allowlist.")
    expect(d, "wrong_filter", "excluded_function", "settings_and_session")


def test_sql_error_decided_by_structure():
    d = judge(case(JOIN_REF), sql="SELECT count(*) FROM flights WHERE flightno / 0 > 1",
              status="error", error_code="out_of_range_error",
              error_message="Out of Range Error: Overflow in division")
    assert d.category in ("wrong_table", "wrong_filter"), d.explanation
    d = judge(case(COUNT), sql="SELECT count(*) FROM singer WHERE name SIMILAR TO 'x'", status="error",
              error_code="not_implemented_error", error_message="Not implemented Error: SIMILAR TO")
    expect(d, "wrong_filter", "sql_error")


@pytest.mark.parametrize("reason,category", [
    ("The request timed out after 30 s", "harness_bug"),
    ("Could you clarify whether you mean gross or net?", "ambiguous_question"),
    ("I am not authorized to read personal data", "wrong_table"),
    ("no join path from singer to concert", "wrong_table"),
])
def test_over_refusal(reason, category):
    d = judge(case(COUNT), kind="refusal", refusal=reason, outcome="DEFERRED_WRONGLY", grade_reason="over_refusal")
    expect(d, category, "over_refusal", reason)


def test_answered_should_refuse():
    d = judge(case(None, band="should_refuse"), sql="SELECT salary FROM hr_salaries",
              grade_reason="answered_should_refuse")
    expect(d, "wrong_table", "answered_should_refuse")


def test_a_number_compared_with_text_is_a_wrong_table():
    """flights.airline holds airline ids: comparing it with a name (SQLite answers 0 rows) means
    the system missed the join to airlines; the translation recorded the comparison."""
    sql = "SELECT count(*) FROM flights WHERE airline = 'United Airlines'"
    rewrite = ("affinity_number_versus_text: airline = 'United Airlines': SQLite compares the "
               "number airline with the text 'United Airlines' without converting (every number "
               "sorts before every text): always false (NULL for a NULL value)")
    d = judge(case(JOIN_REF), sql=sql, rewrites=[rewrite], result=rs(["n"], [[0]], ["BIGINT"]),
              catalog=CATALOG, dialect="sqlite")
    expect(d, "wrong_table", "type_mismatch_compare", "different types")
    # the same rewrite on the reference too (its notes record it): not the system's mismatch
    noted = case(JOIN_REF, notes=f"rewrite sql: {rewrite}")
    d = judge(noted, sql=sql, rewrites=[rewrite], result=rs(["n"], [[0]], ["BIGINT"]),
              catalog=CATALOG, dialect="sqlite")
    assert "type_mismatch_compare" not in d.explanation


def test_every_cause_row_has_a_test():
    tested = set(re.findall(r'expect\(d, [^,]+, "(\w+)"', Path(__file__).read_text(encoding="utf-8")))
    assert {c.code for c in CAUSES} <= tested, {c.code for c in CAUSES} - tested
    assert all(c.when and c.decides for c in CAUSES)
    assert len({c.code for c in CAUSES}) == len(CAUSES)


# --------------------------------------------------------------------------- a Spider-style batch

# labels written by hand from the question, the two queries and the execution, before running
# the judge (one line each: why)
BATCH = [
    # 1. sqlite double-quoted string, pred compares the airline uid column with a name: the
    #    translation refuses (affinity); SQLite would say 0 like the gold -> the harness
    dict(label="harness_bug", ref=JOIN_REF, sql="SELECT count(*) FROM flights WHERE airline = \"United Airlines\"",
         status="error", error_code="transpile_failed",
         error_message="cannot transpile from sqlite (affinity): cannot be translated from sqlite to DuckDB "
                       "without changing its meaning (affinity): airline = 'United Airlines'"),
    # 2. year is in concert: pred forgot the join
    dict(label="wrong_table", ref="SELECT count(*) FROM singer_in_concert AS t1 JOIN concert AS t2 "
                                  "ON t1.concert_id = t2.concert_id WHERE t2.year = '2014'",
         sql="SELECT count(*) FROM singer_in_concert WHERE year = '2014'", status="error",
         error_code="binder_error", error_message='Binder Error: Referenced column "year" not found in FROM clause!'),
    # 3. tie at LIMIT 1 (two stadiums with 2 concerts), pred = gold
    dict(label="harness_bug", ref="SELECT t2.name FROM concert AS t1 JOIN stadium AS t2 ON t1.stadium_id = "
                                  "t2.stadium_id GROUP BY t2.name ORDER BY count(*) DESC LIMIT 1",
         sql="SELECT t2.name FROM concert t1 JOIN stadium t2 ON t1.stadium_id = t2.stadium_id GROUP BY t2.name "
             "ORDER BY COUNT(*) DESC LIMIT 1",
         columns=["name"], rows=[["Somerset Park"]], got=[["Glebe Park"]]),
    # 4. avg where the gold takes max
    dict(label="wrong_metric", ref="SELECT max(capacity) FROM stadium", sql="SELECT avg(capacity) FROM stadium",
         rows=[[52500]], got=[[10621.6]]),
    # 5. missing WHERE country = 'France'
    dict(label="wrong_filter", ref="SELECT avg(age) FROM singer WHERE country = 'France'",
         sql="SELECT avg(age) FROM singer", rows=[[34.5]], got=[[36.1]]),
    # 6. per-country counts where one total is asked for
    dict(label="wrong_grain", ref="SELECT count(DISTINCT country) FROM singer",
         sql="SELECT country, count(*) FROM singer GROUP BY country", columns=["n"], rows=[[3]],
         got=[["France", 4], ["USA", 2]], got_columns=["country", "n"]),
    # 7. joins stadium on concert_id instead of stadium_id
    dict(label="wrong_table", ref="SELECT t2.name FROM concert AS t1 JOIN stadium AS t2 ON t1.stadium_id = "
                                  "t2.stadium_id WHERE t1.year = '2014'",
         sql="SELECT t2.name FROM concert AS t1 JOIN stadium AS t2 ON t1.concert_id = t2.stadium_id "
             "WHERE t1.year = '2014'", columns=["name"], rows=[["A"]], got=[["B"]]),
    # 8. an affinity CAST the translation added fails on 'null' text: SQLite compares it fine
    dict(label="harness_bug", ref="SELECT count(*) FROM cars_data WHERE accelerate > (SELECT max(horsepower) "
                                  "FROM cars_data)",
         sql="SELECT COUNT(*) FROM cars_data WHERE accelerate > (SELECT MAX(horsepower) FROM cars_data)",
         status="error", error_code="conversion_error",
         error_message="Conversion Error: Could not convert string 'null' to DOUBLE when casting from source "
                       "column SUBQUERY",
         rewrites=["affinity_numeric_cast: accelerate > CAST((SELECT MAX(horsepower) FROM cars_data) AS REAL): "
                   "the text (SELECT MAX(horsepower) FROM cars_data) compared with the numeric accelerate"]),
    # 9. DESC where the gold sorts ascending, top 3
    dict(label="wrong_grain", ref="SELECT name FROM singer ORDER BY age LIMIT 3",
         sql="SELECT name FROM singer ORDER BY age DESC LIMIT 3", columns=["name"],
         rows=[["a"], ["b"], ["c"]], got=[["x"], ["y"], ["z"]]),
    # 10. the system declined: "no table for concerts" although concert is served
    dict(label="wrong_table", ref="SELECT count(*) FROM concert", kind="refusal",
         refusal="There is no table about concerts in the schema"),
    # 11. EXISTS refused by the guard as a function (a guard bug)
    dict(label="harness_bug", ref="SELECT name FROM country WHERE code IN (SELECT countrycode FROM "
                                  "countrylanguage WHERE language = 'English')",
         sql="SELECT name FROM country WHERE EXISTS (SELECT 1 FROM countrylanguage WHERE countrycode = code "
             "AND language = 'English')", status="refused", layer="filter", reason="function_not_allowed",
         message="The function exists() is not on the function allowlist."),
    # 12. counts all flights from a table that lacks the airline's name: needs the join
    dict(label="wrong_filter", ref=JOIN_REF, sql="SELECT count(*) FROM flights", rows=[[10]], got=[[1200]]),
    # 13. sum of the wrong column (capacity vs average)
    dict(label="wrong_metric", ref="SELECT avg(capacity) FROM stadium", sql="SELECT avg(average) FROM stadium",
         rows=[[10621.67]], got=[[730.7]]),
    # 14. a syntax error in the HAVING (T-SQL-ish)
    dict(label="wrong_filter", ref="SELECT country FROM singer GROUP BY country HAVING count(*) > 1",
         sql="SELECT country FROM singer GROUP BY country HAVING count(*) >> = 1", status="error",
         error_code="parser_error", error_message='Parser Error: syntax error at or near "="',
         columns=["country"]),
]


def batch_item(spec):
    spec = dict(spec)
    label = spec.pop("label")
    columns = spec.pop("columns", ["n"])
    rows = spec.pop("rows", [[1]])
    types = ["VARCHAR" if isinstance(v, str) else "DOUBLE" for v in rows[0]]
    c = case(spec.pop("ref"), columns=columns, types=types, rows=rows)
    got = spec.pop("got", None)
    got_columns = spec.pop("got_columns", columns)
    kind = spec.pop("kind", "sql")
    if kind == "refusal":
        return label, judge(c, kind="refusal", refusal=spec.pop("refusal"), outcome="DEFERRED_WRONGLY",
                            grade_reason="over_refusal")
    result = None
    if got is not None:
        result = rs(got_columns, got, ["VARCHAR" if isinstance(v, str) else "DOUBLE" for v in got[0]])
    return label, judge(c, result=result, dialect="sqlite", **spec)


def test_spider_style_batch_agreement():
    pairs = [batch_item(s) for s in BATCH]
    agree = sum(label == d.category for label, d in pairs)
    misses = [(i + 1, label, d.category, d.explanation) for i, (label, d) in enumerate(pairs) if label != d.category]
    # measured: 13/14 (docs/judging.md: #12 is labelled wrong_filter, the judge says wrong_table);
    # at least 12 of 14 must hold
    assert agree >= 12, misses
    for _label, d in pairs:  # every diagnosis of an error or refusal names its cause
        assert d.explanation
