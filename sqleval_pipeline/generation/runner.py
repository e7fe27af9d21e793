"""Produce attempts for (configuration version, case, run) with bounded concurrency.

* Each attempt is journaled to ``parts/<case>__r<run>.json`` the moment it finishes (atomic
  rename), so an interrupted batch resumes without repeating finished attempts.
* Provider failures are retried with exponential backoff (honouring ``retry-after``); an
  attempt whose provider cannot be reached ends as ``kind="error"`` (graded ERROR, outside the
  denominator), never as a wrong answer.
* When every attempt is in, the parts are consolidated into ``attempts.parquet`` and the
  batch is marked complete; re-running a complete batch makes no provider calls.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from sqleval_pipeline.generation.base import Generator, ProviderError
from sqleval_pipeline.generation.context import ContextBuilder
from sqleval_pipeline.generation.retry import call_with_retries
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.records import Attempt, load_records, save_records
from sqleval_pipeline.store import BatchInfo, Store, atomic_write_text


def golden_hash(cases: Sequence[Case]) -> str:
    h = hashlib.sha256()
    for c in sorted(cases, key=lambda c: c.id):
        h.update(c.to_json_line().encode())
    return h.hexdigest()[:12]


def part_name(case_id: str, run_index: int) -> str:
    return f"{case_id}__r{run_index}.json"


@dataclass
class RunResult:
    attempts: list[Attempt]
    batch: BatchInfo
    provider_calls: int
    resumed: int  # attempts found already journaled
    seconds: float


class _Counter:
    def __init__(self):
        self.n = 0
        self._lock = threading.Lock()

    def inc(self) -> None:
        with self._lock:
            self.n += 1


def _call(generator: Generator, ctx, max_retries: int, calls: _Counter, sleep):
    def once():
        calls.inc()
        return generator.generate(ctx)

    return call_with_retries(once, max_retries=max_retries, sleep=sleep)


def make_attempt(case: Case, run_index: int, *, config_version: str, batch_id: str,
                 generator: Generator, builder: ContextBuilder, max_retries: int,
                 calls: _Counter, sleep=time.sleep) -> Attempt:
    ctx = builder.build(case.id, case.question, run_index)
    base = dict(config_version=config_version, case_id=case.id, run_index=run_index,
                batch_id=batch_id, generator=generator.name, prompt=ctx.prompt,
                created_at=dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"))
    try:
        out, retries = _call(generator, ctx, max_retries, calls, sleep)
    except ProviderError as exc:
        return Attempt(**base, kind="error", error_code=exc.code, error_message=exc.message,
                       raw_response=exc.raw_response, retries=getattr(exc, "retries", 0))
    except Exception as exc:  # a generator bug is a harness fault, never the system's answer
        return Attempt(**base, kind="error", error_code="harness_error",
                       error_message=f"{type(exc).__name__}: {exc}")
    common = dict(model=out.model, usage=out.usage, raw_response=out.raw_response,
                  retries=retries, temperature=out.temperature,
                  temperature_settable=out.temperature_settable)
    if out.kind == "sql" and out.sql and out.sql.strip():
        return Attempt(**base, **common, kind="sql", sql=out.sql)
    reason = out.refusal_reason or ("empty SQL" if out.kind == "sql" else "declined")
    return Attempt(**base, **common, kind="refusal", refusal_reason=reason)


def run_attempts(
    *, store: Store, info: BatchInfo, cases: Sequence[Case], generator: Generator | None,
    builder: ContextBuilder | None, concurrency: int, max_retries: int,
    on_progress: Callable[[int, int], None] | None = None, sleep=time.sleep,
) -> RunResult:
    """Fill the batch with attempts (resuming), consolidate, and mark it complete.

    A complete batch is returned as stored; ``generator`` and ``builder`` may then be None."""
    started = time.perf_counter()
    bdir = store.batch_dir(info.partition_key, info.batch_id)
    final = bdir / "attempts.parquet"
    if info.status == "complete" and final.exists():
        attempts = load_records(final, Attempt)
        return RunResult(attempts, info, 0, len(attempts), time.perf_counter() - started)
    if info.attempts_from and not final.exists():
        return _reuse_attempts(store, info, started)
    parts = bdir / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    store.write_batch(info)
    todo = []
    done: dict[tuple[str, int], Attempt] = {}
    by_id = {c.id: c for c in cases}
    for cid in info.case_ids:
        for r in range(info.runs):
            p = parts / part_name(cid, r)
            if p.exists():
                try:
                    done[(cid, r)] = Attempt.model_validate_json(p.read_text())
                    continue
                except ValueError:
                    p.unlink()  # a torn journal entry is simply redone
            todo.append((by_id[cid], r))
    resumed = len(done)
    total = len(info.case_ids) * info.runs
    calls = _Counter()
    if on_progress:
        on_progress(resumed, total)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = {
            pool.submit(make_attempt, case, r, config_version=info.config_version,
                        batch_id=info.batch_id, generator=generator, builder=builder,
                        max_retries=max_retries, calls=calls, sleep=sleep): (case.id, r)
            for case, r in todo
        }
        for fut in as_completed(futures):
            cid, r = futures[fut]
            attempt = fut.result()
            atomic_write_text(parts / part_name(cid, r), attempt.model_dump_json())
            done[(cid, r)] = attempt
            if on_progress:
                on_progress(len(done), total)
    attempts = [done[(cid, r)] for cid in info.case_ids for r in range(info.runs)]
    save_records(final, attempts)  # a batch always has cases (select_cases refuses none)
    counts: dict[str, int] = {}
    for a in attempts:
        counts[a.kind] = counts.get(a.kind, 0) + 1
    info = info.model_copy(update={
        "status": "complete", "counts": counts,
        "provider_calls": info.provider_calls + calls.n,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    })
    store.write_batch(info)
    for p in parts.glob("*.json"):
        p.unlink()
    parts.rmdir()
    return RunResult(attempts, info, calls.n, resumed, time.perf_counter() - started)


def _reuse_attempts(store: Store, info: BatchInfo, started: float) -> RunResult:
    """Copy the attempts of ``info.attempts_from`` (same configuration version, cases, runs and
    snapshot) into this batch and mark it complete: no provider call is made."""
    source = store.get(info.partition_key, info.attempts_from)
    src = store.artifact(info.partition_key, info.attempts_from, "attempts.parquet")
    if source is None or not src.exists():
        raise ValueError(f"batch {info.batch_id} reuses the attempts of {info.attempts_from}, "
                         "which are gone; evaluate with --new-batch")
    final = store.artifact(info.partition_key, info.batch_id, "attempts.parquet")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(final)
    attempts = load_records(final, Attempt)
    info = info.model_copy(update={
        "status": "complete", "counts": dict(source.counts), "provider_calls": 0,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    })
    store.write_batch(info)
    return RunResult(attempts, info, 0, len(attempts), time.perf_counter() - started)


def open_batch(store: Store, *, partition_key: str, config_name: str, config_version: str,
               snapshot_id: str, cases: Sequence[Case], runs: int, mode: str = "latest",
               batch_id: str | None = None, policy_version: str | None = None) -> BatchInfo:
    """Pick the batch to fill: ``latest`` resumes/reuses the newest batch made for the same
    cases, snapshot, golden set *and guard policy*; ``new`` always starts a fresh one (nightly
    re-evaluation); an explicit ``batch_id`` resumes that batch.

    Executions depend on the guard policy (``policy_version``), attempts do not: when the
    newest matching batch was executed under another policy, a new batch is opened that
    reuses its attempts (``attempts_from``; no provider calls) and executes them again under
    the current policy. A stored batch is never re-executed in place."""
    from sqleval_pipeline.store import new_batch_id

    gh = golden_hash(cases)
    ids = [c.id for c in cases]
    if batch_id:
        found = store.get(partition_key, batch_id)
        if found is None:
            raise ValueError(f"no batch {batch_id} for {partition_key}")
        if policy_version and found.policy_version and found.policy_version != policy_version:
            raise ValueError(f"batch {batch_id} was executed under guard policy {found.policy_version}, "
                             f"not the current {policy_version}; evaluate without --batch to execute "
                             "its attempts again under the current policy")
        return found
    source = None
    if mode == "latest":
        for b in reversed(store.batches(partition_key)):
            if b.snapshot_id == snapshot_id and b.golden_hash == gh and b.case_ids == ids \
                    and b.runs == runs:
                if b.policy_version == policy_version:
                    return b
                if source is None and b.status == "complete" and \
                        store.artifact(partition_key, b.batch_id, "attempts.parquet").exists():
                    source = b
    elif mode != "new":
        raise ValueError(f"batch mode must be 'latest' or 'new', not {mode!r}")
    return BatchInfo(
        batch_id=new_batch_id(), partition_key=partition_key, config_name=config_name,
        config_version=config_version, snapshot_id=snapshot_id, golden_hash=gh, runs=runs,
        case_ids=ids, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        policy_version=policy_version, attempts_from=source.batch_id if source else None,
    )
