"""Readers of other harnesses' question files: defog sql-eval's CSV, Spider's and BIRD's JSON.

Part of :mod:`sqleval_pipeline.golden.importers` (which detects the format and dispatches
here); each reader turns its rows into :class:`~sqleval_pipeline.golden.importers.ImportRow`
objects, or rejections naming the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sqleval_pipeline.dialect import TranspileError, resolve_dialect
from sqleval_pipeline.golden.defog_sql import MAX_DEFOG_READINGS, expand_defog_braces, split_defog_query
from sqleval_pipeline.golden.import_rows import (
    ImportBatch, ImportFormatError, ImportRow, Rejection, RowError, add_row, join_notes, read_csv_dicts,
    source_of, text_value, transpile_row,
)


DEFOG_REQUIRED: tuple[str, ...] = ("question", "query")
DEFOG_USED: tuple[str, ...] = ("db_name", "db_type", "query_category", "instructions")
#: defog columns that are known but not imported (prompt material)
DEFOG_IGNORED: tuple[str, ...] = ("full_instructions", "k_shot_prompt", "glossary")

SPIDER_IGNORED: tuple[str, ...] = ("query_toks", "query_toks_no_value", "question_toks", "sql")
BIRD_IGNORED: tuple[str, ...] = ("question_toks", "SQL_toks", "evidence_toks")


# --------------------------------------------------------------------------- defog


def _defog_row(path: Path, line: int, rec: dict[str, str], dialect: str | None,
               explicit: bool, schema=None) -> ImportRow:
    question = text_value(rec.get("question"), "question")
    if not question:
        raise RowError("question is empty")
    query = text_value(rec.get("query"), "query")
    if not query:
        raise RowError("query is empty: a defog row needs its gold query")
    row = ImportRow(line=line, question=question, source=source_of(path, line))
    readings: list[str] = []
    total = 0
    for part in split_defog_query(query):
        expanded, n = expand_defog_braces(part)
        total += n
        readings.extend(r for r in expanded if r not in readings)
    capped = None
    if total > MAX_DEFOG_READINGS or len(readings) > MAX_DEFOG_READINGS:
        readings = readings[:MAX_DEFOG_READINGS]
        capped = (f"defog query has {total} accepted readings (';' alternatives and {{a, b}} "
                  f"column groups); kept the first {MAX_DEFOG_READINGS}")
    if not readings:
        raise RowError("query holds no SQL statement")
    row.sql, row.alternatives = readings[0], readings[1:]
    category = text_value(rec.get("query_category"), "query_category")
    if category:
        row.cluster = category
        row.tags = [category]
    db = text_value(rec.get("db_name"), "db_name")
    instructions = text_value(rec.get("instructions"), "instructions")
    row.notes = join_notes(f"instructions: {instructions}" if instructions else None,
                            f"db_name: {db}" if db else None, capped)
    row_dialect = dialect
    if not explicit:
        db_type = text_value(rec.get("db_type"), "db_type")
        if db_type:
            try:
                row_dialect = resolve_dialect(db_type)
            except TranspileError as exc:
                raise RowError(f"db_type: {exc}") from None
    transpile_row(row, row_dialect, schema)
    return row


def read_defog(path: Path, text: str, batch: ImportBatch, dialect: str | None,
                explicit: bool) -> None:
    header, rows = read_csv_dicts(path, text)
    missing = [c for c in DEFOG_REQUIRED if c not in header]
    if missing:
        raise ImportFormatError(f"{path}: not a defog question file: missing column(s) "
                                f"{', '.join(repr(m) for m in missing)} (defog files have "
                                "question, query, db_name, query_category, instructions)")
    extra = [h for h in header if h not in (*DEFOG_REQUIRED, *DEFOG_USED, *DEFOG_IGNORED)]
    if extra:
        batch.warnings.append(f"{path.name}: column(s) {', '.join(extra)} are not used by the "
                              "defog import and were ignored")
    for line, rec in rows:
        if isinstance(rec, str):
            batch.rejected.append(Rejection(line, rec))
            continue
        add_row(batch, line, None, lambda rec=rec, line=line: _defog_row(
            path, line, rec, dialect, explicit, batch.schema))


# --------------------------------------------------------------------------- spider / bird


def _json_records(path: Path, data: list, batch: ImportBatch, used: tuple[str, ...],
                  ignored: tuple[str, ...]) -> Iterator[tuple[int, dict]]:
    extra: set[str] = set()
    for index, rec in enumerate(data):
        line = index + 1
        if not isinstance(rec, dict):
            batch.rejected.append(Rejection(line, f"record {line} is not a JSON object"))
            continue
        extra |= set(rec) - set(used) - set(ignored)
        yield line, rec
    if extra:
        batch.warnings.append(f"{path.name}: field(s) {', '.join(sorted(extra))} are not used by "
                              f"the {batch.format} import and were ignored")


def _spider_row(path: Path, line: int, rec: dict, dialect: str | None, schema=None) -> ImportRow:
    question = text_value(rec.get("question"), "question")
    if not question:
        raise RowError("question is missing or empty")
    sql = text_value(rec.get("query"), "query")
    if not sql:
        raise RowError("query is missing or empty")
    db = text_value(rec.get("db_id"), "db_id")
    row = ImportRow(line=line, question=question, sql=sql, source=source_of(path, line),
                    notes=join_notes(f"db_id: {db}" if db else None),
                    facets={"database": db} if db else {}, derived_cluster=db)
    transpile_row(row, dialect, schema)
    return row


def read_spider(path: Path, data: list, batch: ImportBatch, dialect: str | None,
                 _explicit: bool) -> None:
    for line, rec in _json_records(path, data, batch, ("db_id", "question", "query"),
                                   SPIDER_IGNORED):
        add_row(batch, line, None, lambda rec=rec, line=line: _spider_row(path, line, rec, dialect,
                                                                       batch.schema))


def _bird_row(path: Path, line: int, rec: dict, dialect: str | None, schema=None) -> ImportRow:
    question = text_value(rec.get("question"), "question")
    if not question:
        raise RowError("question is missing or empty")
    sql = text_value(rec.get("SQL"), "SQL")
    if not sql:
        raise RowError("SQL is missing or empty")
    db = text_value(rec.get("db_id"), "db_id")
    evidence = text_value(rec.get("evidence"), "evidence")
    if evidence is not None and evidence.lower() == "false":  # BIRD's early "no evidence"
        evidence = None
    qid = rec.get("question_id")
    difficulty = text_value(rec.get("difficulty"), "difficulty")
    facets = {"database": db} if db else {}
    if difficulty:
        facets["bird_difficulty"] = difficulty
    row = ImportRow(line=line, question=question, sql=sql, source=source_of(path, line),
                    source_difficulty=difficulty, facets=facets, derived_cluster=db,
                    notes=join_notes(f"evidence: {evidence}" if evidence else None,
                                      f"db_id: {db}" if db else None,
                                      f"bird question_id: {qid}" if qid is not None else None))
    transpile_row(row, dialect, schema)
    return row


def read_bird(path: Path, data: list, batch: ImportBatch, dialect: str | None,
               _explicit: bool) -> None:
    used = ("db_id", "question", "evidence", "SQL", "difficulty", "question_id")
    for line, rec in _json_records(path, data, batch, used, BIRD_IGNORED):
        add_row(batch, line, None, lambda rec=rec, line=line: _bird_row(path, line, rec, dialect,
                                                                     batch.schema))
