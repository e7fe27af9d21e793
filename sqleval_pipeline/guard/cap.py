"""Layer 4, the result cap: never fetch more than ``cap + 1`` rows; LIMIT injection for serving.

:func:`fetch_capped` fetches at most ``cap + 1`` rows from a DuckDB cursor and reports
truncation; :func:`estimate_size` bounds the bytes relayed. :func:`inject_limit` rewrites a
query (already validated by the statement filter) so the database itself stops after ``n``
rows — for serving paths that must never relay an unbounded result:

* no LIMIT at the root: ``LIMIT n`` is appended (after the root's ORDER BY / OFFSET, so it
  applies to the whole UNION / ordered result);
* a literal LIMIT larger than ``n`` is lowered in place (OFFSET kept);
* a literal LIMIT (or FETCH FIRST) of at most ``n`` is left alone;
* anything else (LIMIT with an expression or a percentage, FETCH FIRST more than ``n``,
  LIMIT ALL) is wrapped: ``SELECT * FROM (<query>) AS _sqleval_limited LIMIT n``.

>>> inject_limit("SELECT a FROM t ORDER BY a", 100)
'SELECT a FROM t ORDER BY a\\nLIMIT 100'
>>> inject_limit("SELECT a FROM t LIMIT 5000 OFFSET 10;", 100)
'SELECT a FROM t LIMIT 100 OFFSET 10'
>>> inject_limit("SELECT a FROM t LIMIT 7", 100)
'SELECT a FROM t LIMIT 7'
>>> inject_limit("SELECT a FROM t LIMIT 10%", 100)
'SELECT * FROM (\\nSELECT a FROM t LIMIT 10%\\n) AS _sqleval_limited LIMIT 100'
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

LAYER = "cap"
WRAP_ALIAS = "_sqleval_limited"


def fetch_capped(cursor: Any, cap: int) -> tuple[list[tuple], bool]:
    """Fetch at most ``cap`` rows (reading ``cap + 1`` to know whether more exist)."""
    rows = cursor.fetchmany(cap + 1)
    truncated = len(rows) > cap
    return rows[:cap], truncated


def estimate_size(value: Any, budget: int | None = None) -> int:
    """Approximate bytes of a fetched value (strings/bytes by length, 16 per scalar).

    Stops counting once ``budget`` is exceeded.

    >>> estimate_size([("abc", 1), ("de", None)])
    37
    """
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str | bytes | bytearray):
            total += len(v)
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            total += 16
        if budget is not None and total > budget:
            return total
    return total


def _significant(tokens) -> int:
    """Index past the last token that is not a semicolon."""
    end = len(tokens)
    while end and tokens[end - 1].token_type == TokenType.SEMICOLON:
        end -= 1
    return end


def _body(sql: str, tokens) -> str:
    end = _significant(tokens)
    if not end:
        raise ValueError("no statement to limit")
    return sql[: tokens[end - 1].end + 1]


def _wrap(body: str, n: int) -> str:
    return f"SELECT * FROM (\n{body}\n) AS {WRAP_ALIAS} LIMIT {n}"


def _literal_int(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    return None


def inject_limit(sql: str, n: int) -> str:
    """Bound ``sql`` to at most ``n`` rows (see module doc). Raises ValueError on non-queries."""
    if n < 0:
        raise ValueError("n must be >= 0")
    tokens = sqlglot.tokenize(sql, read="duckdb")
    statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None
                  and not isinstance(s, exp.Semicolon)]
    if len(statements) != 1:
        raise ValueError("inject_limit needs exactly one statement")
    root = statements[0]
    body = _body(sql, tokens)
    if not isinstance(root, exp.Select | exp.Union | exp.Intersect | exp.Except | exp.Subquery):
        raise ValueError(f"inject_limit needs a query, not {type(root).__name__}")
    if isinstance(root, exp.Subquery):
        return _wrap(body, n)
    limit = root.args.get("limit")
    if limit is None:
        return f"{body}\nLIMIT {n}"
    if isinstance(limit, exp.Fetch):
        count = _literal_int(limit.args.get("count"))
        opts = limit.args.get("limit_options")
        plain = opts is None or not (opts.args.get("percent") or opts.args.get("with_ties"))
        return body if count is not None and count <= n and plain else _wrap(body, n)
    opts = limit.args.get("limit_options")
    if opts is not None and (opts.args.get("percent") or opts.args.get("with_ties")):
        return _wrap(body, n)
    value = _literal_int(limit.args.get("expression"))
    if value is None:
        return _wrap(body, n)
    if value <= n:
        return body
    # lower the literal in place: the LIMIT keyword at parenthesis depth 0 is the root's
    depth = 0
    target = None
    end = _significant(tokens)
    for i, tok in enumerate(tokens[:end]):
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.token_type == TokenType.LIMIT:
            target = i
    if target is None or target + 1 >= end or tokens[target + 1].token_type != TokenType.NUMBER \
            or tokens[target + 1].text.strip() != str(limit.expression.this):
        return _wrap(body, n)
    lit = tokens[target + 1]
    return body[: lit.start] + str(n) + body[lit.end + 1:]
