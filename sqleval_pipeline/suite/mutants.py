"""Mutants of a reference query: small edits that make it wrong, or that might not (sqlglot).

Each mutant is one edit of the reference's syntax tree. The kinds:

==================  ===================================================================
``comparison_flip``  ``>`` ↔ ``>=``, ``<`` ↔ ``<=``, ``=`` ↔ ``<>`` (comparisons with a constant)
``boundary_shift``   the constant of a comparison or a ``BETWEEN`` end moved by one unit (one
                     day for a date or timestamp column); a ``BETWEEN`` end made exclusive
``drop_predicate``   one ``AND``-ed condition of a ``WHERE``/``HAVING`` removed; an aggregate's
                     ``FILTER`` removed
``add_predicate``    a condition added: ``col IS NOT NULL`` for a column the query reads, ``col
                     <= CURRENT_DATE`` for its date columns, ``col = v`` / ``col <> v`` for a
                     constant another golden reference compares that column with, then
                     ``col IS NOT NULL`` for the other nullable columns of the tables read
``and_or_swap``      an ``AND`` made ``OR``, or an ``OR`` made ``AND``
``count_variant``    ``COUNT(*)``, ``COUNT(col)`` and ``COUNT(DISTINCT col)`` for one another;
                     ``COUNT(DISTINCT col)`` counting NULL as one more value
``distinct_toggle``  ``SELECT DISTINCT`` on or off
``join_type``        an inner join made ``LEFT``, a ``LEFT`` join made inner
``min_max_swap``     ``MIN`` ↔ ``MAX``
``order_key``        the first ``ORDER BY`` key replaced by another output column, by another
                     column of the same kind that is not output (or the same aggregate over
                     it), same direction and ``LIMIT``; or its direction reversed
==================  ===================================================================

Mutants the served models' data tests make equivalent to the reference are not generated
(:class:`~sqleval_pipeline.suite.known.Known`). Join conditions are never edited (a cross join teaches nothing and costs much). A mutant whose
text is the reference's, or another mutant's, is dropped; at most ``max_mutants`` are kept,
taken from the kinds in turn, so every kind is represented.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from sqleval_pipeline.suite.constraints import Constraints
from sqleval_pipeline.suite.known import (
    COMPARISONS, FLIPS, NUMERIC_TYPES, Known, const_side, enclosing_select, sql_of,
)
from sqleval_pipeline.suite.probes import column_tables, conjuncts, is_constant, sources_of

MUTATOR_VERSION = "m1"
DEFAULT_MAX_MUTANTS = 80
#: COUNT variants tried per COUNT call
MAX_COUNT_COLUMNS = 12
#: conditions added per SELECT
MAX_ADDED = 24
#: other sort keys tried (columns that are not output columns)
MAX_OTHER_KEYS = 4

@dataclass(frozen=True)
class Mutant:
    kind: str
    detail: str
    sql: str


def _in_join_condition(node: exp.Expression) -> bool:
    parent, child = node.parent, node
    while parent is not None:
        if isinstance(parent, exp.Join) and child is not parent.this:
            return True
        if isinstance(parent, exp.Select):
            return False
        parent, child = parent.parent, parent
    return False


class _Types:
    """Column types of the served tables, as the query's aliases see them."""

    def __init__(self, columns: Mapping[str, Mapping[str, str]]):
        self.columns = columns

    def of(self, col: exp.Expression) -> str | None:
        if not isinstance(col, exp.Column):
            return None
        sel = enclosing_select(col)
        sources = sources_of(sel, self.columns) if sel is not None else None
        if not sources:
            return None
        hits = column_tables(col, sources, self.columns)
        if not hits:
            return None
        t = hits[0][1]
        return next(v for c, v in self.columns[t].items() if c.lower() == col.name.lower())


def _family(type_: str | None, const: exp.Expression) -> str:
    t = (type_ or "").upper()
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    if t.startswith(NUMERIC_TYPES):
        return "number"
    if t:
        return "other"
    if isinstance(const, exp.Literal) and not const.is_string:
        return "number"
    if any(isinstance(n, (exp.Interval, exp.CurrentDate, exp.DateTrunc)) for n in const.walk()) or (
            isinstance(const, exp.Cast) and const.to.is_type("date")):
        return "date"
    return "other"


def _shift(const: exp.Expression, family: str, step: int) -> exp.Expression | None:
    """``const`` moved by ``step`` units (days for dates and timestamps)."""
    if family == "number":
        if isinstance(const, exp.Literal) and not const.is_string:
            try:
                value = int(const.this) if const.this.lstrip("-").isdigit() else float(const.this)
            except ValueError:
                return None
            return exp.Literal.number(value + step)
        return exp.Paren(this=exp.Add(this=exp.Paren(this=const.copy()), expression=exp.Literal.number(step)))
    if family in ("date", "timestamp"):
        if (isinstance(const, exp.Cast) and const.to.is_type("date") and isinstance(const.this, exp.Literal)
                and const.this.is_string):
            try:
                day = dt.date.fromisoformat(const.this.this) + dt.timedelta(days=step)
            except ValueError:
                return None
            return exp.Cast(this=exp.Literal.string(day.isoformat()), to=exp.DataType.build("date"))
        moved = exp.Add(this=exp.Paren(this=const.copy()),
                        expression=exp.Interval(this=exp.Literal.string(str(step)), unit=exp.var("DAY")))
        if family == "date":
            return exp.Cast(this=moved, to=exp.DataType.build("date"))
        return exp.Paren(this=moved)
    return None


def _output_name(e: exp.Expression, pos: int) -> exp.Expression:
    if isinstance(e, exp.Alias):
        return exp.column(e.alias, quoted=True) if e.alias else exp.Literal.number(pos)
    if isinstance(e, exp.Column):
        return exp.column(e.name, quoted=True)
    return exp.Literal.number(pos)


Edit = Callable[[exp.Expression], None]


def _edits(tree: exp.Expression, types: _Types, columns: Mapping[str, Mapping[str, str]],
           literals: Mapping[tuple[str, str], Sequence[Any]], known: Known) -> Iterator[tuple[str, str, int, Edit]]:
    """(kind, detail, node index, edit of that node in a copy of the tree)."""
    nodes = list(tree.walk())
    for i, node in enumerate(nodes):
        if isinstance(node, COMPARISONS) and not _in_join_condition(node) and const_side(node):
            new = FLIPS[type(node)]
            yield ("comparison_flip", f"{sql_of(node)} → {new.__name__}", i,
                   lambda n, new=new: n.replace(new(this=n.this.copy(), expression=n.expression.copy())))
            col, const = const_side(node)  # type: ignore[misc]
            fam = _family(types.of(col), const)
            for step in (-1, 1):
                moved = _shift(const, fam, step)
                if moved is None:
                    continue
                const_is_right = node.right is const

                def edit(n, moved=moved, right=const_is_right):
                    (n.expression if right else n.this).replace(moved.copy())
                yield ("boundary_shift", f"{sql_of(node)}: constant {step:+d}", i, edit)
        elif isinstance(node, exp.Between) and not _in_join_condition(node):
            low, high = node.args.get("low"), node.args.get("high")
            fam = _family(types.of(node.this), low if low is not None else node)
            for end in ("low", "high"):
                const = node.args.get(end)
                if const is None or not is_constant(const):
                    continue
                for step in (-1, 1):
                    moved = _shift(const, fam, step)
                    if moved is not None:
                        yield ("boundary_shift", f"{sql_of(node)}: {end} {step:+d}", i,
                               lambda n, end=end, moved=moved: n.args[end].replace(moved.copy()))
            if low is not None and high is not None:
                yield ("boundary_shift", f"{sql_of(node)}: low end exclusive", i,
                       lambda n: n.replace(exp.and_(exp.GT(this=n.this.copy(), expression=n.args["low"].copy()),
                                                    exp.LTE(this=n.this.copy(), expression=n.args["high"].copy()))))
                yield ("boundary_shift", f"{sql_of(node)}: high end exclusive", i,
                       lambda n: n.replace(exp.and_(exp.GTE(this=n.this.copy(), expression=n.args["low"].copy()),
                                                    exp.LT(this=n.this.copy(), expression=n.args["high"].copy()))))
        elif isinstance(node, (exp.Where, exp.Having)):
            conds = conjuncts(node.this)
            for j, cond in enumerate(conds):
                def drop(n, j=j):
                    rest = [c.copy() for k, c in enumerate(conjuncts(n.this)) if k != j]
                    if rest:
                        n.set("this", exp.and_(*rest))
                    else:
                        n.pop()
                yield ("drop_predicate", f"drop {sql_of(cond)}", i, drop)
        elif isinstance(node, exp.Filter):
            yield ("drop_predicate", f"drop FILTER of {sql_of(node.this)}", i, lambda n: n.replace(n.this.copy()))
        if isinstance(node, (exp.And, exp.Or)) and not _in_join_condition(node) and node.find_ancestor(
                exp.Where, exp.Having, exp.Filter) is not None:
            other = exp.Or if isinstance(node, exp.And) else exp.And
            yield ("and_or_swap", f"{type(node).__name__.upper()} → {other.__name__.upper()} in {sql_of(node)[:60]}", i,
                   lambda n, other=other: n.replace(
                       exp.Paren(this=other(this=n.this.copy(), expression=n.expression.copy()))))
        if isinstance(node, exp.Count):
            yield from _count_edits(node, i, columns, known)
        if isinstance(node, (exp.Min, exp.Max)):
            other = exp.Max if isinstance(node, exp.Min) else exp.Min
            yield ("min_max_swap", f"{sql_of(node)} → {other.__name__.upper()}", i,
                   lambda n, other=other: n.replace(other(this=n.this.copy())))
        if isinstance(node, exp.Join):
            side = (node.args.get("side") or "").upper()
            if side == "LEFT":
                yield ("join_type", f"LEFT JOIN {sql_of(node.this)} → INNER", i,
                       lambda n: (n.set("side", None), n.set("kind", None)))
            elif (not side and (node.args.get("kind") or "INNER").upper() == "INNER"
                  and not (isinstance(node.parent, exp.Select) and known.left_is_inner(node.parent, node))):
                yield ("join_type", f"JOIN {sql_of(node.this)} → LEFT", i,
                       lambda n: (n.set("side", "LEFT"), n.set("kind", None)))
        if isinstance(node, exp.Select):
            if node.args.get("distinct") or not known.one_row_or_grouped(node):
                yield ("distinct_toggle", "DISTINCT " + ("off" if node.args.get("distinct") else "on"), i,
                       lambda n: n.set("distinct", None if n.args.get("distinct") else exp.Distinct()))
            yield from _added_predicates(node, i, columns, literals, known)
    top = tree if isinstance(tree, exp.Select) else None
    order = top.args.get("order") if top is not None else None
    if top is not None and order is not None and order.expressions:
        first = order.expressions[0]
        yield ("order_key", f"ORDER BY {sql_of(first.this)} {'ASC' if first.args.get('desc') else 'DESC'}", 0,
               lambda n: n.args["order"].expressions[0].set("desc", not n.args["order"].expressions[0].args.get("desc")))
        keys = {sql_of(o.this).lower() for o in order.expressions}
        for pos, e in enumerate(top.expressions, start=1):
            name = _output_name(e, pos)
            if sql_of(name).lower() in keys or e.alias_or_name.lower() in {k.strip('"') for k in keys}:
                continue
            yield ("order_key", f"ORDER BY {sql_of(name)} instead of {sql_of(first.this)}", 0,
                   lambda n, name=name: n.args["order"].expressions[0].set("this", name.copy()))
        for other in _other_keys(top, first.this, columns, types):
            yield ("order_key", f"ORDER BY {sql_of(other)} instead of {sql_of(first.this)}", 0,
                   lambda n, other=other: n.args["order"].expressions[0].set("this", other.copy()))


def _other_keys(sel: exp.Select, key: exp.Expression, columns: Mapping[str, Mapping[str, str]],
                types: _Types) -> list[exp.Expression]:
    """Other sort keys of the same kind that are not output columns: another column of the
    tables read (no GROUP BY), or the same aggregate over another column (a GROUP BY whose key
    is an aggregate, named or by its alias)."""
    sources = sources_of(sel, columns)
    if not sources:
        return []
    target = key
    if isinstance(key, exp.Column) and not key.table:  # an output alias?
        target = next((e.this for e in sel.expressions if isinstance(e, exp.Alias) and e.alias.lower() == key.name.lower()),
                      key)
    agg = target if isinstance(target, (exp.Sum, exp.Avg, exp.Min, exp.Max)) else None
    base = agg.this if agg is not None else target
    if not isinstance(base, exp.Column) or (sel.args.get("group") is not None and agg is None):
        return []
    base_type = types.of(base) if base.parent is not None else None
    family = _family(base_type, base)
    used = {c.name.lower() for c in sel.find_all(exp.Column)}
    found: list[tuple[bool, int, exp.Expression]] = []
    for alias, table in sources:
        for c, t in columns[table].items():
            col = exp.column(c, table=exp.to_identifier(alias), quoted=True)
            if (c.lower() in used or family == "other" or _family(t, col) != family
                    or c.lower() == "id" or c.lower().endswith("_id")):  # keys are no measure
                continue
            found.append((t != base_type, len(found), type(agg)(this=col) if agg is not None else col))
    return [e for *_k, e in sorted(found, key=lambda x: (x[0], x[1]))][:MAX_OTHER_KEYS]


def _null_seen(col: exp.Expression) -> exp.Expression:
    """1 when some row has ``col`` NULL, else 0 (as an integer)."""
    return exp.Cast(this=exp.GT(this=exp.Sum(this=exp.Cast(this=exp.Is(this=col.copy(), expression=exp.Null()),
                                                          to=exp.DataType.build("int"))),
                                 expression=exp.Literal.number(0)),
                    to=exp.DataType.build("bigint"))


def _count_edits(node: exp.Count, i: int, columns: Mapping[str, Mapping[str, str]], known: Known
                 ) -> Iterator[tuple[str, str, int, Edit]]:
    arg = node.this
    distinct = isinstance(arg, exp.Distinct)
    inner = arg.expressions[0] if distinct and arg.expressions else arg
    star = isinstance(inner, exp.Star) or (isinstance(inner, exp.Literal) and not inner.is_string)
    sel = enclosing_select(node)
    if sel is None or (distinct and len(arg.expressions) != 1):
        return
    if not star:
        if not known.never_null(sel, inner) and not (distinct and known.is_key(sel, inner)):
            yield ("count_variant", f"{sql_of(node)} → COUNT(*)", i, lambda n: n.set("this", exp.Star()))
        if distinct and not known.never_null(sel, inner):  # NULL counted as one more value (GROUP BY's count)
            yield ("count_variant", f"{sql_of(node)} → NULL counted as a value", i,
                   lambda n: n.replace(exp.Paren(this=exp.Add(this=n.copy(), expression=_null_seen(inner)))))
        if not known.unique_alone(sel, inner):
            other = "COUNT(col)" if distinct else "COUNT(DISTINCT col)"
            yield ("count_variant", f"{sql_of(node)} → {other}", i,
                   lambda n, inner=inner, distinct=distinct: n.set(
                       "this", inner.copy() if distinct else exp.Distinct(expressions=[inner.copy()])))
        return
    sources = known.scope(sel)[0]
    if not sources:
        return
    cands: list[exp.Column] = []
    seen: set[str] = set()
    for col in sel.find_all(exp.Column):
        if enclosing_select(col) is sel and column_tables(col, sources, columns):
            key = sql_of(col).lower()
            if key not in seen and not any(x.name.lower() == col.name.lower() for x in cands):
                seen.add(key)
                cands.append(col)
    for alias, table in sources:
        for c in columns[table]:
            col = exp.column(c, table=exp.to_identifier(alias), quoted=True)
            if sql_of(col).lower() not in seen and not any(x.name.lower() == c.lower() for x in cands):
                seen.add(sql_of(col).lower())
                cands.append(col)
    n = 0
    for col in cands:
        if n >= MAX_COUNT_COLUMNS:
            break
        if not known.never_null(sel, col):
            yield ("count_variant", f"COUNT(*) → COUNT({sql_of(col)})", i, lambda n, col=col: n.set("this", col.copy()))
            n += 1
        if not known.is_key(sel, col):
            yield ("count_variant", f"COUNT(*) → COUNT(DISTINCT {sql_of(col)})", i,
                   lambda n, col=col: n.set("this", exp.Distinct(expressions=[col.copy()])))
            n += 1


def _added_predicates(sel: exp.Select, i: int, columns: Mapping[str, Mapping[str, str]],
                      literals: Mapping[tuple[str, str], Sequence[Any]], known: Known
                      ) -> Iterator[tuple[str, str, int, Edit]]:
    sources = known.scope(sel)[0]
    if not sources:
        return
    preds: list[exp.Expression] = []
    seen_cols: set[str] = set()
    for col in sel.find_all(exp.Column):
        if enclosing_select(col) is not sel or not column_tables(col, sources, columns):
            continue
        key = col.name.lower()
        if key in seen_cols or known.never_null(sel, col):
            continue
        seen_cols.add(key)
        preds.append(exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null())))
    present = known.conditions(sel)
    for pos, (alias, table) in enumerate(sources):
        for c, t in columns[table].items():
            col = exp.column(c, table=exp.to_identifier(alias), quoted=True)
            if not known.bounded_above(sel, pos, c):
                if t.upper() == "DATE":
                    preds.append(exp.LTE(this=col.copy(), expression=exp.CurrentDate()))
                elif t.upper().startswith("TIMESTAMP"):
                    preds.append(exp.LTE(this=col.copy(), expression=exp.CurrentTimestamp()))
            if known.equal(sel, pos, c):
                continue
            for v in literals.get((table, c), ()):
                lit = exp.Literal.string(v) if isinstance(v, str) else exp.Literal.number(v)
                for cls in (exp.EQ, exp.NEQ):
                    if (pos, c.lower(), cls.__name__.upper(), sql_of(lit).lower()) not in present:
                        preds.append(cls(this=col.copy(), expression=lit.copy()))
    for alias, table in sources:  # a filter that removes nothing today, on a column the query does not name
        for c in columns[table]:
            col = exp.column(c, table=exp.to_identifier(alias), quoted=True)
            if c.lower() not in seen_cols and not known.never_null(sel, col):
                seen_cols.add(c.lower())
                preds.append(exp.Not(this=exp.Is(this=col, expression=exp.Null())))
    for p in preds[:MAX_ADDED]:
        yield ("add_predicate", f"AND {sql_of(p)}", i, lambda n, p=p: n.where(p.copy(), append=True, copy=False))


def mutants(sql: str, columns: Mapping[str, Mapping[str, str]], *,
            literals: Mapping[tuple[str, str], Sequence[Any]] | None = None,
            constraints: Constraints | None = None, max_mutants: int = DEFAULT_MAX_MUTANTS) -> list[Mutant]:
    """The mutants of ``sql`` over the served ``columns`` (table → column → type); see the
    module doc. An unparsable query has none."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return []
    original = sql_of(tree)
    types = _Types(columns)
    by_kind: dict[str, list[Mutant]] = {}
    seen = {original}
    for kind, detail, index, edit in _edits(tree, types, columns, literals or {}, Known(columns, constraints)):
        copy = tree.copy()
        target = copy if index == 0 else list(copy.walk())[index]
        try:
            edit(target)
            text = sql_of(copy)
        except (sqlglot.errors.SqlglotError, AttributeError, KeyError, IndexError, TypeError, ValueError):
            continue
        if text in seen:
            continue
        seen.add(text)
        by_kind.setdefault(kind, []).append(Mutant(kind, detail, text))
    out: list[Mutant] = []
    queues = [list(v) for v in by_kind.values()]
    while queues and len(out) < max_mutants:
        for q in queues:
            if q and len(out) < max_mutants:
                out.append(q.pop(0))
        queues = [q for q in queues if q]
    return out
