"""Spider's hardness (easy, medium, hard, extra) of a query, by the rules of Spider's published
evaluator (``evaluation.py``: ``count_component1``, ``count_component2``, ``count_others``),
re-implemented on a sqlglot tree; docs/inferred-metadata.md.
"""

from __future__ import annotations

from sqlglot import exp

from sqleval_pipeline.golden.sql_shape import (
    atoms_of,
    condition_of,
    count_aggregates,
    guarded,
    is_negated,
    join_conditions,
    local,
    nested_queries,
    output_is_aggregate,
    parse_query,
    top_select,
    unwrap,
)


@guarded(None)
def spider_hardness(sql: str, dialect: str | None = "sqlite") -> str | None:
    """Spider's hardness of ``sql``: ``"easy"``, ``"medium"``, ``"hard"`` or ``"extra"``.

    The rules are Spider's (``evaluation.py``: ``count_component1``, ``count_component2``,
    ``count_others``, ``Evaluator.eval_hardness``), counted on the *top-level* query — the first
    SELECT of a set operation; an ORDER BY or LIMIT after a UNION belongs, for Spider, to its
    last branch and is not counted:

    * component 1: +1 each for WHERE, GROUP BY, ORDER BY, LIMIT; +1 per table of the FROM
      beyond the first (JOIN or comma, a derived table or CTE included); +1 per OR and per
      LIKE (NOT LIKE too) in the ON, WHERE and HAVING conditions;
    * component 2: +1 per query nested in an ON, WHERE or HAVING condition (``IN (SELECT ..)``,
      ``> (SELECT ..)``, ``EXISTS``), +1 for a set operation (INTERSECT / UNION / EXCEPT);
    * others: +1 when the "aggregate count" exceeds 1, +1 for more than one SELECT column, +1
      for more than one WHERE condition, +1 for more than one GROUP BY key. The aggregate
      count is Spider's, quirks kept: aggregated SELECT columns + aggregates in ORDER BY and
      GROUP BY + *negated* WHERE conditions + AND/OR connectors and negated conditions of
      HAVING (Spider's ``has_agg`` reads the first field of a condition, its NOT flag, and of a
      connector string, its first letter);
    * easy: c1 <= 1, others 0, c2 0; medium: (others <= 2, c1 <= 1, c2 0) or (c1 <= 2,
      others < 2, c2 0); hard: (others > 2, c1 <= 2, c2 0) or (2 < c1 <= 3, others <= 2, c2 0)
      or (c1 <= 1, others 0, c2 <= 1); else extra.

    Beyond Spider's grammar: a query nested in the SELECT list counts in component 2, any
    aggregate function (not only Spider's five) counts as one, and ORDER BY an alias or
    position of an aggregated output column counts as an aggregate in ORDER BY. A CTE is read
    like a derived table (a table of the FROM, not a nested query). None for SQL that does not
    parse as one query.

    >>> spider_hardness("SELECT count(*) FROM singer")
    'easy'
    >>> spider_hardness("SELECT name FROM singer WHERE age > 30 ORDER BY age DESC LIMIT 1")
    'hard'
    >>> spider_hardness("SELECT name FROM a INTERSECT SELECT name FROM b")
    'hard'
    >>> spider_hardness("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer) AND country = 'FR'")
    'extra'
    """
    q = parse_query(sql, dialect)
    if q is None:
        return None
    top = top_select(q)
    if top is None:
        return None
    c1 = component1(top)
    c2 = component2(top, set_operation=isinstance(unwrap(q), exp.SetOperation))
    others = count_others(top)
    if c1 <= 1 and others == 0 and c2 == 0:
        return "easy"
    if (others <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and others < 2 and c2 == 0):
        return "medium"
    if ((others > 2 and c1 <= 2 and c2 == 0) or (2 < c1 <= 3 and others <= 2 and c2 == 0)
            or (c1 <= 1 and others == 0 and c2 <= 1)):
        return "hard"
    return "extra"


def conditions_of(select: exp.Select) -> list[exp.Expression]:
    """The ON, WHERE and HAVING conditions of one SELECT (Spider's from.conds, where, having)."""
    out = join_conditions(select)
    for key in ("where", "having"):
        c = condition_of(select.args.get(key))
        if c is not None:
            out.append(c)
    return out


def component1(s: exp.Select) -> int:
    count = sum(1 for key in ("where", "group", "order", "limit") if s.args.get(key) is not None)
    count += len(s.args.get("joins") or [])
    for cond in conditions_of(s):
        for n in local(cond):
            if isinstance(n, exp.Or):
                count += 1
            elif isinstance(n, (exp.Like, exp.ILike)):
                count += 1
    return count


def component2(s: exp.Select, *, set_operation: bool) -> int:
    nested = sum(nested_queries(c) for c in conditions_of(s))
    nested += sum(nested_queries(e) for e in s.expressions)
    return nested + (1 if set_operation else 0)


def count_others(s: exp.Select) -> int:
    agg = sum(1 for e in s.expressions if count_aggregates(e) > 0)
    where = condition_of(s.args.get("where"))
    agg += sum(1 for a in atoms_with_not(where) if a)
    group = s.args.get("group")
    keys = list(group.expressions) if group is not None else []
    agg += sum(count_aggregates(k) for k in keys)
    order = s.args.get("order")
    if order is not None:
        for o in order.expressions:
            key = o.this if isinstance(o, exp.Ordered) else o
            agg += count_aggregates(key) or (1 if output_is_aggregate(s, key) else 0)
    having = condition_of(s.args.get("having"))
    if having is not None:
        agg += sum(1 for n in local(having) if isinstance(n, (exp.And, exp.Or, exp.Xor)))
        agg += sum(1 for a in atoms_with_not(having) if a)
    count = 1 if agg > 1 else 0
    count += 1 if len(s.expressions) > 1 else 0
    count += 1 if where is not None and len(atoms_of(where)) > 1 else 0
    count += 1 if len(keys) > 1 else 0
    return count


def atoms_with_not(cond: exp.Expression | None) -> list[bool]:
    """For each atomic condition of ``cond``: is it negated (``NOT IN``, ``NOT LIKE``, ``NOT
    BETWEEN``, ``IS NOT NULL``, ``NOT EXISTS``)? ``!=`` is a comparison, not a negation."""
    out: list[bool] = []
    stack: list[tuple[exp.Expression, bool]] = [(cond, False)] if cond is not None else []
    while stack:
        n, negated = stack.pop()
        if isinstance(n, (exp.And, exp.Or, exp.Xor)):
            stack.extend([(n.right, negated), (n.left, negated)])
        elif isinstance(n, exp.Not):
            stack.append((n.this, True))
        elif isinstance(n, exp.Paren):
            stack.append((n.this, negated))
        else:
            out.append(negated or is_negated(n))
    return out
