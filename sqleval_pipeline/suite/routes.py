"""Which tables an answer takes its values from, and whether the neighbours can judge that route.

A neighbour database is made table by table: it keeps each table's data tests, and the
relationships tests between tables, but not the values dbt *derives* from one table into
another — ``fct_orders.units`` being the sum of its lines' ``quantity`` in ``fct_order_items``,
``mart_orders_daily.orders`` counting ``fct_orders`` per day. An answer that computes the
reference's number from another table than the reference (``sum(units) FROM fct_orders`` for
``sum(quantity) FROM fct_order_items``) is right on every database the dbt project can build,
yet differs on a neighbour: the neighbours cannot judge it.

:func:`value_tables` reads, with sqlglot's scopes (after qualifying the columns with the served
schema), the tables whose columns an answer outputs or aggregates; a ``*`` or ``COUNT(*)``
reads the rows of every table of its ``FROM``, except a table joined as the *parent* of another
there through a ``relationships`` test (a lookup: one parent row per child row, so it adds no
rows), and of a join with a table the case's readings read, only the rows of that table (the
other tables drop or repeat them as their keys say); a subquery of a ``WHERE`` or ``HAVING``
condition filters and takes no value. :meth:`Routes.judgeable` says whether those tables are all tables the case's readings
read; when they are not, the check says so and runs nothing (``inconclusive``).

>>> routes = Routes({"fct_orders": {"order_id": "INT", "units": "INT"},
...                  "fct_order_items": {"order_id": "INT", "quantity": "INT"},
...                  "fct_returns": {"order_id": "INT", "refund_inr": "INT"}},
...                 parents={("fct_returns", "fct_orders"), ("fct_order_items", "fct_orders")})
>>> sorted(routes.value_tables("SELECT sum(units) FROM fct_orders"))
['fct_orders']
>>> sorted(routes.value_tables("SELECT count(*) FROM fct_returns r JOIN fct_orders o USING (order_id)"))
['fct_returns']
>>> ok, why = routes.judgeable("SELECT sum(units) AS u FROM fct_orders", ["SELECT sum(quantity) AS u FROM fct_order_items"])
>>> ok, why[:60]
(False, 'it takes its values from fct_orders, which no reading of the')
>>> routes.judgeable("SELECT sum(refund_inr) FROM fct_returns r JOIN fct_orders o USING (order_id)",
...                  ["SELECT sum(refund_inr) FROM fct_returns"])
(True, None)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from sqleval_pipeline.dialect.tables import scope_tables


class Routes:
    """The served schema and the relationships tests the neighbours keep (see module doc)."""

    def __init__(self, columns: Mapping[str, Mapping[str, str]], parents: Iterable[tuple[str, str]] = ()):
        self.schema = {t.lower(): {c.lower(): ty for c, ty in cols.items()} for t, cols in columns.items()}
        #: (child table, parent table) pairs of the kept relationships tests
        self.parents = {(c.lower(), p.lower()) for c, p in parents}

    def _scopes(self, sql: str) -> list[Scope] | None:
        try:
            tree = sqlglot.parse_one(sql, read="duckdb")
            tree = qualify(tree, schema=self.schema, dialect="duckdb", validate_qualify_columns=False,
                           quote_identifiers=False)
            return list(traverse_scope(tree))
        except (SqlglotError, RecursionError, KeyError, ValueError):
            return None

    @staticmethod
    def _tables(scope: Scope) -> dict[str, str]:
        """The scope's base tables: alias -> table name (lower case; dialect/tables.py)."""
        return {alias: ref.key for alias, ref in scope_tables(scope).items()}

    def read_tables(self, sql: str) -> set[str] | None:
        """Every table ``sql`` reads, in any scope; None when it cannot be parsed."""
        scopes = self._scopes(sql)
        if scopes is None:
            return None
        return {t for s in scopes for t in self._tables(s).values()}

    def value_tables(self, sql: str, prefer: set[str] | None = None) -> set[str] | None:
        """The tables ``sql`` takes its output values from (see module doc); None when it
        cannot be parsed. ``prefer``: the tables whose rows a ``*`` over a join counts when it
        joins any of them (the case's readings' tables: the other tables of that join only
        drop or repeat those rows, as their keys say)."""
        scopes = self._scopes(sql)
        if scopes is None:
            return None
        out: set[str] = set()
        for scope in scopes:
            if not isinstance(scope.expression, exp.Select):
                continue
            if scope.is_subquery and scope.expression.find_ancestor(exp.Where, exp.Having) is not None:
                continue  # a condition's subquery (IN, EXISTS, a compared scalar) filters, it outputs nothing
            tables = self._tables(scope)
            for projection in scope.expression.expressions:
                for col in projection.find_all(exp.Column):
                    if col.table in tables:
                        out.add(tables[col.table])
                if projection.find(exp.Star) is not None or isinstance(projection, exp.Star):
                    names = set(tables.values())
                    rows = {t for t in names if not any((o, t) in self.parents for o in names if o != t)}
                    out |= (rows & prefer) or rows if prefer else rows
        return out

    def judgeable(self, sql: str, readings: Iterable[str]) -> tuple[bool, str | None]:
        """(True, None) when the neighbours can judge ``sql`` against the case's ``readings``
        (reference and alternatives); else (False, why)."""
        read: set[str] = set()
        for r in readings:
            tables = self.read_tables(r)
            if tables is None:
                return True, None
            read |= tables
        values = self.value_tables(sql, prefer=read)
        if values is None:
            return True, None
        other = sorted(values - read)
        if not other:
            return True, None
        return False, (f"it takes its values from {', '.join(other)}, which no reading of the case reads: "
                       "the neighbours keep each table's data tests, not the values dbt derives from one "
                       "table into another")
