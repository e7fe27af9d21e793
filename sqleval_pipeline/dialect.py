"""Transpile one SQL statement from another dialect to DuckDB (the serving snapshot's dialect).

Golden questions imported from elsewhere (a Snowflake BI log, defog's Postgres questions,
Spider's and BIRD's SQLite queries) and systems under test that speak another dialect are
translated with sqlglot before anything else looks at the SQL. The translation is strict:
anything sqlglot knows it cannot express in DuckDB (``unsupported_level=RAISE``) is an error,
never a silently different query.

>>> to_duckdb("SELECT IFF(amount > 100, 'big', 'small') AS size FROM claims", "snowflake")
"SELECT CASE WHEN amount > 100 THEN 'big' ELSE 'small' END AS size FROM claims"
>>> to_duckdb("SELECT `claim id` FROM `proj.ds.claims` LIMIT 5", "bigquery")
'SELECT "claim id" FROM "proj"."ds"."claims" LIMIT 5'
>>> to_duckdb("SELECT SUM(IIF(status = 'open', 1, 0)) FROM claims", "sqlite")
"SELECT SUM(CASE WHEN status = 'open' THEN 1 ELSE 0 END) FROM claims"
>>> to_duckdb("SELECT TOP 3 id FROM claims ORDER BY amount DESC", "tsql")
'SELECT id FROM claims ORDER BY amount DESC LIMIT 3'
>>> to_duckdb("SELECT  anything  goes ", None)   # DuckDB (or no dialect): the text unchanged
'SELECT  anything  goes '
>>> to_duckdb("SELECT 1; SELECT 2", "postgres")
Traceback (most recent call last):
...
sqleval_pipeline.dialect.TranspileError: expected one SQL statement, found 2 (postgres)
>>> to_duckdb("SELECT 1", "snowflak")
Traceback (most recent call last):
...
sqleval_pipeline.dialect.TranspileError: unknown SQL dialect 'snowflak' (did you mean 'snowflake'?); known dialects include bigquery, databricks, duckdb, mysql, oracle, postgres, redshift, snowflake, spark, sqlite, trino, tsql
"""

from __future__ import annotations

import difflib

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialects
from sqlglot.errors import ErrorLevel, SqlglotError, UnsupportedError

#: every dialect name sqlglot can read (lower-case), e.g. ``snowflake``, ``bigquery``, ``tsql``
KNOWN_DIALECTS: tuple[str, ...] = tuple(sorted(d.value for d in Dialects if d.value))

#: common spellings that are not sqlglot names
DIALECT_ALIASES: dict[str, str] = {
    "postgresql": "postgres", "pg": "postgres", "psql": "postgres",
    "mssql": "tsql", "sqlserver": "tsql", "sql_server": "tsql", "sql-server": "tsql",
    "sqlite3": "sqlite", "sparksql": "spark", "spark_sql": "spark", "bq": "bigquery",
    "mariadb": "mysql",
}

#: the names shown when a dialect is unknown
_SHOWN = ("bigquery", "databricks", "duckdb", "mysql", "oracle", "postgres", "redshift",
          "snowflake", "spark", "sqlite", "trino", "tsql")


class TranspileError(ValueError):
    """The SQL cannot be translated to DuckDB faithfully; the message says why."""


def resolve_dialect(dialect: str | None) -> str | None:
    """The sqlglot name of ``dialect``; None for no dialect or DuckDB itself.

    >>> resolve_dialect("PostgreSQL"), resolve_dialect("duckdb"), resolve_dialect(None)
    ('postgres', None, None)
    """
    if dialect is None:
        return None
    name = dialect.strip().lower()
    if name in ("", "duckdb"):
        return None
    name = DIALECT_ALIASES.get(name, name)
    if name not in KNOWN_DIALECTS:
        close = difflib.get_close_matches(name, [*KNOWN_DIALECTS, *DIALECT_ALIASES], n=1)
        hint = f" (did you mean {DIALECT_ALIASES.get(close[0], close[0])!r}?)" if close else ""
        raise TranspileError(f"unknown SQL dialect {dialect!r}{hint}; known dialects include "
                             f"{', '.join(_SHOWN)}")
    return name


def to_duckdb(sql: str, dialect: str | None) -> str:
    """Translate one statement written in ``dialect`` to DuckDB SQL.

    ``None`` or ``"duckdb"`` returns ``sql`` unchanged (no parse, no cost). Raises
    :class:`TranspileError` for an unknown dialect, a text that does not parse in that
    dialect, more (or fewer) than one statement, or a construct sqlglot cannot express in
    DuckDB. A trailing semicolon is fine.
    """
    name = resolve_dialect(dialect)
    if name is None:
        return sql
    if not isinstance(sql, str):
        raise TranspileError(f"the SQL must be text, not {type(sql).__name__}")
    try:
        parsed = sqlglot.parse(sql, read=name)
    except RecursionError:
        raise TranspileError(f"the SQL is nested too deeply to translate ({name})") from None
    except SqlglotError as exc:
        raise TranspileError(f"does not parse as {name} SQL: {_one_line(exc)}") from None
    statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
    if not statements:
        raise TranspileError(f"no SQL statement to translate ({name})")
    if len(statements) > 1:
        raise TranspileError(f"expected one SQL statement, found {len(statements)} ({name})")
    try:
        return statements[0].sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as exc:
        raise TranspileError(f"cannot be translated from {name} to DuckDB without changing its "
                             f"meaning: {_one_line(exc)}") from None
    except RecursionError:
        raise TranspileError(f"the SQL is nested too deeply to translate ({name})") from None
    except SqlglotError as exc:
        raise TranspileError(f"cannot be translated from {name} to DuckDB: {_one_line(exc)}") from None


def _one_line(exc: Exception, limit: int = 300) -> str:
    # sqlglot messages carry ANSI underline codes and the offending line; keep them readable
    text = " ".join(str(exc).replace("\x1b[4m", "").replace("\x1b[0m", "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["DIALECT_ALIASES", "KNOWN_DIALECTS", "TranspileError", "resolve_dialect", "to_duckdb"]
