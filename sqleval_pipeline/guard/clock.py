"""Pinned clock: rewrite "now" to the snapshot's as-of date, preserving the rest of the text.

Time-window answers must not drift with the wall clock, so CURRENT_DATE, now(), today(),
current_timestamp and their relatives are replaced *in the original text* (by token span, so
string literals and comments are untouched and nothing else is re-generated):

* date functions become ``DATE '<as_of>'``;
* timestamp functions become ``TIMESTAMP '<as_of> 23:59:59'`` (the end of the as-of day, so
  "the last 24 hours" includes the as-of day's orders);
* time-of-day functions become ``TIME '23:59:59'``.

Spellings handled: keywords (``CURRENT_DATE``, ``LOCALTIMESTAMP`` ...), calls with empty
parentheses (``now()``, ``today()``, ``current_date()``), quoted names (``"now"()``) and
qualified calls (``main.now()``, ``system.main.current_date()``), which DuckDB resolves to the
same built-in functions. :func:`residual_clock_calls` finds clock calls left in a text (the
executor refuses such a text rather than let an answer drift).

>>> pin_clock("SELECT current_date - INTERVAL 30 DAY, 'now()' AS s, now()", date(2025, 12, 15))
"SELECT DATE '2025-12-15' - INTERVAL 30 DAY, 'now()' AS s, TIMESTAMP '2025-12-15 23:59:59'"
>>> pin_clock('SELECT system.main.current_date(), "now"()', date(2025, 12, 15))
"SELECT DATE '2025-12-15', TIMESTAMP '2025-12-15 23:59:59'"
"""

from __future__ import annotations

from datetime import date

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from sqleval_pipeline.guard._names import function_names

_DATE_FUNCS = {"today", "current_date"}
_TS_FUNCS = {"now", "current_timestamp", "get_current_timestamp", "transaction_timestamp",
             "current_localtimestamp", "localtimestamp", "statement_timestamp", "current_datetime"}
_TIME_FUNCS = {"current_time", "localtime", "get_current_time", "current_localtime"}
#: every function name that reads the wall clock (lower-case)
CLOCK_FUNCTIONS: frozenset[str] = frozenset(_DATE_FUNCS | _TS_FUNCS | _TIME_FUNCS)

_KEYWORDS = {
    TokenType.CURRENT_DATE: "date",
    TokenType.CURRENT_TIMESTAMP: "ts",
    TokenType.CURRENT_TIME: "time",
}
for _name in ("LOCALTIMESTAMP", "CURRENT_DATETIME", "LOCALTIME"):
    if hasattr(TokenType, _name):
        _KEYWORDS[getattr(TokenType, _name)] = "time" if _name == "LOCALTIME" else "ts"
_NAME_TOKENS = {TokenType.VAR, TokenType.IDENTIFIER}
_BARE_KEYWORDS = {"current_date", "current_time", "current_timestamp", "localtime", "localtimestamp"}


def _kind_of_name(name: str) -> str | None:
    name = name.lower()
    if name in _DATE_FUNCS:
        return "date"
    if name in _TS_FUNCS:
        return "ts"
    if name in _TIME_FUNCS:
        return "time"
    return None


def _kind(token) -> str | None:
    if token.token_type in _KEYWORDS:
        return _KEYWORDS[token.token_type]
    if token.token_type in _NAME_TOKENS:
        return _kind_of_name(token.text)
    return None


def _qualifier_start(tokens, i: int) -> int:
    """Index of the first token of a ``a.b.`` qualifier chain ending just before ``tokens[i]``."""
    j = i
    while j >= 2 and tokens[j - 1].token_type == TokenType.DOT and (
        tokens[j - 2].token_type in _NAME_TOKENS or tokens[j - 2].token_type in _KEYWORDS
        or tokens[j - 2].text.isidentifier()
    ):
        j -= 2
    return j


def pin_clock(sql: str, as_of: date) -> str:
    """Return ``sql`` with every clock function replaced by a literal at ``as_of``.

    Raises :class:`sqlglot.errors.TokenError` on text that cannot be tokenized (callers that
    guard untrusted SQL refuse it).
    """
    tokens = sqlglot.tokenize(sql, read="duckdb")
    literal = {
        "date": f"DATE '{as_of.isoformat()}'",
        "ts": f"TIMESTAMP '{as_of.isoformat()} 23:59:59'",
        "time": "TIME '23:59:59'",
    }
    out: list[str] = []
    pos = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        kind = _kind(tok)
        if kind is None:
            i += 1
            continue
        start_idx = i
        qualified = i > 0 and tokens[i - 1].token_type == TokenType.DOT
        has_call = i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN
        empty_call = has_call and i + 2 < len(tokens) and tokens[i + 2].token_type == TokenType.R_PAREN
        if has_call and not empty_call:
            i += 1  # a call with arguments (e.g. a user column function): leave it
            continue
        if qualified:
            if not empty_call:
                i += 1  # t.current_date is a column of t, not the clock
                continue
            start_idx = _qualifier_start(tokens, i)  # main.now(), system.main.current_date()
            if start_idx == i:
                i += 1
                continue
        elif not empty_call and tok.token_type in _NAME_TOKENS:
            i += 1  # a bare identifier named like a function (a column "now"): leave it
            continue
        end = tokens[i + 2].end if empty_call else tok.end
        if start_idx < len(tokens) and tokens[start_idx].start < pos:
            i += 1
            continue
        out.append(sql[pos : tokens[start_idx].start])
        out.append(literal[kind])
        pos = end + 1
        i += 3 if empty_call else 1
    out.append(sql[pos:])
    return "".join(out)


def residual_clock_calls(tree: exp.Expression) -> list[str]:
    """Clock calls still present in a parsed statement (empty after a correct :func:`pin_clock`).

    >>> import sqlglot
    >>> residual_clock_calls(sqlglot.parse_one("SELECT now(), current_date", read="duckdb"))
    ['now', 'current_date']
    """
    found: list[str] = []
    for node in tree.walk():
        if isinstance(node, exp.Func):
            names = function_names(node)
            hit = sorted(names & CLOCK_FUNCTIONS)
            if hit:
                found.append(hit[0])
        elif (isinstance(node, exp.Column) and not node.table
              and isinstance(node.this, exp.Identifier) and not node.this.args.get("quoted")
              and node.name.lower() in _BARE_KEYWORDS):
            found.append(node.name.lower())
    return found
