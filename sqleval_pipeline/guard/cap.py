"""Layer 4, the result cap: rows, bytes and bytes per value; LIMIT injection for serving.

:func:`fetch_capped` fetches at most ``cap + 1`` rows from a DuckDB cursor and reports
truncation (more than ``row_cap`` rows: the rows are kept, flagged). While fetching it measures
each row's *encoded* size (:func:`encoded_size`: strings in UTF-8 bytes, every cell, list and
struct element counted, framing charged even for an empty string or a NULL) and refuses —
never truncates — a result over ``max_result_bytes`` (``result_too_large``) or holding one
value over ``max_cell_bytes`` (``cell_too_large``), stopping the fetch at once. :func:`inject_limit` rewrites a
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
import duckdb
from sqleval_pipeline.errors import SqlevalError

LAYER = "cap"
WRAP_ALIAS = "_sqleval_limited"


class CapExceeded(SqlevalError):
    """A result broke the byte cap (``result_too_large``) or the per-cell cap (``cell_too_large``)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


#: bytes of framing charged per value (a separator, quotes, brackets ...): an empty string,
#: an empty list or a NULL is never free
FRAME = 2
_NULL = 4
_FLOAT = 24           # the longest text form of a double
_STR_CHUNK = 1 << 20  # non-ASCII strings are measured in slices of this many code points


def _str_bytes(s: str, budget: int) -> int:
    """UTF-8 length of ``s`` (stops once ``budget`` is exceeded; no full copy for ASCII)."""
    if s.isascii():
        return len(s)
    total = 0
    for i in range(0, len(s), _STR_CHUNK):
        total += len(s[i:i + _STR_CHUNK].encode("utf-8", "surrogatepass"))
        if total > budget:
            break
    return total


def encoded_size(value: Any, budget: int | None = None) -> int:
    """Bytes of ``value`` once encoded (JSON-like: strings in UTF-8 bytes, bytes in base64,
    every cell, list, struct element and key counted, ``FRAME`` bytes of framing per value,
    so an empty string or a NULL still costs bytes). Stops counting once ``budget`` is exceeded.

    >>> encoded_size([("abc", 1), ("de", None)])
    28
    >>> encoded_size(["", "", ""]) > encoded_size([])
    True
    >>> encoded_size("é" * 10)
    22
    """
    limit = budget if budget is not None else 1 << 62
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if v is None:
            total += _NULL
        elif isinstance(v, str):
            total += FRAME + _str_bytes(v, limit - total)
        elif isinstance(v, bytes | bytearray | memoryview):
            total += FRAME + 4 * ((len(v) + 2) // 3) + 12  # {"base64": "..."}
        elif isinstance(v, list | tuple):
            total += FRAME + len(v)  # brackets, one separator per element
            if total > limit:
                return total
            stack.extend(v)
        elif isinstance(v, dict):
            total += FRAME + 2 * len(v)
            if total > limit:
                return total
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, bool):
            total += FRAME + 5
        elif isinstance(v, int):
            total += FRAME + (len(str(v)) if -10 ** 60 < v < 10 ** 60 else v.bit_length() // 3 + 2)
        elif isinstance(v, float):
            total += FRAME + _FLOAT
        else:  # Decimal, dates, times, UUIDs, intervals ...: their text form
            total += FRAME + min(len(str(v)), 1 << 20)
        if total > limit:
            return total
    return total


#: the name the rest of the guard used for the measure
estimate_size = encoded_size


def _row_size(row: Any, remaining: int, max_cell_bytes: int | None) -> int:
    if max_cell_bytes is None:
        return encoded_size(row, remaining)
    total = FRAME + len(row)
    for cell in row:
        budget = min(max_cell_bytes, remaining - total)
        size = encoded_size(cell, max(budget, 0))
        if size > max_cell_bytes:
            raise CapExceeded("cell_too_large", "a single value is larger than the cell cap once encoded")
        total += size
        if total > remaining:
            return total
    return total


def header_size(description: Any, *, max_bytes: int | None = None,
                max_cell_bytes: int | None = None) -> int:
    """Encoded bytes of a result's column names and type strings, checked like values.

    What is returned is not only rows: a column name or a type string (a STRUCT with huge
    field names, an ENUM of huge labels) reaches the caller too, so each one counts against
    ``max_cell_bytes`` (``cell_too_large``) and all of them against ``max_bytes``
    (``result_too_large``), before any row is fetched. Sizes are read from the strings
    DuckDB already built for the description, never converted further.

    >>> header_size([("n", "BIGINT"), ("city", "VARCHAR")])   # 2 + (2+1) + (2+6) + (2+4) + (2+7)
    28
    >>> header_size([("x" * 100, "INTEGER")], max_cell_bytes=64)
    Traceback (most recent call last):
    ...
    sqleval_pipeline.guard.cap.CapExceeded: a column name or type is larger than the cell cap once encoded
    """
    total = FRAME
    budget = max_bytes if max_bytes is not None else 1 << 62
    for d in description or ():
        for text in (d[0], d[1]):
            text = text if isinstance(text, str) else str(text)
            limit = budget - total if max_cell_bytes is None else min(max_cell_bytes, budget - total)
            size = FRAME + _str_bytes(text, max(limit, 0))
            if max_cell_bytes is not None and size > max_cell_bytes:
                raise CapExceeded("cell_too_large", "a column name or type is larger than the cell cap once encoded")
            total += size
            if total > budget:
                raise CapExceeded("result_too_large", "the column names and types are larger than the result cap")
    return total


def fetch_capped(cursor: Any, cap: int, *, max_bytes: int | None = None,
                 max_cell_bytes: int | None = None, start: int = 0) -> tuple[list[tuple], bool]:
    """Fetch at most ``cap`` rows (reading ``cap + 1`` to know whether more exist), measuring
    the encoded size of every row while fetching.

    Raises :class:`CapExceeded` as soon as the rows kept so far exceed ``max_bytes`` or one
    value exceeds ``max_cell_bytes``: rows are fetched in small batches sized from what is
    left of the budget, so no more than about the byte cap is ever held (a single row is
    materialized whole by DuckDB before it can be measured; the memory limit bounds it).
    Truncation (more than ``cap`` rows) is never an error: the extra row is dropped unmeasured.
    ``start`` is what the result already costs before its rows (:func:`header_size`).
    """
    rows: list[tuple] = []
    total = FRAME + start
    budget = max_bytes if max_bytes is not None else 1 << 62
    batch = 1
    while len(rows) <= cap:
        chunk = cursor.fetchmany(min(batch, cap + 1 - len(rows)))
        if not chunk:
            return rows, False
        for row in chunk:
            if len(rows) == cap:
                return rows, True
            total += _row_size(row, budget - total, max_cell_bytes)
            if total > budget:
                raise CapExceeded("result_too_large", "the result is larger than the result cap once encoded")
            rows.append(row)
        avg = max(total // max(len(rows), 1), 1)
        batch = max(1, min(1024, (budget - total) // avg // 2))
    return rows[:cap], len(rows) > cap


#: DuckDB type ids whose values are converted to nested Python objects (slow for big values)
NESTED_TYPE_IDS = frozenset({"list", "array", "struct", "map", "union"})


def nested_columns(description: Any) -> list[int]:
    """Positions of the result columns of a nested type (list, array, struct, map, union)."""
    out = []
    for i, d in enumerate(description or ()):
        type_id = str(getattr(d[1], "id", "") or "").lower()
        if type_id in NESTED_TYPE_IDS:
            out.append(i)
    return out


def statement_body(sql: str) -> str:
    """``sql`` without its trailing semicolons (and the comments around them), cut where
    DuckDB's own tokenizer says the statement ends, so the text can sit inside parentheses.

    >>> statement_body("SELECT ';' AS s ; -- done"), statement_body("SELECT 1 -- note")
    ("SELECT ';' AS s", 'SELECT 1 -- note')
    """
    tokens = duckdb.tokenize(sql)
    cut, semicolon = len(sql), False
    for pos, kind in reversed(tokens):
        kind = str(kind).rsplit(".", 1)[-1]
        if kind == "comment":
            cut = pos
            continue
        if kind == "operator" and sql[pos] == ";":
            cut, semicolon = pos, True
            continue
        break
    return sql[:cut].rstrip() if semicolon else sql


def sizing_sql(statement_sql: str, ncols: int, nested: list[int], row_cap: int) -> str:
    """A query that measures, inside DuckDB, the text size of every nested value of the first
    ``row_cap`` rows of ``statement_sql``: ``(largest value, sum)`` in bytes.

    Columns are renamed positionally (``q(c0, c1, ...)``), so duplicate or odd output names
    cannot break the wrapper; the statement's text sits on its own lines, so a trailing
    comment cannot swallow the closing parenthesis.

    >>> print(sizing_sql("SELECT list(x) FROM t -- all", 2, [0], 1000))
    SELECT max(greatest(strlen(CAST(c0 AS VARCHAR)))), sum(strlen(CAST(c0 AS VARCHAR))) FROM (SELECT * FROM (
    SELECT list(x) FROM t -- all
    ) AS q(c0, c1) LIMIT 1000) AS s
    """
    names = ", ".join(f"c{i}" for i in range(ncols))
    sizes = [f"strlen(CAST(c{i} AS VARCHAR))" for i in nested]
    return (f"SELECT max(greatest({', '.join(sizes)})), sum({' + '.join(sizes)}) FROM (SELECT * FROM (\n"
            f"{statement_body(statement_sql)}\n) AS q({names}) LIMIT {int(row_cap)}) AS s")


def precheck_nested(con: Any, statement_sql: str, description: Any, row_cap: int, *,
                    max_bytes: int | None, max_cell_bytes: int | None) -> None:
    """Refuse a result whose nested values are too large *before* Python converts them.

    Converting one list of 100,000 structs into Python objects takes about a second (DuckDB
    built it in 25 ms): measured in Python, a table packed into one cell could outlast the
    statement timeout and be stopped by the wall clock instead of the cap. DuckDB measures
    the text form of each nested value instead (``strlen(CAST(v AS VARCHAR))``, UTF-8 bytes;
    about the size :func:`encoded_size` charges), on the same connection and under the same
    timeout. A value over ``max_cell_bytes`` raises ``cell_too_large``; nested values summing
    over ``max_bytes`` raise ``result_too_large``. Anything within the limits is fetched and
    measured exactly by :func:`fetch_capped`. No-op when no column is nested.
    """
    nested = nested_columns(description)
    if not nested or (max_bytes is None and max_cell_bytes is None):
        return
    try:
        largest, total = con.execute(sizing_sql(statement_sql, len(description), nested, row_cap)).fetchone()
    except duckdb.ParserException:
        return  # the wrapper could not be composed: fetch_capped still measures every value
    if max_cell_bytes is not None and largest is not None and largest > max_cell_bytes:
        raise CapExceeded("cell_too_large", "a single value is larger than the cell cap once encoded")
    if max_bytes is not None and total is not None and total > max_bytes:
        raise CapExceeded("result_too_large", "the result is larger than the result cap once encoded")


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
