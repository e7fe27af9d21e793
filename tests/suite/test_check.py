"""The API grading will use: suite_for, check_on_suite, AccidentalMatch (and the guard as runner)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sqleval_pipeline.guard.policy import load_policy
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.suite import check as check_module
from sqleval_pipeline.suite.check import (
    MAX_DIFF_ROWS, GuardedRunner, ReferenceCache, SuiteError, _difference, check_on_suite, load_suite, outcome,
    readonly_runner, suite_for,
)


def test_no_reference_or_alternative_is_flagged_against_itself(suite_env, run):
    seen = 0
    for case in suite_env.cases.values():
        if not case.answerable or not case.reference_sql:
            continue
        for sql in [case.reference_sql, *case.alternative_sqls]:
            skipped: list = []
            hit = check_on_suite(sql, case, suite_env.neighbours, run, references=suite_env.suite.references,
                                 skipped=skipped)
            assert hit is None, hit.describe()
            assert not skipped
            seen += 1
    assert seen > 30


def test_suite_for_returns_the_distilled_neighbours_with_their_files(suite_env):
    case_id, entry = next(iter(suite_env.suite.data.cases.items()))
    refs = suite_for(case_id, suite_env.suite)
    assert [r.id for r in refs] == entry.neighbours
    assert all(r.path.exists() and r.as_of == suite_env.snapshot.manifest.as_of for r in refs)
    assert suite_env.suite.suite_for("no-such-case") == []
    assert suite_env.suite.suite_for(next(iter(suite_env.suite.data.skipped))) == []


def test_an_accidental_match_names_the_neighbour_and_shows_a_bounded_difference(suite_env, run):
    case = suite_env.cases["com-039"]  # payment methods by order count, several rows
    hit = suite_env.suite.check("SELECT payment_method, count(channel) AS orders FROM fct_orders "
                                "GROUP BY payment_method ORDER BY orders DESC", case, run)
    assert hit is not None and hit.case_id == "com-039"
    assert hit.neighbour.id in suite_env.suite.data.cases["com-039"].neighbours
    assert hit.reason.startswith("result_mismatch:") and hit.mismatch
    assert hit.expected.row_count <= MAX_DIFF_ROWS and hit.got is not None and hit.got.row_count <= MAX_DIFF_ROWS
    assert hit.missing and hit.unexpected and len(hit.missing) <= MAX_DIFF_ROWS
    assert hit.neighbour.id in hit.describe() and hit.neighbour.kind in hit.describe()


def test_the_first_differing_neighbour_is_returned(suite_env, run):
    case = suite_env.cases["com-001"]
    wrong = "SELECT count(*) + 1 AS orders FROM fct_orders"  # wrong everywhere
    order = list(reversed(suite_env.neighbours))
    assert check_on_suite(wrong, case, order, run, references=suite_env.suite.references).neighbour == order[0]


def test_the_difference_is_a_multiset_difference():
    exp = ResultSet(columns=["k"], types=["BIGINT"], rows=[[1], [1], [2], [3]])
    got = ResultSet(columns=["k"], types=["BIGINT"], rows=[[1], [2], [2], [4]])
    assert _difference(exp, got) == ([[1], [3]], [[2], [4]])
    wide = ResultSet(columns=["a", "b"], types=["BIGINT", "BIGINT"], rows=[[i, i] for i in range(20)])
    missing, unexpected = _difference(exp, wide)
    assert len(missing) == 4 and len(unexpected) == MAX_DIFF_ROWS


@dataclass
class _Guarded:
    status: str
    result: ResultSet | None = None
    truncated: bool = False
    message: str | None = None
    error_source: str | None = None


def test_what_a_runner_returns_decides_how_a_neighbour_counts(suite_env):
    case = suite_env.cases["com-001"]
    refs = suite_env.suite.suite_for("com-001")
    cache = suite_env.suite.references

    def returning(x):
        return lambda sql, path: x

    skipped: list = []
    for said in (_Guarded("refused", message="no"), _Guarded("timeout"), _Guarded("error", error_source="harness"),
                 _Guarded("ok", ResultSet(columns=["n"], types=["BIGINT"], rows=[[0]]), truncated=True)):
        assert check_on_suite("SELECT 1", case, refs, returning(said), references=cache, skipped=skipped) is None
    assert len(skipped) == 4 * len(refs)
    failed = check_on_suite("SELECT 1", case, refs, returning(_Guarded("error", message="Binder Error: x",
                                                                         error_source="sql")), references=cache)
    assert failed is not None and failed.reason == "candidate_failed:error" and failed.got is None
    with pytest.raises(SuiteError):
        outcome(42)


def test_the_case_is_frozen_once_per_neighbour(suite_env, run, monkeypatch):
    calls = []
    real = check_module.freeze_case
    monkeypatch.setattr(check_module, "freeze_case", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    cache = ReferenceCache()
    case = suite_env.cases["com-002"]
    for _ in range(3):
        check_on_suite("SELECT count(*) FROM dim_customers", case, suite_env.neighbours, run, references=cache)
    assert sorted(calls) == sorted(r.id for r in suite_env.neighbours)


def test_a_reference_that_fails_on_a_neighbour_skips_it(suite_env, run):
    case = suite_env.cases["com-001"].model_copy(update={"reference_sql": "SELECT no_such_column FROM fct_orders"})
    skipped: list = []
    assert check_on_suite("SELECT 1", case, suite_env.neighbours[:2], run, skipped=skipped) is None
    assert len(skipped) == 2 and "cannot run" in skipped[0][1]


def test_the_readonly_runner_pins_the_clock_and_reports_errors(suite_env):
    runner = readonly_runner()
    ref = suite_env.neighbours[0]
    got = runner("SELECT current_date AS d", ref.path)
    assert got.rows == [[suite_env.snapshot.manifest.as_of]]
    bad = runner("SELECT no_such_column FROM fct_orders", ref.path)
    assert outcome(bad)[0] == "error"


def test_a_suite_file_of_another_set_is_refused(suite_env, tmp_path):
    import shutil

    d = tmp_path / "x"
    shutil.copytree(suite_env.report.nset.directory, d)
    text = (d / "suite.json").read_text().replace(suite_env.report.nset.set_id, "set-000000000000")
    (d / "suite.json").write_text(text)
    with pytest.raises(SuiteError, match="distilled for set-000000000000"):
        load_suite(d / "suite.json")
    with pytest.raises(SuiteError, match="no suite"):
        load_suite(tmp_path / "nothing.json")


def test_the_guard_can_be_the_runner(suite_env):
    policy = load_policy(served=list(suite_env.snapshot.manifest.tables), schemas=["main"])
    case = suite_env.cases["com-001"]
    with GuardedRunner(policy) as guarded:
        hit = suite_env.suite.check("SELECT count(channel) AS orders FROM fct_orders", case, guarded)
        assert hit is not None and hit.reason.startswith("result_mismatch:")
        assert suite_env.suite.check("SELECT count(1) AS orders FROM fct_orders", case, guarded) is None
        skipped: list = []
        assert suite_env.suite.check("SELECT * FROM duckdb_settings()", case, guarded, skipped=skipped) is None
        assert skipped and all("refused" in why for _n, why in skipped)
