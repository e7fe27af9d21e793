"""What the question-file readers share: the rows and batches they build, rejections, and the
per-row helpers (text values, dialect translation, CSV records).

The format readers live in :mod:`sqleval_pipeline.golden.importers` (sqleval's own CSV/JSONL and
the entry point) and :mod:`sqleval_pipeline.golden.importers_foreign` (defog, Spider, BIRD);
both build on this module, which imports neither.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqleval_pipeline.dialect import Schema, TranspileError, resolve_dialect, translate
from sqleval_pipeline.errors import SqlevalError


class ImportFormatError(SqlevalError, ValueError):
    """The file as a whole cannot be imported (format, columns, JSON); nothing is imported."""


@dataclass
class Rejection:
    """A row of the source file that does not become a case, and why."""

    line: int
    reason: str
    id: str | None = None

    def __str__(self) -> str:
        who = f" ({self.id})" if self.id else ""
        return f"line {self.line}{who}: {self.reason}"


@dataclass
class ImportRow:
    """One parsed question, its SQL already in DuckDB's dialect."""

    line: int
    question: str
    id: str | None = None
    sql: str | None = None
    #: the SQL as written in the file, when it was translated from ``original_dialect``
    original_sql: str | None = None
    original_dialect: str | None = None
    alternatives: list[str] = field(default_factory=list)
    original_alternatives: list[str] = field(default_factory=list)
    answerable: bool = True
    band: str | None = None
    difficulty: str | None = None
    #: a benchmark's own difficulty label (BIRD), used only if the taxonomy has it
    source_difficulty: str | None = None
    split: str | None = None
    order_matters: bool | None = None
    cluster: str | None = None
    tags: list[str] = field(default_factory=list)
    traps: list[str] = field(default_factory=list)
    notes: str | None = None
    source: str = ""
    #: named slices the source gives (a benchmark's database, its own difficulty)
    facets: dict[str, str] = field(default_factory=dict)
    #: the cluster a benchmark implies when the row names none (its database); marked derived
    derived_cluster: str | None = None
    #: every rewrite the dialect translation made, ``"rule: detail"`` (kept beside the original)
    rewrites: list[str] = field(default_factory=list)


@dataclass
class ImportBatch:
    rows: list[ImportRow]
    rejected: list[Rejection]
    format: str
    path: Path | None = None
    #: the dialect the SQL was translated from (None: taken as DuckDB, or per row for defog)
    dialect: str | None = None
    #: file-level remarks (ignored fields, capped expansions are in the rows' notes)
    warnings: list[str] = field(default_factory=list)
    #: the served schema the SQL was translated against (None: schema-blind)
    schema: Schema | None = None


class RowError(SqlevalError, ValueError):
    """One row cannot be imported; becomes a Rejection."""


def text_value(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        else:
            raise RowError(f"{what} must be text, not {type(value).__name__}")
    value = value.strip()
    return value or None


def transpile_row(row: ImportRow, dialect: str | None, schema: Schema | None = None) -> None:
    """Translate the row's SQL and alternatives to DuckDB in place (raises RowError); every
    rewrite the translation made is kept in ``row.rewrites``."""
    name = resolve_dialect(dialect)
    if name is None:
        return
    texts = [row.sql, *row.alternatives] if row.sql is not None else list(row.alternatives)
    out: list[str] = []
    for i, text in enumerate(texts):
        which = "sql" if (i == 0 and row.sql is not None) else \
            f"alternatives[{i - (1 if row.sql is not None else 0)}]"
        try:
            done = translate(text, name, schema)
        except TranspileError as exc:
            raise RowError(f"{which} ({name} to DuckDB): {exc}") from None
        out.append(done.sql)
        row.rewrites.extend(f"{which}: {r}" for r in done.rewrites)
    row.original_dialect = name
    if row.sql is not None:
        row.original_sql, row.sql = row.sql, out[0]
        out = out[1:]
    row.original_alternatives, row.alternatives = list(row.alternatives), out


def source_of(path: Path, line: int) -> str:
    return f"import:{path.name}:{line}"


def join_notes(*parts: str | None) -> str | None:
    kept = [p.strip() for p in parts if p and p.strip()]
    return "\n".join(kept) or None


def csv_records(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line where the record starts, cells) for every non-blank CSV record."""
    reader = csv.reader(io.StringIO(text, newline=""))
    end = 0
    while True:
        start = end + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ImportFormatError(f"line {start}: not valid CSV ({exc})") from None
        end = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        yield start, cells


def read_csv_dicts(path: Path, text: str, *, lower: bool = False
                    ) -> tuple[list[str], Iterator[tuple[int, dict[str, str] | str]]]:
    try:
        records = csv_records(text)
        first = next(records, None)
    except ImportFormatError as exc:
        raise ImportFormatError(f"{path}:{exc}") from None
    if first is None:
        raise ImportFormatError(f"{path}: the file is empty (a CSV needs a header row)")
    header = [h.strip().lower() if lower else h.strip() for h in first[1]]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise ImportFormatError(f"{path}: column(s) {dupes} appear twice in the header")

    def rows() -> Iterator[tuple[int, dict[str, str] | str]]:
        try:
            for line, cells in records:
                if len(cells) > len(header):
                    yield line, (f"{len(cells)} cells but the header has {len(header)} columns "
                                 "(an unquoted comma?)")
                    continue
                yield line, dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=True))
        except ImportFormatError as exc:
            raise ImportFormatError(f"{path}:{exc}") from None

    return header, rows()


def add_row(batch: ImportBatch, line: int, rid: Any, make) -> None:
    try:
        batch.rows.append(make())
    except RowError as exc:
        batch.rejected.append(Rejection(line, str(exc), rid if isinstance(rid, str) and rid else None))


__all__ = [
    "ImportBatch", "ImportFormatError", "ImportRow", "Rejection", "RowError", "add_row",
    "csv_records", "join_notes", "read_csv_dicts", "source_of", "text_value", "transpile_row",
]
