"""Transpile one SQL statement from another dialect to DuckDB (the serving snapshot's dialect).

Golden questions imported from elsewhere (a Snowflake BI log, defog's Postgres questions,
Spider's and BIRD's SQLite queries) and systems under test that speak another dialect are
translated with sqlglot before anything else looks at the SQL. The translation is strict:
anything sqlglot knows it cannot express in DuckDB (``unsupported_level=RAISE``) is an error,
never a silently different query.

sqlglot translates syntax; :func:`translate` also keeps meaning where the source dialect
answers differently from DuckDB (SQLite's double-quoted strings, bare columns, type
affinity, integer division, case-insensitive LIKE, NULL ordering...). Given the served
schema it decides what a name refers to and what type it has; every change is reported as a
:class:`Rewrite`, and a query no DuckDB text answers the same way raises
:class:`TranspileError` with a ``reason`` code. The rules are in
:mod:`sqleval_pipeline.dialect.rules` and documented in ``docs/dialects.md``.

>>> schema = {"pets": [("name", "VARCHAR"), ("age", "INTEGER"), ("kind", "VARCHAR")]}
>>> t = translate('SELECT name, max(age) FROM pets WHERE kind = "cat"', "sqlite", schema)
>>> print(t.sql)
SELECT CASE WHEN COUNT(age) > 0 THEN ARG_MAX_NULL(name, age) ELSE LAST(name) END AS name, MAX(age) FROM pets WHERE kind = 'cat'
>>> [r.rule for r in t.rewrites]
['sqlite_double_quoted_string', 'bare_column_arg_max']
>>> to_duckdb("SELECT age / 2 FROM pets WHERE name LIKE 'r%'", "sqlite", schema)
"SELECT age // 2 FROM pets WHERE name ILIKE 'r%'"

>>> to_duckdb("SELECT IFF(amount > 100, 'big', 'small') AS size FROM claims", "snowflake")
"SELECT CASE WHEN amount > 100 THEN 'big' ELSE 'small' END AS size FROM claims"
>>> to_duckdb("SELECT `claim id` FROM `proj.ds.claims` LIMIT 5", "bigquery")
'SELECT "claim id" FROM "proj"."ds"."claims" LIMIT 5'
>>> to_duckdb("SELECT SUM(IIF(status = 'open', 1, 0)) FROM claims", "sqlite")
"SELECT SUM(CASE WHEN status = 'open' THEN 1 ELSE 0 END) FROM claims"
>>> to_duckdb("SELECT status FROM claims ORDER BY amount", "sqlite")   # SQLite: NULLs first
'SELECT status FROM claims ORDER BY amount NULLS FIRST'
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
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialects
from sqlglot.errors import ErrorLevel, SqlglotError, UnsupportedError

from sqleval_pipeline.dialect.rules import apply_rules
from sqleval_pipeline.dialect.scope import Refusal, Rewrite, Schema
from sqleval_pipeline.errors import SqlevalError

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


class TranspileError(SqlevalError, ValueError):
    """The SQL cannot be translated to DuckDB faithfully; the message says why.

    ``reason`` is a short code: ``unknown_dialect``, ``not_text``, ``parse_error``,
    ``statement_count``, ``too_deep``, ``unsupported`` (sqlglot cannot express it in
    DuckDB), or a fidelity rule's refusal (``affinity``, ``bare_column_star``, ``scope``;
    see ``docs/dialects.md``).

    >>> TranspileError("no", reason="affinity").reason
    'affinity'
    """

    def __init__(self, message: str, reason: str = "unsupported") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Translation:
    """One statement translated to DuckDB: the text, what it was, and every change of meaning
    a fidelity rule made (``rewrites``, empty when sqlglot's syntax translation sufficed)."""

    sql: str
    original: str
    dialect: str | None
    rewrites: tuple[Rewrite, ...] = ()


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
                             f"{', '.join(_SHOWN)}", reason="unknown_dialect")
    return name


def to_duckdb(sql: str, dialect: str | None, schema: Schema | None = None) -> str:
    """Translate one statement written in ``dialect`` to DuckDB SQL: ``translate(...).sql``.

    ``None`` or ``"duckdb"`` returns ``sql`` unchanged (no parse, no cost). Raises
    :class:`TranspileError` for an unknown dialect, a text that does not parse in that
    dialect, more (or fewer) than one statement, a construct sqlglot cannot express in
    DuckDB, or one a fidelity rule refuses. A trailing semicolon is fine.
    """
    return translate(sql, dialect, schema).sql


def translate(sql: str, dialect: str | None, schema: Schema | None = None) -> Translation:
    """Translate one statement written in ``dialect`` to DuckDB, keeping its meaning.

    ``schema`` maps each served table (lower-case) to its ``(column, DuckDB type)`` pairs
    (:func:`schema_from_manifest`); without it, rules that need names or types do what they
    can and say what they assumed (``sqlite_double_quoted_assumed_identifier``,
    ``division_types_unknown``).

    >>> translate("SELECT 1", None)
    Translation(sql='SELECT 1', original='SELECT 1', dialect=None, rewrites=())
    >>> t = translate("SELECT count(*) / 2 FROM t", "sqlite")
    >>> t.sql, [str(r) for r in t.rewrites]
    ('SELECT COUNT(*) // 2 FROM t', ['integer_division: COUNT(*) / 2: both operands are integers, so the quotient is truncated toward zero as in the source dialect (DuckDB //)'])
    """
    name = resolve_dialect(dialect)
    if name is None:
        return Translation(sql, sql, None, ())
    if not isinstance(sql, str):
        raise TranspileError(f"the SQL must be text, not {type(sql).__name__}", reason="not_text")
    try:
        parsed = sqlglot.parse(sql, read=name)
    except RecursionError:
        raise TranspileError(f"the SQL is nested too deeply to translate ({name})",
                             reason="too_deep") from None
    except SqlglotError as exc:
        raise TranspileError(f"does not parse as {name} SQL: {_one_line(exc)}",
                             reason="parse_error") from None
    statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
    if not statements:
        raise TranspileError(f"no SQL statement to translate ({name})", reason="statement_count")
    if len(statements) > 1:
        raise TranspileError(f"expected one SQL statement, found {len(statements)} ({name})",
                             reason="statement_count")
    tree = statements[0]
    try:
        rewrites = apply_rules(tree, name, sql, schema)
        out = tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
    except Refusal as exc:
        raise TranspileError(f"cannot be translated from {name} to DuckDB without changing its "
                             f"meaning ({exc.reason}): {exc.message}", reason=exc.reason) from None
    except UnsupportedError as exc:
        raise TranspileError(f"cannot be translated from {name} to DuckDB without changing its "
                             f"meaning: {_one_line(exc)}", reason="unsupported") from None
    except RecursionError:
        raise TranspileError(f"the SQL is nested too deeply to translate ({name})",
                             reason="too_deep") from None
    except SqlglotError as exc:
        raise TranspileError(f"cannot be translated from {name} to DuckDB: {_one_line(exc)}",
                             reason="unsupported") from None
    return Translation(out, sql, name, tuple(rewrites))


def schema_from_manifest(manifest) -> dict[str, list[tuple[str, str]]]:
    """The served schema of a :class:`~sqleval_pipeline.snapshot.SnapshotManifest`: each table
    (lower-case) with its ``(column, DuckDB type)`` pairs, for :func:`translate`.

    >>> from types import SimpleNamespace as NS
    >>> m = NS(tables={"Pets": NS(columns=[NS(name="age", type="INTEGER", family="integer")])})
    >>> schema_from_manifest(m)
    {'pets': [('age', 'INTEGER')]}
    """
    return {str(name).lower(): [(c.name, c.type) for c in info.columns]
            for name, info in manifest.tables.items()}


def _one_line(exc: Exception, limit: int = 300) -> str:
    # sqlglot messages carry ANSI underline codes and the offending line; keep them readable
    text = " ".join(str(exc).replace("\x1b[4m", "").replace("\x1b[0m", "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["DIALECT_ALIASES", "KNOWN_DIALECTS", "Rewrite", "Schema", "TranspileError",
           "Translation", "resolve_dialect", "schema_from_manifest", "to_duckdb", "translate"]
