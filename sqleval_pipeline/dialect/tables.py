"""Which tables a parsed statement reads: one answer for the guard, the judge and the proposers.

:func:`table_refs` walks sqlglot's scopes (:func:`sqlglot.optimizer.scope.traverse_scope`) and
returns one :class:`TableRef` per reference to a base table. A name is a CTE reference only in
the scopes that can see that CTE, so a CTE named like a real table shadows it only there; a
non-recursive CTE that names itself in its own body reads the *outside* table, as DuckDB does.
Identifiers are compared lower-cased (DuckDB matches them case-insensitively, even quoted).
Derived tables, ``VALUES`` and CTE references are not base tables; table functions
(``range(3)``, ``read_csv('x')``) are returned only when asked for (``functions=True``).

A table no scope accounts for (an ``INSERT``/``DROP`` target, a query sqlglot's scopes skip) is
still returned, with ``scoped=False``: the guard refuses it, the hostile suite records it.
When sqlglot cannot build the scopes at all, ``strict=False`` falls back to resolving each name
by the ``WITH`` clauses around it in the text.

>>> import sqlglot
>>> tree = sqlglot.parse_one(
...     "WITH orders AS (SELECT * FROM orders WHERE state = 'paid') "
...     "SELECT * FROM orders o JOIN main.Customers c USING (customer_id)", read="duckdb")
>>> [(r.catalog, r.db, r.name, r.alias) for r in table_refs(tree)]
[(None, None, 'orders', 'orders'), (None, 'main', 'Customers', 'c')]
>>> sorted(table_names(sqlglot.parse_one("SELECT * FROM t, range(3) r", read="duckdb")))
['t']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from sqleval_pipeline.errors import SqlevalError


class ScopeError(SqlevalError, ValueError):
    """sqlglot could not build the statement's scopes (``strict=True``); the message says why."""


@dataclass(frozen=True)
class TableRef:
    """One reference to a base table: its name parts as written (unquoted), the alias it is
    known by in its scope, and the sqlglot node (not compared).

    ``scoped`` is False for a reference no query scope accounts for; ``function`` is True for
    a table function (``name`` is then the function's lower-case name)."""

    name: str
    db: str | None = None
    catalog: str | None = None
    alias: str = ""
    scoped: bool = True
    function: bool = False
    node: exp.Table | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """The name lower-cased, as DuckDB matches it."""
        return self.name.lower()

    @property
    def qualified(self) -> bool:
        return self.db is not None or self.catalog is not None

    @property
    def parts(self) -> tuple[str | None, str | None, str]:
        """``(catalog, db, name)``."""
        return self.catalog, self.db, self.name


def table_refs(tree: exp.Expression, *, functions: bool = False, strict: bool = False,
               tick: Callable[[], None] | None = None) -> list[TableRef]:
    """Every base-table reference in ``tree``, scope by scope (see the module doc).

    ``tick`` is called once per scope (the guard checks its time budget there). When sqlglot
    cannot build the scopes, ``strict`` raises :class:`ScopeError`; otherwise every table is
    resolved by where it sits in the text (the CTEs of its enclosing ``WITH`` clauses) and
    reported with ``scoped=False``."""
    lexical = False
    try:
        scopes = list(traverse_scope(tree))
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - sqlglot raises several kinds; the caller decides
        if strict:
            raise ScopeError(str(exc)) from None
        scopes, lexical = [], True
    out: list[TableRef] = []
    seen: set[int] = set()
    for scope in scopes:
        if tick is not None:
            tick()
        visible = {name.lower() for name in scope.cte_sources}
        for table in scope.tables:
            seen.add(id(table))
            if _is_function(table):
                if functions:
                    out.append(_ref(table, scoped=True))
                continue
            if not _qualified(table) and table.name.lower() in visible \
                    and not _self_reference(table, table.name.lower()):
                continue  # a CTE this scope can see
            out.append(_ref(table, scoped=True))
    for table in tree.find_all(exp.Table):
        if id(table) in seen or isinstance(table.parent, exp.UserDefinedFunction):
            continue  # a macro's name is not a table
        if _is_function(table):
            if functions:
                out.append(_ref(table, scoped=False))
            continue
        if lexical and not _qualified(table) and _cte_in_reach(table):
            continue
        out.append(_ref(table, scoped=False))
    return out


def scope_tables(scope: Scope) -> dict[str, TableRef]:
    """The base tables one scope reads, by the alias they are known by there (a table without
    an alias by its name). CTE references, derived tables and table functions are left out."""
    visible = {name.lower() for name in scope.cte_sources}
    out: dict[str, TableRef] = {}
    for table in scope.tables:
        if _is_function(table):
            continue
        if not _qualified(table) and table.name.lower() in visible \
                and not _self_reference(table, table.name.lower()):
            continue
        out[table.alias_or_name] = _ref(table, scoped=True)
    return out


def table_names(tree: exp.Expression) -> set[str]:
    """The lower-case names of the base tables ``tree`` reads (qualifiers dropped)."""
    return {r.key for r in table_refs(tree)}


def _ref(table: exp.Table, *, scoped: bool) -> TableRef:
    function = _is_function(table)
    if function:
        fn = table.this
        name = (fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()).lower()
    else:
        name = table.name
    return TableRef(name=name, db=table.db or None, catalog=table.catalog or None,
                    alias=table.alias_or_name, scoped=scoped, function=function, node=table)


def _is_function(table: exp.Table) -> bool:
    return not isinstance(table.this, exp.Identifier)


def _qualified(table: exp.Table) -> bool:
    return bool(table.args.get("db") or table.args.get("catalog"))


def _self_reference(table: exp.Table, name: str) -> bool:
    """True when ``table`` sits inside the body of a non-recursive CTE of the same name.

    DuckDB then reads the *outside* object of that name (a table or a file), not the CTE.
    """
    node = table.parent
    while node is not None:
        if isinstance(node, exp.CTE) and node.alias_or_name.lower() == name:
            with_ = node.parent
            return not (isinstance(with_, exp.With) and with_.args.get("recursive"))
        node = node.parent
    return False


def _cte_in_reach(table: exp.Table) -> bool:
    """Whether a CTE of an enclosing ``WITH`` names ``table`` where it sits: all of that
    clause's CTEs from the query it prefixes, the earlier ones from inside a CTE's body (every
    one when the clause is RECURSIVE). Used only when sqlglot cannot build the scopes."""
    name = table.name.lower()
    child, node = table, table.parent
    while node is not None:
        if isinstance(node, exp.With):
            ctes = list(node.expressions)
            at = next((i for i, c in enumerate(ctes) if c is child), len(ctes))
            upto = len(ctes) if node.args.get("recursive") else at
            if any(c.alias_or_name.lower() == name for c in ctes[:upto]):
                return True
        else:
            with_ = node.args.get("with_") or node.args.get("with")
            if isinstance(with_, exp.With) and with_ is not child \
                    and any(c.alias_or_name.lower() == name for c in with_.expressions):
                return True
        child, node = node, node.parent
    return False


__all__ = ["ScopeError", "TableRef", "scope_tables", "table_names", "table_refs"]
