"""Read question files into import rows: sqleval CSV/JSONL, defog sql-eval CSV, Spider, BIRD.

:func:`read_questions` parses a file (format from ``fmt`` or detected), translates every SQL
to DuckDB (:func:`sqleval_pipeline.dialect.to_duckdb`) and returns an :class:`ImportBatch`:
the rows that can become golden cases and a :class:`Rejection` (line + reason) for every row
that cannot — nothing is dropped silently. Checking against the guard and freezing on the
snapshot happen later (:mod:`sqleval_pipeline.golden.importing`). A problem with the file as a
whole (unknown or missing column, not JSON, unknown format or dialect) raises
:class:`ImportFormatError`.

sqleval's own format (``.csv`` or ``.jsonl``)
---------------------------------------------
One question per row (CSV, with a header) or per line (JSONL, one object per line):

==================  ========  =====================================================================
column / key        required  meaning
==================  ========  =====================================================================
``question``        yes       the question as a user would ask it
``sql``             yes       the reference SQL (empty/null: none yet, or a should-refuse row)
``id``              no        case id (lower-case letters, digits, ``_ . -``); empty: next free id
``answerable``      no        true/false (also yes/no, 1/0, y/n, t/f); empty: true. ``false`` makes
                              a should_refuse case, whose ``sql`` must be empty
``band``            no        answerable, needs_definition or should_refuse (default: from
                              ``answerable``)
``difficulty``      no        one of the project's difficulties (default: the import's default)
``split``           no        dev or heldout (default: the import's default)
``cluster``         no        group of related questions (default: the import's default)
``order_matters``   no        true/false: the row order of the answer is part of it
``tags``            no        free labels, kept in the case's notes. CSV: separated by ``,`` or
                              ``;``. JSONL: a list of strings
``traps``           no        trap names (the case's ``traps``); same syntax as ``tags``
``alternatives``    no        further accepted reference SQL. JSONL: a list of strings. CSV: one
                              cell holding the queries separated by a line that contains only
                              ``;;`` (a cell without such a line is one alternative)
``notes``           no        free text kept in the case's notes
==================  ========  =====================================================================

Any other column is an error naming it (a misspelt column must not be ignored). Blank
lines are skipped. With ``dialect`` every SQL is translated from that dialect; without it
the SQL is taken as DuckDB.

CSV example (an alternative after ``;;``)::

    id,question,sql,answerable,tags,alternatives
    clm-001,How many claims are open?,SELECT count(*) FROM claims WHERE status = 'open',true,status,
    clm-002,What is the CEO's salary?,,false,"pii;refuse",
    clm-003,Total paid?,SELECT sum(paid) FROM claims,,,"SELECT sum(paid) AS total FROM claims
    ;;
    SELECT coalesce(sum(paid), 0) FROM claims"

Third-party formats
-------------------
* ``defog`` — defog-ai/sql-eval's ``data/questions_gen_<dialect>.csv`` and
  ``instruct_*.csv``: columns ``question, query`` plus some of ``db_name, db_type,
  query_category, instructions, full_instructions, k_shot_prompt``. ``query`` may hold several
  gold queries separated by ``;`` (each is an accepted answer), and a ``{a, b}`` group in a
  query means any non-empty subset of the listed columns is accepted (``GROUP BY {}`` repeats
  the chosen columns). The first reading becomes the reference SQL, the others alternatives
  (at most :data:`MAX_DEFOG_READINGS`; when capped the notes say so). ``query_category``
  becomes the cluster and a tag; ``instructions`` and ``db_name`` go to the notes. Dialect:
  ``dialect``, else the row's ``db_type``, else postgres.
* ``spider`` — Spider's ``dev.json``/``train_spider.json``: a JSON array of objects with
  ``db_id, question, query`` (and token/parse fields, ignored). Dialect: sqlite.
* ``bird`` — BIRD's ``dev.json``/``mini_dev_*.json``: a JSON array of objects with ``db_id,
  question, evidence, SQL`` and usually ``question_id, difficulty``. ``evidence`` (the
  external-knowledge hint) and ``db_id`` go to the notes; BIRD's difficulty
  (simple/moderate/challenging) becomes a tag ``bird:<difficulty>`` and is used as the case's
  difficulty only if the project's taxonomy has it. Dialect: sqlite.

For these formats, fields sqleval does not use are ignored (listed in the batch's warnings).
Line numbers are the line where a CSV record starts, the line of a JSONL object, and the
1-based position of an object in a JSON array.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqleval_pipeline.dialect import Schema, TranspileError, resolve_dialect
from sqleval_pipeline.golden.import_rows import (  # re-exported: part of this module's API
    ImportBatch,
    ImportFormatError,
    ImportRow,
    Rejection,
    RowError,
    add_row,
    read_csv_dicts,
    source_of,
    text_value,
    transpile_row,
)
from sqleval_pipeline.golden.importers_foreign import read_bird, read_defog, read_spider
from sqleval_pipeline.textfiles import BadJsonLine, json_lines
from sqleval_pipeline.golden.defog_sql import (  # re-exported: part of this module's API
    MAX_DEFOG_READINGS,
    expand_defog_braces,
    split_defog_query,
)

FORMATS: tuple[str, ...] = ("csv", "jsonl", "defog", "spider", "bird")

#: the default dialect of each format (None: DuckDB)
DEFAULT_DIALECTS: dict[str, str | None] = {
    "csv": None, "jsonl": None, "defog": "postgres", "spider": "sqlite", "bird": "sqlite",
}

OWN_REQUIRED: tuple[str, ...] = ("question", "sql")
OWN_OPTIONAL: tuple[str, ...] = ("id", "answerable", "band", "difficulty", "split", "cluster",
                                 "order_matters", "tags", "traps", "alternatives", "notes")
OWN_COLUMNS: tuple[str, ...] = (*OWN_REQUIRED, *OWN_OPTIONAL)

ALTERNATIVE_SEPARATOR = ";;"
_ALT_SPLIT = re.compile(r"^[ \t]*;;[ \t]*$", re.MULTILINE)
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}
_BANDS = ("answerable", "needs_definition", "should_refuse")


# --------------------------------------------------------------------------- entry point


def read_questions(path: Path, fmt: str | None = None, dialect: str | None = None,
                   schema: Schema | None = None) -> ImportBatch:
    """Parse a question file into an :class:`ImportBatch` (see the module doc for formats).

    ``schema`` (served table -> ``[(column, type)]``, :func:`~sqleval_pipeline.dialect.schema_from_manifest`)
    makes the translation schema-aware: SQLite's double-quoted strings, bare columns and type
    affinity are read as SQLite reads them (docs/dialects.md); without it those rules cannot be
    decided."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if fmt is not None:
        fmt = fmt.strip().lower()
        if fmt not in FORMATS:
            raise ImportFormatError(f"unknown import format {fmt!r}; use one of {', '.join(FORMATS)}")
    try:
        explicit = resolve_dialect(dialect) if dialect is not None else None
    except TranspileError as exc:
        raise ImportFormatError(str(exc)) from None
    data: Any = None
    if fmt is None:
        fmt, data = detect_format(path, text)
    elif fmt in ("spider", "bird"):
        data = _load_json(path, text)
    reader = {"csv": _read_own_csv, "jsonl": _read_own_jsonl, "defog": read_defog,
              "spider": read_spider, "bird": read_bird}[fmt]
    chosen = explicit if dialect is not None else DEFAULT_DIALECTS[fmt]
    batch = ImportBatch(rows=[], rejected=[], format=fmt, path=path, dialect=chosen, schema=schema)
    reader(path, text if data is None else data, batch, chosen, dialect is not None)
    batch.rejected.sort(key=lambda r: r.line)
    return batch


def detect_format(path: Path, text: str) -> tuple[str, Any]:
    """The format of a file from its extension and content; JSON arrays are returned parsed.

    ``.csv`` is sqleval's CSV unless the header is defog's (``question`` and ``query``, no
    ``sql``); ``.jsonl``/``.ndjson`` is sqleval's JSONL; a ``.json`` array is Spider (``query``
    + ``db_id``) or BIRD (``SQL`` + ``db_id``/``evidence``).
    """
    suffix = path.suffix.lower()
    stripped = text.lstrip()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl", None
    if suffix == ".json" or (suffix not in (".csv", ".tsv") and stripped.startswith("[")):
        data = _load_json(path, text)
        first = data[0] if data else None
        if not isinstance(first, dict):
            raise ImportFormatError(f"{path}: a JSON question file is an array of objects "
                                    "(Spider or BIRD); use .jsonl for sqleval's own format")
        keys = set(first)
        if "SQL" in keys and ({"db_id", "evidence"} & keys):
            return "bird", data
        if "query" in keys and "db_id" in keys:
            return "spider", data
        raise ImportFormatError(f"{path}: cannot tell the JSON format from its keys "
                                f"{sorted(keys)}: Spider has query + db_id, BIRD has SQL + db_id "
                                "+ evidence; pass --format")
    if suffix not in (".csv", ".tsv") and stripped.startswith("{"):
        return "jsonl", None
    header = next(csv.reader(io.StringIO(text)), [])
    cols = {h.strip().lower() for h in header}
    if {"question", "query"} <= cols and "sql" not in cols:
        return "defog", None
    return "csv", None


def _load_json(path: Path, text: str) -> list:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column "
                                f"{exc.colno})") from None
    if not isinstance(data, list):
        raise ImportFormatError(f"{path}: expected a JSON array of question objects, got "
                                f"{type(data).__name__}")
    return data


# --------------------------------------------------------------------------- value parsing


def parse_bool(value: Any, what: str) -> bool | None:
    """true/false, yes/no, 1/0, y/n, t/f (any case); None or empty → None.

    >>> parse_bool("Yes", "answerable"), parse_bool("0", "answerable"), parse_bool("", "x")
    (True, False, None)
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text == "":
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise RowError(f"{what} must be true or false (also yes/no, 1/0), not {value!r}")


def split_labels(value: Any, what: str, *, from_csv: bool) -> list[str]:
    """Labels from a CSV cell (``,`` or ``;`` separated) or a JSON list.

    >>> split_labels("a, b;c", "tags", from_csv=True)
    ['a', 'b', 'c']
    """
    if value is None:
        return []
    if from_csv:
        return [t.strip() for t in re.split(r"[,;]", str(value)) if t.strip()]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t.strip() for t in value if t.strip()]
    raise RowError(f"{what} must be a list of strings in JSONL, not {value!r}")


def split_alternatives(cell: str | None) -> list[str]:
    """The SQL texts of a CSV ``alternatives`` cell, separated by lines holding only ``;;``.

    >>> split_alternatives("SELECT 1\\n;;\\nSELECT 2\\n")
    ['SELECT 1', 'SELECT 2']
    >>> split_alternatives("")
    []
    """
    if not cell or not cell.strip():
        return []
    return [part.strip() for part in _ALT_SPLIT.split(cell) if part.strip()]


# --------------------------------------------------------------------------- sqleval's own


def _check_columns(path: Path, columns: Iterable[str], where: str) -> None:
    cols = list(columns)
    unknown = [c for c in cols if c not in OWN_COLUMNS]
    if unknown:
        hints = []
        for c in unknown:
            close = difflib.get_close_matches(c.lower(), OWN_COLUMNS, n=1)
            hints.append(f"{c!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ImportFormatError(f"{path}{where}: unknown column(s) {', '.join(hints)}; the columns "
                                f"are {', '.join(OWN_COLUMNS)} — fix the spelling or remove them")
    missing = [c for c in OWN_REQUIRED if c not in cols]
    if missing:
        raise ImportFormatError(f"{path}{where}: missing required column(s) "
                                f"{', '.join(repr(m) for m in missing)} (required: "
                                f"{', '.join(OWN_REQUIRED)}; an empty value is allowed for sql)")


def _own_row(path: Path, line: int, rec: dict[str, Any], dialect: str | None,
             from_csv: bool, schema: Schema | None = None) -> ImportRow:
    question = text_value(rec.get("question"), "question")
    if not question:
        raise RowError("question is empty")
    row = ImportRow(line=line, question=question, source=source_of(path, line))
    row.id = text_value(rec.get("id"), "id")
    row.sql = text_value(rec.get("sql"), "sql")
    answerable = parse_bool(rec.get("answerable"), "answerable")
    band = text_value(rec.get("band"), "band")
    if band is not None and band not in _BANDS:
        raise RowError(f"band must be one of {', '.join(_BANDS)}, not {band!r}")
    if band == "should_refuse" and answerable is True:
        raise RowError("band should_refuse contradicts answerable=true")
    if answerable is False and band not in (None, "should_refuse"):
        raise RowError(f"answerable=false means band should_refuse, not {band!r}")
    row.answerable = answerable is not False and band != "should_refuse"
    row.band = band or (None if row.answerable else "should_refuse")
    row.difficulty = text_value(rec.get("difficulty"), "difficulty")
    row.split = text_value(rec.get("split"), "split")
    row.cluster = text_value(rec.get("cluster"), "cluster")
    row.order_matters = parse_bool(rec.get("order_matters"), "order_matters")
    row.tags = split_labels(rec.get("tags") or None, "tags", from_csv=from_csv)
    row.traps = split_labels(rec.get("traps") or None, "traps", from_csv=from_csv)
    row.notes = text_value(rec.get("notes"), "notes")
    alts = rec.get("alternatives")
    if from_csv:
        row.alternatives = split_alternatives(alts)
    elif alts is None:
        row.alternatives = []
    elif isinstance(alts, list) and all(isinstance(a, str) for a in alts):
        row.alternatives = [a.strip() for a in alts if a.strip()]
    else:
        raise RowError(f"alternatives must be a list of SQL strings in JSONL, not {alts!r}")
    if not row.answerable and (row.sql or row.alternatives):
        raise RowError("answerable=false (should_refuse) but SQL is given: leave sql and "
                        "alternatives empty — for such a question, answering is the failure")
    if row.alternatives and not row.sql:
        raise RowError("alternatives are given without sql: the reference SQL comes first")
    transpile_row(row, dialect, schema)
    return row


def _read_own_csv(path: Path, text: str, batch: ImportBatch, dialect: str | None,
                  _explicit: bool) -> None:
    header, rows = read_csv_dicts(path, text, lower=True)
    _check_columns(path, header, "")
    for line, rec in rows:
        if isinstance(rec, str):
            batch.rejected.append(Rejection(line, rec))
            continue
        add_row(batch, line, rec.get("id"), lambda rec=rec, line=line: _own_row(
            path, line, rec, dialect, from_csv=True, schema=batch.schema))


def _read_own_jsonl(path: Path, text: str, batch: ImportBatch, dialect: str | None,
                    _explicit: bool) -> None:
    records: list[tuple[int, dict]] = []
    unknown: dict[str, int] = {}

    def bad(b: BadJsonLine) -> None:
        batch.rejected.append(Rejection(b.line, "each line must be a JSON object" if b.error is None
                                        else f"not valid JSON ({b.reason}); each line is one JSON object"))

    for line, _raw, rec in json_lines(path, text, bad):
        for k in rec:
            if k not in OWN_COLUMNS:
                unknown.setdefault(k, line)
        records.append((line, rec))
    if unknown:
        first = min(unknown.values())
        _check_columns(path, [*unknown, *OWN_REQUIRED], f":{first}")
    for line, rec in records:
        missing = [k for k in OWN_REQUIRED if k not in rec]
        if missing:
            batch.rejected.append(Rejection(
                line, f"key(s) {', '.join(repr(m) for m in missing)} missing (required: "
                      f"{', '.join(OWN_REQUIRED)}; use null for no sql)",
                rec.get("id") if isinstance(rec.get("id"), str) else None))
            continue
        add_row(batch, line, rec.get("id"), lambda rec=rec, line=line: _own_row(
            path, line, rec, dialect, from_csv=False, schema=batch.schema))


__all__ = [
    "ALTERNATIVE_SEPARATOR", "FORMATS", "ImportBatch", "ImportFormatError", "ImportRow",
    "MAX_DEFOG_READINGS", "Rejection", "detect_format", "expand_defog_braces", "read_questions",
    "split_alternatives", "split_defog_query",
]
