"""Streamed stage passes: one guarded execution per distinct SQL text, in attempt order, with
each reuse logged; attempts walked beside their executions."""

import json

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.pipeline.records import Attempt, Execution, save_records
from sqleval_pipeline.pipeline.streams import MissingExecution, _Memo, execute_stream, joined
from tests.conftest import demo_policy

COUNT = "SELECT count(*) AS n FROM fct_orders"
OTHER = "SELECT count(DISTINCT customer_id) AS n FROM fct_orders"
BAD = "SELECT no_such_column FROM fct_orders"


class Counting:
    """The guard, counting what it is asked to execute."""

    def __init__(self, guard):
        self.guard, self.executed = guard, []

    def execute(self, sql, **kw):
        self.executed.append(sql)
        return self.guard.execute(sql, **kw)

    def log_reuse(self, res, extra):
        self.guard.log_reuse(res, extra)


def attempt(case, run, sql=None, kind="sql"):
    return Attempt(config_version="v", case_id=case, run_index=run, kind=kind, sql=sql,
                   refusal_reason=None if kind == "sql" else "no")


@pytest.fixture()
def guard(serving_snapshot, tmp_path):
    with GuardedExecutor(serving_snapshot.path, as_of=serving_snapshot.manifest.as_of,
                         policy=demo_policy(), log_path=tmp_path / "guard_log.jsonl") as g:
        yield g


def test_each_distinct_text_is_executed_once_and_every_attempt_gets_its_execution(guard, tmp_path):
    todo = [attempt("a", 0, COUNT), attempt("a", 1, COUNT), attempt("b", 0, BAD),
            attempt("a", 2, COUNT), attempt("b", 1, BAD), attempt("c", 0, OTHER)]
    counting = Counting(guard)
    got = list(execute_stream(todo, counting, workers=2))
    assert sorted(counting.executed) == sorted([COUNT, BAD, OTHER])
    assert [e.key for e in got] == [a.key for a in todo]  # in the attempts' order
    # each equals what executing that attempt on its own gives
    for a, e in zip(todo, got, strict=True):
        alone = guard.execute(a.sql).to_execution(a.config_version, a.case_id, a.run_index)
        assert (e.status, e.error_code, e.result) == (alone.status, alone.error_code, alone.result)
    assert got[0].status == "ok" and got[2].status == "error"
    guard.close()
    log = [json.loads(x) for x in (tmp_path / "guard_log.jsonl").read_text().splitlines()]
    reused = [r for r in log if r["event"] == "guarded_execution_reused"]
    assert [(r["case_id"], r["run_index"]) for r in reused] == [("a", 1), ("a", 2), ("b", 1)]
    assert reused[0]["same_sql_as"] == {"config_version": "v", "case_id": "a", "run_index": 0}
    assert reused[2]["same_sql_as"]["case_id"] == "b"


def test_a_text_whose_execution_was_dropped_from_the_bounded_memo_is_executed_again(guard, monkeypatch):
    """The memo is bounded (cells held); past the bound a repeated text costs an execution,
    never a wrong result."""
    import sqleval_pipeline.pipeline.streams as streams

    monkeypatch.setattr(streams, "_Memo", lambda: _Memo(max_cells=1, max_entries=1))
    between = [f"SELECT {i} AS x" for i in range(6)]  # more than the window (4 x 1 worker)
    todo = [attempt("a", 0, COUNT), *(attempt(f"b{i}", 0, s) for i, s in enumerate(between)),
            attempt("a", 1, COUNT)]
    counting = Counting(guard)
    got = list(execute_stream(todo, counting, workers=1))
    assert counting.executed == [COUNT, *between, COUNT]
    assert got[0].result == got[-1].result


def test_attempts_walk_beside_their_executions_and_a_missing_one_is_named(tmp_path):
    attempts = [attempt("a", 0, COUNT), attempt("a", 1, kind="refusal"), attempt("b", 0, OTHER)]
    save_records(tmp_path / "attempts.parquet", attempts)
    ex = [Execution(config_version="v", case_id=c, run_index=r, status="timeout")
          for c, r in (("a", 0), ("b", 0))]
    pairs = list(joined(tmp_path / "attempts.parquet", ex))
    assert [(a.key, e.key if e else None) for a, e in pairs] == [
        (("v", "a", 0), ("v", "a", 0)), (("v", "a", 1), None), (("v", "b", 0), ("v", "b", 0))]
    assert pairs[0][0].prompt is None and pairs[0][0].sql == COUNT
    with pytest.raises(MissingExecution, match=r"\('v', 'b', 0\) has no execution"):
        list(joined(tmp_path / "attempts.parquet", ex[:1]))


def test_a_batch_without_sql_attempts_stores_an_empty_twin_not_an_error(env, tmp_path):
    """Every attempt declined: the executions stage stores an empty JSON Lines twin (Parquet
    needs a row) and grading goes on."""
    import dataclasses

    from sqleval_pipeline.pipeline import evaluation as ev
    from sqleval_pipeline import paths
    from sqleval_pipeline.configs import load_config
    from sqleval_pipeline.generation.baseline import BaselineGenerator
    from sqleval_pipeline.generation.base import GenerationOutput

    raw = load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml")
    env = dataclasses.replace(env)
    plain = BaselineGenerator.generate
    BaselineGenerator.generate = lambda self, ctx: GenerationOutput(kind="refusal", refusal_reason="no")
    try:
        run = ev.stage_attempts(env, raw, case_ids=["com-001", "com-004"])
    finally:
        BaselineGenerator.generate = plain
    summary = ev.stage_executions(env, raw, run.batch)
    folder = env.store.batch_dir(run.batch.partition_key, run.batch.batch_id)
    assert summary.count == 0 and (folder / "executions.jsonl").read_text() == ""
    assert not (folder / "executions.parquet").exists()
    grades = ev.stage_grades(env, run.batch)
    assert len(grades) == 6 and {g.outcome for g in grades} == {"DEFERRED_WRONGLY"}
    assert not [p for p in folder.iterdir() if p.is_dir() and p.name.startswith(".")]  # no staging left
