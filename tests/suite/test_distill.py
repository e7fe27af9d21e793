"""Distillation: every case's suite kills what the whole set kills, its counts add up, the
suite file is reused case by case and never used for a case whose readings changed."""

from __future__ import annotations

import shutil

import pytest

from sqleval_pipeline.golden.freeze import run_reference
from sqleval_pipeline.suite import check as check_module
from sqleval_pipeline.suite.audit import insensitive, literals_for, run_suite, weak_cases
from sqleval_pipeline.suite.check import check_on_suite, load_suite
from sqleval_pipeline.suite.distill import ALWAYS_KINDS, DEFAULT_MIN_SIZE, greedy_cover, suitable
from sqleval_pipeline.suite.model import reading_hash
from sqleval_pipeline.suite.mutants import mutants
from sqleval_pipeline.suite.neighbours import served_columns
from sqleval_pipeline.grading import grade_against
from sqleval_pipeline.snapshot import open_readonly


def test_every_answerable_case_with_a_reference_has_a_suite(suite_env):
    data = suite_env.suite.data
    for case in suite_env.cases.values():
        if suitable(case) is None:
            entry = data.cases[case.id]
            assert entry.reading_hash == reading_hash(case)
            assert DEFAULT_MIN_SIZE <= len(entry.neighbours) <= suite_env.params.neighbours
            assert len(set(entry.neighbours)) == len(entry.neighbours)
            kinds = {suite_env.report.nset.ref(n).kind for n in entry.neighbours}
            assert set(ALWAYS_KINDS) <= kinds
            assert set(entry.frozen) == set(entry.neighbours)
        else:
            assert case.id in data.skipped and case.id not in data.cases
    assert any(not c.answerable for c in suite_env.cases.values())  # the should_refuse cases were seen


def test_the_counts_of_each_case_add_up(suite_env):
    for entry in suite_env.suite.data.cases.values():
        assert entry.mutants > 0
        assert entry.mutants == entry.killed_by_snapshot + entry.killed_by_neighbours + len(entry.surviving)
        assert entry.kill_rate == pytest.approx((entry.killed_by_snapshot + entry.killed_by_neighbours) / entry.mutants)
        assert sum(total for total, _killed in entry.by_kind.values()) == entry.mutants
        assert max(entry.kills.values()) <= entry.killed_by_neighbours
        assert not entry.unusable


def _mutants_alive_on_the_snapshot(suite_env, case, literals, con):
    snap = suite_env.snapshot
    found = []
    readings = [case.reference_sql, *case.alternative_sqls]
    seen = set(readings)
    for sql in readings:
        for m in mutants(sql, served_columns(snap.manifest), literals=literals, constraints=suite_env.constraints):
            if m.sql in seen:
                continue
            seen.add(m.sql)
            try:
                got = run_reference(con, m.sql, snap.manifest.as_of)
            except Exception:  # noqa: BLE001 - an invalid mutant
                continue
            c = grade_against(case, got)
            if c.exact or c.facts:
                found.append(m)
    return found


def test_the_distilled_suite_kills_every_mutant_the_whole_set_kills(suite_env, run):
    """Recomputed here, mutant by mutant, through the public check: a mutant some neighbour
    tells apart from the reference is told apart by the case's distilled suite too, and the
    mutants reported as surviving are those no neighbour tells apart."""
    refs = suite_env.neighbours
    cache = suite_env.suite.references
    killed_somewhere = 0
    literals = literals_for(list(suite_env.cases.values()), suite_env.snapshot.manifest, suite_env.constraints)
    con = open_readonly(suite_env.snapshot.path)
    alive = {cid: _mutants_alive_on_the_snapshot(suite_env, suite_env.cases[cid], literals, con)
             for cid in suite_env.suite.data.cases}
    con.close()
    for case_id, entry in suite_env.suite.data.cases.items():
        case = suite_env.cases[case_id]
        distilled = suite_env.suite.suite_for(case_id)
        surviving = {m.sql for m in entry.surviving}
        for m in alive[case_id]:
            everywhere = check_on_suite(m.sql, case, refs, run, references=cache)
            if everywhere is None:
                assert m.sql in surviving, f"{case_id}: {m.detail} survives but is not reported"
                continue
            killed_somewhere += 1
            assert m.sql not in surviving
            assert check_on_suite(m.sql, case, distilled, run, references=cache) is not None, (
                f"{case_id}: the distilled suite misses {m.detail}, which {everywhere.neighbour.kind} kills")
    assert killed_somewhere > 100  # the neighbours do kill what the snapshot cannot


def test_greedy_cover_finds_a_cover_and_keeps_the_kinds():
    kills = {"a": {1, 2}, "b": {2, 3}, "c": {3, 4}, "d": {4}, "e": set()}
    kinds = {"a": "nulls", "b": "mixed", "c": "boundary", "d": "sparse", "e": "mixed"}
    chosen = greedy_cover(kills, list(kills), 0, kinds)
    assert set().union(*(kills[n] for n in chosen)) == {1, 2, 3, 4}
    assert chosen[0] in ("a", "b", "c") and "b" in chosen  # one mixed always, the best one
    assert greedy_cover({"a": {1, 2, 3}, "b": {1}, "c": {2}, "d": {3}}, ["b", "c", "d", "a"]) == ["a"]
    assert greedy_cover({}, [], 3) == []
    padded = greedy_cover({"a": {1}, "b": set(), "c": set()}, ["a", "b", "c"], 3, {"a": "x", "b": "x", "c": "y"})
    assert padded == ["a", "c", "b"]


def test_the_suite_file_is_reused_case_by_case(suite_env, tmp_path):
    shutil.copytree(suite_env.report.nset.directory, tmp_path / suite_env.report.nset.set_id)
    cases = list(suite_env.cases.values())
    snap = suite_env.snapshot

    def again(cs):
        return run_suite(cs, serving=snap.path, snapshot=snap.manifest, constraints=suite_env.constraints,
                         root=tmp_path, params=suite_env.params)

    same = again(cases)
    assert same.nset.reused and same.suite.timings["cases_distilled"] == 0
    assert same.suite.cases == suite_env.suite.data.cases
    # one case edited (the same query, spelled otherwise): only that one is distilled again
    edited = [c.model_copy(update={"reference_sql": c.reference_sql.replace("count(*)", "COUNT(*)")})
              if c.id == "com-001" else c for c in cases]
    third = again(edited)
    assert third.nset.set_id == same.nset.set_id and third.nset.reused
    assert third.suite.timings["cases_distilled"] == 1
    assert third.suite.cases["com-001"].reading_hash != same.suite.cases["com-001"].reading_hash


def test_a_golden_set_with_nothing_to_distil_builds_no_neighbour(suite_env, tmp_path):
    """A project just built (its golden set empty, or only should-refuse cases) gets a set of
    no neighbour: neighbours made now would not be those of the first cases (a set's id depends
    on the references). The first cases get theirs, built then."""
    snap = suite_env.snapshot
    refusals = [c for c in suite_env.cases.values() if not c.answerable]
    assert refusals

    def suite_of(cs):
        return run_suite(cs, serving=snap.path, snapshot=snap.manifest, constraints=suite_env.constraints,
                         root=tmp_path, params=suite_env.params)

    empty = suite_of([])
    assert empty.nset.manifest.neighbours == [] and empty.suite.cases == {}
    assert not empty.nset.reused and not list(empty.nset.directory.glob("*.duckdb"))
    assert load_suite(empty.path).suite_for("any") == []  # the handle grading reads
    only_refusals = suite_of(refusals)
    assert only_refusals.nset.set_id == empty.nset.set_id and only_refusals.nset.reused
    assert set(only_refusals.suite.skipped) == {c.id for c in refusals}
    # a set.json that is not what it should be is written again
    (empty.nset.directory / "set.json").write_text("{", encoding="utf-8")
    assert not suite_of([]).nset.reused and load_suite(empty.path).suite_for("any") == []
    # the first case with a reference: a set of its own, with the neighbours it asks for
    first = suite_of([suite_env.cases["com-001"]])
    assert first.nset.set_id != empty.nset.set_id
    assert len(first.nset.manifest.neighbours) == suite_env.params.neighbours
    assert len(list(first.nset.directory.glob("*.duckdb"))) == suite_env.params.neighbours


def test_a_case_whose_reference_changed_is_not_checked_with_stored_results(suite_env, run, monkeypatch):
    case = suite_env.cases["com-001"]
    assert suite_env.suite.is_current(case)
    # a current case: the stored results are used, nothing is frozen again
    fresh = load_suite(suite_env.suite.path)
    monkeypatch.setattr(check_module, "freeze_case", lambda *a, **k: pytest.fail("froze again"))
    assert fresh.check(case.reference_sql, case, run) is None
    monkeypatch.undo()
    # the same id with another reference: its own results are computed on the neighbours
    other = case.model_copy(update={"reference_sql": "SELECT count(*) AS n FROM dim_customers"})
    assert not fresh.is_current(other)
    assert fresh.check(other.reference_sql, other, run) is None
    assert fresh.check(case.reference_sql, other, run) is not None


def test_findings_are_consistent(suite_env):
    data = suite_env.suite.data
    with_survivors = {c.case_id for c in data.cases.values() if c.surviving}
    assert {c.case_id for c in weak_cases(data, 1.0)} == with_survivors - {c.case_id for c in suite_env.report.insensitive}
    assert {c.case_id for c in suite_env.report.insensitive} == {
        c.case_id for c in data.cases.values() if c.killed_by_snapshot + c.killed_by_neighbours == 0}
    assert all(insensitive(c) for c in suite_env.report.insensitive)
