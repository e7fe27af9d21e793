"""Structural bounds checked on the token stream, before sqlglot parses the text.

The statement filter's cost must not depend on how cleverly a text is shaped. The size cap
bounds the characters; the tokenizer is linear; but sqlglot's parser does work per operator
that grows with its operand in a few places, and Python turns a numeric literal into an
integer of any size when asked. Measured on 20 KB texts before these bounds: a chain of
``.f()`` calls on a large operand cost 45 ms per call (the parser copies the operand each
time), nested lambdas cost a scan of their body each, ``range(1e999999)`` cost 36 s (the
series size check turned the literal into a million-digit integer), 6,600 chained ``[1]``
subscripts cost 72 s (sqlglot annotates the operand's types at every subscript; the filter
parses with :class:`GuardDuckDB`, DuckDB's dialect without the index-offset rewrite, which
is what triggers it — the filter never generates SQL from the tree, it runs the text).

:func:`check_tokens` refuses, before any parse:

======================  =================================================================
reason                  when
======================  =================================================================
``too_complex``         more than :data:`MAX_TOKENS` tokens; more than
                        :data:`MAX_CHAINED_CALLS` method calls on a computed value
                        (``(…).f()``, ``x.f().g()``); lambdas (or ``->`` operators) nested
                        more than :data:`MAX_LAMBDA_DEPTH` deep
``too_deep``            parentheses, brackets or braces nested more than :data:`MAX_DEPTH`
``literal_too_large``   a numeric literal of more than :data:`MAX_NUMBER_CHARS` characters
                        or with an exponent beyond ±:data:`MAX_EXPONENT` (inspected as
                        text: no arithmetic is done on it)
======================  =================================================================

No evaluation query comes near these bounds (the demo's longest golden reference has 10
levels of nesting and no numeric literal longer than 10 characters); each is far below the
point where the parser's cost grows.

>>> import sqlglot
>>> def check(sql):
...     v = check_tokens(GUARD_DIALECT.tokenize(sql))
...     return v and v[0]
>>> check("SELECT count(*) FROM fct_orders WHERE amount > 1e3") is None
True
>>> check("SELECT * FROM range(1e999999)"), check("SELECT " + "(" * 200 + "1" + ")" * 200)
('literal_too_large', 'too_deep')
>>> check("SELECT 'x'" + ".upper()" * 20)
'too_complex'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlglot.dialects.duckdb import DuckDB
from sqlglot.tokens import Token, TokenType

from sqleval_pipeline.guard.clock import CLOCK_FUNCTIONS

#: tokens per statement (a 20 KB text has at most about 10,000)
MAX_TOKENS = 20_000
#: nesting of ( [ { (DuckDB's own expression depth limit is 1,000; sqlglot recurses per level)
MAX_DEPTH = 100
#: method calls on a computed value ``(…).f()`` per statement (sqlglot copies the operand)
MAX_CHAINED_CALLS = 8
#: lambdas (and ``->`` operators) nested inside one another (sqlglot scans each body)
MAX_LAMBDA_DEPTH = 16
#: characters of one numeric literal, and the largest exponent it may carry
MAX_NUMBER_CHARS = 100
MAX_EXPONENT = 1000


class GuardDuckDB(DuckDB):
    """DuckDB's dialect as the statement filter parses it: subscripts keep their index as
    written (``INDEX_OFFSET = 0``), so the parser never annotates types at a subscript
    (quadratic on a chain). Tokens and every other rule are DuckDB's."""

    INDEX_OFFSET = 0


GUARD_DIALECT = GuardDuckDB()

_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})
_CLOCK_KEYWORDS = frozenset(getattr(TokenType, n) for n in (
    "CURRENT_DATE", "CURRENT_TIMESTAMP", "CURRENT_TIME", "LOCALTIMESTAMP", "CURRENT_DATETIME", "LOCALTIME")
    if hasattr(TokenType, n))
_NUMBER = re.compile(r"[0-9_]*(?:\.[0-9_]*)?(?:[eE]([+-]?)([0-9]+))?\Z")


def number_problem(text: str) -> str | None:
    """Why a numeric literal's text is too large to handle (None when it is not), judged on
    the text alone.

    >>> number_problem("1e3"), number_problem("1e999999"), number_problem("9" * 101)
    (None, 'an exponent of 999999', '101 characters')
    """
    if len(text) > MAX_NUMBER_CHARS:
        return f"{len(text)} characters"
    m = _NUMBER.match(text)
    if m and m.group(2) and int(m.group(2)) > MAX_EXPONENT:  # at most 100 digits: int() is cheap
        return f"an exponent of {m.group(1) if m.group(1) == '-' else ''}{int(m.group(2))}"
    return None


def check_tokens(tokens: Sequence[Token]) -> tuple[str, str] | None:
    """``(reason, message)`` when the token stream exceeds a bound (module doc), else None."""
    if len(tokens) > MAX_TOKENS:
        return ("too_complex", f"The statement has {len(tokens):,} tokens; at most {MAX_TOKENS:,} "
                               "are checked.")
    depth = 0
    lambdas: list[int] = []  # paren depth of each open lambda
    chained = 0
    prev = None
    for k, tok in enumerate(tokens):
        tt = tok.token_type
        if tt in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                return ("too_deep", f"The statement nests parentheses or brackets more than {MAX_DEPTH} "
                                    "levels deep.")
        elif tt in _CLOSE:
            depth = max(0, depth - 1)
            while lambdas and lambdas[-1] > depth:
                lambdas.pop()
        elif tt == TokenType.NUMBER:
            problem = number_problem(tok.text)
            if problem:
                return ("literal_too_large", f"A numeric literal has {problem}; at most "
                                             f"{MAX_NUMBER_CHARS} characters and exponents up to "
                                             f"{MAX_EXPONENT} are allowed.")
        elif tt == TokenType.ARROW or (tt == TokenType.VAR and tok.text.lower() == "lambda"):
            while lambdas and lambdas[-1] >= depth:
                lambdas.pop()  # a sibling: the previous lambda at this depth has ended
            lambdas.append(depth)
            if len(lambdas) > MAX_LAMBDA_DEPTH:
                return ("too_complex", f"The statement nests lambdas (or -> operators) more than "
                                       f"{MAX_LAMBDA_DEPTH} deep.")
        elif (tt == TokenType.DOT and prev in (TokenType.R_PAREN, TokenType.R_BRACKET)
              and k + 2 < len(tokens) and tokens[k + 2].token_type == TokenType.L_PAREN):
            chained += 1
            if chained > MAX_CHAINED_CALLS:
                return ("too_complex", f"The statement calls more than {MAX_CHAINED_CALLS} functions "
                                       "with the method syntax on a computed value ((…).f()).")
        prev = tt
    return None


def may_read_clock(tokens: Sequence[Token]) -> bool:
    """True unless no token can be a clock call: a keyword such as ``CURRENT_DATE`` or any
    token spelled like a clock function. False means :func:`~.clock.pin_clock` leaves the
    text as it is (a superset of what it rewrites: spelling alone decides)."""
    return any(t.token_type in _CLOCK_KEYWORDS or t.text.lower() in CLOCK_FUNCTIONS for t in tokens)


__all__ = ["GUARD_DIALECT", "GuardDuckDB", "MAX_CHAINED_CALLS", "MAX_DEPTH", "MAX_EXPONENT",
           "MAX_LAMBDA_DEPTH", "MAX_NUMBER_CHARS", "MAX_TOKENS", "check_tokens", "may_read_clock",
           "number_problem"]
