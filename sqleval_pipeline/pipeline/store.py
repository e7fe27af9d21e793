"""Where attempts, executions, grades and scorecards are persisted.

Layout under the project's build directory (``<build>/store``, ``.sqleval/store`` by default)::

    runs/<config name>@<version>/<batch id>/
        batch.json            what the batch is (config, snapshot, golden hash, status, counts)
        parts/                crash journal: journal-*.jsonl, one line per finished attempt
        .fill.lock            held by the process filling the batch
        attempts.parquet      consolidated once every attempt is in (immutable)
        executions.parquet    guarded executions of those attempts (under batch.policy_version)
        grades.parquet        grades (an older grader's kept as grades.<version>.parquet)
        diagnoses.parquet     judge diagnoses of failed attempts
        scorecard.json        the scorecard of this batch
        rebased/<baseline key>/<batch id>/   a baseline re-graded for this batch's gate

A stage reads artifacts that earlier stages wrote into the same batch folder (grades read the
attempts and the executions; diagnoses read all three) and, for the gate only, the baseline's
batch, read-only. Files are written to a temporary name and renamed, so a crash never leaves
half a file; a batch that did not finish resumes where it stopped (its ``parts/`` survive).
Batch ids sort by creation time.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.textfiles import file_sha256, write_atomically
from sqleval_pipeline.errors import SqlevalError


log = logging.getLogger("sqleval_pipeline.pipeline.store")

#: a batch in which more than this share of attempts are ERROR (no answer was obtained: a
#: provider outage, a harness fault) is *inconclusive*: it passes no gate, and re-running the
#: configuration version retries its ERROR attempts in a new batch
INCONCLUSIVE_ERROR_SHARE = 0.10


#: the manifest of a batch's files (name -> size, SHA-256), rewritten at the end of each stage
FILES_MANIFEST = bf.FILES
#: files of a batch folder that are not part of its recorded content: its description, the
#: manifest itself, the HTML page rendered from the records after the gate (nothing reads it
#: back) and the record of what each derived file was derived from (derived.py: advisory — a
#: lost or edited one only means the file is computed again)
UNRECORDED = frozenset({bf.BATCH, FILES_MANIFEST, bf.REPORT, bf.DERIVED})


class BatchFileError(SqlevalError, ValueError):
    """A batch's ``batch.json`` cannot be read; the message names the file and what to do."""


def read_batch_info(f: Path) -> BatchInfo:
    """The batch described by ``f`` (a ``batch.json``); :class:`BatchFileError` naming the file
    when it is not a readable batch description."""
    try:
        return BatchInfo.model_validate_json(f.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise BatchFileError(f"{f}: not a readable batch description ({first}); the batch is skipped — "
                             "delete its folder to remove it, or restore the file") from exc


class BatchInfo(BaseModel):
    batch_id: str
    partition_key: str
    config_name: str
    config_version: str
    snapshot_id: str
    golden_hash: str
    runs: int
    case_ids: list[str]
    status: str = "running"  # running | complete | damaged (a recorded file missing or changed)
    created_at: str
    finished_at: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    provider_calls: int = 0
    notes: dict[str, Any] = Field(default_factory=dict)
    #: the resolved guard policy's version the executions are made under (None: recorded
    #: before policies identified batches; such a batch is never reused for executions)
    policy_version: str | None = None
    #: the batch whose attempts this one reuses (same configuration version, cases, runs and
    #: snapshot, another guard policy): its answers are copied, only the executions are new
    attempts_from: str | None = None
    #: the inconclusive batch whose ERROR attempts this one asks again (its other answers are
    #: copied: no provider call for them)
    retries_errors_of: str | None = None

    @property
    def error_share(self) -> float | None:
        """Share of the batch's attempts that are ERROR (from its counts); None before any."""
        total = sum(self.counts.values())
        return self.counts.get("error", 0) / total if total else None

    @property
    def inconclusive(self) -> bool:
        share = self.error_share
        return self.status == "complete" and share is not None and share > INCONCLUSIVE_ERROR_SHARE


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created when missing), across threads and processes:
    ``flock`` on a file of its own, released when the holder exits or dies. Used where two
    runs could otherwise pick or fill the same batch, register the same partition or create
    the same Dagster instance (local and NFSv4 file systems)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def new_batch_id(now: dt.datetime | None = None) -> str:
    """``b<UTC time to the millisecond>Z-<random>``: sorts by creation, unique across processes.

    >>> new_batch_id(dt.datetime(2026, 12, 1, 2, 0, 5, 123456, tzinfo=dt.UTC))[:22]
    'b20261201T020005.123Z-'
    """
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("b%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z-" + secrets.token_hex(2)


def batch_order(info: BatchInfo) -> tuple:
    """Sort key: creation time (ids of older batches carry only the second), then id. A time
    written without a zone (earlier versions) is read as UTC, so old and new batches sort together.

    >>> old = BatchInfo(batch_id="b1", partition_key="p", config_name="c", config_version="v",
    ...                 snapshot_id="s", golden_hash="g", runs=3, case_ids=[], created_at="2026-12-01T10:00:00")
    >>> new = old.model_copy(update={"batch_id": "b2", "created_at": "2026-12-01T09:00:00+00:00"})
    >>> [b.batch_id for b in sorted([old, new], key=batch_order)]
    ['b2', 'b1']
    """
    try:
        when = dt.datetime.fromisoformat(info.created_at)
    except ValueError:
        when = dt.datetime.min
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when, info.batch_id)


class Store:
    """The local store, and (``remote``) the shared copy finished batches are published to
    and fetched from (:mod:`sqleval_pipeline.pipeline.storage`)."""

    def __init__(self, root: Path, remote=None):
        self.root = root
        self.remote = remote
        #: batch folders skipped because their batch.json is unreadable: {path: reason}
        self.unreadable: dict[Path, str] = {}

    # ---- a finished batch is a manifest of its files -------------------------------------

    def _batch_files(self, info: BatchInfo) -> dict[str, Path]:
        folder = self.batch_dir(info.partition_key, info.batch_id)
        if not folder.exists():
            return {}
        return {p.name: p for p in sorted(folder.iterdir())
                if p.is_file() and not p.name.startswith(".") and p.name not in UNRECORDED}

    def record_files(self, info: BatchInfo) -> dict[str, dict]:
        """Record the size and SHA-256 of every file of the batch (``files.json``); called at the
        end of every stage (:meth:`publish`), so what a stage wrote is what is recorded."""
        entries = {name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
                   for name, p in self._batch_files(info).items()}
        path = self.artifact(info.partition_key, info.batch_id, FILES_MANIFEST)
        text = json.dumps({"files": entries}, indent=2, sort_keys=True) + "\n"
        try:
            unchanged = path.read_text() == text
        except OSError:
            unchanged = False
        if not unchanged:  # a stage that changed nothing (a re-run) leaves the manifest alone
            write_atomically(path, text)
        return entries

    def damaged(self, info: BatchInfo) -> list[str]:
        """What is wrong with the batch's recorded files: ``"<name>: missing"`` or
        ``"<name>: changed since it was written"`` (size or digest); an unreadable manifest is
        itself damage. Empty for an intact batch (or one recorded before manifests existed)."""
        f = self.artifact(info.partition_key, info.batch_id, FILES_MANIFEST)
        if not f.exists():
            return []
        try:
            recorded = json.loads(f.read_text())["files"]
            assert isinstance(recorded, dict)
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            return [f"{FILES_MANIFEST}: unreadable"]
        problems = []
        for name, entry in sorted(recorded.items()):
            p = self.artifact(info.partition_key, info.batch_id, name)
            if not p.exists():
                problems.append(f"{name}: missing")
            elif not isinstance(entry, dict) or p.stat().st_size != entry.get("size") \
                    or file_sha256(p) != entry.get("sha256"):
                problems.append(f"{name}: changed since it was written")
        return problems

    def mark_damaged(self, info: BatchInfo, problems: list[str]) -> BatchInfo:
        """Take a damaged batch out of use (status ``damaged``, the problems in its notes): it is
        never reused or refilled; its files stay as they are for inspection."""
        folder = self.batch_dir(info.partition_key, info.batch_id)
        log.warning("batch %s is damaged (%s): not reused; its work is redone in a new batch",
                    folder, "; ".join(problems))
        marked = info.model_copy(update={"status": "damaged", "notes": {**info.notes, "damaged": problems}})
        self.write_batch(marked)
        return marked

    def publish(self, info: BatchInfo) -> int:
        """Record the batch's files (:meth:`record_files`), then upload its finished files to
        the remote store (none configured: nothing)."""
        self.record_files(info)
        if self.remote is None:
            return 0
        return self.remote.push(self.root, f"runs/{info.partition_key}/{info.batch_id}")

    def _fetch_remote(self, partition_key: str, batch_id: str | None = None) -> None:
        if self.remote is None:
            return
        ids = [batch_id] if batch_id else self.remote.batch_ids(partition_key)
        for b in ids:
            if not (self.batch_dir(partition_key, b) / bf.BATCH).exists():
                self.remote.pull(self.root, f"runs/{partition_key}/{b}")

    def config_dir(self, partition_key: str) -> Path:
        return self.root / "runs" / partition_key

    def batch_dir(self, partition_key: str, batch_id: str) -> Path:
        return self.config_dir(partition_key) / batch_id

    def partitions(self) -> list[str]:
        """Every configuration version with a folder in the store."""
        runs = self.root / "runs"
        local = {d.name for d in runs.iterdir() if d.is_dir()} if runs.exists() else set()
        return sorted(local | set(self.remote.partitions() if self.remote else ()))

    def batches(self, partition_key: str) -> list[BatchInfo]:
        self._fetch_remote(partition_key)
        d = self.config_dir(partition_key)
        out = []
        if d.exists():
            for b in sorted(d.iterdir()):
                f = b / bf.BATCH
                if f.exists():
                    try:
                        out.append(read_batch_info(f))
                    except BatchFileError as exc:  # one bad file is one warning, not a blocked store
                        if f not in self.unreadable:
                            log.warning("%s", exc)
                        self.unreadable[f] = str(exc)
        return sorted(out, key=batch_order)  # oldest first

    def get(self, partition_key: str, batch_id: str) -> BatchInfo | None:
        f = self.batch_dir(partition_key, batch_id) / bf.BATCH
        if not f.exists():
            self._fetch_remote(partition_key, batch_id)
        return read_batch_info(f) if f.exists() else None

    def latest(self, partition_key: str, *, complete_only: bool = False) -> BatchInfo | None:
        bs = [b for b in self.batches(partition_key) if b.status == "complete" or not complete_only]
        return bs[-1] if bs else None

    def write_batch(self, info: BatchInfo) -> None:
        write_atomically(self.batch_dir(info.partition_key, info.batch_id) / bf.BATCH,
                          info.model_dump_json(indent=2))

    def artifact(self, partition_key: str, batch_id: str, name: str) -> Path:
        return self.batch_dir(partition_key, batch_id) / name

    def write_json(self, partition_key: str, batch_id: str, name: str, data: Any) -> Path:
        p = self.artifact(partition_key, batch_id, name)
        write_atomically(p, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        return p
