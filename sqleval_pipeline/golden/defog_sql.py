"""defog sql-eval's gold-query conventions, as plain text functions: several gold queries in
one field separated by ``;`` (outside strings and comments), and ``{a, b}`` column
alternatives meaning any non-empty subset of the columns. Used by the defog importer
(:mod:`sqleval_pipeline.golden.importers`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

#: at most this many accepted readings are kept per defog row (a cartesian product of
#: ``{…}`` groups grows fast); the importer notes when it capped
MAX_DEFOG_READINGS = 8


def split_defog_query(query: str) -> list[str]:
    """The gold queries of a defog ``query`` cell: split on ``;`` outside quotes and comments.

    >>> split_defog_query("SELECT 'a;b' FROM t; SELECT 2 -- x;y\\n;")
    ["SELECT 'a;b' FROM t", 'SELECT 2 -- x;y']
    """
    parts: list[str] = []
    start = 0
    for kind, i, j in _scan(query):
        if kind == ";":
            parts.append(query[start:i])
            start = j
    parts.append(query[start:])
    return [p.strip() for p in parts if p.strip()]


def expand_defog_braces(query: str) -> tuple[list[str], int]:
    """Every reading of a defog query with ``{a, b}`` column groups, and how many there are.

    A group stands for any non-empty subset of its columns (in defog's order: single columns
    first); ``{}`` repeats the columns chosen for the group before it (``GROUP BY {}``). Several
    groups combine as a cartesian product. At most :data:`MAX_DEFOG_READINGS` readings are
    returned; the second value is the full count.

    >>> readings, n = expand_defog_braces("SELECT {t.name, t.id}, count(*) FROM t GROUP BY {}")
    >>> n, readings[0], readings[2]
    (3, 'SELECT t.name, count(*) FROM t GROUP BY t.name', 'SELECT t.name, t.id, count(*) FROM t GROUP BY t.name, t.id')
    """
    groups: list[tuple[int, int, list[str]]] = []
    for kind, i, j in _scan(query):
        if kind == "{}":
            inner = query[i + 1: j - 1]
            groups.append((i, j, [o.strip() for o in _split_top_commas(inner) if o.strip()]))
    if not groups:
        return [query], 1
    choices = []
    for _, _, options in groups:
        if options:
            choices.append([list(c) for r in range(1, len(options) + 1)
                            for c in itertools.combinations(options, r)])
    total = 1
    for c in choices:
        total *= len(c)
    readings: list[str] = []
    for combo in itertools.product(*choices) if choices else [()]:
        out, pos, last, k = [], 0, None, 0
        for i, j, options in groups:
            out.append(query[pos:i])
            if options:
                last = combo[k]
                k += 1
                out.append(", ".join(last))
            else:
                out.append(", ".join(last) if last is not None else query[i:j])
            pos = j
        out.append(query[pos:])
        text = "".join(out)
        if text not in readings:
            readings.append(text)
        if len(readings) >= MAX_DEFOG_READINGS:
            break
    return readings, total


def _split_top_commas(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _scan(sql: str) -> Iterator[tuple[str, int, int]]:
    """Yield (";", i, i+1) and ("{}", start, end) outside strings, quoted names and comments."""
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:  # doubled quote
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif ch == ";":
            yield ";", i, i + 1
            i += 1
        elif ch == "{":
            j = sql.find("}", i + 1)
            if j < 0 or "{" in sql[i + 1:j]:
                i += 1  # unbalanced or nested: left as is (the transpile will report it)
                continue
            yield "{}", i, j + 1
            i = j + 1
        else:
            i += 1
