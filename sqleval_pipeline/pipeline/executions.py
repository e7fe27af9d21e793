"""Stage 2, guarded executions: every SQL attempt of a batch through the guard, once per batch.

One execution per distinct SQL text, streamed through the guard's warm workers and written as
results come; a batch executed under another guard policy is refused (evaluate again for a new
batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.dialect import schema_from_manifest
from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.batch_files import artifact_file, load_artifact
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError, Progress
from sqleval_pipeline.pipeline.records import Execution, RecordWriter, iter_records, save_records
from sqleval_pipeline.pipeline.store import BatchInfo
from sqleval_pipeline.pipeline.streams import attempts as stored_attempts
from sqleval_pipeline.pipeline.streams import execute_stream


@dataclass(frozen=True)
class ExecutionSummary:
    """What the executions stage stored: how many, by status (``refused:<layer>`` apart)."""
    count: int
    status: dict[str, int]


def execution_summary(path: Path) -> ExecutionSummary:

    if not path.exists():
        return ExecutionSummary(0, {})
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT CASE WHEN status = 'refused' THEN 'refused:' || layer ELSE status END AS k, "
            "count(*) FROM read_parquet(?) GROUP BY k ORDER BY k", [str(path)]).fetchall()
    finally:
        con.close()
    return ExecutionSummary(sum(n for _k, n in rows), {k: n for k, n in rows})


def stage_executions(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                     progress: Progress | None = None) -> ExecutionSummary:
    """Run every SQL attempt of the batch through the guard (persisted once per batch),
    streaming: one execution per distinct SQL text, results written as they come."""
    out_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.EXECUTIONS)
    policy = env.policy(loaded.config.guard or None)
    if artifact_file(out_path) is not None:
        if batch.policy_version != policy.version:
            raise EvaluationError(
                f"batch {batch.batch_id} was executed under guard policy {batch.policy_version or 'unrecorded'}, "
                f"not the current {policy.version}; evaluate again (without --batch) to execute its "
                "attempts under the current policy in a new batch")
        return execution_summary(out_path)
    if batch.policy_version not in (None, policy.version):
        raise EvaluationError(f"batch {batch.batch_id} belongs to guard policy {batch.policy_version}, "
                              f"not the current {policy.version}; evaluate again without --batch")

    attempts_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    total = batch.counts.get("sql") if batch.counts else None
    log_path = env.store.artifact(batch.partition_key, batch.batch_id, "guard_log.jsonl")
    log_path.unlink(missing_ok=True)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress("executions", done, total if total is not None else done)

    with GuardedExecutor(env.serving, as_of=env.as_of, policy=policy, log_path=log_path) as guard, \
            RecordWriter(out_path, Execution) as out:
        # one thread per warm worker keeps the pool busy; results come in the attempts' order
        out.write_all(execute_stream(stored_attempts(attempts_path, sql_only=True), guard,
                                     workers=guard.pool.size, dialect=loaded.config.dialect,
                                     on_done=tick, schema=schema_from_manifest(env.manifest)))
        if not out.count:  # "no SQL attempts" is a legitimate batch: an empty JSON Lines twin
            out.abort()
            save_records(out_path.with_suffix(".jsonl"), [])
    env.store.publish(batch)
    return execution_summary(out_path)


def executions_are_current(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> bool:
    """The batch's executions are stored, under the configuration's current guard policy."""
    path = env.store.artifact(batch.partition_key, batch.batch_id, bf.EXECUTIONS)
    return artifact_file(path) is not None and batch.policy_version == env.policy(loaded.config.guard or None).version


def load_executions(env: Environment, batch: BatchInfo) -> list[Execution]:
    p = env.store.artifact(batch.partition_key, batch.batch_id, bf.EXECUTIONS)
    return load_artifact(p, Execution) or []


def iter_executions(env: Environment, batch: BatchInfo):
    """The batch's executions in stored (attempt) order, streamed; none when there are none."""
    found = artifact_file(env.store.artifact(batch.partition_key, batch.batch_id,
                                             bf.EXECUTIONS))
    return iter(()) if found is None else iter_records(found, Execution)
