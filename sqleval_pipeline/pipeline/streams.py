"""Streamed passes over a batch's stored records, in attempt order, in bounded memory.

A batch's files are written in attempt order (case, then run): ``attempts.parquet`` by the
attempts stage, ``executions.parquet`` (its SQL attempts only) by :func:`execute_stream`.
The later stages walk them side by side (:func:`joined`) one chunk at a time, so no stage
holds the batch's result sets: memory follows the chunk, not the golden set.

Executions are made once per *distinct SQL text* per batch. Every guard layer is a pure
function of the text for the batch's fixed snapshot and policy (read-only data, pinned clock),
so runs that answered with the same text get the same execution; the guard log records the
execution once and each reuse with the attempt it came from (``same_sql_as``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from sqleval_pipeline.guard.lru import LRU
from sqleval_pipeline.pipeline.records import Attempt, Execution, iter_records
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.dialect import translate, TranspileError

#: the attempt fields later stages need (the rendered prompt and raw response stay on disk)
ATTEMPT_FIELDS = tuple(n for n in Attempt.model_fields if n not in ("prompt", "raw_response"))


def attempts(path: Path, *, sql_only: bool = False) -> Iterator[Attempt]:
    """The attempts of a batch in stored order, without prompt and raw response (only those
    that answered with SQL when ``sql_only``)."""
    it = iter_records(path, Attempt, columns=ATTEMPT_FIELDS)
    return (a for a in it if a.kind == "sql") if sql_only else it


def joined(attempt_path: Path, executions: Iterable[Execution]
           ) -> Iterator[tuple[Attempt, Execution | None]]:
    """Each attempt with its execution (None for refusals and errors), walking both files in
    step. An SQL attempt without its execution raises :class:`MissingExecution`."""
    ex_it = iter(executions)
    pending: Execution | None = None
    for a in attempts(attempt_path):
        if a.kind != "sql":
            yield a, None
            continue
        if pending is None:
            pending = next(ex_it, None)
        if pending is None or pending.key != a.key:
            raise MissingExecution(a.key)
        yield a, pending
        pending = None


class MissingExecution(SqlevalError, LookupError):
    def __init__(self, key):
        super().__init__(f"attempt {key} has no execution; run the executions stage")
        self.key = key


class _Memo:
    """In-flight and finished executions by SQL text. In-flight ones are kept until they
    settle (at most the stream's window); finished ones go to an :class:`~.guard.lru.LRU`
    bounded in entries and in the cells their results hold (plus the LRU's 100 per entry)."""

    def __init__(self, max_cells: int = 2_000_000, max_entries: int = 8192):
        self._inflight: dict[str, tuple[Future, dict]] = {}
        self._done: LRU[str, tuple[Future, dict]] = LRU(max_entries, max_bytes=max_cells,
                                                         weigh=lambda _sql, entry: _cells(entry[0]))

    def get(self, sql: str):
        found = self._inflight.get(sql)
        return found if found is not None else self._done.get(sql)

    def put(self, sql: str, fut: Future, first: dict) -> None:
        self._inflight[sql] = (fut, first)

    def settled(self, sql: str) -> None:
        """Move a finished execution to the bounded LRU (dropping the least recently used
        ones over budget)."""
        entry = self._inflight.pop(sql, None)
        if entry is not None:
            self._done.put(sql, entry)


def _cells(fut: Future) -> int:
    rs = getattr(fut.result(), "result", None)
    return len(rs.rows) * max(1, len(rs.columns)) if rs is not None else 1


def execute_stream(todo: Iterable[Attempt], guard, *, workers: int, dialect: str | None = None,
                   on_done: Callable[[], None] | None = None,
                   schema: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> Iterator[Execution]:
    """Executions of SQL attempts through ``guard``, in input order, at most ``4 x workers``
    in flight; a text already executed in this pass is not executed again.

    ``dialect``: the system answers in another dialect; its text is transpiled to DuckDB's (a
    failure is the attempt's ``transpile_failed`` error, its message naming the reason code;
    the DuckDB text is kept as ``executed_sql`` and the fidelity rules' changes as
    ``rewrites``). ``schema``: the served tables' ``(column, DuckDB type)`` pairs
    (:func:`sqleval_pipeline.dialect.schema_from_manifest`), which the rules need to tell a
    SQLite string from a column and to keep type affinity and integer division."""
    memo = _Memo()
    window: deque = deque()

    def key_of(a: Attempt) -> dict:
        return {"config_version": a.config_version, "case_id": a.case_id, "run_index": a.run_index}

    def finish(item) -> Execution:
        a, (executed, rewrites), fut, first, sql = item
        if fut is None:  # transpile failure: made without the guard
            return executed
        res = fut.result()
        if first is not None:
            guard.log_reuse(res, {**key_of(a), "same_sql_as": first})
        else:
            memo.settled(sql)
        ex = res.to_execution(a.config_version, a.case_id, a.run_index)
        if executed:
            return ex.model_copy(update={"executed_sql": executed, "rewrites": rewrites})
        return ex

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for a in todo:
            sql, executed, rewrites = a.sql, None, []
            if dialect:
                try:
                    translation = translate(a.sql, dialect, schema)
                    sql = executed = translation.sql
                    rewrites = [str(r) for r in translation.rewrites]
                except TranspileError as exc:
                    err = Execution(config_version=a.config_version, case_id=a.case_id,
                                    run_index=a.run_index, status="error", error_source="sql",
                                    error_code="transpile_failed",
                                    error_message=f"cannot transpile from {dialect} "
                                                  f"({exc.reason}): {exc}")
                    window.append((a, (err, []), None, None, None))
                    sql = None
            if sql is not None:
                found = memo.get(sql)
                if found is not None:
                    window.append((a, (executed, rewrites), found[0], found[1], sql))
                else:
                    fut = pool.submit(guard.execute, sql, log_extra=key_of(a))
                    memo.put(sql, fut, key_of(a))
                    window.append((a, (executed, rewrites), fut, None, sql))
            while len(window) > 4 * max(1, workers):
                yield finish(window.popleft())
                if on_done:
                    on_done()
        while window:
            yield finish(window.popleft())
            if on_done:
                on_done()
