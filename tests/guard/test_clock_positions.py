"""The wall clock in every syntactic position (issue 21, class 1: decide on what is certainly seen).

DuckDB's bound plan folds lambda bodies into constants, so a check that walks only the plan
never sees ``list_reduce(l, lambda a, b: a + epoch_ms("current_timestamp"))`` read the clock.
This test generates clock reads — every spelling (keywords, calls, quoted keywords that the
binder turns into calls, qualified calls) in every position (each lambda-taking function,
list comprehension, FILTER, window, QUALIFY, PIVOT, CTE, subquery, LATERAL, GROUP BY/HAVING,
ORDER BY inside an aggregate, VALUES, set operations, structs) — sends each through the real
guard, and asserts that an allowed statement returns the as-of date and nothing derived from
the machine's clock.

The expected value is the snapshot's as-of date, fixed by the test session; the machine's
date is read here with :func:`datetime.date.today` and must differ from it for the test to
mean anything (asserted).
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from sqleval_pipeline.guard import duckdb_view
from sqleval_pipeline.guard.duckdb_view import DuckDBView, decide

#: spellings of "today" (each an expression of type DATE)
SPELLINGS = [
    'CAST("current_timestamp" AS DATE)',
    'CAST("CURRENT_TIMESTAMP" AS DATE)',
    '"current_date"',
    '"Current_Date"',
    'CAST("localtimestamp" AS DATE)',
    "CAST(make_timestamp(epoch_us(\"current_timestamp\")) AS DATE)",
    "CAST(epoch_ms(epoch_ms(\"current_timestamp\")) AS DATE)",
    "current_date",
    "CAST(current_timestamp AS DATE)",
    "CAST(now() AS DATE)",
    "today()",
    'CAST("now"() AS DATE)',
    "CAST(main.now() AS DATE)",
    "CAST(get_current_timestamp() AS DATE)",
    "CAST(transaction_timestamp() AS DATE)",
]

#: positions: each template yields the DATE expression {c} (or a value built from it) as output
POSITIONS = {
    "select": "SELECT {c} AS d",
    "list_transform": "SELECT list_transform([1], lambda x: {c})[1] AS d",
    "list_transform_arrow": "SELECT list_transform([1], x -> {c})[1] AS d",
    "array_transform": "SELECT array_transform([1], lambda x: {c})[1] AS d",
    "apply": "SELECT apply([1], lambda x: {c})[1] AS d",
    "list_apply": "SELECT list_apply([1], lambda x: {c})[1] AS d",
    "array_apply": "SELECT array_apply([1], lambda x: {c})[1] AS d",
    "list_reduce": "SELECT list_reduce([DATE '1900-01-01', DATE '1900-01-02'], lambda a, b: greatest(a, b, {c})) AS d",
    "list_reduce_init": "SELECT list_reduce([DATE '1900-01-01'], lambda a, b: greatest(a, b), {c}) AS d",
    "array_reduce": "SELECT array_reduce([DATE '1900-01-01', DATE '1900-01-02'], lambda a, b: greatest(a, b, {c})) AS d",
    "reduce": "SELECT reduce([DATE '1900-01-01', DATE '1900-01-02'], lambda a, b: greatest(a, b, {c})) AS d",
    "list_filter": "SELECT list_filter([{c}, DATE '1900-01-01'], lambda x: x > {c} - 1)[1] AS d",
    "array_filter": "SELECT array_filter([{c}], lambda x: x = {c})[1] AS d",
    "filter": "SELECT filter([{c}], lambda x: x IS NOT NULL AND {c} IS NOT NULL)[1] AS d",
    "invoke": "SELECT invoke(lambda x: {c}, 1) AS d",
    "nested_lambda": "SELECT list_transform([[1]], lambda x: list_transform(x, lambda y: {c})[1])[1] AS d",
    "comprehension": "SELECT [{c} for x in [1]][1] AS d",
    "comprehension_if": "SELECT [x for x in [{c}] if x = {c}][1] AS d",
    "lambda_param_shadow": 'SELECT list_transform([{c}], lambda "current_date": "current_date")[1] AS d',
    "filter_clause": "SELECT max({c}) FILTER (WHERE {c} IS NOT NULL) AS d",
    "window": "SELECT max({c}) OVER () AS d",
    "window_order": "SELECT first_value({c}) OVER (ORDER BY {c}) AS d",
    "qualify": "SELECT d FROM (SELECT {c} AS d) QUALIFY max({c}) OVER () = d",
    "cte": "WITH t AS (SELECT {c} AS d) SELECT d FROM t",
    "subquery": "SELECT (SELECT {c}) AS d",
    "exists": "SELECT {c} AS d WHERE EXISTS (SELECT {c})",
    "lateral": "SELECT l.d FROM range(1) r, LATERAL (SELECT {c} AS d) l",
    "pivot": "SELECT * FROM (PIVOT (SELECT {c} AS d, 'k' AS k) ON k IN ('k') USING max(d))",
    "group_having": "SELECT max(x) AS d FROM (SELECT {c} AS x) GROUP BY x HAVING max(x) = {c}",
    "ordered_aggregate": "SELECT list({c} ORDER BY {c})[1] AS d",
    "values": "SELECT * FROM (VALUES ({c})) t(d)",
    "union": "SELECT {c} AS d UNION ALL SELECT {c}",
    "struct": "SELECT {{'a': {c}}}.a AS d",
    "case": "SELECT CASE WHEN {c} IS NULL THEN NULL ELSE {c} END AS d",
    "strftime": "SELECT CAST(strftime({c}, '%Y-%m-%d') AS DATE) AS d",
    "range_args": "SELECT CAST(max(range) AS DATE) AS d FROM range(CAST({c} AS TIMESTAMP), "
                  "CAST({c} AS TIMESTAMP) + INTERVAL 1 HOUR, INTERVAL 1 HOUR)",
}

#: positions where nothing runs: sqlglot cannot parse ``apply`` and ``reduce`` (keywords to
#: it), so the filter refuses them; DuckDB 2.0 rejects the deprecated arrow lambda
NOTHING_RUNS = {"apply", "reduce", "list_transform_arrow"}

LAMBDA_FUNCTIONS_COVERED = {"apply", "array_apply", "array_filter", "array_reduce", "array_transform", "filter",
                            "invoke", "list_apply", "list_filter", "list_reduce", "list_transform", "reduce"}


def test_every_lambda_taking_function_has_a_position():
    """A DuckDB upgrade that adds a lambda-taking function to the allowlist must add it here."""
    con = duckdb.connect()
    lambda_functions = {r[0] for r in con.execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE list_contains(parameter_types, 'LAMBDA')").fetchall()}
    from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS

    assert (lambda_functions & ALLOWED_FUNCTIONS) <= LAMBDA_FUNCTIONS_COVERED, \
        sorted((lambda_functions & ALLOWED_FUNCTIONS) - LAMBDA_FUNCTIONS_COVERED)


def _cells(rows) -> list:
    return [c for row in rows for c in row]


@pytest.mark.parametrize("position", sorted(POSITIONS))
def test_clock_read_in_every_position_gives_the_as_of_date_or_is_refused(position, guard, serving_snapshot):
    as_of = serving_snapshot.manifest.as_of
    today = dt.date.today()
    assert today != as_of, "the test needs a machine date other than the as-of date"
    allowed = 0
    for spelling in SPELLINGS:
        sql = POSITIONS[position].format(c=spelling)
        r = guard.execute(sql)
        if not r.ok:
            assert r.status in ("refused", "error"), (sql, r.describe())
            continue
        allowed += 1
        cells = _cells(r.result.rows)
        dates = [c for c in cells if isinstance(c, dt.date)]
        assert dates, (sql, r.result.rows)
        assert all((c.date() if isinstance(c, dt.datetime) else c) == as_of for c in dates), \
            (sql, r.result.rows)
        assert not any(str(today) in str(c) for c in cells), (sql, r.result.rows)
    if position in NOTHING_RUNS:
        assert allowed == 0
    else:  # the test means something only if the unquoted spellings (pinned by the rewrite) run
        assert allowed >= 1, f"no spelling allowed in position {position}: the template is broken"


def test_the_reported_attack_is_refused(guard):
    r = guard.execute('SELECT list_reduce([1, 2], lambda a, b: a + epoch_ms("current_timestamp"))')
    assert r.status == "refused" and r.reason == "duckdb_function_not_allowed", r.describe()
    assert "lambda" in r.message


class _Allow:
    def function_allowed(self, name, nargs=None):
        return name in {"list_transform", "list_value", "+", "epoch_ms"}

    def table_function_allowed(self, name):
        return False


def _view(sql: str) -> DuckDBView:
    con = duckdb.connect()
    return duckdb_view.parse_view(con, sql)


@pytest.mark.parametrize("sql, columns, refused", [
    ('SELECT "user" FROM t', {"user"}, False),               # a served column named user
    ('SELECT "user" FROM t', {"name"}, True),                 # binds to user(): the session
    ('SELECT "current_timestamp"', None, True),              # columns unknown: fail closed
    ("SELECT list_transform([1], lambda x: x + \"user\")", {"user"}, True),  # in a lambda: refused even then
    ('SELECT list_transform([1], lambda "user": "user" + 1)', set(), False),  # a lambda parameter
    ('SELECT t."current_date" FROM t', set(), False),        # qualified: always a column
    ('SELECT "current_date" FROM t', {"current_date"}, True),  # a clock name: qualify it
    ('SELECT epoch_us("current_timestamp") FROM t', {"current_timestamp"}, True),  # the plan folds it
    ("SELECT list_transform([1], lambda x: x + 1)", set(), False),
])
def test_value_function_names_are_calls_unless_a_served_column(sql, columns, refused):
    view = _view(sql)
    refusal = decide(view, _Allow(), ["t"], columns=columns)
    assert (refusal is not None and refusal.code == duckdb_view.FUNCTION_NOT_ALLOWED) is refused, (sql, refusal)


def test_value_function_table_matches_duckdb():
    """Each name of VALUE_FUNCTIONS really is turned into a call by DuckDB's binder: a SELECT
    of the quoted name with no table succeeds, and the plan shows the function named — or
    only a constant (the session names are folded at bind time: the plan hides them too)."""
    con = duckdb.connect()
    for name, function in duckdb_view.VALUE_FUNCTIONS.items():
        con.execute(f'SELECT "{name}"').fetchall()  # a binder error here: not a value function
        plan = con.execute("SELECT json_serialize_plan(?, optimize := false)", [f'SELECT "{name}"']).fetchone()[0]
        assert f'"{function}"' in plan or ('"BOUND_FUNCTION"' not in plan and "VALUE_CONSTANT" in plan), \
            (name, plan[:300])
    # and a name outside the table is an ordinary (missing) column
    with pytest.raises(duckdb.BinderException):
        con.execute('SELECT "current_datetime_x"').fetchall()
