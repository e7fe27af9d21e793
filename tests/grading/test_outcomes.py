"""Outcome table (docs/grading.md), alternatives, grader version and wide-result column matching."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from sqleval_pipeline import grading
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.grading import GRADER_VERSION, compare, grade_against, grade_attempt
from sqleval_pipeline.pipeline.records import Attempt, Execution
from sqleval_pipeline.results import ResultSet
from tests.conftest import cpu_time_of

EXPECTED = {"columns": ["region", "revenue"], "types": ["VARCHAR", "DECIMAL(18,2)"],
            "rows": [["north", "10.50"], ["south", "7.25"]]}


def make_case(band="answerable", alternatives=(), **kw) -> Case:
    data = dict(
        id="q01", question="Revenue by region?", difficulty="filtered_aggregate", band=band,
        cluster="orders", split="dev", status="verified",
        provenance={"source": "test", "author": "me"}, snapshot_id="snap1",
    )
    if band != "should_refuse":
        data["reference_sql"] = "SELECT region, SUM(revenue) FROM t GROUP BY 1"
        data["expected"] = {**EXPECTED, "alternatives": list(alternatives)}
        data["alternative_sqls"] = ["SELECT 1"] * len(alternatives)
    data.update(kw)
    return Case.model_validate(data)


def sql_attempt(**kw):
    return Attempt(config_version="cfg", case_id="q01", run_index=0, kind="sql", sql="SELECT 1", **kw)


def ok(rows, columns=("region", "revenue"), types=("VARCHAR", "DOUBLE"), truncated=False):
    return Execution(config_version="cfg", case_id="q01", run_index=0, status="ok", truncated=truncated,
                     result=ResultSet(columns=list(columns), types=list(types), rows=rows))


def test_correct():
    g = grade_attempt(make_case(), sql_attempt(), ok([["south", 7.25], ["north", 10.5]]))
    assert (g.outcome, g.exact, g.facts, g.reason) == ("CORRECT", True, True, "match")
    assert (g.band, g.difficulty, g.split, g.cluster, g.snapshot_id) == (
        "answerable", "filtered_aggregate", "dev", "orders", "snap1")
    assert g.grader_version == GRADER_VERSION


def test_correct_facts_extra_column():
    g = grade_attempt(make_case(), sql_attempt(),
                      ok([["south", 7.25, 3], ["north", 10.5, 4]], ("region", "revenue", "n"), ("VARCHAR", "DOUBLE", "BIGINT")))
    assert (g.outcome, g.exact, g.facts) == ("CORRECT_FACTS", False, True)
    assert g.reason == "facts_only:column_count"


def test_wrong_result_keeps_mismatch():
    g = grade_attempt(make_case(), sql_attempt(), ok([["south", 7.25], ["north", 11.5]]))
    assert g.outcome == "WRONG" and g.reason == "result_mismatch:values"
    assert "11.5" in g.mismatch


def test_truncated_result_is_wrong():
    g = grade_attempt(make_case(), sql_attempt(), ok([["south", 7.25], ["north", 10.5]], truncated=True))
    assert (g.outcome, g.reason) == ("WRONG", "result_truncated")


@pytest.mark.parametrize("execution, reason", [
    (dict(status="refused", layer="filter", reason="not_select", message="DELETE"), "guard_refused:filter:not_select"),
    (dict(status="refused", layer="database", reason="schema_not_allowed"), "guard_refused:database:schema_not_allowed"),
    (dict(status="timeout"), "timeout"),
    (dict(status="error", error_source="sql", error_code="binder_error"), "sql_error:binder_error"),
])
def test_guard_refusals_timeouts_and_sql_errors_are_wrong(execution, reason):
    ex = Execution(config_version="cfg", case_id="q01", run_index=0, **execution)
    g = grade_attempt(make_case(), sql_attempt(), ex)
    assert (g.outcome, g.reason) == ("WRONG", reason)


def test_harness_and_provider_errors_are_error():
    ex = Execution(config_version="cfg", case_id="q01", run_index=0, status="error",
                   error_source="harness", error_code="worker_crashed")
    assert grade_attempt(make_case(), sql_attempt(), ex).outcome == "ERROR"
    att = Attempt(config_version="cfg", case_id="q01", run_index=0, kind="error", error_code="provider_503")
    g = grade_attempt(make_case(), att, None)
    assert (g.outcome, g.reason) == ("ERROR", "provider_error:provider_503")
    assert grade_attempt(make_case(), sql_attempt(), None).outcome == "ERROR"


def test_refusals():
    refusal = Attempt(config_version="cfg", case_id="q01", run_index=0, kind="refusal", refusal_reason="no such column")
    assert grade_attempt(make_case(), refusal, None).outcome == "DEFERRED_WRONGLY"
    sr = make_case(band="should_refuse")
    assert grade_attempt(sr, refusal, None).outcome == "DEFERRED_CORRECTLY"
    answered = grade_attempt(sr, sql_attempt(), ok([["x", 1.0]]))
    assert (answered.outcome, answered.reason) == ("WRONG", "answered_should_refuse")
    blocked = Execution(config_version="cfg", case_id="q01", run_index=0, status="refused",
                        layer="filter", reason="schema_not_allowed")
    g = grade_attempt(sr, sql_attempt(), blocked)
    assert g.outcome == "WRONG" and g.reason.startswith("answered_should_refuse:guard_blocked:filter")


def test_unverified_case_gets_execution_only():
    case = make_case(status="unverified", expected=None, alternative_sqls=[])
    g = grade_attempt(case, sql_attempt(), ok([["a", 1.0]]))
    assert g.outcome is None and g.executed is True and g.reason == "unverified_execution_only"


def test_alternatives_any_passes():
    alt = {"columns": ["region", "revenue"], "types": ["VARCHAR", "DECIMAL(18,2)"],
           "rows": [["north", "11.00"], ["south", "8.00"]]}
    case = make_case(alternatives=[alt])
    g = grade_attempt(case, sql_attempt(), ok([["north", 11.0], ["south", 8.0]]))
    assert (g.outcome, g.alternative) == ("CORRECT", 1)
    c = grade_against(case, ResultSet(columns=["r", "v"], types=["VARCHAR", "DOUBLE"], rows=[["north", 10.5], ["south", 7.25]]))
    assert c.exact and c.alternative == 0
    c = grade_against(case, ResultSet(columns=["r", "v"], types=["VARCHAR", "DOUBLE"], rows=[["north", 1.0], ["south", 2.0]]))
    assert not c.facts and c.alternative == 0


def test_attempt_execution_keys_must_agree():
    ex = Execution(config_version="cfg", case_id="q01", run_index=1, status="timeout")
    with pytest.raises(ValueError):
        grade_attempt(make_case(), sql_attempt(), ex)


def test_grader_version_changes_with_rules():
    rules = dict(grading.RULES)
    assert grading._grader_version(rules) == GRADER_VERSION
    assert grading._grader_version({**rules, "abs_tol": 1e-6}) != GRADER_VERSION
    assert grading._grader_version({**rules, "revision": rules["revision"] + 1}) != GRADER_VERSION


def test_wide_result_with_duplicate_looking_columns_is_fast_and_correct():
    rnd = random.Random(7)
    n, k = 2000, 20
    # 20 columns holding the same multiset of 0/1 flags, arranged differently per column
    base = [[rnd.randint(0, 1) for _ in range(k)] for _ in range(n)]
    exp = ResultSet(columns=[f"c{i}" for i in range(k)], types=["BIGINT"] * k, rows=base)
    perm = list(range(k))
    rnd.shuffle(perm)
    rows = [[r[p] for p in perm] + [7] for r in base]
    rnd.shuffle(rows)
    got = ResultSet(columns=[f"g{i}" for i in range(k + 1)], types=["BIGINT"] * (k + 1), rows=rows)
    c, secs = cpu_time_of(lambda: compare(exp, got))
    assert c.facts and not c.exact
    # the matched columns, projected from the candidate's rows, give back the expected bag
    # (several maps can be right when 0/1 columns coincide; each must reproduce the rows)
    assert sorted(c.column_map) == sorted(set(c.column_map)) and len(c.column_map) == k
    assert sorted([r[j] for j in c.column_map] for r in rows) == sorted(base)
    # each column sorted independently: every column matches alone, nothing lines up
    cols = [sorted(col) for col in zip(*base, strict=True)]
    sorted_rows = [list(r) for r in zip(*cols, strict=True)]
    c2, secs2 = cpu_time_of(lambda: compare(exp, ResultSet(columns=exp.columns, types=exp.types, rows=sorted_rows)))
    assert not c2.facts and c2.facts_reason == "no_alignment"
    assert secs + secs2 < 5


def test_decimal_and_float_large_bag():
    rnd = random.Random(3)
    rows = [[i, Decimal(f"{rnd.randint(0, 10**6)}.{rnd.randint(1, 99):02d}")] for i in range(5000)]
    exp = ResultSet(columns=["id", "v"], types=["BIGINT", "DECIMAL(18,2)"], rows=rows)
    got_rows = [[i, float(v) * (1 + 1e-12)] for i, v in rows]  # summation-order noise, within 1e-9 relative
    rnd.shuffle(got_rows)
    got = ResultSet(columns=["id", "v"], types=["BIGINT", "DOUBLE"], rows=got_rows)
    assert compare(exp, got).exact
    got_rows[10][1] += 100.0  # 1.2e-4 relative: outside the tolerance
    c = compare(exp, ResultSet(columns=["id", "v"], types=["BIGINT", "DOUBLE"], rows=got_rows))
    assert not c.exact and not c.facts
    assert "1 expected row(s) missing, 1 unexpected row(s)" in c.mismatch
