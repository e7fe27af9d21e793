"""The tables a hostile case's SQL names (to check that a "must refuse" name is not served).

Part of the hostile suite (:mod:`sqleval_pipeline.guard.hostile_templates`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlglot
from sqlglot import exp


# --------------------------------------------------------------------------- table references

_IDENT_RE = r'(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)'
_REF_RE = re.compile(r"(?i)\b(?:from|join|into|table|update|describe|summarize|pivot|using)\s+"
                     rf"({_IDENT_RE}(?:\s*\.\s*{_IDENT_RE}){{0,2}})(?!\s*[\w.\"]*\s*\()")
_CTE_RE = re.compile(rf"(?i)(?:\bwith(?:\s+recursive)?|,)\s*({_IDENT_RE})\s*(?:\([^)]*\)\s*)?as\s*\(")
_STRING_SQL_FUNCS = {"query", "json_serialize_sql"}


def _unquote(part: str) -> str:
    part = part.strip()
    if part.startswith('"') and part.endswith('"') and len(part) >= 2:
        return part[1:-1].replace('""', '"')
    return part


def referenced_tables(sql: str) -> list[tuple[str | None, str | None, str]]:
    """``(catalog, schema, name)`` of every table reference in ``sql`` (CTE names excluded).

    Parsed with sqlglot (every statement; SQL in string arguments of ``query()`` /
    ``json_serialize_sql()`` and names given to ``query_table()`` included); text sqlglot
    cannot parse, and commands it keeps as raw text, are scanned for ``FROM/JOIN/INTO/TABLE/
    UPDATE … name`` instead.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except (Exception, RecursionError):  # noqa: BLE001 - unparseable attacks are common here
        return _scan(sql)
    out: list[tuple[str | None, str | None, str]] = []
    for stmt in statements:
        ctes = {c.alias_or_name.lower() for c in stmt.find_all(exp.CTE)}
        for node in stmt.walk():
            if isinstance(node, exp.Command):
                out += _scan(node.sql(dialect="duckdb"))
            elif isinstance(node, exp.Table):
                if not isinstance(node.this, exp.Identifier) or isinstance(node.parent, exp.UserDefinedFunction):
                    continue
                name, db, catalog = node.name, node.db or None, node.catalog or None
                if not name or (db is None and catalog is None and name.lower() in ctes):
                    continue
                out.append((catalog, db, name))
            elif isinstance(node, exp.Func):
                fname = node.name.lower() if isinstance(node, exp.Anonymous) else ""
                args = [a for a in node.expressions] if isinstance(node, exp.Anonymous) else []
                if fname in _STRING_SQL_FUNCS:
                    for a in args:
                        text = _literal_text(a)
                        if text:
                            out += referenced_tables(text)
                elif fname == "query_table":
                    for a in args:
                        items = a.expressions if isinstance(a, exp.Array) else [a]
                        for it in items:
                            text = _literal_text(it)
                            if text:
                                parts = [_unquote(p) for p in text.split(".")]
                                out.append(_as_ref(parts))
    return out


def _literal_text(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    if isinstance(node, (exp.Concat, exp.DPipe)):
        parts = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
        texts = [_literal_text(p) for p in parts]
        return "".join(texts) if all(t is not None for t in texts) else None  # type: ignore[arg-type]
    return None


def _as_ref(parts: Sequence[str]) -> tuple[str | None, str | None, str]:
    parts = list(parts)[-3:]
    while len(parts) < 3:
        parts.insert(0, "")
    catalog, db, name = parts
    return catalog or None, db or None, name


def _scan(text: str) -> list[tuple[str | None, str | None, str]]:
    ctes = {_unquote(m.group(1)).lower() for m in _CTE_RE.finditer(text)}
    out = []
    for m in _REF_RE.finditer(text):
        parts = [_unquote(p) for p in re.split(r"\s*\.\s*(?=(?:\"|[A-Za-z_]))", m.group(1))]
        ref = _as_ref(parts)
        if ref[0] is None and ref[1] is None and ref[2].lower() in ctes:
            continue
        out.append(ref)
    return out
