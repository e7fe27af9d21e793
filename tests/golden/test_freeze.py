import datetime as dt

import pytest

from sqleval_pipeline import paths
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.golden.freeze import FreezeError, freeze_cases, order_keys_of, verify_cases
from sqleval_pipeline.golden.model import Case


@pytest.fixture(scope="module")
def golden():
    return load_golden(paths.GOLDEN_DIR)


def test_every_committed_case_reproduces_on_a_fresh_snapshot(golden, serving_snapshot):
    drifts = verify_cases(golden.cases, serving_snapshot.path, serving_snapshot.snapshot_id,
                          serving_snapshot.manifest.as_of)
    assert drifts == []


def test_verify_catches_a_changed_expected_result(golden, serving_snapshot):
    case = golden.by_id()["com-010"]
    tampered = case.model_copy(deep=True)
    tampered.expected.rows[0][0] += 1
    drifts = verify_cases([tampered], serving_snapshot.path, serving_snapshot.snapshot_id,
                          serving_snapshot.manifest.as_of)
    assert len(drifts) == 1 and drifts[0].case_id == "com-010"
    assert "first difference" in drifts[0].detail


def test_verify_catches_a_case_frozen_on_another_snapshot(golden, serving_snapshot):
    case = golden.by_id()["com-001"].model_copy(update={"snapshot_id": "snap-000000000000"})
    drifts = verify_cases([case], serving_snapshot.path, serving_snapshot.snapshot_id,
                          serving_snapshot.manifest.as_of)
    assert drifts and "frozen against snap-000000000000" in drifts[0].detail


def test_freeze_records_types_alternatives_and_order_keys(golden, serving_snapshot):
    ids = ["com-028", "com-037", "com-006", "com-055"]
    todo = [golden.by_id()[i].model_copy(update={"expected": None, "order_keys": []}) for i in ids]
    frozen = {c.id: c for c in freeze_cases(todo, serving_snapshot.path, serving_snapshot.snapshot_id,
                                            serving_snapshot.manifest.as_of)}
    for i in ids:
        assert frozen[i].expected == golden.by_id()[i].expected
        assert frozen[i].order_keys == golden.by_id()[i].order_keys
    assert len(frozen["com-028"].expected.alternatives) == 1
    assert frozen["com-037"].order_keys == ["customers"]
    assert frozen["com-006"].expected.types == ["DOUBLE"]
    assert frozen["com-055"].expected is None


def test_time_windows_follow_the_as_of_date_not_the_clock(golden, serving_snapshot):
    case = golden.by_id()["com-027"]  # last 7 days
    later = freeze_cases([case], serving_snapshot.path, serving_snapshot.snapshot_id,
                         dt.date(2025, 12, 1))[0]
    assert later.expected.rows != case.expected.rows  # moves with the as-of date only


@pytest.mark.parametrize("sql,keys", [
    ("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC", ["n"]),
    ("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY 2 DESC, 1", ["n", "a"]),
    ("SELECT a, sum(b) FROM t GROUP BY a ORDER BY sum(b) DESC", ["SUM(b)"]),
    ("SELECT a FROM t UNION ALL SELECT a FROM u ORDER BY a", ["a"]),
])
def test_order_keys_are_output_columns(sql, keys):
    assert order_keys_of(sql) == keys


def test_unaliased_expressions_take_the_database_column_name():
    assert order_keys_of("SELECT a, sum(b) FROM t GROUP BY a ORDER BY sum(b) DESC",
                         ["a", "sum(b)"]) == ["sum(b)"]


def test_order_by_a_hidden_expression_is_refused():
    with pytest.raises(FreezeError, match="not an output column"):
        order_keys_of("SELECT a FROM t ORDER BY b")


def test_a_failing_reference_names_the_case(serving_snapshot):
    bad = Case(id="t-bad", question="?!?", reference_sql="SELECT nope FROM fct_orders",
               difficulty="simple_aggregate", band="answerable", cluster="x", split="dev",
               status="verified", provenance={"source": "t", "author": "t"})
    with pytest.raises(FreezeError, match="case t-bad: reference_sql failed"):
        freeze_cases([bad], serving_snapshot.path, serving_snapshot.snapshot_id,
                     serving_snapshot.manifest.as_of)
