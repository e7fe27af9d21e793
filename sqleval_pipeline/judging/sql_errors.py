"""What an SQL error says about its cause: DuckDB's function catalog and the allowlist's excluded
families (a guard misread vs a function that does not exist), where DuckDB's parser stopped,
and whether SQLite itself would parse the text.
"""

from __future__ import annotations

import json
import re
import sqlite3
from functools import lru_cache

import duckdb
import yaml

from sqleval_pipeline.guard.policy import FUNCTIONS_PATH


def first_line(*texts: str | None) -> str:
    for t in texts:
        if t and t.strip():
            return t.strip().splitlines()[0][:300]
    return ""


@lru_cache(maxsize=1)
def duckdb_functions() -> dict[str, str | None]:
    """DuckDB's function names -> the name they are an alias of (None: not an alias)."""
    con = duckdb.connect(":memory:")
    try:
        rows = con.execute("SELECT DISTINCT lower(function_name), lower(alias_of) FROM duckdb_functions()").fetchall()
    finally:
        con.close()
    out: dict[str, str | None] = {}
    for name, alias in rows:
        out[name] = out.get(name) or alias
    return out


@lru_cache(maxsize=1)
def excluded_families() -> dict[str, tuple[str, str]]:
    """Function name -> (family, reason) of the guard's excluded functions (guard/functions.yaml)."""
    try:
        doc = yaml.safe_load(FUNCTIONS_PATH.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out = {}
    for family, spec in (doc.get("excluded") or {}).items():
        for n in (spec or {}).get("names") or ():
            out[str(n).lower()] = (str(family), str(spec.get("reason") or family))
    return out


def duckdb_error_position(sql: str) -> int | None:
    """Where DuckDB's parser stops on ``sql`` (a character offset), None when it parses."""
    if len(sql) > 200_000:
        return None
    con = duckdb.connect(":memory:")
    try:
        raw = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0]
    except duckdb.Error:
        return None
    finally:
        con.close()
    try:
        doc = json.loads(raw)
        return int(doc["position"]) if doc.get("error") and doc.get("position") is not None else None
    except (ValueError, TypeError, KeyError):
        return None


def sqlite_syntax_error(sql: str) -> str | None:
    """SQLite's own syntax error for ``sql`` (compiled with EXPLAIN in an empty in-memory
    database under an authorizer that denies everything but reads; nothing runs), or None
    when SQLite parses it (a missing table or a denied action is not a syntax error)."""
    if len(sql) > 200_000:
        return None
    con = sqlite3.connect(":memory:")
    allowed = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
               getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
    con.set_authorizer(lambda action, *_a: sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY)
    try:
        con.execute("EXPLAIN " + sql)
    except sqlite3.Warning:
        return None  # several statements: parsed, not a syntax error
    except sqlite3.Error as exc:
        msg = str(exc)
        return msg if re.search(r"syntax error|incomplete input|unrecognized token", msg) else None
    finally:
        con.close()
    return None
