"""Pinned clock: rewrite "now" to the snapshot's as-of date, preserving the rest of the text.

Time-window answers must not drift with the wall clock, so CURRENT_DATE, now(), today(),
current_timestamp and their relatives are replaced *in the original text* (by token span, so
string literals and comments are untouched and nothing else is re-generated):

* date functions become ``DATE '<as_of>'``;
* timestamp functions become ``TIMESTAMP '<as_of> 23:59:59'`` (the end of the as-of day, so
  "the last 24 hours" includes the as-of day's orders);
* time-of-day functions become ``TIME '23:59:59'``.

>>> pin_clock("SELECT current_date - INTERVAL 30 DAY, 'now()' AS s, now()", date(2025, 12, 15))
"SELECT DATE '2025-12-15' - INTERVAL 30 DAY, 'now()' AS s, TIMESTAMP '2025-12-15 23:59:59'"
"""

from __future__ import annotations

from datetime import date

import sqlglot
from sqlglot.tokens import TokenType

_DATE_FUNCS = {"today", "current_date"}
_TS_FUNCS = {"now", "current_timestamp", "get_current_timestamp", "transaction_timestamp",
             "current_localtimestamp", "localtimestamp", "statement_timestamp"}
_TIME_FUNCS = {"current_time", "localtime", "get_current_time"}
_KEYWORDS = {
    TokenType.CURRENT_DATE: "date",
    TokenType.CURRENT_TIMESTAMP: "ts",
    TokenType.CURRENT_TIME: "time",
}
for _name in ("LOCALTIMESTAMP", "CURRENT_DATETIME", "LOCALTIME"):
    if hasattr(TokenType, _name):
        _KEYWORDS[getattr(TokenType, _name)] = "time" if _name == "LOCALTIME" else "ts"


def _kind(token) -> str | None:
    if token.token_type in _KEYWORDS:
        return _KEYWORDS[token.token_type]
    if token.token_type == TokenType.VAR:
        name = token.text.lower()
        if name in _DATE_FUNCS:
            return "date"
        if name in _TS_FUNCS:
            return "ts"
        if name in _TIME_FUNCS:
            return "time"
    return None


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
        prev = tokens[i - 1] if i else None
        if prev is not None and prev.token_type == TokenType.DOT:
            i += 1  # a qualified name such as t.now is a column, not the clock
            continue
        end = tok.end
        has_call = i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN
        if has_call:
            if i + 2 < len(tokens) and tokens[i + 2].token_type == TokenType.R_PAREN:
                end = tokens[i + 2].end
                i += 2
            else:
                i += 1  # a call with arguments (e.g. a user column function): leave it
                continue
        elif tok.token_type == TokenType.VAR:
            i += 1  # a bare identifier named like a function (a column "now"): leave it
            continue
        out.append(sql[pos : tok.start])
        out.append(literal[kind])
        pos = end + 1
        i += 1
    out.append(sql[pos:])
    return "".join(out)
