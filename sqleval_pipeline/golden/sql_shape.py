"""The shape of a reference query as the metadata rules read it (golden/infer.py, and Spider's
hardness in golden/spider_hardness.py): one cached parse, the top-level query, its local
nodes, conditions split into atoms, aggregates and nested queries. Pure sqlglot; never raises
on odd SQL.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import sqlglot
from sqlglot import exp

from sqleval_pipeline.dialect import resolve_dialect


@functools.lru_cache(maxsize=1024)
def parse_query(sql: str, dialect: str | None) -> exp.Query | None:
    """The one query statement of ``sql``, or None when it is not exactly one query.

    Cached: :func:`~sqleval_pipeline.golden.infer.infer` calls every function on the same
    text, which parses it once. The
    tree is shared between callers, so nothing in this module modifies it.
    """
    if not isinstance(sql, str) or not sql.strip():
        return None
    try:
        read = resolve_dialect(dialect) or "duckdb"
        statements = [s for s in sqlglot.parse(sql, read=read)
                      if s is not None and not isinstance(s, exp.Semicolon)]
    except Exception:  # sqlglot's errors, an unknown dialect, 3,000 parentheses
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    if any(not s.expressions for s in statements[0].find_all(exp.Select)):
        return None  # a bare "SELECT": sqlglot accepts it, no engine does
    return statements[0]


def guarded(default):
    """Return ``default`` instead of raising (a pathological tree may still exhaust the stack)."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception:  # RecursionError included
                return default
        return inner
    return wrap


def unwrap(q: exp.Expression) -> exp.Expression:
    """A parenthesised query's inside: ``(SELECT ...)`` -> ``SELECT ...``."""
    while isinstance(q, exp.Subquery) and isinstance(q.this, exp.Query):
        q = q.this
    return q


def top_arg(q: exp.Expression, key: str) -> exp.Expression | None:
    """A modifier (``order``, ``limit``, ``offset``) of the outermost query: of the root, or of
    the query inside the root's parentheses (``(SELECT .. ORDER BY a) LIMIT 1`` has both)."""
    while True:
        if q.args.get(key) is not None:
            return q.args[key]
        if not (isinstance(q, exp.Subquery) and isinstance(q.this, exp.Query)):
            return None
        q = q.this


def local(node: exp.Expression | None) -> Iterator[exp.Expression]:
    """``node`` and its descendants, without entering a nested query: a query at or below
    ``node`` is yielded itself, its inside is not."""
    if node is None:
        return
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, exp.Query):
            continue
        stack.extend(reversed(list(n.iter_expressions())))


def nested_queries(node: exp.Expression | None) -> int:
    """How many queries ``node`` is or holds (not counting queries inside those)."""
    return sum(1 for n in local(node) if isinstance(n, exp.Query))


def condition_of(node: exp.Expression | None) -> exp.Expression | None:
    """The condition of a WHERE/HAVING/QUALIFY node (or the node itself)."""
    if isinstance(node, (exp.Where, exp.Having, exp.Qualify)):
        return node.this
    return node


def atoms_of(cond: exp.Expression | None) -> list[exp.Expression]:
    """The atomic predicates of a boolean condition: the leaves under AND / OR / NOT / ( )."""
    out: list[exp.Expression] = []
    stack = [cond] if cond is not None else []
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.And, exp.Or, exp.Xor)):
            stack.extend([n.right, n.left])
        elif isinstance(n, (exp.Not, exp.Paren)):
            stack.append(n.this)
        elif n is not None:
            out.append(n)
    return out


def is_negated(n: exp.Expression) -> bool:
    return isinstance(n, exp.Not) or bool(n.args.get("negate"))


def is_agg(n: exp.Expression) -> bool:
    return isinstance(n, exp.AggFunc)


def count_aggregates(node: exp.Expression | None) -> int:
    """Aggregate calls in ``node`` (outside nested queries; an aggregate inside another counts once)."""
    count = 0
    for n in local(node):
        if is_agg(n) and not any(is_agg(a) for a in ancestors(n, node)):
            count += 1
    return count


def ancestors(n: exp.Expression, stop: exp.Expression | None) -> Iterator[exp.Expression]:
    p = n.parent
    while p is not None and n is not stop:
        yield p
        if p is stop:
            return
        n, p = p, p.parent


def join_conditions(select: exp.Select) -> list[exp.Expression]:
    return [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on") is not None]


def top_select(q: exp.Expression) -> exp.Select | None:
    """The query Spider calls the top level: the first SELECT of a set operation."""
    q = unwrap(q)
    while isinstance(q, exp.SetOperation):
        q = unwrap(q.this)
    return q if isinstance(q, exp.Select) else None


def output_is_aggregate(s: exp.Select, key: exp.Expression) -> bool:
    """Does ORDER BY ``key`` name (by alias or position) an aggregated output column of ``s``?"""
    target = output_expression(s, key)
    return target is not None and count_aggregates(target) > 0


def output_expression(s: exp.Select, key: exp.Expression) -> exp.Expression | None:
    """The SELECT expression an ORDER BY / GROUP BY key refers to by position or alias."""
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        i = int(key.this)
        return s.expressions[i - 1] if 1 <= i <= len(s.expressions) else None
    if isinstance(key, exp.Column) and not key.table:
        for e in s.expressions:
            if isinstance(e, exp.Alias) and e.alias.lower() == key.name.lower():
                return e.this
    return None
