"""What the golden references look at, read with sqlglot: the rows a neighbour must hold.

For every reading (reference or alternative) of every case, and for every ``SELECT`` in it that
reads served tables only:

* **witness queries**: the rows that satisfy its ``WHERE`` (*all conditions*) and, for each
  top-level conjunct, the rows that satisfy every other conjunct but not that one
  (*not c_j*). Each query selects the canonical row number (``__rn``) of every table it reads,
  so a generator can copy those rows into a neighbour: a dropped or weakened condition is then
  visible on rows where only that condition decides;
* **boundaries**: each comparison of a column with a constant (``order_date > current_date -
  INTERVAL 7 DAY``, ``net_revenue_inr > 5000``, ``BETWEEN DATE '2025-01-01' AND …``), the
  constant evaluated with the clock pinned to the as-of date and cast to the column's type. A
  generator puts rows on, just below and just above each one, copied from rows that satisfy
  the other conjuncts (the witnesses of *not c_j*);
* **literals**: the string and number constants compared with each column, the values the
  mutants may add as conditions.

Nothing here reads data: constants are evaluated on an empty in-memory DuckDB.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from sqleval_pipeline.dialect.tables import scope_tables
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.results import encode_value

#: witness rows kept per witness query (the generator draws from them)
POOL_ROWS = 64
#: the column every working table carries: its row's rank in the canonical order
RN = "__rn"


@dataclass(frozen=True)
class WitnessQuery:
    """A query over the numbered working tables returning one ``__rn`` per table it reads
    (``tables``, in that order), for rows satisfying ``label``."""

    sql: str
    tables: tuple[str, ...]
    label: str
    #: the rows satisfy every condition (not all but one)
    complete: bool = False


@dataclass(frozen=True)
class Boundary:
    """A constant a reference compares ``table.column`` with (typed like the column)."""

    table: str
    column: str
    value: Any
    #: where it comes from (case id and the condition)
    origin: str
    #: witness queries whose rows satisfy the other conditions of that SELECT, with the
    #: position of ``table`` in their ``tables``
    witnesses: tuple[tuple[int, int], ...] = ()

    def key(self) -> tuple[str, str, str]:
        return (self.table, self.column, str(encode_value(self.value)))


@dataclass
class Probes:
    witnesses: list[WitnessQuery] = field(default_factory=list)
    boundaries: list[Boundary] = field(default_factory=list)
    #: (table, column) → constants compared with it (strings and numbers), sorted
    literals: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    #: readings that could not be analysed, with why
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What a neighbour is made from (labels and origins left out: the same queries from
        other cases give the same neighbours)."""
        return {
            "witnesses": [[w.sql, list(w.tables), w.complete] for w in self.witnesses],
            "boundaries": [[b.table, b.column, encode_value(b.value), [list(x) for x in b.witnesses]]
                           for b in self.boundaries],
            "literals": [[t, c, [encode_value(v) for v in vs]] for (t, c), vs in sorted(self.literals.items())],
        }


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The top-level ``AND``-ed conditions of a condition (parentheses removed)."""
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]


def is_constant(node: exp.Expression) -> bool:
    """No column, no subquery, no aggregate: a value the pinned clock fixes."""
    return not any(isinstance(n, (exp.Column, exp.Select, exp.AggFunc, exp.Star)) for n in node.walk())


def sources_of(select: exp.Select, served: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """(alias, served table) of every source of ``select`` (FROM and joins), or None when one
    of them is not a served table (a subquery, a CTE, a table function)."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        return None
    nodes = [from_.this, *(j.this for j in select.args.get("joins") or [])]
    base = _base_tables(select)
    out = []
    for node in nodes:
        if not isinstance(node, exp.Table) or id(node) not in base:
            return None
        name = next((t for t in served if t.lower() == node.name.lower()), None)
        if name is None:
            return None
        out.append((node.alias_or_name, name))
    return out


def _base_tables(select: exp.Select) -> set[int]:
    """Ids of the base-table nodes ``select``'s own scope reads, CTEs resolved per scope in the
    statement it belongs to (dialect/tables.py); empty when the scopes cannot be built."""
    try:
        scope = next((s for s in traverse_scope(select.root()) if s.expression is select), None)
    except (SqlglotError, RecursionError, KeyError, ValueError):
        return set()
    return {id(r.node) for r in scope_tables(scope).values()} if scope is not None else set()


def column_tables(col: exp.Column, sources: Sequence[tuple[str, str]],
                  columns: Mapping[str, Mapping[str, str]]) -> list[tuple[int, str]]:
    """(position in ``sources``, table) a column reference may read: its qualifier's table, else
    every source table that has a column of that name."""
    name = col.name.lower()
    if col.table:
        return [(i, t) for i, (a, t) in enumerate(sources) if a.lower() == col.table.lower()
                and any(c.lower() == name for c in columns.get(t, {}))]
    return [(i, t) for i, (_a, t) in enumerate(sources) if any(c.lower() == name for c in columns.get(t, {}))]


def _real_name(columns: Mapping[str, str], name: str) -> str:
    return next(c for c in columns if c.lower() == name.lower())


def _comparisons(cond: exp.Expression) -> Iterable[tuple[exp.Column, list[exp.Expression]]]:
    """(column, constants) of each comparison of a column with constants inside ``cond``."""
    for node in cond.walk():
        if isinstance(node, (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ)):
            left, right = node.left, node.right
            if isinstance(left, exp.Column) and is_constant(right):
                yield left, [right]
            elif isinstance(right, exp.Column) and is_constant(left):
                yield right, [left]
        elif isinstance(node, exp.Between) and isinstance(node.this, exp.Column):
            consts = [e for e in (node.args.get("low"), node.args.get("high")) if e is not None and is_constant(e)]
            if consts:
                yield node.this, consts
        elif isinstance(node, exp.In) and isinstance(node.this, exp.Column):
            consts = [e for e in node.expressions if is_constant(e)]
            if consts:
                yield node.this, consts


class _Evaluator:
    """Constant expressions evaluated once each on an empty in-memory DuckDB."""

    def __init__(self) -> None:
        self.con = duckdb.connect(config={"enable_external_access": False, "threads": "1"})
        self.cache: dict[tuple[str, str], Any] = {}

    def value(self, const: exp.Expression, type_: str) -> Any:
        key = (const.sql(dialect="duckdb"), type_)
        if key not in self.cache:
            try:
                self.cache[key] = self.con.execute(f"SELECT CAST(({key[0]}) AS {type_})").fetchone()[0]
            except duckdb.Error:
                self.cache[key] = None
        return self.cache[key]

    def close(self) -> None:
        self.con.close()


def _witness_sql(select: exp.Select, sources: Sequence[tuple[str, str]], cond: exp.Expression | None) -> str:
    q = select.copy()
    for arg in ("group", "having", "order", "limit", "offset", "distinct", "qualify", "windows", "with"):
        q.set(arg, None)
    cols = [exp.alias_(exp.column(RN, table=exp.to_identifier(a, quoted=True)), f"__w{i}", quoted=True)
            for i, (a, _t) in enumerate(sources)]
    q.set("expressions", cols)
    q.set("where", exp.Where(this=cond) if cond is not None else None)
    mix = " + ".join(f'"__w{i}" * {1103515245 + 2 * i}' for i in range(len(sources)))
    keys = ", ".join(f'"__w{i}"' for i in range(len(sources)))
    return (f"SELECT * FROM ({q.sql(dialect='duckdb')}) AS __q "
            f"ORDER BY ({mix} + 12345) % 2147483647, {keys} LIMIT {POOL_ROWS}")


def analyse(readings: Sequence[tuple[str, str]], columns: Mapping[str, Mapping[str, str]],
            as_of: dt.date) -> Probes:
    """Witness queries, boundaries and literals of ``readings`` ((origin, SQL) pairs) over the
    served ``columns`` (table → column → DuckDB type)."""
    probes = Probes()
    seen_sql: dict[str, int] = {}
    seen_bounds: dict[tuple[str, str, str], int] = {}
    literals: dict[tuple[str, str], set] = {}
    ev = _Evaluator()
    try:
        for origin, sql in readings:
            try:
                tree = sqlglot.parse_one(pin_clock(sql, as_of), read="duckdb")
            except (sqlglot.errors.SqlglotError, RecursionError) as exc:
                probes.skipped.append(f"{origin}: does not parse ({str(exc).splitlines()[0][:120]})")
                continue
            for node in tree.walk():  # comments change nothing a query looks at
                node.comments = None
            for select in tree.find_all(exp.Select):
                sources = sources_of(select, columns)
                if not sources:
                    continue
                where = select.args.get("where")
                conds = conjuncts(where.this if where is not None else None)

                def add(cond: exp.Expression | None, label: str, complete: bool = False) -> int:
                    text = _witness_sql(select, sources, cond)
                    if text not in seen_sql:
                        seen_sql[text] = len(probes.witnesses)
                        probes.witnesses.append(WitnessQuery(text, tuple(t for _a, t in sources), label, complete))
                    return seen_sql[text]

                everything = add(exp.and_(*[c.copy() for c in conds]) if conds else None,
                                 f"{origin}: every condition", complete=True)
                for j, cond in enumerate(conds):
                    others = [c.copy() for k, c in enumerate(conds) if k != j]
                    negated = exp.Is(this=exp.Paren(this=cond.copy()), expression=exp.Not(this=exp.true()))
                    fail = add(exp.and_(*others, negated) if others else negated,
                               f"{origin}: not ({cond.sql(dialect='duckdb')})")
                    for col, consts in _comparisons(cond):
                        for pos, table in column_tables(col, sources, columns):
                            cname = _real_name(columns[table], col.name)
                            ctype = columns[table][cname]
                            for const in consts:
                                value = ev.value(const, ctype)
                                if value is None:
                                    continue
                                if isinstance(value, (str, int, Decimal)) and not isinstance(value, bool):
                                    literals.setdefault((table, cname), set()).add(value)
                                if not isinstance(value, (int, float, Decimal, dt.date)) or isinstance(value, bool):
                                    continue
                                b = Boundary(table, cname, value, f"{origin}: {cond.sql(dialect='duckdb')}",
                                             ((fail, pos), (everything, pos)))
                                if b.key() in seen_bounds:  # one boundary, more rows to copy from
                                    i = seen_bounds[b.key()]
                                    old = probes.boundaries[i]
                                    more = tuple(dict.fromkeys(old.witnesses + b.witnesses))
                                    probes.boundaries[i] = Boundary(old.table, old.column, old.value, old.origin, more)
                                else:
                                    seen_bounds[b.key()] = len(probes.boundaries)
                                    probes.boundaries.append(b)
    finally:
        ev.close()
    probes.literals = {k: sorted(v, key=lambda x: (type(x).__name__, str(x))) for k, v in sorted(literals.items())}
    return probes
