"""What the data tests prove about a query: the mutants they make equivalent to it.

:class:`Known` answers, for one ``SELECT`` of a reference, whether a column can be NULL there,
whether a key is unique, whether a condition already decides a column, whether the rows are
distinct already and whether a ``LEFT`` join would keep the same rows as an inner one — from
the served models' dbt tests and the query's own top-level conditions.
:mod:`~sqleval_pipeline.suite.mutants` does not generate a mutant these facts make equivalent.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from sqleval_pipeline.suite.constraints import Constraints
from sqleval_pipeline.suite.probes import column_tables, conjuncts, is_constant, sources_of

FLIPS: dict[type, type] = {exp.GT: exp.GTE, exp.GTE: exp.GT, exp.LT: exp.LTE, exp.LTE: exp.LT,
                            exp.EQ: exp.NEQ, exp.NEQ: exp.EQ}
COMPARISONS = tuple(FLIPS)
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT", "UHUGEINT", "DECIMAL", "DOUBLE", "FLOAT", "REAL", "NUMERIC")


def sql_of(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def enclosing_select(node: exp.Expression) -> exp.Select | None:
    sel = node.find_ancestor(exp.Select)
    return sel if isinstance(sel, exp.Select) else None


def const_side(node: exp.Expression) -> tuple[exp.Expression, exp.Expression] | None:
    """(column side, constant side) of a comparison with one constant side."""
    left, right = node.left, node.right
    if is_constant(right) and not is_constant(left):
        return left, right
    if is_constant(left) and not is_constant(right):
        return right, left
    return None


class Known:
    """What the data tests prove about a SELECT. Mutants they make equivalent to the reference
    are not generated (they could never be killed, and would only lower a kill rate):

    * ``COUNT(*)`` ↔ ``COUNT(col)``, and ``col IS NOT NULL`` added, when ``col`` is never NULL
      there: a ``not_null`` test (no outer join in the SELECT), or a top-level condition that
      rejects NULLs (``col = 'x'``, ``col > 5``, ``col BETWEEN …``);
    * ``COUNT(DISTINCT key)`` for ``COUNT(*)``/``COUNT(key)`` over one table whose ``unique``
      key is never NULL;
    * ``col = v`` / ``col <> v`` added where a top-level condition already says ``col = w``;
    * ``DISTINCT`` added to a one-row aggregate, or to a ``GROUP BY`` whose keys are all output;
    * ``LEFT`` for an inner join whose right side a top-level condition filters (NULL-padded
      rows are dropped again), or that follows a ``relationships`` test from a ``not_null`` key.
    """

    def __init__(self, columns: Mapping[str, Mapping[str, str]], constraints: Constraints | None):
        c = constraints or Constraints()
        self.columns = columns
        self.not_null = {(n.table, n.column.lower()) for n in c.not_null}
        self.unique = {(u.table, u.column.lower()) for u in c.unique if u.column}
        self.refs = {(r.table, r.column.lower(), r.parent, r.field.lower()) for r in c.relationships}
        self._scopes: dict[int, tuple[list[tuple[str, str]], bool, set[tuple[int, str]], set[tuple[int, str]]]] = {}
        #: per SELECT: (position, column, comparison, constant SQL) of its top-level conditions
        self._conditions: dict[int, set[tuple[int, str, str, str]]] = {}
        self._where_rejected: dict[int, set[tuple[int, str]]] = {}

    def conditions(self, sel: exp.Select) -> set[tuple[int, str, str, str]]:
        self.scope(sel)
        return self._conditions[id(sel)]

    def bounded_above(self, sel: exp.Select, pos: int, column: str) -> bool:
        """A top-level condition already bounds the column from above."""
        return any(p == pos and c == column.lower() and op in ("LT", "LTE", "BETWEEN", "EQ")
                   for p, c, op, _v in self.conditions(sel))

    def scope(self, sel: exp.Select) -> tuple[list[tuple[str, str]], bool, set[tuple[int, str]], set[tuple[int, str]]]:
        """(sources, has an outer join, NULL-rejected (position, column), equal-to-a-constant ones)."""
        if id(sel) not in self._scopes:
            conds_seen: set[tuple[int, str, str, str]] = set()
            sources = sources_of(sel, self.columns) or []
            outer = any((j.args.get("side") or "").upper() in ("LEFT", "RIGHT", "FULL")
                        for j in sel.args.get("joins") or [])
            rejected: set[tuple[int, str]] = set()
            equal: set[tuple[int, str]] = set()
            where = sel.args.get("where")
            for cond in conjuncts(where.this if where is not None else None):
                operands: list[exp.Expression] = []
                if isinstance(cond, (*COMPARISONS, exp.Like, exp.ILike)):
                    operands = [cond.this, cond.expression]
                elif isinstance(cond, (exp.Between, exp.In)):
                    operands = [cond.this]
                elif isinstance(cond, exp.Not) and isinstance(cond.this, exp.Is) and isinstance(cond.this.expression,
                                                                                                 exp.Null):
                    operands = [cond.this.this]
                for op in operands:
                    if isinstance(op, exp.Column):
                        hits = {(p, op.name.lower()) for p, _t in column_tables(op, sources, self.columns)}
                        rejected |= hits
                        if isinstance(cond, exp.EQ) and const_side(cond) is not None:
                            equal |= hits
                        if isinstance(cond, COMPARISONS) and const_side(cond) is not None:
                            col, const = const_side(cond)  # type: ignore[misc]
                            name = type(cond).__name__.upper()
                            if col is not cond.this:  # constant on the left: the comparison read the other way
                                name = {"GT": "LT", "GTE": "LTE", "LT": "GT", "LTE": "GTE"}.get(name, name)
                            conds_seen |= {(p, c, name, sql_of(const).lower()) for p, c in hits if col is op}
                        elif isinstance(cond, exp.Between):
                            conds_seen |= {(p, c, "BETWEEN", "") for p, c in hits}
            self._where_rejected[id(sel)] = set(rejected)
            if not outer:  # inner join keys are never NULL in the joined rows
                for pos, j in enumerate(sel.args.get("joins") or [], start=1):
                    for ident in j.args.get("using") or []:
                        rejected |= {(p, ident.name.lower()) for p, (_a, t) in enumerate(sources[:pos + 1])
                                     if any(c.lower() == ident.name.lower() for c in self.columns.get(t, {}))}
                    for eq in conjuncts(j.args.get("on")):
                        if isinstance(eq, exp.EQ):
                            for op in (eq.this, eq.expression):
                                if isinstance(op, exp.Column):
                                    rejected |= {(p, op.name.lower())
                                                 for p, _t in column_tables(op, sources, self.columns)}
            self._scopes[id(sel)] = (sources, outer, rejected, equal)
            self._conditions[id(sel)] = conds_seen
        return self._scopes[id(sel)]

    def _where(self, sel: exp.Select, col: exp.Expression) -> tuple[int, str] | None:
        if not isinstance(col, exp.Column):
            return None
        sources = self.scope(sel)[0]
        hits = column_tables(col, sources, self.columns)
        return (hits[0][0], col.name.lower()) if len(hits) == 1 else None

    def never_null(self, sel: exp.Select, col: exp.Expression) -> bool:
        at = self._where(sel, col)
        if at is None:
            return False
        sources, outer, rejected, _ = self.scope(sel)
        return at in rejected or (not outer and (sources[at[0]][1], at[1]) in self.not_null)

    def unique_alone(self, sel: exp.Select, col: exp.Expression) -> bool:
        """``col`` is a ``unique`` column of the only table the SELECT reads."""
        at = self._where(sel, col)
        sources = self.scope(sel)[0]
        return at is not None and len(sources) == 1 and (sources[0][1], at[1]) in self.unique

    def is_key(self, sel: exp.Select, col: exp.Expression) -> bool:
        return self.unique_alone(sel, col) and self.never_null(sel, col)

    def equal(self, sel: exp.Select, pos: int, column: str) -> bool:
        return (pos, column.lower()) in self.scope(sel)[3]

    def one_row_or_grouped(self, sel: exp.Select) -> bool:
        """The SELECT's rows are distinct already: one aggregate row, every GROUP BY key in the
        output, or a never-NULL ``unique`` column of its only table in the output."""
        if any(isinstance(e.unalias(), exp.Column) and self.is_key(sel, e.unalias()) for e in sel.expressions):
            return True
        group = sel.args.get("group")
        if group is None:
            return any(isinstance(n, exp.AggFunc) and enclosing_select(n) is sel for e in sel.expressions
                       for n in e.walk())
        outputs = {sql_of(e.unalias()).lower() for e in sel.expressions} | {e.alias_or_name.lower() for e in sel.expressions}
        return all(sql_of(g).lower() in outputs or (isinstance(g, exp.Column) and g.name.lower() in outputs)
                   for g in group.expressions)

    def left_is_inner(self, sel: exp.Select, join: exp.Join) -> bool:
        sources = self.scope(sel)[0]
        joins = sel.args.get("joins") or []
        if not sources or join not in joins:
            return False
        pos = joins.index(join) + 1
        if any(p == pos for p, _c in self._where_rejected[id(sel)]):
            return True
        right = sources[pos][1]
        pairs: list[tuple[int, str, str]] = []  # (left position, left column, right column)
        using = join.args.get("using") or []
        if len(using) == 1:
            name = using[0].name.lower()
            pairs = [(p, name, name) for p, (_a, t) in enumerate(sources[:pos])
                     if any(c.lower() == name for c in self.columns[t])]
        on = join.args.get("on")
        if isinstance(on, exp.EQ) and isinstance(on.this, exp.Column) and isinstance(on.expression, exp.Column):
            a = column_tables(on.this, sources, self.columns)
            b = column_tables(on.expression, sources, self.columns)
            if len(a) == 1 and len(b) == 1:
                (pa, _), (pb, _) = a[0], b[0]
                if pb == pos and pa < pos:
                    pairs = [(pa, on.this.name.lower(), on.expression.name.lower())]
                elif pa == pos and pb < pos:
                    pairs = [(pb, on.expression.name.lower(), on.this.name.lower())]
        return any((sources[p][1], lc, right, rc) in self.refs and (sources[p][1], lc) in self.not_null
                   for p, lc, rc in pairs)
