"""Metadata inferred from a reference SQL (sqleval_pipeline.golden.infer, docs/inferred-metadata.md).

Every expectation is worked out by hand from the documented rules. For Spider's hardness each
case notes its counts ``c1/c2/others`` (component 1, component 2, others of Spider's
``evaluation.py``) and the branch of ``eval_hardness`` it lands in; the fixture
``spider_hardness.json`` adds 60 real Spider dev gold queries with the hardness Spider's own
evaluator gives them. Cases marked "extension" use SQL that Spider's own parser cannot read
(CTEs, comma joins, ILIKE, IS NOT NULL, EXISTS, aliases in ORDER BY, subqueries in SELECT);
their expectations follow the documented extension of the rules. The others were also checked
once against Spider's evaluator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqleval_pipeline.golden import infer as infer_module
from sqleval_pipeline.golden import sql_shape
from sqleval_pipeline.golden.infer import (
    Inference,
    infer,
    infer_difficulty,
    limit_without_order,
    main_table,
    order_matters_of,
    spider_hardness,
)
from sqleval_pipeline.golden.model import DEFAULT_DIFFICULTIES

FIXTURES = Path(__file__).parent.parent / "fixtures" / "imports"

# (sql, expected hardness, why: c1/c2/others and the branch)
HARDNESS = [
    # easy: c1 <= 1, others 0, c2 0
    ("SELECT count(*) FROM singer", "easy", "0/0/0"),
    ("SELECT name FROM singer WHERE age > 20", "easy", "where 1/0/0"),
    ("SELECT name FROM singer ORDER BY age", "easy", "order 1/0/0"),
    ("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id",
     "easy", "one join 1/0/0"),
    ("SELECT name FROM singer WHERE age BETWEEN 20 AND 30", "easy",
     "BETWEEN's AND joins no conditions: 1/0/0"),
    ("SELECT count(*) FROM singer WHERE age != 20", "easy", "!= is no negation: 1/0/0"),
    ("SELECT country FROM singer GROUP BY country HAVING count(*) > 2", "easy",
     "group 1; HAVING's count(*) is not counted by Spider's has_agg: 1/0/0"),
    ("SELECT max(age) FROM singer GROUP BY country HAVING count(*) > 2", "easy",
     "only the SELECT's max counts as an aggregate: 1/0/0"),
    ("SELECT count(*) FROM (SELECT DISTINCT name FROM singer WHERE age > 20)", "easy",
     "a derived table is one table unit, not nested SQL: 0/0/0"),
    ("WITH s AS (SELECT * FROM singer WHERE age > 20) SELECT count(*) FROM s", "easy",
     "extension: a CTE is read like a derived table: 0/0/0"),
    ("(SELECT name FROM singer)", "easy", "parentheses: 0/0/0"),
    # medium, first branch: others <= 2, c1 <= 1, c2 0
    ("SELECT name, country FROM singer", "medium", "two columns 0/0/1"),
    ("SELECT max(age), min(age) FROM singer", "medium", "two aggregates + two columns 0/0/2"),
    ("SELECT max(age), min(age), avg(age) FROM singer WHERE country = 'FR'", "medium",
     "1/0/2"),
    ("SELECT country, count(*) FROM singer GROUP BY country", "medium", "1/0/1"),
    ("SELECT country FROM singer GROUP BY country, city", "medium", "two keys 1/0/1"),
    ("SELECT count(*) FROM singer WHERE age IS NOT NULL", "medium",
     "extension: IS NOT NULL is a negated condition; count + it = 2 aggregates: 1/0/1"),
    # medium, second branch: c1 <= 2, others < 2, c2 0
    ("SELECT name FROM singer ORDER BY age LIMIT 1", "medium", "order, limit 2/0/0"),
    ("SELECT name FROM singer WHERE age = 1 OR age = 2", "medium",
     "where + or 2/0/1 (two conditions)"),
    ("SELECT name FROM singer WHERE name LIKE '%a%'", "medium", "where + like 2/0/0"),
    ("SELECT name FROM singer WHERE name NOT LIKE '%a%'", "medium",
     "NOT LIKE is a like; one negated condition is one aggregate: 2/0/0"),
    ("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id "
     "JOIN stadium AS T3 ON T2.stadium_id = T3.stadium_id", "medium", "two joins 2/0/0"),
    ("SELECT T1.name FROM singer AS T1, concert AS T2 WHERE T1.singer_id = T2.singer_id",
     "medium", "extension: comma join + where 2/0/0"),
    ("SELECT country FROM singer GROUP BY country HAVING count(*) > 2 OR max(age) > 60",
     "medium", "group + or 2/0/0; one HAVING connector = one aggregate"),
    ("SELECT country, count(*) FROM singer GROUP BY country HAVING count(*) > 2 "
     "AND avg(age) > 30", "medium", "1/0/2: select agg + HAVING connector, two columns"),
    ("SELECT name FROM singer WHERE name ILIKE 'a%'", "medium", "extension: ILIKE counts as LIKE 2/0/0"),
    # hard, first branch: others > 2, c1 <= 2, c2 0
    ("SELECT country, max(age), min(age) FROM singer WHERE age > 1 AND city = 'x' "
     "GROUP BY country, city", "hard", "2/0/4"),
    # hard, second branch: 2 < c1 <= 3, others <= 2, c2 0
    ("SELECT name FROM singer WHERE age > 30 ORDER BY age DESC LIMIT 1", "hard", "3/0/0"),
    ("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1", "hard",
     "3/0/0: one aggregate (in ORDER BY)"),
    ("SELECT country, count(*) FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1",
     "hard", "3/0/2"),
    ("SELECT country, count(*) AS n FROM singer GROUP BY country ORDER BY n DESC LIMIT 1",
     "hard", "extension: ORDER BY the alias of an aggregate: 3/0/2"),
    ("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id "
     "JOIN stadium AS T3 ON T2.stadium_id = T3.stadium_id WHERE T3.capacity > 10", "hard",
     "two joins + where 3/0/0"),
    # hard, third branch: c1 <= 1, others 0, c2 <= 1
    ("SELECT name FROM singer UNION SELECT name FROM concert", "hard", "0/1/0"),
    ("SELECT name FROM singer WHERE age > 1 INTERSECT SELECT name FROM concert WHERE x = 2",
     "hard", "1/1/0"),
    ("SELECT name FROM singer UNION SELECT name FROM concert ORDER BY name LIMIT 3", "hard",
     "ORDER BY/LIMIT after a UNION belong to its last branch: 0/1/0"),
    ("SELECT name FROM singer UNION SELECT name FROM concert UNION SELECT name FROM stadium",
     "hard", "one set operation at the top: 0/1/0"),
    ("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", "hard",
     "1/1/0: the nested avg is not counted at the top"),
    ("SELECT count(*) FROM singer WHERE singer_id IN (SELECT singer_id FROM concert)", "hard",
     "1/1/0"),
    ("SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM concert)", "hard",
     "1/1/0: one negated condition is one aggregate"),
    ("SELECT name FROM singer WHERE EXISTS (SELECT 1 FROM concert WHERE concert.x = singer.x)",
     "hard", "extension: EXISTS 1/1/0"),
    # extra
    ("SELECT count(*) FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM concert)",
     "extra", "count + negated condition = 2 aggregates: 1/1/1"),
    ("SELECT name, age FROM singer EXCEPT SELECT name, age FROM concert", "extra", "0/1/1"),
    ("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer) AND country = 'FR'",
     "extra", "1/1/1"),
    ("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM concert) "
     "AND country IN (SELECT country FROM stadium)", "extra", "two nested: 1/2/1"),
    ("SELECT name FROM singer WHERE name LIKE 'a%' OR name LIKE 'b%'", "extra",
     "where + or + 2 like = 4/0/1"),
    ("SELECT country, count(*) FROM singer WHERE age > 20 GROUP BY country "
     "ORDER BY count(*) DESC LIMIT 1", "extra", "4/0/2"),
    ("SELECT country, max(age), min(age) FROM singer WHERE age > 1 AND city = 'x' "
     "GROUP BY country, city ORDER BY country", "extra", "3/0/4"),
    ("SELECT name, (SELECT count(*) FROM concert) FROM singer", "extra",
     "extension: a query in the SELECT list is nested: 0/1/1"),
]


@pytest.mark.parametrize(("sql", "expected", "why"), HARDNESS, ids=[w for _, _, w in HARDNESS])
def test_spider_hardness_hand_derived(sql, expected, why):
    assert spider_hardness(sql) == expected, why


def test_spider_hardness_covers_every_label():
    assert {h for _, h, _ in HARDNESS} == {"easy", "medium", "hard", "extra"}


def _fixture_cases():
    return json.loads((FIXTURES / "spider_hardness.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", _fixture_cases(), ids=lambda c: f"dev{c['dev_index']}")
def test_spider_hardness_matches_spider_evaluator_on_real_dev_queries(case):
    assert spider_hardness(case["query"], "sqlite") == case["hardness"]


def test_fixture_spans_all_four_labels():
    labels = [c["hardness"] for c in _fixture_cases()]
    assert len(labels) >= 60 and set(labels) == {"easy", "medium", "hard", "extra"}


def test_spider_hardness_reads_other_dialects():
    # postgres: "name" is an identifier, ILIKE and :: casts parse
    assert spider_hardness('SELECT "name" FROM singer WHERE age::int > 3', "postgres") == "easy"
    # T-SQL TOP is a LIMIT: order + limit = 2/0/0
    assert spider_hardness("SELECT TOP 1 name FROM singer ORDER BY age", "tsql") == "medium"
    # DuckDB when no dialect is given
    assert spider_hardness("SELECT count(*) FROM singer QUALIFY 1 = 1", None) == "easy"


# --------------------------------------------------------------------------- order_matters

@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT a FROM t ORDER BY a", True),
    ("SELECT a, count(*) FROM t GROUP BY a ORDER BY 2 DESC LIMIT 3", True),
    ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", True),
    ("(SELECT a FROM t ORDER BY a)", True),
    ("(SELECT a FROM t) ORDER BY a LIMIT 1", True),
    ("WITH c AS (SELECT a FROM t) SELECT a FROM c ORDER BY a DESC", True),
    ("SELECT a FROM t", False),
    ("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3) s", False),
    ("SELECT count(*) FROM t WHERE a = (SELECT a FROM u ORDER BY b DESC LIMIT 1)", False),
    ("WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c", False),
    ("SELECT a, row_number() OVER (ORDER BY a) FROM t", False),
    ("SELECT 'order by' AS note FROM t", False),
    ("SELECT a FROM t -- order by a", False),
    ("SELECT a FROM t LIMIT 3", False),
    ("this is not sql ORDER BY", False),
])
def test_order_matters(sql, expected):
    assert order_matters_of(sql) is expected


def test_order_matters_is_stricter_than_spiders_text_test():
    # Spider's exec evaluator: order matters when 'order by' is in the gold text anywhere
    sql = "SELECT count(*) FROM concert WHERE stadium_id = (SELECT stadium_id FROM stadium " \
          "ORDER BY capacity DESC LIMIT 1)"
    assert "order by" in sql.lower()
    assert order_matters_of(sql, "sqlite") is False


# --------------------------------------------------------------------------- limit without order

@pytest.mark.parametrize(("sql", "dialect", "expected"), [
    ("SELECT a FROM t LIMIT 5", None, True),
    ("SELECT a FROM t OFFSET 5", "postgres", True),
    ("SELECT a FROM t FETCH FIRST 3 ROWS ONLY", "postgres", True),
    ("SELECT TOP 3 a FROM t", "tsql", True),
    ("SELECT a FROM t UNION SELECT b FROM u LIMIT 2", None, True),
    ("SELECT a FROM t ORDER BY a LIMIT 5", None, False),
    ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1 LIMIT 2", None, False),
    ("(SELECT a FROM t ORDER BY a) LIMIT 1", None, False),
    ("SELECT a FROM t", None, False),
    ("SELECT a FROM t ORDER BY a", None, False),
    ("SELECT * FROM (SELECT a FROM t LIMIT 3) s ORDER BY a", None, False),
    ("SELECT * FROM (SELECT a FROM t LIMIT 3) s", None, False),
    ("LIMIT 5", None, False),
])
def test_limit_without_order(sql, dialect, expected):
    assert limit_without_order(sql, dialect) is expected


# --------------------------------------------------------------------------- main table

@pytest.mark.parametrize(("sql", "dialect", "expected"), [
    ("SELECT count(*) FROM orders", None, "orders"),
    ('SELECT count(*) FROM Sales."Orders"', "postgres", "orders"),
    ("SELECT * FROM analytics.main.fct_orders o JOIN dim_customers c USING (customer_id)",
     None, "fct_orders"),
    ("SELECT * FROM a, b WHERE a.id = b.id", None, "a"),
    ("WITH recent AS (SELECT * FROM fct_orders WHERE d > DATE '2024-01-01') "
     "SELECT count(*) FROM recent", None, "fct_orders"),
    ("WITH a AS (SELECT * FROM raw_a), b AS (SELECT * FROM a) SELECT * FROM b", None, "raw_a"),
    ("WITH orders AS (SELECT * FROM raw_orders) SELECT * FROM orders", None, "raw_orders"),
    ("WITH orders AS (SELECT * FROM raw_orders) SELECT * FROM main.orders", None, "orders"),
    ("SELECT * FROM (SELECT customer_id FROM fct_orders GROUP BY 1) s JOIN dim_customers c "
     "USING (customer_id)", None, "fct_orders"),
    ("SELECT * FROM ((SELECT * FROM inner_t)) x", None, "inner_t"),
    ("SELECT a FROM t1 UNION SELECT a FROM t2", None, "t1"),
    ("SELECT 1 UNION SELECT a FROM t2", None, "t2"),
    ("SELECT * FROM generate_series(1, 3) g JOIN orders o ON o.n = g.generate_series",
     None, "orders"),
    ("SELECT * FROM (VALUES (1), (2)) v(a)", None, None),
    ("SELECT * FROM read_csv('x.csv')", None, None),
    ("SELECT * FROM 'data/x.csv'", None, None),
    ("SELECT 1", None, None),
    ("SELECT 1 WHERE EXISTS (SELECT 1 FROM t)", None, None),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) "
     "SELECT * FROM r", None, None),
    ("WITH RECURSIVE r AS (SELECT id, parent FROM nodes UNION ALL SELECT n.id, n.parent "
     "FROM nodes n JOIN r ON n.parent = r.id) SELECT count(*) FROM r", None, "nodes"),
    ("SELECT * FROM T AS t1 JOIN u AS t2 ON t1.a = t2.a", "sqlite", "t"),
    ("not a query", None, None),
])
def test_main_table(sql, dialect, expected):
    assert main_table(sql, dialect) == expected


# --------------------------------------------------------------------------- difficulty

KINDS = ("simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k")

DIFFICULTY = [
    # no predicate
    ("SELECT count(*) FROM orders", None, "simple_aggregate"),
    ("SELECT status, count(*) FROM orders GROUP BY status", None, "simple_aggregate"),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.id", None,
     "simple_aggregate"),
    ("SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.id", None,
     "simple_aggregate"),
    ("SELECT max(order_date) FROM orders", None, "simple_aggregate"),
    ("SELECT name FROM customers ORDER BY name", None, "simple_aggregate"),
    # exactly one predicate
    ("SELECT count(*) FROM orders WHERE status = 'paid'", None, "filtered_aggregate"),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.id "
     "WHERE c.city = 'Pune'", None, "filtered_aggregate"),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.id "
     "AND c.city = 'Pune'", None, "filtered_aggregate"),
    ("SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.id "
     "AND c.city = 'Pune'", None, "filtered_aggregate"),
    ("SELECT city FROM customers GROUP BY city HAVING count(*) > 10", None,
     "filtered_aggregate"),
    ("WITH paid AS (SELECT * FROM orders WHERE status = 'paid') SELECT count(*) FROM paid",
     None, "filtered_aggregate"),
    ("SELECT count(*) FILTER (WHERE status = 'paid') FROM orders", None, "filtered_aggregate"),
    ("SELECT count(*) FROM orders WHERE ship_city = bill_city", None, "filtered_aggregate"),
    ("SELECT count(*) FROM orders WHERE shipped_date > order_date", None,
     "filtered_aggregate"),
    ("SELECT count(*) FROM games WHERE year > 2010", None, "filtered_aggregate"),
    ("SELECT count(*) FROM orders WHERE NOT (status = 'paid')", None, "filtered_aggregate"),
    # two or more
    ("SELECT count(*) FROM orders WHERE status = 'paid' AND total > 100", None,
     "multi_condition"),
    ("SELECT count(*) FROM orders WHERE status = 'paid' OR status = 'sent'", None,
     "multi_condition"),
    ("SELECT city FROM customers WHERE active GROUP BY city HAVING count(*) > 10", None,
     "multi_condition"),
    ("SELECT count(*) FROM orders WHERE total > (SELECT avg(total) FROM orders)", None,
     "multi_condition"),
    ("SELECT count(*) FROM orders WHERE customer_id IN (SELECT id FROM customers "
     "WHERE city = 'Pune')", None, "multi_condition"),
    ("SELECT count(*) FROM concert WHERE stadium_id = (SELECT stadium_id FROM stadium "
     "ORDER BY capacity DESC LIMIT 1)", "sqlite", "multi_condition"),
    ("WITH paid AS (SELECT * FROM orders WHERE status = 'paid') "
     "SELECT count(*) FROM paid WHERE total > 100", None, "multi_condition"),
    # time windows (beat the predicate count)
    ("SELECT count(*) FROM orders WHERE order_date >= DATE '2024-01-01'", None, "time_window"),
    ("SELECT count(*) FROM orders WHERE order_date > current_date - INTERVAL 30 DAY", None,
     "time_window"),
    ("SELECT count(*) FROM orders WHERE order_date BETWEEN '2024-01-01' AND '2024-03-31'",
     None, "time_window"),
    ("SELECT count(*) FROM orders WHERE status = 'paid' AND region = 'N' "
     "AND order_date >= date_trunc('month', current_date)", None, "time_window"),
    ("SELECT count(*) FROM orders WHERE strftime('%Y', order_date) = '2024'", "sqlite",
     "time_window"),
    ('SELECT count(*) FROM orders WHERE order_date > "2010-01-01"', "sqlite", "time_window"),
    ("SELECT count(*) FROM orders WHERE extract(year FROM order_date) = 2024", "postgres",
     "time_window"),
    ("SELECT date_trunc('month', order_date) AS m, count(*) FROM orders GROUP BY 1", None,
     "time_window"),
    ("SELECT date_trunc('month', order_date) AS m, count(*) FROM orders GROUP BY m", None,
     "time_window"),
    ("SELECT year(order_date), count(*) FROM orders GROUP BY year(order_date)", None,
     "time_window"),
    ("SELECT month, net FROM monthly WHERE month >= date_trunc('month', current_date) "
     "- INTERVAL 3 MONTH ORDER BY month", None, "time_window"),
    # top-k (beats everything)
    ("SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC LIMIT 5", None,
     "top_k"),
    ("SELECT name FROM singer ORDER BY age DESC LIMIT 1", "sqlite", "top_k"),
    ("SELECT method, count(*) AS orders FROM orders GROUP BY method ORDER BY orders DESC",
     None, "top_k"),
    ("SELECT method, count(*) FROM orders GROUP BY method ORDER BY 2 DESC", None, "top_k"),
    ("SELECT method FROM orders GROUP BY method ORDER BY sum(total)", None, "top_k"),
    ("SELECT region, sum(net) AS net FROM orders WHERE order_date >= DATE '2025-01-01' "
     "AND status = 'paid' GROUP BY region ORDER BY net DESC", None, "top_k"),
    ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1 LIMIT 3", None, "top_k"),
]


@pytest.mark.parametrize(("sql", "dialect", "expected"), DIFFICULTY,
                         ids=[f"{e}:{s[:50]}" for s, _, e in DIFFICULTY])
def test_infer_difficulty(sql, dialect, expected):
    assert infer_difficulty(sql, DEFAULT_DIFFICULTIES, dialect) == expected


def test_difficulty_cases_cover_every_inferable_kind():
    assert {e for _, _, e in DIFFICULTY} == set(KINDS)


def test_difficulty_is_never_trap():
    for sql, dialect, _ in DIFFICULTY:
        assert infer_difficulty(sql, ("trap",), dialect) is None


def test_difficulty_outside_the_taxonomy_is_none():
    top = "SELECT name FROM singer ORDER BY age DESC LIMIT 1"
    # the taxonomy lacks top_k: no fallback to the next rule, the importer uses its default
    assert infer_difficulty(top, ("simple_aggregate", "filtered_aggregate")) is None
    assert infer_difficulty("SELECT count(*) FROM t", ("easy", "hard")) is None
    assert infer_difficulty("SELECT count(*) FROM t", ("simple_aggregate",)) == "simple_aggregate"


def test_difficulty_of_nothing_is_none():
    assert infer_difficulty(None, DEFAULT_DIFFICULTIES) is None
    assert infer_difficulty("SELEC count(*) FRM t", DEFAULT_DIFFICULTIES) is None


# --------------------------------------------------------------------------- infer / robustness

def test_infer_everything_at_once():
    got = infer("WITH r AS (SELECT * FROM fct_orders WHERE status = 'paid') "
                "SELECT region, sum(net) AS net FROM r GROUP BY region ORDER BY net DESC LIMIT 3",
                DEFAULT_DIFFICULTIES)
    # top level: group, order, limit = c1 3; select agg + order alias agg = 2, two columns: 2
    assert got == Inference(difficulty="top_k", order_matters=True, limit_without_order=False,
                            main_table="fct_orders", spider_hardness="hard")


def test_infer_limit_without_order():
    got = infer("SELECT * FROM Orders LIMIT 10", DEFAULT_DIFFICULTIES, "sqlite")
    assert got == Inference(difficulty="simple_aggregate", order_matters=False,
                            limit_without_order=True, main_table="orders",
                            spider_hardness="easy")


def test_infer_parses_once():
    sql_shape.parse_query.cache_clear()
    infer("SELECT a FROM t WHERE b = 1 ORDER BY a LIMIT 2", DEFAULT_DIFFICULTIES, "postgres")
    info = sql_shape.parse_query.cache_info()
    assert info.misses == 1 and info.hits >= 4


def test_infer_of_no_sql():
    assert infer(None, DEFAULT_DIFFICULTIES) == Inference(None, False, False, None, None)


ODD = [
    "", "   ", ";", "-- just a comment", "SELECT", "SELECT * FROM t WHERE", "((((",
    "(" * 3000 + "1" + ")" * 3000, "SELECT 1; SELECT 2", "DROP TABLE t",
    "INSERT INTO t VALUES (1)", "UPDATE t SET a = 1", "CALL do_it()", "\x00\x01 garbage \u202e",
    "SELECT 'unterminated", "SELECT * FROM t WHERE a IN (" + "SELECT a FROM t WHERE a IN (" * 200
    + "1" + ")" * 400,
]


@pytest.mark.parametrize("sql", ODD, ids=range(len(ODD)))
def test_odd_sql_gives_safe_defaults(sql):
    got = infer(sql, DEFAULT_DIFFICULTIES)
    assert got.difficulty is None or got.difficulty in DEFAULT_DIFFICULTIES
    if not sql.strip().upper().startswith("SELECT * FROM T WHERE A IN"):
        assert got == Inference(None, False, False, None, None)
    for fn in (spider_hardness, order_matters_of, limit_without_order, main_table):
        fn(sql)  # never raises


def test_unknown_dialect_gives_safe_defaults():
    assert infer("SELECT a FROM t ORDER BY a", DEFAULT_DIFFICULTIES, "no-such-dialect") == \
        Inference(None, False, False, None, None)


def test_dialect_names_as_sqleval_spells_them():
    # "PostgreSQL" and "duckdb" resolve like the importer's dialect option
    assert main_table('SELECT * FROM "Orders"', "PostgreSQL") == "orders"
    assert main_table("SELECT * FROM orders", "duckdb") == "orders"


def test_doctests():
    import doctest

    from sqleval_pipeline.golden import spider_hardness as hardness_module

    # the examples of the inference, split over the module and the two it builds on
    results = [doctest.testmod(m) for m in (infer_module, hardness_module, sql_shape)]
    result = doctest.TestResults(sum(r.failed for r in results), sum(r.attempted for r in results))
    assert result.failed == 0 and result.attempted >= 15
