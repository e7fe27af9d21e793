"""Produce attempts for (configuration version, case, run) with bounded concurrency.

* Each finished attempt is appended to the batch's journal (``parts/journal-*.jsonl``, one
  JSON line per attempt, written the moment it finishes and fsync'd in groups), so an
  interrupted batch resumes without repeating finished attempts: a killed process loses at
  most the attempts in flight (and, on power loss, the last unsynced group). A torn last
  line is ignored on resume.
* Submission is bounded: at most a few times ``concurrency`` attempts are in flight, so
  memory does not grow with the golden set. A generator that answers in this process
  without waiting on I/O (``in_process = True``, e.g. the embedded baseline) is called
  inline: threads would only contend for the interpreter.
* Provider failures are retried with exponential backoff (honouring ``retry-after``); an
  attempt whose provider cannot be reached ends as ``kind="error"`` (graded ERROR, outside the
  denominator), never as a wrong answer.
* Every attempt records its wall time (``usage.wall_s``: from the first call to the answer or
  to giving up, retries and their waits included) and its retries; tokens are what the
  generator's provider reported (None when it reports none).
* When every attempt is in, the journal is consolidated into ``attempts.parquet`` (streamed,
  in case and run order) and the batch is marked complete; re-running a complete batch makes
  no provider calls.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.golden.model import golden_hash  # noqa: F401 (used here; its home is the golden set)
from sqleval_pipeline.generation.base import Generator, ProviderError
from sqleval_pipeline.generation.context import ContextBuilder
from sqleval_pipeline.generation.retry import call_with_retries
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.pipeline.records import Attempt, RecordWriter, Usage, count_records, load_records
from sqleval_pipeline.pipeline.store import BatchInfo, file_lock, new_batch_id, Store
from sqleval_pipeline.textfiles import atomic_path


log = logging.getLogger("sqleval_pipeline.generation.runner")




@dataclass
class RunResult:
    """What the attempts stage did. The attempts themselves stay on disk (``path``):
    :attr:`attempts` reads them back when asked."""

    batch: BatchInfo
    provider_calls: int
    resumed: int  # attempts found already journaled
    seconds: float
    path: Path
    n_attempts: int = 0
    _cache: list[Attempt] | None = field(default=None, repr=False)

    @property
    def attempts(self) -> list[Attempt]:
        if self._cache is None:
            self._cache = load_records(self.path, Attempt)
        return self._cache


class _Counter:
    def __init__(self):
        self.n = 0
        self._lock = threading.Lock()

    def inc(self) -> None:
        with self._lock:
            self.n += 1


def _call(generator: Generator, ctx, max_retries: int, calls: _Counter, sleep):
    # only a generator that calls a model provider or a service counts its calls (the
    # embedded baseline and recorded answers say ``calls_provider = False``)
    counts = getattr(generator, "calls_provider", True)

    def once():
        if counts:
            calls.inc()
        return generator.generate(ctx)

    def waiting(exc: ProviderError, n: int, delay: float) -> None:
        log.warning("%s on %s run %d: %s; retry %d of %d in %.1f s", generator.name, ctx.case_id,
                    ctx.run_index, exc.code, n, max_retries, delay)

    return call_with_retries(once, max_retries=max_retries, sleep=sleep, on_retry=waiting)


def _timed(usage: Usage | None, seconds: float | None) -> Usage | None:
    """``usage`` with the runner's wall time (``None``: not measured, the generator's own
    ``wall_s`` is kept — a recorded answer's latency)."""
    if seconds is None:
        return usage
    return (usage or Usage()).model_copy(update={"wall_s": round(max(seconds, 0.0), 6)})


def make_attempt(case: Case, run_index: int, *, config_version: str, batch_id: str,
                 generator: Generator, builder: ContextBuilder, max_retries: int,
                 calls: _Counter, sleep=time.sleep,
                 clock: Callable[[], float] = time.perf_counter) -> Attempt:
    """One attempt: the generator called (and retried) for ``case`` run ``run_index``.

    The wall time from the first call to the answer — or to giving up — retries and their
    waits included, is recorded as ``usage.wall_s`` (read from ``clock``, in seconds), for
    answers and errors alike; a generator that replays answers made elsewhere (``live =
    False``: recorded answers) is not timed, its own ``wall_s`` is kept."""
    ctx = builder.build(case.id, case.question, run_index)
    base = dict(config_version=config_version, case_id=case.id, run_index=run_index,
                batch_id=batch_id, generator=generator.name, prompt=ctx.prompt,
                created_at=dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"))
    live = getattr(generator, "live", True)
    started = clock()

    def elapsed() -> float | None:
        return clock() - started if live else None

    try:
        out, retries = _call(generator, ctx, max_retries, calls, sleep)
    except ProviderError as exc:
        seconds = elapsed()
        gave_up = getattr(exc, "gave_up", None)
        message = f"{exc.message} (not retried: {gave_up})" if gave_up else exc.message
        if gave_up:
            log.warning("%s on %s run %d: %s; %s", generator.name, case.id, run_index, exc.code, gave_up)
        return Attempt(**base, kind="error", error_code=exc.code, error_message=message,
                       raw_response=exc.raw_response, retries=getattr(exc, "retries", 0),
                       usage=_timed(None, seconds))
    except Exception as exc:  # a generator bug is a harness fault, never the system's answer
        return Attempt(**base, kind="error", error_code="harness_error",
                       error_message=f"{type(exc).__name__}: {exc}", usage=_timed(None, elapsed()))
    common = dict(model=out.model, usage=_timed(out.usage, elapsed()), raw_response=out.raw_response,
                  retries=retries, temperature=out.temperature,
                  temperature_settable=out.temperature_settable)
    if out.kind == "sql" and out.sql and out.sql.strip():
        return Attempt(**base, **common, kind="sql", sql=out.sql)
    reason = out.refusal_reason or ("empty SQL" if out.kind == "sql" else "declined")
    return Attempt(**base, **common, kind="refusal", refusal_reason=reason)


# ---- the journal ---------------------------------------------------------------------------

JOURNAL_GLOB = "journal-*.jsonl"


class Journal:
    """Append-only journal of finished attempts, one file per filling process.

    Every attempt is written (one ``write`` of one line) as soon as it is added, so a killed
    process loses only what was in flight; ``fsync`` runs every ``sync_every`` attempts or
    ``sync_seconds``, and on close."""

    def __init__(self, parts: Path, *, sync_every: int = 512, sync_seconds: float = 1.0,
                 kind: str = ""):
        parts.mkdir(parents=True, exist_ok=True)
        # ``kind="seeded"``: answers copied from another batch (no provider call was made for them)
        self.path = parts / f"journal-{kind + '-' if kind else ''}{os.getpid()}-{secrets.token_hex(3)}.jsonl"
        self._fh = self.path.open("ab")
        self._size = 0  # a new file: the next line starts here
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self.sync_every, self.sync_seconds = sync_every, sync_seconds

    def add(self, attempt: Attempt) -> tuple[Path, int]:
        """Write one attempt; where its line is (file, byte offset)."""
        body = attempt.model_dump_json().encode()
        # each record carries the SHA-256 of its JSON: an edited record is refused on resume
        line = hashlib.sha256(body).hexdigest().encode() + b" " + body + b"\n"
        where = (self.path, self._size)
        self._fh.write(line)
        self._fh.flush()
        self._size += len(line)
        self._unsynced += 1
        if self._unsynced >= self.sync_every or time.monotonic() - self._last_sync >= self.sync_seconds:
            self.sync()
        return where

    def sync(self) -> None:
        if self._unsynced:
            os.fsync(self._fh.fileno())
            self._unsynced = 0
        self._last_sync = time.monotonic()

    def close(self) -> None:
        if not self._fh.closed:
            self.sync()
            self._fh.close()


def journaled(parts: Path) -> Iterator[tuple[tuple[str, int], Path, int]]:
    """``((case_id, run_index), file, byte offset)`` of every attempt journaled under
    ``parts``, oldest files first (an attempt's record is the line at that offset, or the
    whole file for the one-file-per-attempt journal of earlier versions); a torn or
    unreadable record (a crash mid-write) is skipped, so that attempt is made again."""
    if not parts.exists():
        return
    for p in sorted(parts.glob("*.json")):  # one file per attempt (earlier versions)
        key = _key_of(p.read_bytes())
        if key is None:
            p.unlink()  # torn: redone
        else:
            yield key, p, 0
    for p in sorted(parts.glob(JOURNAL_GLOB), key=lambda p: (p.stat().st_mtime_ns, p.name)):
        with p.open("rb") as fh:
            offset = 0
            for line in fh:
                key = _key_of(line)
                if key is not None:
                    yield key, p, offset
                offset += len(line)


def _calls_journaled(where: dict[tuple[str, int], tuple[Path, int]]) -> int:
    """Provider calls behind the journaled attempts made for this batch (one per attempt plus
    its retries); answers copied from another batch (``journal-seeded-*``) cost none."""
    handles: dict[Path, object] = {}
    try:
        return sum(1 + _read_record(handles, path, offset).retries
                   for path, offset in where.values() if not path.name.startswith("journal-seeded-"))
    finally:
        for fh in handles.values():
            fh.close()


def _decode(raw: bytes) -> Attempt | None:
    """The attempt of one journal record, or None when it is torn, unreadable or edited.

    A record is ``<sha256 of the JSON> <JSON>``; the checksum must match the JSON's bytes.
    Records of earlier versions (the JSON alone, no checksum) are still read."""
    raw = raw.rstrip(b"\r\n")
    if raw[:1] != b"{":
        digest, _, raw = raw.partition(b" ")
        if hashlib.sha256(raw).hexdigest().encode() != digest:
            return None
    try:
        return Attempt.model_validate_json(raw)
    except ValueError:
        return None


def _read_record(handles: dict[Path, object], path: Path, offset: int) -> Attempt:
    fh = handles.get(path)
    if fh is None:
        fh = handles[path] = path.open("rb")
    fh.seek(offset)
    a = _decode(fh.readline() if path.suffix == ".jsonl" else fh.read())
    if a is None:
        raise ValueError(f"{path} at byte {offset}: the journal record changed after it was checked")
    return a


def _key_of(text: bytes) -> tuple[str, int] | None:
    a = _decode(text)
    return None if a is None else (a.case_id, a.run_index)


# ---- the stage -----------------------------------------------------------------------------


def run_attempts(
    *, store: Store, info: BatchInfo, cases: Sequence[Case], generator: Generator | None,
    builder: ContextBuilder | None, concurrency: int, max_retries: int,
    on_progress: Callable[[int, int], None] | None = None, sleep=time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Fill the batch with attempts (resuming), consolidate, and mark it complete.

    Holds the batch's lock while filling, so a second process asked for the same batch waits
    and then finds it complete. A complete batch is returned as stored; ``generator`` and
    ``builder`` may then be None."""
    with file_lock(store.batch_dir(info.partition_key, info.batch_id) / ".fill.lock"):
        info = store.get(info.partition_key, info.batch_id) or info
        return _run_locked(store=store, info=info, cases=cases, generator=generator,
                           builder=builder, concurrency=concurrency, max_retries=max_retries,
                           on_progress=on_progress, sleep=sleep, clock=clock)


def _run_locked(*, store, info, cases, generator, builder, concurrency, max_retries,
                on_progress, sleep, clock=time.perf_counter) -> RunResult:
    started = time.perf_counter()
    bdir = store.batch_dir(info.partition_key, info.batch_id)
    final = bdir / bf.ATTEMPTS
    if info.status == "complete" and final.exists():
        n = count_records(final)
        return RunResult(info, 0, n, time.perf_counter() - started, final, n)
    if info.attempts_from and not final.exists():
        return _reuse_attempts(store, info, started)
    if generator is None or builder is None:
        raise ValueError(f"batch {info.batch_id} is not complete: a generator is needed to fill it")
    parts = bdir / "parts"
    if info.retries_errors_of:
        retried = _seed_from_retried(store, info, parts)
        if retried:
            info = info.model_copy(update={"notes": {**info.notes, "retried_errors": {
                "of": info.retries_errors_of, "count": retried}}})
    store.write_batch(info)
    wanted = {(cid, r) for cid in info.case_ids for r in range(info.runs)}
    # where each finished attempt's record is: read from the journal once, then kept up to
    # date as attempts are added, and used to consolidate without reading the journal again
    where: dict[tuple[str, int], tuple[Path, int]] = {}
    for key, path, offset in journaled(parts):
        if key in wanted:
            where.setdefault(key, (path, offset))  # a duplicate (two fills of one batch): the first
    by_id = {c.id: c for c in cases}
    todo = ((by_id[cid], r) for cid in info.case_ids for r in range(info.runs)
            if (cid, r) not in where)
    resumed = len(where)
    total = len(wanted)
    calls = _Counter()
    # calls made by earlier, interrupted fills of this batch (their journals), so a batch
    # finished by a second process counts every call it cost, not only the last process's
    earlier = _calls_journaled(where) if getattr(generator, "calls_provider", True) else 0
    if on_progress:
        on_progress(resumed, total)
    kw = dict(config_version=info.config_version, batch_id=info.batch_id, generator=generator,
              builder=builder, max_retries=max_retries, calls=calls, sleep=sleep, clock=clock)
    journal = Journal(parts)
    finished = resumed
    try:
        for attempt in _produce(todo, kw, concurrency, inline=getattr(generator, "in_process", False)):
            where.setdefault((attempt.case_id, attempt.run_index), journal.add(attempt))
            finished += 1
            if on_progress:
                on_progress(finished, total)
    finally:
        journal.close()
    counts = _consolidate(where, final, info)
    info = info.model_copy(update={
        "status": "complete", "counts": counts,
        "provider_calls": info.provider_calls + earlier + calls.n,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    })
    store.write_batch(info)
    shutil.rmtree(parts, ignore_errors=True)
    return RunResult(info, calls.n, resumed, time.perf_counter() - started, final, total)


def _produce(todo, kw: dict, concurrency: int, *, inline: bool) -> Iterator[Attempt]:
    """Attempts as they finish, with at most ``4 x concurrency`` submitted and not collected."""
    if inline or concurrency <= 1:
        for case, r in todo:
            yield make_attempt(case, r, **kw)
        return
    window = 4 * concurrency
    pending: set[Future] = set()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        try:
            for case, r in todo:
                pending.add(pool.submit(make_attempt, case, r, **kw))
                if len(pending) >= window:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        yield fut.result()
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield fut.result()
        finally:
            for fut in pending:
                fut.cancel()


def _consolidate(where: dict[tuple[str, int], tuple[Path, int]], final: Path,
                 info: BatchInfo) -> dict[str, int]:
    """Stream the journal into ``attempts.parquet`` in case and run order, one read per
    attempt at the place ``where`` names (nothing but that index is held); the counts by
    kind."""
    missing = [(cid, r) for cid in info.case_ids for r in range(info.runs) if (cid, r) not in where]
    if missing:
        raise RuntimeError(f"batch {info.batch_id}: {len(missing)} attempt(s) missing from the "
                           f"journal, e.g. {missing[0]}")
    counts: dict[str, int] = {}
    handles: dict[Path, object] = {}
    try:
        with RecordWriter(final, Attempt) as out:
            for cid in info.case_ids:
                for r in range(info.runs):
                    a = _read_record(handles, *where[(cid, r)])
                    counts[a.kind] = counts.get(a.kind, 0) + 1
                    out.write(a)
    finally:
        for fh in handles.values():
            fh.close()
    return counts


def _reuse_attempts(store: Store, info: BatchInfo, started: float) -> RunResult:
    """Copy the attempts of ``info.attempts_from`` (same configuration version, cases, runs and
    snapshot) into this batch and mark it complete: no provider call is made."""
    source = store.get(info.partition_key, info.attempts_from)
    src = store.artifact(info.partition_key, info.attempts_from, bf.ATTEMPTS)
    if source is None or not src.exists():
        raise ValueError(f"batch {info.batch_id} reuses the attempts of {info.attempts_from}, "
                         "which are gone; evaluate with --new-batch")
    final = store.artifact(info.partition_key, info.batch_id, bf.ATTEMPTS)
    with atomic_path(final) as tmp:
        shutil.copyfile(src, tmp)
    n = count_records(final)
    info = info.model_copy(update={
        "status": "complete", "counts": dict(source.counts), "provider_calls": 0,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    })
    store.write_batch(info)
    return RunResult(info, 0, n, time.perf_counter() - started, final, n)


def _retry_batch(source: BatchInfo) -> BatchInfo:
    """A new batch for an inconclusive one: same inputs, its ERROR attempts asked again."""
    return source.model_copy(update={
        "batch_id": new_batch_id(), "status": "running", "finished_at": None, "counts": {},
        "provider_calls": 0, "notes": {}, "attempts_from": None, "retries_errors_of": source.batch_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")})


def _seed_from_retried(store: Store, info: BatchInfo, parts: Path) -> int:
    """Copy the answers (everything but ERROR) of the batch ``info`` retries into this batch's
    journal, once; the ERROR attempts are then generated again. Returns how many are retried."""
    if any(parts.glob("journal-*.jsonl")):
        return 0  # seeded by an earlier, interrupted fill
    src = store.artifact(info.partition_key, info.retries_errors_of, bf.ATTEMPTS)
    if not src.exists():
        raise ValueError(f"batch {info.batch_id} retries the ERROR attempts of {info.retries_errors_of}, "
                         f"whose {src.name} is gone; evaluate with --new-batch")
    journal = Journal(parts, kind="seeded")
    retried = 0
    try:
        for a in load_records(src, Attempt):
            if a.kind == "error":
                retried += 1
            else:
                journal.add(a.model_copy(update={"batch_id": info.batch_id}))
    finally:
        journal.close()
    return retried


def open_batch(store: Store, *, partition_key: str, config_name: str, config_version: str,
               snapshot_id: str, cases: Sequence[Case], runs: int, mode: str = "latest",
               batch_id: str | None = None, policy_version: str | None = None) -> BatchInfo:
    """Pick the batch to fill: ``latest`` resumes/reuses the newest batch made for the same
    cases, snapshot, golden set *and guard policy*; ``new`` always starts a fresh one (nightly
    re-evaluation); an explicit ``batch_id`` resumes that batch.

    Executions depend on the guard policy (``policy_version``), attempts do not: when the
    newest matching batch was executed under another policy, a new batch is opened that
    reuses its attempts (``attempts_from``; no provider calls) and executes them again under
    the current policy. A stored batch is never re-executed in place.

    A batch whose recorded files are missing or changed (:meth:`Store.damaged`) is marked
    ``damaged`` and skipped; a new batch redoes its work (copying its attempts when those are
    intact, so only the later stages run again)."""
    gh = golden_hash(cases)
    ids = [c.id for c in cases]
    if batch_id:
        found = store.get(partition_key, batch_id)
        if found is None:
            raise ValueError(f"no batch {batch_id} for {partition_key}")
        damage = [] if found.status == "damaged" else store.damaged(found)
        if found.status == "damaged" or damage:
            raise ValueError(f"batch {batch_id} of {partition_key} is damaged "
                             f"({'; '.join(damage or found.notes.get('damaged', []))}); it is never "
                             "refilled: evaluate without --batch to redo its work in a new batch")
        if policy_version and found.policy_version and found.policy_version != policy_version:
            raise ValueError(f"batch {batch_id} was executed under guard policy {found.policy_version}, "
                             f"not the current {policy_version}; evaluate without --batch to execute "
                             "its attempts again under the current policy")
        return found
    source = None
    if mode == "latest":
        for b in reversed(store.batches(partition_key)):
            if b.snapshot_id == snapshot_id and b.golden_hash == gh and b.case_ids == ids \
                    and b.runs == runs and b.status != "damaged":
                damage = store.damaged(b)
                if damage:  # never reused, never refilled: redone in a new batch
                    store.mark_damaged(b, damage)
                    if source is None and not any(d.startswith(bf.ATTEMPTS) for d in damage) \
                            and store.artifact(partition_key, b.batch_id, bf.ATTEMPTS).exists():
                        source = b  # its answers are intact: copied, executed again
                    continue
                if b.policy_version == policy_version:
                    if b.inconclusive:  # an outage is not an answer: ask its ERROR attempts again
                        return _retry_batch(b)
                    return b
                if source is None and b.status == "complete" and \
                        store.artifact(partition_key, b.batch_id, bf.ATTEMPTS).exists():
                    source = b
    elif mode != "new":
        raise ValueError(f"batch mode must be 'latest' or 'new', not {mode!r}")
    return BatchInfo(
        batch_id=new_batch_id(), partition_key=partition_key, config_name=config_name,
        config_version=config_version, snapshot_id=snapshot_id, golden_hash=gh, runs=runs,
        case_ids=ids, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        policy_version=policy_version, attempts_from=source.batch_id if source else None,
    )
