"""What one query computes, read off its sqlglot tree (for the rules judge).

:func:`facts` parses a statement once (cached on its text) and records, with column
qualifiers, output aliases and unquoted identifier case normalised away:

- ``tables``: the base tables read (CTE names are not tables); ``links``: the pairs of tables a
  join condition connects (``USING`` links the joined table with those before it) and
  ``join_keys``: each join as the set of its key columns;
- ``measures``: the output expressions that aggregate (``count(1)`` is ``count(*)``), and
  ``count_bases``: the table whose rows a ``count(*)`` counts (its scope's FROM table);
- ``grain``: the GROUP BY expressions, a position (``GROUP BY 1``) or an output alias resolved to
  the output expression it names; ``order``: ORDER BY resolved the same way (``order_keys``:
  the columns of each key and its direction), ``limit``, ``distinct``;
- ``filters``: the WHERE and HAVING conjuncts in a canonical form (``NOT a = b`` is ``a <> b``, a
  one-value ``IN`` is ``=``, a literal on the left of a comparison moves to the right);
- ``outputs``: the outermost projection; ``roles``: every column reference by where it is used
  (measure, grain, filter, output, join) with its table when that is certain (a qualifier, or
  the only table of its scope);
- ``text``: the whole statement normalised, to recognise two spellings of one query;
- ``functions``: the names of the functions it calls;
- ``sources``: each table alias (and bare table name) to the base table it names, to resolve
  the qualifier of a DuckDB error (``Table "s" does not have a column named "year"``).

A SQLite bare column as the dialect translation writes it (``ANY_VALUE(c)``, or ``CASE WHEN
count(e) > 0 THEN arg_max_null(c, e) ELSE last(c) END``) is read as the column ``c``, as the
SQLite text means it (``arbitrary`` keeps which outputs were ``ANY_VALUE``). A ``CAST`` around
a join key column is read as the column (the dialect translation's affinity
casts, ``CAST(t.id AS DOUBLE) = u.id``, join the same columns).

:func:`clause_at` names the clause a character position of a statement falls in (for an error
DuckDB reports at a position), :func:`clause_of_name` the clause an identifier is first used in,
and :data:`CLAUSE_CATEGORY` the failure category each clause stands for.

>>> clause_at("SELECT a FROM t WHERE b IN (SELECT c FROM v) GROUP BY a", 40)
'where'
>>> clause_of_name("SELECT a FROM t JOIN u ON t.k = u.kk WHERE b = 1", "kk")
'on'

>>> f = facts("SELECT date_trunc('month', o.created_at) AS m, sum(o.amount) FROM orders o "
...           "WHERE NOT o.state = 'void' GROUP BY 1 ORDER BY m")
>>> sorted(f.tables), f.grain, sorted(f.measures)
(['orders'], ("date_trunc('month', created_at)",), ['sum(amount)'])
>>> f.filters, f.order
(("state <> 'void'",), ("date_trunc('month', created_at)",))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.dialects.duckdb import DuckDB

from sqleval_pipeline.dialect.tables import TableRef, scope_tables

__all__ = ["Facts", "facts", "ParseFailure", "TIME_WORDS", "is_time", "words", "clause_at",
           "clause_of_name", "CLAUSE_CATEGORY"]

ParseFailure = (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError, ValueError)
#: a filter or column counts as "about time" when its text contains one of these
TIME_WORDS = ("date", "month", "year", "week", "day", "_ts", "_at", "time", "interval", "quarter")
_TRUNC_UNIT = re.compile(r"(date_trunc|date_part|datediff|date_diff)\('([A-Za-z]+)'")
Ref = tuple[str | None, str]  # (table or None when uncertain, column)


@dataclass(frozen=True)
class Facts:
    tables: frozenset[str]
    links: frozenset[frozenset[str]]
    join_keys: frozenset[frozenset[str]]
    measures: frozenset[str]
    count_bases: frozenset[str]
    grain: tuple[str, ...]
    order: tuple[str, ...]
    order_keys: tuple[tuple[frozenset[str], bool], ...]
    limit: int | None
    distinct: bool
    filters: tuple[str, ...]
    filter_columns: dict[str, frozenset[Ref]]
    outputs: tuple[str, ...]
    output_names: tuple[str, ...]
    aliases: frozenset[str]
    roles: dict[str, frozenset[Ref]]
    text: str
    #: alias (or bare name) -> base table, lower-cased
    sources: dict[str, str] | None = None
    #: the names of the functions it calls, lower-cased (``count``, ``any_value``, ``strftime``)
    functions: frozenset[str] = frozenset()
    #: positions of the outputs that take some row's value (``ANY_VALUE``: a SQLite bare column)
    arbitrary: frozenset[int] = frozenset()

    @property
    def aggregates(self) -> bool:
        """Whether the outermost query aggregates or groups (else it reads rows as they are)."""
        return bool(self.measures or self.grain)

    def columns(self, role: str) -> frozenset[str]:
        """Column names used in ``role`` (measure, grain, filter, output, join)."""
        return frozenset(c for _t, c in self.roles.get(role, ()))

    def known_columns(self) -> frozenset[str]:
        """Every column name the query reads (a query that ran has each in one of its tables)."""
        names = {c for role, refs in self.roles.items() if role != "filter" for _t, c in refs}
        return frozenset(names | (self.columns("filter") - self.aliases))

    def columns_of(self, table: str) -> frozenset[str]:
        """Columns the query certainly reads from ``table`` (qualified, or its only table)."""
        return frozenset(c for refs in self.roles.values() for t, c in refs if t == table)


def words(text: str) -> set[str]:
    """Lower-case word pieces of an identifier or phrase (``payment_method`` → payment, method)."""
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) > 1}


def is_time(text: str) -> bool:
    t = text.lower()
    return any(w in t for w in TIME_WORDS)


def show(node: exp.Expression) -> str:
    """Display text of an already normalised node (lower-case functions and date units)."""
    text = node.sql("duckdb", normalize_functions="lower")
    return _TRUNC_UNIT.sub(lambda m: f"{m.group(1)}('{m.group(2).lower()}'", text)


def _bare(node: exp.Expression) -> exp.Expression:
    """A copy without column qualifiers or an output alias, ``count(1)`` as ``count(*)``."""
    node = node.unalias().copy() if isinstance(node, exp.Alias) else node.copy()
    for col in node.find_all(exp.Column):
        for part in ("table", "db", "catalog"):
            col.set(part, None)
    for cnt in node.find_all(exp.Count):
        arg = cnt.this
        if isinstance(arg, exp.Literal) and not arg.is_string:
            cnt.set("this", exp.Star())
    return node


def _plain(tree: exp.Expression) -> exp.Expression:
    """The statement without qualifiers, table aliases or output aliases (for equal spellings)."""
    tree = _bare(tree)
    for sel in list(tree.find_all(exp.Select)):
        projections = list(sel.expressions)
        group = sel.args.get("group")
        for g in list(group.expressions) if group is not None else []:
            g.replace(_resolve(g, projections).copy())
        order = sel.args.get("order")
        for o in list(order.expressions) if order is not None else []:
            o.this.replace(_resolve(o.this, projections).copy())
    for table in tree.find_all(exp.Table):
        table.set("alias", None)
    for alias in list(tree.find_all(exp.Alias)):
        if isinstance(alias.parent, exp.Select):
            alias.replace(alias.this)
    return tree


_FLIP = {exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.LTE: exp.GTE, exp.EQ: exp.EQ,
         exp.NEQ: exp.NEQ}


def _canonical(pred: exp.Expression) -> exp.Expression:
    pred = _bare(pred)
    if isinstance(pred, exp.Not) and isinstance(pred.this, exp.EQ):
        pred = exp.NEQ(this=pred.this.this, expression=pred.this.expression)
    if isinstance(pred, exp.In) and len(pred.expressions) == 1 and not pred.args.get("query"):
        pred = exp.EQ(this=pred.this, expression=pred.expressions[0])
    elif isinstance(pred, exp.In):
        pred.set("expressions", sorted(pred.expressions, key=lambda e: e.sql()))
    flip = _FLIP.get(type(pred))
    if flip and isinstance(pred.this, exp.Literal) and not isinstance(pred.expression, exp.Literal):
        pred = flip(this=pred.expression, expression=pred.this)
    return pred


def _conjuncts(cond: exp.Expression | None) -> list[exp.Expression]:
    if cond is None:
        return []
    if isinstance(cond, exp.And):
        return _conjuncts(cond.left) + _conjuncts(cond.right)
    if isinstance(cond, exp.Paren):
        return _conjuncts(cond.this)
    return [cond]


def _resolve(item: exp.Expression, projections: list[exp.Expression]) -> exp.Expression:
    """A GROUP BY / ORDER BY item with a position or an output alias replaced by what it names."""
    if isinstance(item, exp.Literal) and not item.is_string:
        try:
            i = int(item.this)
        except ValueError:
            return item
        if 1 <= i <= len(projections):
            return projections[i - 1].unalias()
        return item
    if isinstance(item, exp.Column) and not item.table:
        for p in projections:
            if isinstance(p, exp.Alias) and p.alias == item.name and not (
                    isinstance(p.this, exp.Column) and p.this.name == item.name):
                return p.this
    return item


def _debare(node: exp.Expression) -> exp.Expression:
    """A SQLite bare column as the dialect translation writes it, read back as the column:
    ``ANY_VALUE(c)``, and ``CASE WHEN count(e) > 0 THEN arg_max_null(c, e) ELSE last(c) END``."""
    if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
        return node.this.this.copy()
    if isinstance(node, exp.AnyValue):
        return node.this.copy()
    if isinstance(node, exp.Case) and len(node.args.get("ifs") or []) == 1 and \
            isinstance(node.args.get("default"), exp.Last):
        true = node.args["ifs"][0].args.get("true")
        if isinstance(true, exp.Anonymous) and true.name.lower() in ("arg_max_null", "arg_min_null") \
                and true.expressions and true.expressions[0] == node.args["default"].this:
            return true.expressions[0].copy()
    return node


def _key(node: exp.Expression) -> str:
    """A join key as the column it compares (a CAST around a column is the column)."""
    while isinstance(node, exp.Cast | exp.TryCast) and isinstance(node.this, exp.Column | exp.Cast):
        node = node.this
    return node.name if isinstance(node, exp.Column) else show(_bare(node))


class _Reader:
    def __init__(self):
        self.tables: set[str] = set()
        self.links: set[frozenset[str]] = set()
        self.join_keys: set[frozenset[str]] = set()
        self.measures: set[str] = set()
        self.count_bases: set[str] = set()
        self.grain: list[str] = []
        self.filters: list[str] = []
        self.filter_columns: dict[str, frozenset[Ref]] = {}
        self.roles: dict[str, set[Ref]] = {}
        self.sources: dict[str, str] = {}
        self._own: dict[int, dict[str, TableRef]] = {}

    def own(self, scope: Scope) -> dict[str, TableRef]:
        """The base tables ``scope`` reads, by alias (dialect/tables.py: CTEs resolved per scope)."""
        if id(scope) not in self._own:
            self._own[id(scope)] = scope_tables(scope)
        return self._own[id(scope)]

    def table_of(self, scope: Scope, col: exp.Column) -> str | None:
        own = self.own(scope)
        if col.table:
            ref = own.get(col.table)
            return ref.name if ref is not None else None
        if len(scope.sources) == 1 and len(own) == 1:
            return next(iter(own.values())).name
        return None

    def refs(self, scope: Scope, node: exp.Expression) -> set[Ref]:
        return {(self.table_of(scope, c), c.name) for c in node.find_all(exp.Column)
                if not isinstance(c.this, exp.Star)}

    def note(self, role: str, refs: set[Ref]) -> None:
        self.roles.setdefault(role, set()).update(refs)

    def read(self, scope: Scope) -> None:
        sel = scope.expression
        owned = self.own(scope)
        own = {k: r.name for k, r in owned.items()}
        self.tables.update(own.values())
        for alias, name in own.items():
            self.sources.setdefault(alias.lower(), name.lower())
            self.sources.setdefault(name.lower(), name.lower())
        if not isinstance(sel, exp.Select):
            return
        projections = list(sel.expressions)
        from_ = sel.args.get("from_") or sel.args.get("from")
        base = from_.this if from_ is not None else None
        base_name = _base_name(base, owned)
        before = [base_name] if base_name else []
        for join in sel.args.get("joins") or []:
            right = _base_name(join.this, owned)
            on, using = join.args.get("on"), join.args.get("using")
            if using:
                self.join_keys.add(frozenset(u.name for u in using))
                self.links.update(frozenset({right, b}) for b in before if right and b != right)
            elif on is not None:
                refs = self.refs(scope, on)
                self.note("join", refs)
                keys = [frozenset({_key(c.this), _key(c.expression)})
                        for c in _conjuncts(on) if isinstance(c, exp.EQ)]
                self.join_keys.update(keys)
                ts = sorted({t for t, _c in refs if t})
                self.links.update(frozenset({a, b}) for a in ts for b in ts if a < b)
            if right:
                before.append(right)
        for p in projections:
            aggs = list(p.find_all(exp.AggFunc))
            if aggs:
                self.measures.add(show(_bare(p)))
                self.note("measure", set().union(*(self.refs(scope, a) for a in aggs)))
                if base_name and any(isinstance(a, exp.Count) and isinstance(a.this, exp.Star)
                                     or isinstance(a, exp.Count) and isinstance(a.this, exp.Literal)
                                     for a in aggs):
                    self.count_bases.add(base_name)
            else:
                self.note("output", self.refs(scope, p))
        group = sel.args.get("group")
        if group is not None:
            for g in group.expressions:
                r = _resolve(g, projections)
                self.grain.append(show(_bare(r)))
                self.note("grain", self.refs(scope, r))
        for clause in ("where", "having"):
            node = sel.args.get(clause)
            for c in _conjuncts(node.this if node is not None else None):
                text = show(_canonical(c))
                if text not in self.filters:
                    self.filters.append(text)
                refs = self.refs(scope, c)
                self.filter_columns[text] = frozenset(refs)
                self.note("filter", refs)


def _base_name(node: exp.Expression | None, refs: dict[str, TableRef]) -> str | None:
    """The base table ``node`` (a FROM or JOIN item) reads; None for a CTE, a derived table or
    a table function."""
    if not isinstance(node, exp.Table):
        return None
    ref = refs.get(node.alias_or_name)
    return ref.name if ref is not None and ref.node is node else None


def _limit(tree: exp.Expression) -> int | None:
    limit = tree.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal):
        try:
            return int(limit.expression.this)
        except ValueError:
            return None
    return None


@lru_cache(maxsize=4096)
def facts(sql: str) -> Facts:
    """The facts of one DuckDB statement (parsed once per distinct text; raises on a parse error)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    if tree is None:
        raise ValueError("empty statement")
    tree = normalize_identifiers(tree, dialect="duckdb")
    first = tree if isinstance(tree, exp.Select) else next(tree.find_all(exp.Select), None)
    arbitrary = frozenset(i for i, p in enumerate(first.expressions if first is not None else ())
                          if any(True for _ in p.find_all(exp.AnyValue)))
    functions = frozenset((f.name if isinstance(f, exp.Anonymous) else f.sql_name()).lower()
                          for f in tree.find_all(exp.Func))
    tree = tree.transform(_debare)
    reader = _Reader()
    for scope in traverse_scope(tree):
        reader.read(scope)
    outer = tree if isinstance(tree, exp.Select) else next(tree.find_all(exp.Select), None)
    projections = list(outer.expressions) if outer is not None else []
    order_node = tree.args.get("order")
    ordered = [(_resolve(o.this, projections), bool(o.args.get("desc")))
               for o in (order_node.expressions if order_node is not None else [])]
    order = tuple(show(_bare(e)) + (" desc" if desc else "") for e, desc in ordered)
    order_keys = tuple((frozenset(c.name for c in e.find_all(exp.Column)), desc) for e, desc in ordered)
    return Facts(
        tables=frozenset(reader.tables), links=frozenset(reader.links),
        join_keys=frozenset(reader.join_keys), measures=frozenset(reader.measures),
        count_bases=frozenset(reader.count_bases), grain=tuple(dict.fromkeys(reader.grain)),
        order=order, order_keys=order_keys, limit=_limit(tree),
        distinct=bool(outer is not None and outer.args.get("distinct")),
        filters=tuple(reader.filters), filter_columns=reader.filter_columns,
        outputs=tuple(show(_bare(p)) for p in projections),
        output_names=tuple(p.alias_or_name for p in projections),
        aliases=frozenset(p.alias for p in projections if isinstance(p, exp.Alias) and not (
            isinstance(p.this, exp.Column) and p.this.name == p.alias)),
        roles={k: frozenset(v) for k, v in reader.roles.items()},
        text=show(_plain(tree)),
        sources=dict(reader.sources),
        functions=functions, arbitrary=arbitrary,
    )


# --------------------------------------------------------------------------- clauses

#: the failure category an error in each clause stands for (docs/judging.md)
CLAUSE_CATEGORY = {
    "select": "wrong_metric", "from": "wrong_table", "join": "wrong_table", "on": "wrong_table",
    "using": "wrong_table", "where": "wrong_filter", "having": "wrong_filter",
    "qualify": "wrong_filter", "group by": "wrong_grain", "order by": "wrong_grain",
    "limit": "wrong_grain", "offset": "wrong_grain", "window": "wrong_metric",
}
_CLAUSE_TOKENS = {
    "SELECT": "select", "FROM": "from", "JOIN": "join", "ON": "on", "USING": "using",
    "WHERE": "where", "HAVING": "having", "QUALIFY": "qualify", "GROUP_BY": "group by",
    "ORDER_BY": "order by", "LIMIT": "limit", "OFFSET": "offset", "WINDOW": "window",
    "FETCH": "limit", "WITH": "with", "TOP": "limit",
}
_CLAUSE_WORDS = re.compile(r"\b(select|from|join|on|using|where|having|qualify|group\s+by|order\s+by|"
                           r"limit|offset|window|with)\b", re.IGNORECASE)


def _tokens(sql: str):
    try:
        return [(t.token_type.name, t.text, t.start, t.end) for t in DuckDB().tokenize(sql)]
    except (sqlglot.errors.TokenError, ValueError, RecursionError):
        return None


def clause_at(sql: str, position: int) -> str | None:
    """The clause (``select``, ``from``, ``join``, ``on``, ``where``, ``group by``, …) that the
    character ``position`` of ``sql`` falls in: the outermost query's clause, except that a
    position inside a CTE's body gets the body's own clause. None before any clause.

    >>> clause_at("SELECT a, b FROM t ORDER BY a LIMIT 3", 36)
    'limit'
    """
    toks = _tokens(sql)
    if toks is None:  # an unterminated literal: clause words outside quotes, by text
        last = None
        for m in _CLAUSE_WORDS.finditer(sql[:position + 1]):
            last = re.sub(r"\s+", " ", m.group(1).lower())
        return None if last == "with" else last
    depth, at = 0, {}  # depth -> the last clause opened at that depth
    for kind, _text, start, _end in toks:
        if start > position:
            break
        if kind == "L_PAREN":
            depth += 1
            at = {d: c for d, c in at.items() if d < depth}
        elif kind == "R_PAREN":
            depth = max(0, depth - 1)
        elif kind in _CLAUSE_TOKENS:
            at[depth] = _CLAUSE_TOKENS[kind]
            at = {d: c for d, c in at.items() if d <= depth}
    for d in sorted(at):
        if at[d] != "with":
            return at[d]
    return None


def clause_of_name(sql: str, name: str) -> str | None:
    """The clause the identifier or literal ``name`` first appears in (case-insensitive; a
    quoted identifier or a string literal counts), None when it does not appear."""
    toks = _tokens(sql)
    want = name.strip().strip('"').strip("'").lower()
    if not want:
        return None
    if toks is not None:
        for _kind, text, start, _end in toks:
            if text.lower() == want:
                return clause_at(sql, start)
    m = re.search(r"(?<![\w.])" + re.escape(want) + r"(?!\w)", sql, re.IGNORECASE)
    return clause_at(sql, m.start()) if m else None
