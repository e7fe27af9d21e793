"""Mutants of a reference: each kind, written as intended, and none that the data tests make
equivalent to the reference."""

from __future__ import annotations

import sqlglot

from sqleval_pipeline.suite.constraints import Constraints, NotNull, Relationship, Unique
from sqleval_pipeline.suite.mutants import DEFAULT_MAX_MUTANTS, mutants

COLUMNS = {
    "orders": {"order_id": "INTEGER", "customer_id": "INTEGER", "order_date": "DATE", "status": "VARCHAR",
               "amount": "DECIMAL(12,2)", "channel": "VARCHAR", "discount": "DECIMAL(12,2)"},
    "customers": {"customer_id": "INTEGER", "city": "VARCHAR", "segment": "VARCHAR"},
}
TESTS = Constraints(
    unique=(Unique("orders", "order_id", '"order_id"'), Unique("customers", "customer_id", '"customer_id"')),
    not_null=(NotNull("orders", "order_id"), NotNull("orders", "customer_id"), NotNull("orders", "status"),
              NotNull("customers", "customer_id")),
    relationships=(Relationship("orders", "customer_id", "customers", "customer_id"),),
)


def texts(sql, kind=None, **kw):
    return [m.sql for m in mutants(sql, COLUMNS, constraints=kw.pop("constraints", TESTS), **kw)
            if kind is None or m.kind == kind]


def norm(sql):
    return sqlglot.parse_one(sql, read="duckdb").sql(dialect="duckdb")


def test_comparison_flips_and_boundary_shifts():
    sql = "SELECT count(*) FROM orders WHERE amount > 5000 AND order_date >= DATE '2025-01-01'"
    flips = texts(sql, "comparison_flip")
    assert norm("SELECT count(*) FROM orders WHERE amount >= 5000 AND order_date >= DATE '2025-01-01'") in flips
    assert norm("SELECT count(*) FROM orders WHERE amount > 5000 AND order_date > DATE '2025-01-01'") in flips
    shifts = texts(sql, "boundary_shift")
    assert norm("SELECT count(*) FROM orders WHERE amount > 5001 AND order_date >= DATE '2025-01-01'") in shifts
    assert norm("SELECT count(*) FROM orders WHERE amount > 4999 AND order_date >= DATE '2025-01-01'") in shifts
    assert norm("SELECT count(*) FROM orders WHERE amount > 5000 AND order_date >= DATE '2024-12-31'") in shifts
    assert norm("SELECT count(*) FROM orders WHERE amount > 5000 AND order_date >= DATE '2025-01-02'") in shifts
    assert not any("'cancelled' +" in t or "+ -1" in t for t in texts(
        "SELECT count(*) FROM orders WHERE status = 'cancelled'", "boundary_shift")), "a string is no number"


def test_a_clock_window_moves_by_a_day_and_stays_a_date():
    sql = "SELECT count(*) FROM orders WHERE order_date > current_date - INTERVAL 7 DAY"
    shifted = texts(sql, "boundary_shift")
    assert len(shifted) == 2 and all("AS DATE)" in t and "INTERVAL '1' DAY" in t or "INTERVAL '-1' DAY" in t
                                     for t in shifted)


def test_between_ends_move_and_become_exclusive():
    sql = "SELECT count(*) FROM orders WHERE order_date BETWEEN DATE '2025-01-01' AND DATE '2025-03-31'"
    got = texts(sql, "boundary_shift")
    assert norm("SELECT count(*) FROM orders WHERE order_date > DATE '2025-01-01' AND order_date <= DATE '2025-03-31'") in got
    assert norm("SELECT count(*) FROM orders WHERE order_date >= DATE '2025-01-01' AND order_date < DATE '2025-03-31'") in got
    assert norm("SELECT count(*) FROM orders WHERE order_date BETWEEN DATE '2025-01-01' AND DATE '2025-04-01'") in got


def test_dropped_predicates_and_and_or_swaps_keep_precedence():
    sql = "SELECT count(*) FROM orders WHERE status = 'a' AND channel = 'b' AND amount > 1"
    dropped = texts(sql, "drop_predicate")
    assert norm("SELECT count(*) FROM orders WHERE channel = 'b' AND amount > 1") in dropped
    assert norm("SELECT count(*) FROM orders WHERE status = 'a' AND channel = 'b'") in dropped
    assert norm("SELECT count(*) FROM orders WHERE status = 'a'") not in dropped  # one at a time
    swaps = texts(sql, "and_or_swap")
    assert norm("SELECT count(*) FROM orders WHERE (status = 'a' OR channel = 'b') AND amount > 1") in swaps
    assert norm("SELECT count(*) FROM orders WHERE status = 'a' AND channel = 'b' OR amount > 1") in [norm(s) for s in swaps] \
        or norm("SELECT count(*) FROM orders WHERE (status = 'a' AND channel = 'b' OR amount > 1)") in swaps
    only = texts("SELECT count(*) FROM orders WHERE status = 'a'", "drop_predicate")
    assert only == [norm("SELECT count(*) FROM orders")]


def test_count_variants_skip_what_a_not_null_test_makes_equal():
    got = texts("SELECT count(*) FROM orders", "count_variant")
    assert norm('SELECT count(orders."channel") FROM orders') in got  # channel may be NULL
    assert norm('SELECT count(DISTINCT orders."customer_id") FROM orders') in got
    assert norm('SELECT count(orders."order_id") FROM orders') not in got  # not_null: the same count
    assert norm('SELECT count(DISTINCT orders."order_id") FROM orders') not in got  # a never-NULL unique key
    assert norm('SELECT count(orders."order_id") FROM orders') in texts(
        "SELECT count(*) FROM orders", "count_variant", constraints=Constraints())
    distinct = texts("SELECT count(DISTINCT channel) FROM orders", "count_variant")
    assert norm("SELECT count(channel) FROM orders") in distinct and norm("SELECT count(*) FROM orders") in distinct
    assert any("IS NULL" in t for t in distinct)  # NULL counted as one more value
    assert texts("SELECT count(*) FROM orders WHERE channel = 'web'", "count_variant").count(
        norm("SELECT count(channel) FROM orders WHERE channel = 'web'")) == 0  # the condition rejects NULL


def test_added_predicates():
    got = texts("SELECT sum(amount) FROM orders WHERE status = 'x'", "add_predicate",
                literals={("orders", "status"): ["x", "y"], ("orders", "channel"): ["web"]})
    assert norm("SELECT sum(amount) FROM orders WHERE status = 'x' AND NOT amount IS NULL") in got
    assert norm('SELECT sum(amount) FROM orders WHERE status = \'x\' AND orders."order_date" <= CURRENT_DATE') in got
    assert norm('SELECT sum(amount) FROM orders WHERE status = \'x\' AND orders."channel" = \'web\'') in got
    assert not any('"status" = \'y\'' in t or '"status" <> \'y\'' in t for t in got)  # status = 'x' decides
    assert not any("NOT status IS NULL" in t for t in got)
    assert norm('SELECT sum(amount) FROM orders WHERE status = \'x\' AND NOT orders."discount" IS NULL') in got
    bounded = texts("SELECT count(*) FROM orders WHERE order_date < DATE '2025-01-01'", "add_predicate")
    assert not any("CURRENT_DATE" in t for t in bounded)  # already bounded above


def test_join_distinct_min_max_and_order_keys():
    join = "SELECT count(*) FROM orders o JOIN customers c USING (customer_id) WHERE o.status = 'x'"
    assert texts(join, "join_type") == []  # a not_null key to its parent: LEFT is the same join
    assert texts(join, "join_type", constraints=Constraints()) == [
        norm("SELECT count(*) FROM orders o LEFT JOIN customers c USING (customer_id) WHERE o.status = 'x'")]
    filtered = "SELECT count(*) FROM orders o JOIN customers c USING (customer_id) WHERE c.city = 'Pune'"
    assert texts(filtered, "join_type", constraints=Constraints()) == []  # the WHERE drops padded rows
    assert texts("SELECT o.status FROM orders o LEFT JOIN customers c USING (customer_id)", "join_type") == [
        norm("SELECT o.status FROM orders o JOIN customers c USING (customer_id)")]
    assert texts("SELECT count(*) FROM orders", "distinct_toggle") == []  # one row
    assert texts("SELECT channel FROM orders", "distinct_toggle") == [norm("SELECT DISTINCT channel FROM orders")]
    assert texts("SELECT min(amount) FROM orders", "min_max_swap") == [norm("SELECT max(amount) FROM orders")]
    keys = texts("SELECT channel, sum(amount) AS total FROM orders GROUP BY channel ORDER BY total DESC LIMIT 3",
                 "order_key")
    assert norm("SELECT channel, sum(amount) AS total FROM orders GROUP BY channel ORDER BY total ASC LIMIT 3") in keys
    assert norm('SELECT channel, sum(amount) AS total FROM orders GROUP BY channel ORDER BY "channel" DESC LIMIT 3') in keys
    assert norm('SELECT channel, sum(amount) AS total FROM orders GROUP BY channel ORDER BY SUM(orders."discount") DESC LIMIT 3') in keys
    plain = texts("SELECT order_id, amount FROM orders ORDER BY amount DESC LIMIT 3", "order_key")
    assert norm('SELECT order_id, amount FROM orders ORDER BY orders."discount" DESC LIMIT 3') in plain


def test_mutants_are_distinct_valid_and_bounded():
    sql = ("SELECT c.city, count(*) AS n FROM orders o JOIN customers c USING (customer_id) "
           "WHERE o.status = 'x' AND o.amount > 10 AND o.order_date >= current_date - INTERVAL 30 DAY "
           "GROUP BY c.city ORDER BY n DESC LIMIT 5")
    ms = mutants(sql, COLUMNS, constraints=TESTS)
    assert ms and len(ms) <= DEFAULT_MAX_MUTANTS
    assert len({m.sql for m in ms}) == len(ms) and norm(sql) not in {m.sql for m in ms}
    for m in ms:
        sqlglot.parse_one(m.sql, read="duckdb")
    few = mutants(sql, COLUMNS, constraints=TESTS, max_mutants=9)
    assert len(few) == 9 and len({m.kind for m in few}) >= 6  # the kinds in turn
    assert mutants("SELECT FROM WHERE (", COLUMNS) == []
