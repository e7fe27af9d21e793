"""The one table-reference extractor (dialect/tables.py) and the callers that use it.

Expected values are worked out by hand from DuckDB's name resolution: a CTE name is visible
in the query its WITH prefixes and in the bodies of later CTEs of the same WITH (all of them
when RECURSIVE); a non-recursive CTE's own body reads the outside table of that name;
identifiers match case-insensitively.
"""

import pytest
import sqlglot
from sqlglot import exp

from sqleval_pipeline.dialect import tables
from sqleval_pipeline.dialect.tables import ScopeError, TableRef, scope_tables, table_names, table_refs
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.golden.vocabulary import _tables_of
from sqleval_pipeline.guard.hostile_refs import referenced_tables
from sqleval_pipeline.guard.policy import load_policy
from sqleval_pipeline.guard.statement_filter import StatementFilter
from sqleval_pipeline.judging.sql_facts import facts
from sqleval_pipeline.suite.probes import sources_of


def parse(sql):
    return sqlglot.parse_one(sql, read="duckdb")


def names(sql, **kw):
    return sorted(r.name for r in table_refs(parse(sql), **kw))


# --------------------------------------------------------------------------- CTEs

def test_a_cte_named_like_a_real_table_shadows_it_only_where_it_is_visible():
    # the body reads the real orders; the outer query reads the CTE
    refs = table_refs(parse("WITH orders AS (SELECT * FROM orders WHERE amount > 0) "
                            "SELECT count(*) FROM orders"))
    assert [(r.name, r.scoped) for r in refs] == [("orders", True)]
    assert refs[0].node.find_ancestor(exp.CTE) is not None  # the one inside the CTE body


def test_nested_cte_scopes():
    # a is a CTE only inside the derived table; the outer a is a real table
    assert names("SELECT * FROM (WITH a AS (SELECT * FROM x) SELECT * FROM a) s, a") == ["a", "x"]
    # a chain: b reads a, a reads t
    assert names("WITH a AS (SELECT * FROM t), b AS (SELECT * FROM a) SELECT * FROM b") == ["t"]
    # an inner WITH shadows an outer one of the same name only inside it
    assert names("WITH c AS (SELECT * FROM t1) "
                 "SELECT * FROM c, (WITH c AS (SELECT * FROM t2) SELECT * FROM c) d") == ["t1", "t2"]


def test_a_recursive_cte_reads_itself_not_a_table():
    assert names("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
                 "SELECT * FROM r") == []


def test_cte_names_match_case_insensitively_but_a_qualified_name_is_a_table():
    assert names('WITH Foo AS (SELECT 1 AS x) SELECT * FROM "FOO"') == []
    refs = table_refs(parse("WITH t AS (SELECT 1 AS x) SELECT * FROM main.t"))
    assert [r.parts for r in refs] == [(None, "main", "t")]


# --------------------------------------------------------------------------- shapes

def test_subqueries_in_from_and_where_and_union_branches():
    assert names("SELECT * FROM (SELECT * FROM orders) o JOIN customers c ON o.cid = c.id") \
        == ["customers", "orders"]
    assert names("SELECT * FROM t WHERE x IN (SELECT y FROM u) AND EXISTS (SELECT 1 FROM v)") \
        == ["t", "u", "v"]
    assert names("SELECT a FROM t UNION ALL SELECT a FROM u EXCEPT SELECT a FROM t") == ["t", "t", "u"]
    assert names("SELECT (SELECT max(a) FROM u) FROM t") == ["t", "u"]
    assert names("SELECT * FROM (VALUES (1), (2)) v(a)") == []


def test_table_functions_only_when_asked_for():
    sql = "SELECT * FROM read_csv('x.csv') f, range(3) r, t"
    assert names(sql) == ["t"]
    refs = table_refs(parse(sql), functions=True)
    assert sorted((r.function, r.alias) for r in refs) == [(False, "t"), (True, "f"), (True, "r")]
    assert next(r for r in refs if r.alias == "f").name == "read_csv"


def test_quoted_and_qualified_names_keep_their_parts_and_alias():
    (ref,) = table_refs(parse('SELECT * FROM "My DB"."Main"."Order Items" AS oi'))
    assert (ref.catalog, ref.db, ref.name, ref.alias) == ("My DB", "Main", "Order Items", "oi")
    assert ref.key == "order items" and ref.qualified and ref.scoped and not ref.function
    assert ref == TableRef("Order Items", "Main", "My DB", "oi")  # the node is not compared


def test_a_table_no_scope_accounts_for_is_reported_unscoped():
    refs = table_refs(parse("INSERT INTO t SELECT * FROM u"))
    assert sorted((r.name, r.scoped) for r in refs) == [("t", False), ("u", True)]
    assert [(r.parts, r.scoped) for r in table_refs(parse("DROP TABLE c.s.t"))] == [(("c", "s", "t"), False)]


def test_without_scopes_names_are_resolved_by_the_with_clauses_around_them(monkeypatch):
    def boom(_tree):
        raise sqlglot.errors.OptimizeError("no scopes")

    monkeypatch.setattr(tables, "traverse_scope", boom)
    tree = parse("WITH a AS (SELECT * FROM a), b AS (SELECT * FROM a) SELECT * FROM b, c")
    with pytest.raises(ScopeError) as err:
        table_refs(tree, strict=True)
    assert isinstance(err.value, SqlevalError)
    refs = table_refs(tree)
    # a's own body reads the real a; b's body reads the CTE a; the query reads CTE b and table c
    assert sorted((r.name, r.scoped) for r in refs) == [("a", False), ("c", False)]


def test_tick_is_called_once_per_scope():
    calls = []
    table_refs(parse("WITH a AS (SELECT * FROM t) SELECT * FROM a WHERE x IN (SELECT y FROM u)"),
               tick=lambda: calls.append(1))
    assert len(calls) == 3  # the CTE body, the IN subquery, the outer query


def test_scope_tables_by_alias():
    tree = parse("WITH c AS (SELECT 1 AS k) SELECT * FROM orders o JOIN c USING (k) JOIN customers")
    outer = [s for s in sqlglot.optimizer.scope.traverse_scope(tree) if s.expression is tree][0]
    got = {alias: r.name for alias, r in scope_tables(outer).items()}
    assert got == {"o": "orders", "customers": "customers"}
    assert table_names(tree) == {"orders", "customers"}


# --------------------------------------------------------------------------- the callers

def test_the_guard_reads_the_real_table_inside_a_shadowing_cte():
    f = StatementFilter(load_policy(served=["orders", "customers"]), database_names={"snap"})
    v = f.check("WITH orders AS (SELECT * FROM orders WHERE amount > 0) SELECT count(*) FROM orders")
    assert v.allowed and v.tables == ("orders",)
    # the outer a is not the CTE of the derived table: a real table, not served
    v = f.check("SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) s, a")
    assert v.reason == "table_not_allowed"


def test_hostile_refs_record_the_table_a_self_named_cte_reads():
    # was [] (every CTE name dropped everywhere); DuckDB reads the outside s in the body
    assert referenced_tables("WITH s AS (SELECT * FROM s) SELECT * FROM s") == [(None, None, "s")]


def test_the_judges_facts_keep_the_table_a_shadowing_cte_reads():
    # was frozenset(): the CTE's name hid the real orders in its own body
    f = facts("WITH orders AS (SELECT * FROM orders WHERE amount > 0) SELECT count(*) FROM orders")
    assert f.tables == frozenset({"orders"})
    f = facts("WITH r AS (SELECT * FROM orders) SELECT * FROM r JOIN customers USING (customer_id)")
    assert f.tables == frozenset({"orders", "customers"})


def test_the_proposers_tables_leave_out_cte_names_and_table_functions():
    # was {"orders", "recent"} and {"orders", ""}
    assert _tables_of("WITH recent AS (SELECT * FROM orders) SELECT count(*) FROM recent") == {"orders"}
    assert _tables_of("SELECT * FROM orders, range(3) r") == {"orders"}


def test_suite_sources_see_the_cte_of_an_enclosing_query():
    tree = parse("WITH orders AS (SELECT * FROM orders WHERE amount > 0) "
                 "SELECT * FROM (SELECT * FROM orders) s")
    served = {"orders": {"amount": "INTEGER"}}
    by_text = {sel.sql(): sources_of(sel, served) for sel in tree.find_all(exp.Select)}
    # the CTE body reads the served table; the derived table reads the CTE (was the table)
    assert by_text["SELECT * FROM orders WHERE amount > 0"] == [("orders", "orders")]
    assert by_text["SELECT * FROM orders"] is None
