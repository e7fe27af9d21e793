"""Persistence of pipeline records: JSON Lines or Parquet, whole or streamed.

Parquet is written and read by DuckDB (no pyarrow needed); nested fields (a result set,
usage) are stored as JSON text. :func:`save_records` / :func:`load_records` move a whole list;
:class:`RecordWriter` and :func:`iter_records` stream, so a stage over tens of thousands of
attempts holds one chunk of records at a time, never the batch.

>>> import tempfile, os
>>> from pydantic import BaseModel
>>> class R(BaseModel):
...     k: int
...     tags: list[str] = []
>>> p = os.path.join(tempfile.mkdtemp(), "r.parquet")
>>> with RecordWriter(p, R) as w:
...     for k in (3, 1, 2):
...         w.write(R(k=k, tags=[str(k)]))
>>> [r.k for r in iter_records(p, R, chunk=2)], load_records(p, R)[0].tags
([3, 1, 2], ['3'])
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
import duckdb

from sqleval_pipeline.processes import process_alive
from sqleval_pipeline.textfiles import ENCODING_ERRORS
from sqleval_pipeline.errors import InputError, SqlevalError

M = TypeVar("M", bound=BaseModel)


#: the memory limit of the in-memory DuckDB a process converts and reads record files in; a
#: conversion that needs more (rows of several MB) gets a database of its own
SCRATCH_MEMORY_MB = 240
_scratch: tuple[int, Any] | None = None  # (pid, connection)
_scratch_lock = threading.Lock()


def scratch_cursor() -> Any:
    """A cursor of this process's in-memory DuckDB for record files, made on first use (in a
    forked child, again). Making a database costs ~14 ms (its catalog of functions), a cursor
    nothing, and a run reads and writes tens of record files. Each caller gets a cursor of
    its own (threads never share one) and closes it."""
    global _scratch
    with _scratch_lock:
        if _scratch is None or _scratch[0] != os.getpid():
            spill = tempfile.mkdtemp(prefix="sqleval-records-")
            atexit.register(shutil.rmtree, spill, ignore_errors=True)
            _scratch = (os.getpid(), duckdb.connect(config={
                "threads": 1, "memory_limit": f"{SCRATCH_MEMORY_MB}MB", "temp_directory": spill}))
        return _scratch[1].cursor()


def _is_nested(annotation: Any) -> bool:
    """True when a field's type is a model, list or dict (stored as JSON text in Parquet)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple, set):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_nested(a) for a in typing.get_args(annotation))
    return annotation in (list, dict)


def nested_fields(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(n for n, f in model.model_fields.items() if _is_nested(f.annotation))


def _duck_type(annotation: Any, nested: bool) -> str:
    if nested:
        return "VARCHAR"
    args = set(typing.get_args(annotation)) - {type(None)} or {annotation}
    if args <= {bool}:
        return "BOOLEAN"
    if args <= {int}:
        return "BIGINT"
    if args <= {float, int}:
        return "DOUBLE"
    return "VARCHAR"


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def flat_row(record: BaseModel, nested: frozenset[str]) -> dict[str, Any]:
    """The record as a flat JSON-able row: nested fields as JSON text (the Parquet form)."""
    row = record.model_dump(mode="json")
    for n in nested:
        row[n] = None if row[n] is None else json.dumps(row[n], sort_keys=True)
    return row


def _sweep_staging(path: Path) -> None:
    """Remove the staging folders a killed writer of ``path`` left behind (their process is
    gone); a live writer's folder (two processes on one batch) is left alone."""
    for d in path.parent.glob(f".{path.stem}.*"):
        pid = d.name[len(path.stem) + 2:].split(".", 1)[0]
        if d.is_dir() and pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


class RecordWriter:
    """Stream records of one model into ``path`` (``.parquet``, or JSON Lines otherwise).

    Rows go to a staging JSON Lines file beside the target as they come; :meth:`close` turns
    it into the target in one DuckDB ``COPY`` (in the order written, in row groups of 2,048
    rows) and renames it into place, so memory stays flat and a crash never leaves half a
    file. An empty Parquet target is refused (no rows, no point): use
    ``.jsonl`` (see ``evaluation.save_artifact``). Leaving the ``with`` block on an exception
    discards the staging file and keeps whatever the target held before.
    """

    def __init__(self, path: str | os.PathLike[str], model: type[BaseModel]):
        self.path = Path(path)
        self.model = model
        self.count = 0
        self._nested = nested_fields(model)
        self._longest = 0  # characters in the longest staged row (sizes DuckDB's reader)
        self._aborted = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _sweep_staging(self.path)
        self._tmpdir = Path(tempfile.mkdtemp(prefix=f".{self.path.stem}.{os.getpid()}.", dir=self.path.parent))
        self._staging = self._tmpdir / "rows.jsonl"
        self._fh = self._staging.open("w", encoding="utf-8", errors=ENCODING_ERRORS)

    def write(self, record: BaseModel) -> None:
        """Append one record."""
        if self.path.suffix == ".parquet":
            line = json.dumps(flat_row(record, self._nested))
            self._longest = max(self._longest, len(line))
            self._fh.write(line)
        else:
            self._fh.write(record.model_dump_json())
        self._fh.write("\n")
        self.count += 1

    def write_all(self, records: Iterable[BaseModel]) -> None:
        for r in records:
            self.write(r)

    def close(self) -> Path:
        self._fh.close()
        try:
            tmp = self._tmpdir / f"out{self.path.suffix}"
            if self.path.suffix == ".parquet":
                if not self.count:
                    raise InputError("cannot write an empty Parquet file: write .jsonl instead")
                self._copy_parquet(tmp)
            else:
                self._staging.replace(tmp)
            tmp.replace(self.path)
        finally:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        """Discard what was written; the target is left as it was (leaving the ``with``
        block afterwards does nothing more)."""
        self._aborted = True
        self._fh.close()
        shutil.rmtree(self._tmpdir, ignore_errors=True)

    def _copy_parquet(self, out: Path) -> None:
        fields = self.model.model_fields
        cols = {n: _duck_type(f.annotation, n in self._nested) for n, f in fields.items()}
        spec = ", ".join(f"{json.dumps(n)}: '{t}'" for n, t in cols.items())
        select = ", ".join(json.dumps(n) for n in fields)
        # the reader's buffer holds the longest row (twice); rows stream through in order
        object_size = max(16 << 20, 4 * self._longest + 1024)
        limit_mb = 192 + 3 * (object_size >> 20)
        if limit_mb <= SCRATCH_MEMORY_MB:
            con = scratch_cursor()
        else:
            con = duckdb.connect(config={"threads": 1, "memory_limit": f"{limit_mb}MB",
                                         "temp_directory": str(self._tmpdir)})
        try:
            con.execute(
                f"COPY (SELECT {select} FROM read_json(?, format='newline_delimited', "
                f"columns={{{spec}}}, maximum_object_size={object_size})) "
                f"TO '{_sql_str(str(out))}' (FORMAT parquet, ROW_GROUP_SIZE 2048)",
                [str(self._staging)],
            )
        finally:
            con.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type, *_exc: Any) -> None:
        if self._aborted:
            return
        if exc_type is None:
            self.close()
        else:
            self.abort()


def save_records(path: str | os.PathLike[str], records: Sequence[BaseModel]) -> Path:
    """Write records to ``.jsonl`` / ``.json`` (JSON Lines) or ``.parquet`` (via DuckDB).

    >>> import tempfile, os
    >>> from sqleval_pipeline.pipeline.records import Attempt
    >>> p = os.path.join(tempfile.mkdtemp(), "a.jsonl")
    >>> _ = save_records(p, [Attempt(config_version="c", case_id="q1", run_index=0, kind="refusal")])
    >>> load_records(p, Attempt)[0].kind
    'refusal'
    """
    path = Path(path)
    if path.suffix == ".parquet" and not records:
        raise InputError("cannot write an empty Parquet file (no schema): write .jsonl instead")
    model = type(records[0]) if records else BaseModel
    with RecordWriter(path, model) as w:
        w.write_all(records)
    return path


def _decode(model: type[M], names: list[str], row: tuple, nested: frozenset[str]) -> M:
    data = dict(zip(names, row, strict=True))
    for n in nested & data.keys():
        if isinstance(data[n], str):
            data[n] = json.loads(data[n])
    return model.model_validate(data)


class RecordsFileError(SqlevalError, ValueError):
    """A records file cannot be read; the message names the file and the line (JSON Lines) or
    the row (Parquet)."""


def iter_records(path: str | os.PathLike[str], model: type[M], *, chunk: int = 1024,
                 columns: Sequence[str] | None = None) -> Iterator[M]:
    """Records of a file written by :func:`save_records` or :class:`RecordWriter`, one chunk
    in memory at a time (``columns``: read only those fields of a Parquet file; the model
    must accept the others missing). A damaged file raises :class:`RecordsFileError` naming
    ``file:line`` (or the Parquet row), never a bare parser error."""
    path = Path(path)
    if path.suffix != ".parquet":
        with path.open(encoding="utf-8", errors="strict") as fh:
            try:
                first = fh.read(1)
                while first.isspace():
                    first = fh.read(1)
                if first == "[":
                    items = json.loads(first + fh.read())
                    for i, d in enumerate(items, start=1):
                        yield _validated(model, d, f"{path}: record {i}")
                    return
            except (ValueError, UnicodeDecodeError) as exc:
                raise RecordsFileError(f"{path}: not a readable records file ({_first_line(exc)})") from exc
            fh.seek(0)
            lineno = 0
            while True:
                try:
                    line = fh.readline()
                except UnicodeDecodeError as exc:
                    raise RecordsFileError(f"{path}:{lineno + 1}: not UTF-8 ({_first_line(exc)})") from exc
                if not line:
                    break
                lineno += 1
                if line.strip():
                    try:
                        yield model.model_validate_json(line)
                    except ValueError as exc:
                        raise RecordsFileError(f"{path}:{lineno}: not a {model.__name__} record "
                                               f"({_first_line(exc)})") from exc
        return

    nested = nested_fields(model)
    select = ", ".join(json.dumps(c) for c in columns) if columns else "*"
    con = scratch_cursor()
    n = 0
    try:
        try:
            cur = con.execute(f"SELECT {select} FROM read_parquet(?)", [str(path)])
            names = [d[0] for d in cur.description]
        except duckdb.Error as exc:
            raise RecordsFileError(f"{path}: not a readable Parquet file ({_first_line(exc)})") from exc
        while True:
            try:
                rows = cur.fetchmany(chunk)
            except duckdb.Error as exc:
                raise RecordsFileError(f"{path}: row {n + 1} and after cannot be read ({_first_line(exc)})") from exc
            if not rows:
                break
            for row in rows:
                n += 1
                try:
                    yield _decode(model, names, row, nested)
                except ValueError as exc:
                    raise RecordsFileError(f"{path}: row {n}: not a {model.__name__} record "
                                           f"({_first_line(exc)})") from exc
    finally:
        con.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _validated(model: type[M], data: Any, where: str) -> M:
    try:
        return model.model_validate(data)
    except ValueError as exc:
        raise RecordsFileError(f"{where}: not a {model.__name__} record ({_first_line(exc)})") from exc


def load_records(path: str | os.PathLike[str], model: type[M]) -> list[M]:
    """Read records written by :func:`save_records` (``.jsonl``, ``.json`` or ``.parquet``).

    A ``.json`` file may also hold a JSON array of records.
    """
    return list(iter_records(path, model, chunk=4096))


def count_records(path: str | os.PathLike[str]) -> int:
    """How many records a Parquet or JSON Lines file holds, without reading them."""
    path = Path(path)
    if path.suffix != ".parquet":
        with path.open(encoding="utf-8") as fh:
            return sum(1 for line in fh if line.strip())

    con = duckdb.connect()
    try:
        return con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()[0]
    finally:
        con.close()
