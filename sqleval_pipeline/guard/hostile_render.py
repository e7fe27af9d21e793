"""Rendering of hostile case templates: placeholders and their modifiers into SQL names.

Part of the hostile suite (:mod:`sqleval_pipeline.guard.hostile_templates`): a placeholder
such as ``{sensitive:upper:quoted}`` becomes an identifier, quoted only when needed (or always
with ``quoted``), ``raw`` text or the text for use inside a string literal (``str``).
``{absent:STEM}`` takes a stem instead of a first modifier: the binding draws the name
(``STEM``, else ``STEM_1``, ``STEM_2`` ... until it names nothing in the snapshot).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp
import duckdb
from sqleval_pipeline.errors import SqlevalError

CASE_MODIFIERS = ("upper", "lower", "title")
RENDER_MODIFIERS = ("quoted", "raw", "str")
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)((?::[A-Za-z_]\w*)*)\}")
#: the placeholder whose first segment is a stem, not a modifier; its stem when none is given
ABSENT = "absent"
DEFAULT_ABSENT_STEM = "no_such_table"
_SIMPLE_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --------------------------------------------------------------------------- rendering


def _ident(part: str, mode: str) -> str:
    if mode == "raw":
        return part
    if mode == "str":
        return part.replace("'", "''")
    if mode == "quoted" or not _SIMPLE_IDENT.fullmatch(part) or _is_keyword(part):
        return '"' + part.replace('"', '""') + '"'
    return part


@lru_cache(maxsize=1)
def _duckdb_keywords() -> frozenset[str]:
    """DuckDB's keywords that cannot stand unquoted as a table or column name."""
    con = duckdb.connect()
    try:
        rows = con.execute("SELECT keyword_name FROM duckdb_keywords() "
                           "WHERE keyword_category <> 'unreserved'").fetchall()
    finally:
        con.close()
    return frozenset(r[0].lower() for r in rows)


@lru_cache(maxsize=4096)
def _is_keyword(name: str) -> bool:
    if name.lower() in _duckdb_keywords():
        return True
    try:  # the statement filter parses with sqlglot: the name must also survive that parse
        tree = sqlglot.parse_one(f"SELECT 1 FROM {name}", read="duckdb")
    except Exception:  # noqa: BLE001 - it needs quoting
        return True
    t = tree.find(exp.Table)
    return t is None or t.name != name


def _render_name(parts: Sequence[str], mods: Sequence[str]) -> str:
    mode = next((m for m in reversed(mods) if m in RENDER_MODIFIERS), "ident")
    out = []
    for part in parts:
        for m in mods:
            if m == "upper":
                part = part.upper()
            elif m == "lower":
                part = part.lower()
            elif m == "title":
                part = part.title()
        out.append(_ident(part, mode))
    return ".".join(out)


def sql_name(*parts: str) -> str:
    """``parts`` joined as a (qualified) SQL name, each double-quoted only when it must be.

    >>> sql_name("hr", "salaries"), sql_name("snap-c898c146fddf", "main", "select")
    ('hr.salaries', '"snap-c898c146fddf".main."select"')
    """
    return _render_name(parts, ())


@dataclass(frozen=True)
class _Binding:
    """The values of one instantiation: name placeholders → name parts, plus column texts."""

    names: dict[str, tuple[str, ...]]
    origins: dict[str, str]       # placeholder -> served | sensitive | context | column
    exprs: dict[str, str]         # placeholders filled verbatim ({text_column})
    #: {absent:STEM}: stem -> a name that exists nowhere in the snapshot (origin "absent")
    absent: Callable[[str], str] | None = None


def absent_parts(mods: Sequence[str]) -> tuple[str, list[str]]:
    """``(stem, modifiers)`` of an ``{absent...}`` placeholder's segments.

    >>> absent_parts(["policy", "upper"]), absent_parts([])
    (('policy', ['upper']), ('no_such_table', []))
    """
    return (mods[0], list(mods[1:])) if mods else (DEFAULT_ABSENT_STEM, [])


class _Unfillable(SqlevalError):
    """A placeholder has no value in this project: the case is skipped with this reason."""


def _render(text: str, b: _Binding, *, sentinels: dict[str, tuple[str, str]] | None = None) -> str:
    """``text`` with placeholders filled; with ``sentinels`` each name part becomes a unique
    identifier recorded there (sentinel → (real part, origin)) so table references can be traced."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        name = m.group(1)
        mods = [x for x in (m.group(2) or "").split(":") if x]
        if name in b.exprs:
            return b.exprs[name]
        if name == ABSENT:
            if b.absent is None:
                raise _Unfillable(name)
            stem, mods = absent_parts(mods)
            parts, origin = (b.absent(stem),), "absent"
        elif name not in b.names:
            raise _Unfillable(name)
        else:
            parts, origin = b.names[name], b.origins[name]
        if sentinels is not None and origin != "column":
            fake = []
            for part in parts:
                s = f"hph{len(sentinels)}x"
                sentinels[s] = (part, origin)
                fake.append(s)
            parts = tuple(fake)
        return _render_name(parts, mods)

    return _TOKEN.sub(sub, text)
