"""The tables a hostile case's SQL names, and the same SQL with some of them renamed.

Part of the hostile suite (:mod:`sqleval_pipeline.guard.hostile_templates`): the names a case
writes literally are recorded when it is instantiated; when the guard lets such a case run
because the name turned out to be a served table, :func:`rename_tables` gives the same SQL
naming an absent table, to ask the guard whether the name was the only thing it allowed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from sqleval_pipeline.dialect.tables import table_refs
from sqleval_pipeline.guard.bounds import GUARD_DIALECT, check_tokens


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
    """``(catalog, schema, name)`` of every table reference in ``sql`` (CTE references excluded,
    per scope: :func:`~sqleval_pipeline.dialect.tables.table_refs`).

    Parsed with sqlglot (every statement; SQL in string arguments of ``query()`` /
    ``json_serialize_sql()`` and names given to ``query_table()`` included); text sqlglot
    cannot parse, and commands it keeps as raw text, are scanned for ``FROM/JOIN/INTO/TABLE/
    UPDATE … name`` instead.
    """
    try:
        # bounded like the statement filter (guard/bounds.py): a text too large or too deep
        # for the parser is scanned instead (sqlglot on a long subscript chain: 15 s)
        tokens = GUARD_DIALECT.tokenize(sql)
        if check_tokens(tokens) is not None:
            return _scan(sql)
        statements = [s for s in GUARD_DIALECT.parser().parse(tokens, sql) if s is not None]
    except (Exception, RecursionError):  # noqa: BLE001 - unparseable attacks are common here
        return _scan(sql)
    out: list[tuple[str | None, str | None, str]] = []
    for stmt in statements:
        try:  # tables by sqlglot's scopes (dialect/tables.py), DDL and DML targets included
            out += [r.parts for r in table_refs(stmt) if r.name]
        except RecursionError:
            return _scan(sql)
        for node in stmt.walk():
            if isinstance(node, exp.Command):
                out += _scan(node.sql(dialect="duckdb"))
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


_NOT_NAMES = {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING, TokenType.HEREDOC_STRING,
              TokenType.BIT_STRING, TokenType.HEX_STRING, TokenType.BYTE_STRING, TokenType.NUMBER}


def rename_tables(sql: str, renames: dict[str, str]) -> str | None:
    """``sql`` with every identifier token equal (case-insensitively) to a key of ``renames``
    replaced by its value (double-quoted when the original was), the rest of the text as it
    was; None when the text cannot be tokenized.

    >>> rename_tables('SELECT "Policy".x FROM main.policy -- policy', {"policy": "policy_1"})
    'SELECT "policy_1".x FROM main.policy_1 -- policy'
    >>> rename_tables("SELECT 'policy' FROM policy p", {"policy": "policy_1"})
    "SELECT 'policy' FROM policy_1 p"
    """
    lower = {k.lower(): v for k, v in renames.items()}
    try:
        tokens = sqlglot.tokenize(sql, read="duckdb")
    except Exception:  # noqa: BLE001 - no rename, no conclusion
        return None
    out, at = [], 0
    for tok in tokens:
        if tok.token_type in _NOT_NAMES or tok.text.lower() not in lower:
            continue
        new = lower[tok.text.lower()]
        quoted = tok.token_type == TokenType.IDENTIFIER
        out += [sql[at:tok.start], '"' + new.replace('"', '""') + '"' if quoted else new]
        at = tok.end + 1
    out.append(sql[at:])
    return "".join(out)
