"""Metadata inferred from a reference SQL (docs/inferred-metadata.md).

When an import's source gives no difficulty, no ``order_matters`` or no cluster, the importer
asks this module. Every function here is pure: it reads the SQL text (parsed once with sqlglot
in the text's own dialect, then cached) and never touches a database or a file.

* :func:`spider_hardness` — Spider's ``easy`` / ``medium`` / ``hard`` / ``extra``, by the rules of
  Spider's ``evaluation.py`` (``eval_hardness``), re-stated on a sqlglot tree.
* :func:`order_matters_of` — the query has a top-level ORDER BY.
* :func:`limit_without_order` — the query cuts its rows (LIMIT, FETCH, TOP, OFFSET) at the top
  level without a top-level ORDER BY that decides which rows.
* :func:`main_table` — the first base table the outermost query reads, through CTEs and derived
  tables; the cluster when the source gives none.
* :func:`infer_difficulty` — one of the default taxonomy's kinds (never ``trap``).
* :func:`infer` — all of them at once, as an :class:`Inference`.

Odd input never raises: a text that does not parse (or holds no query, or more than one
statement, or names an unknown dialect) gives ``None`` for every name-valued answer and
``False`` for the two flags.

>>> infer("SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC LIMIT 5",
...       ("simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k"))
Inference(difficulty='top_k', order_matters=True, limit_without_order=False, main_table='customers', spider_hardness='hard')
>>> infer("not sql at all", ("top_k",))
Inference(difficulty=None, order_matters=False, limit_without_order=False, main_table=None, spider_hardness=None)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from sqleval_pipeline.golden.sql_shape import (
    atoms_of,
    condition_of,
    count_aggregates,
    guarded,
    join_conditions,
    local,
    nested_queries,
    output_expression,
    output_is_aggregate,
    parse_query,
    top_arg,
    top_select,
)
from sqleval_pipeline.golden.spider_hardness import spider_hardness

__all__ = [
    "Inference", "infer", "infer_difficulty", "limit_without_order", "main_table",
    "order_matters_of", "spider_hardness",
]

#: the difficulty names this module can infer, in precedence order (``trap`` is never inferred)
INFERABLE = ("top_k", "time_window", "multi_condition", "filtered_aggregate", "simple_aggregate")


@dataclass(frozen=True)
class Inference:
    """Everything inferred from one reference SQL (see :func:`infer`)."""

    #: a name of the caller's taxonomy, or None (nothing inferred, or not in the taxonomy)
    difficulty: str | None
    #: the reference has a top-level ORDER BY
    order_matters: bool
    #: the reference cuts its rows at the top level with no top-level ORDER BY
    limit_without_order: bool
    #: lower-case unqualified name of the first base table the outermost query reads
    main_table: str | None
    #: Spider's hardness (``easy``, ``medium``, ``hard``, ``extra``)
    spider_hardness: str | None


def infer(sql: str | None, difficulties: Sequence[str], dialect: str | None = None) -> Inference:
    """Every inference for ``sql`` (written in ``dialect``; None means DuckDB), parsing it once.

    ``None`` (a should-refuse case has no reference) infers nothing.

    >>> infer(None, ("top_k",))
    Inference(difficulty=None, order_matters=False, limit_without_order=False, main_table=None, spider_hardness=None)
    """
    if sql is None:
        return Inference(None, False, False, None, None)
    return Inference(
        difficulty=infer_difficulty(sql, difficulties, dialect),
        order_matters=order_matters_of(sql, dialect),
        limit_without_order=limit_without_order(sql, dialect),
        main_table=main_table(sql, dialect),
        spider_hardness=spider_hardness(sql, dialect),
    )


# --------------------------------------------------------------------------- parsing


# --------------------------------------------------------------------------- Spider hardness


# --------------------------------------------------------------------------- order and cuts


@guarded(False)
def order_matters_of(sql: str, dialect: str | None = None) -> bool:
    """True when the outermost query (or the set operation at the top) has an ORDER BY.

    An ORDER BY only inside a subquery, a CTE or a window (``OVER (ORDER BY ..)``) does not
    decide the order of the result, so it does not count. False for SQL that does not parse.
    (Spider's execution evaluator is looser: it treats a gold query as ordered when its text
    contains ``order by`` anywhere, subqueries and string literals included.)

    >>> order_matters_of("SELECT a FROM t ORDER BY a")
    True
    >>> order_matters_of("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3) s")
    False
    >>> order_matters_of("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1")
    True
    """
    q = parse_query(sql, dialect)
    return q is not None and top_arg(q, "order") is not None


@guarded(False)
def limit_without_order(sql: str, dialect: str | None = None) -> bool:
    """True when the outermost query cuts its rows — LIMIT, FETCH FIRST, TOP or OFFSET — with no
    ORDER BY of its own: which rows come back is then up to the engine. A cut inside a
    subquery or CTE is not looked at. False for SQL that does not parse.

    >>> limit_without_order("SELECT a FROM t LIMIT 5")
    True
    >>> limit_without_order("SELECT a FROM t ORDER BY a LIMIT 5")
    False
    """
    q = parse_query(sql, dialect)
    if q is None:
        return False
    cut = top_arg(q, "limit") is not None or top_arg(q, "offset") is not None
    return cut and top_arg(q, "order") is None


# --------------------------------------------------------------------------- main table

_FILE = re.compile(r"[/\\]|\.(csv|tsv|parquet|json|jsonl|ndjson|txt|gz|zst|xlsx?)$", re.I)


@guarded(None)
def main_table(sql: str, dialect: str | None = None) -> str | None:
    """The reference's main table: the first base table of the outermost query's FROM.

    The FROM's sources are read in order (the FROM item, then each JOIN or comma-joined item);
    the first that leads to a base table wins. A CTE name leads to the CTE's query and a
    derived table ``(SELECT ..)`` to its query, read by the same rule; a set operation reads
    its branches in order. Table functions (``read_csv(..)``, ``unnest(..)``,
    ``generate_series(..)``), VALUES lists and quoted file paths are not base tables. The
    name is lower-case and unqualified (``Sales.Orders`` -> ``orders``). None when the query
    reads no table (``SELECT 1``) or does not parse.

    >>> main_table("WITH recent AS (SELECT * FROM Shop.Orders WHERE d > '2024-01-01') "
    ...            "SELECT count(*) FROM recent JOIN customers USING (customer_id)")
    'orders'
    >>> main_table("SELECT 1") is None
    True
    """
    q = parse_query(sql, dialect)
    return None if q is None else _main_of_query(q, {}, frozenset())


def _with_ctes(q: exp.Expression, ctes: dict[str, exp.Expression]) -> dict[str, exp.Expression]:
    w = q.args.get("with_") or q.args.get("with")
    if w is None:
        return ctes
    inner = dict(ctes)
    for cte in w.expressions:
        if cte.alias:
            inner[cte.alias.lower()] = cte.this
    return inner


def _main_of_query(q: exp.Expression, ctes: dict[str, exp.Expression],
                   seen: frozenset[str]) -> str | None:
    ctes = _with_ctes(q, ctes)
    if isinstance(q, exp.Subquery):
        return _main_of_query(q.this, ctes, seen) if isinstance(q.this, exp.Query) else None
    if isinstance(q, exp.SetOperation):
        return (_main_of_query(q.this, ctes, seen)
                or _main_of_query(q.expression, ctes, seen))
    if not isinstance(q, exp.Select):
        return None
    frm = q.args.get("from_") or q.args.get("from")
    sources = [frm.this] if frm is not None else []
    sources += [j.this for j in q.args.get("joins") or []]
    for src in sources:
        name = _main_of_source(src, ctes, seen)
        if name:
            return name
    return None


def _main_of_source(src: exp.Expression, ctes: dict[str, exp.Expression],
                    seen: frozenset[str]) -> str | None:
    if isinstance(src, exp.Table):
        if not isinstance(src.this, exp.Identifier):
            return None  # a table function: read_csv(..), generate_series(..)
        name = src.name.lower()
        if not src.args.get("db") and name in ctes:
            if name in seen:
                return None  # a recursive CTE's reference to itself
            return _main_of_query(ctes[name], ctes, seen | {name})
        if src.this.quoted and _FILE.search(name):
            return None  # FROM 'file.csv'
        return name or None
    if isinstance(src, exp.Subquery):
        return _main_of_query(src, ctes, seen)
    return None  # VALUES, UNNEST, LATERAL, ...


# --------------------------------------------------------------------------- difficulty

#: sqlglot nodes that are date/time functions or values
_TIME_NODES = tuple(getattr(exp, name) for name in (
    "CurrentDate", "CurrentTimestamp", "CurrentTime", "CurrentDatetime", "Interval",
    "DateTrunc", "TimestampTrunc", "DatetimeTrunc", "TimeTrunc", "DateAdd", "DateSub", "DateDiff",
    "DatetimeAdd", "DatetimeSub", "DatetimeDiff", "TimestampAdd", "TimestampSub", "TimestampDiff",
    "TimeAdd", "TimeSub", "TimeDiff", "TsOrDsAdd", "TsOrDsDiff", "TsOrDsToDate",
    "TsOrDsToTimestamp", "Extract", "Year", "Month", "Day", "Quarter", "Week", "DayOfWeek",
    "DayOfMonth", "DayOfYear", "WeekOfYear", "Hour", "Minute", "Second", "StrToTime",
    "StrToDate", "TimeToStr", "TimeStrToTime", "TimeStrToDate", "Date", "Datetime",
    "DateFromParts", "TimeFromParts", "TimestampFromParts", "LastDay", "UnixToTime", "TimeToUnix",
    "DateStrToDate", "DateToDateStr", "MonthsBetween", "AddMonths", "DateBin", "UnixDate",
) if hasattr(exp, name))
#: date/time functions sqlglot leaves anonymous in some dialects
_TIME_NAMES = frozenset({
    "now", "today", "getdate", "sysdate", "systimestamp", "julianday", "datetime", "date_part",
    "datepart", "datename", "to_date", "to_timestamp", "strftime", "strptime", "date_format",
    "age", "months_between", "add_months", "dateadd", "datediff", "date_add", "date_sub",
    "timestampadd", "timestampdiff", "unixepoch", "epoch", "make_date", "make_timestamp",
})
_DATE_TEXT = re.compile(r"^\d{4}-\d{2}(-\d{2})?([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")


def _is_time_node(n: exp.Expression) -> bool:
    """A date/time function, interval, current date/time, or date/time literal."""
    if isinstance(n, _TIME_NODES):
        return True
    if isinstance(n, exp.Anonymous) and str(n.this).lower() in _TIME_NAMES:
        return True
    if isinstance(n, (exp.Cast, exp.TryCast)) and n.to.is_type(*exp.DataType.TEMPORAL_TYPES):
        return True
    if isinstance(n, exp.Literal) and n.is_string and _DATE_TEXT.match(n.this.strip()):
        return True
    return _is_quoted_date(n)


def _is_quoted_date(n: exp.Expression) -> bool:
    """SQLite reads ``"2010-01-01"`` (double quotes) as a string when no column has that name."""
    return (isinstance(n, exp.Column) and not n.table and n.this.quoted
            and bool(_DATE_TEXT.match(n.name.strip())))


def _reads_column(n: exp.Expression) -> bool:
    return any(isinstance(c, exp.Column) and not _is_quoted_date(c) for c in local(n))


def _is_time_predicate(atom: exp.Expression) -> bool:
    """A predicate that reads a column against a date/time value or through a date function."""
    nodes = list(local(atom))
    return any(_is_time_node(n) for n in nodes) and _reads_column(atom)


def _is_time_key(s: exp.Select, key: exp.Expression) -> bool:
    """A GROUP BY key that buckets a column by time (``date_trunc('month', d)``, ``strftime``)."""
    target = output_expression(s, key) or key
    return any(_is_time_node(n) and not isinstance(n, exp.Literal) and _reads_column(n)
               for n in local(target))


def _is_join_key(atom: exp.Expression, *, qualified: bool = False) -> bool:
    """``a.x = b.y``: a join key (or a correlation), not a condition of the question. In an ON
    condition any column = column is one; elsewhere (``FROM a, b WHERE a.x = b.y``) only
    columns of two differently named tables are, since ``ship_city = bill_city`` is a filter."""
    if not (isinstance(atom, exp.EQ) and isinstance(atom.left, exp.Column)
            and isinstance(atom.right, exp.Column)):
        return False
    if not qualified:
        return True
    left, right = atom.left.table.lower(), atom.right.table.lower()
    return bool(left and right and left != right)


@dataclass(frozen=True)
class _Shape:
    top_k: bool
    time_window: bool
    predicates: int


def _shape(q: exp.Query) -> _Shape:
    ordered = top_arg(q, "order")
    top_k = False
    if ordered is not None:
        cut = top_arg(q, "limit") is not None
        first = ordered.expressions[0] if ordered.expressions else None
        key = first.this if isinstance(first, exp.Ordered) else first
        by_measure = False
        if key is not None:
            select = top_select(q)
            by_measure = count_aggregates(key) > 0 or (
                select is not None and output_is_aggregate(select, key))
        top_k = cut or by_measure
    predicates = 0
    time_window = False
    for s in q.find_all(exp.Select):
        conditions = [condition_of(s.args.get(k)) for k in ("where", "having", "qualify")]
        atoms = [a for c in conditions for a in atoms_of(c) if not _is_join_key(a, qualified=True)]
        atoms += [a for on in join_conditions(s) for a in atoms_of(on) if not _is_join_key(a)]
        for e in s.expressions:  # aggregate FILTER (WHERE ..) clauses
            for f in local(e):
                if isinstance(f, exp.Filter):
                    atoms += atoms_of(condition_of(f.expression))
        predicates += len(atoms) + sum(nested_queries(a) for a in atoms)
        time_window = time_window or any(_is_time_predicate(a) for a in atoms)
        group = s.args.get("group")
        if group is not None and not time_window:
            time_window = any(_is_time_key(s, k) for k in group.expressions)
    return _Shape(top_k=top_k, time_window=time_window, predicates=predicates)


@guarded(None)
def infer_difficulty(sql: str | None, difficulties: Sequence[str],
                     dialect: str | None = None) -> str | None:
    """The default taxonomy's kind of ``sql``, if ``difficulties`` has that name; else None.

    The first rule that applies wins (precedence top to bottom):

    1. ``top_k`` — the outermost query has an ORDER BY and either a LIMIT (FETCH, TOP) or a
       first sort key that is a measure (an aggregate, or the alias / position of one):
       a ranking.
    2. ``time_window`` — a predicate anywhere in the query reads a column against a date/time
       value or through a date function (a date literal, ``DATE '..'``, an INTERVAL,
       ``current_date``/``now()``, ``date_trunc``, ``extract``, ``strftime``, BETWEEN two
       dates...), or a GROUP BY buckets a column by time.
    3. ``multi_condition`` — two or more predicates in the whole query.
    4. ``filtered_aggregate`` — exactly one predicate.
    5. ``simple_aggregate`` — none.

    Predicates are the atomic conditions (the leaves under AND / OR / NOT) of every WHERE,
    HAVING, QUALIFY and aggregate ``FILTER (WHERE ..)`` of every SELECT in the query (CTEs and
    subqueries included), plus the ON conditions of a join; a join key (``a.x = b.y`` in an ON,
    or between two tables' columns in a WHERE) is not a predicate, and a subquery used inside
    a predicate adds one more. A join alone adds none. ``trap`` is never
    inferred: a trap is a person's judgement. None when ``sql`` is None or does not parse,
    or when the inferred name is not in ``difficulties`` (the caller then uses its default).

    >>> kinds = ("simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k")
    >>> infer_difficulty("SELECT count(*) FROM orders WHERE status = 'paid'", kinds)
    'filtered_aggregate'
    >>> infer_difficulty("SELECT count(*) FROM orders WHERE d >= current_date - INTERVAL 7 DAY", kinds)
    'time_window'
    >>> infer_difficulty("SELECT count(*) FROM orders", ("easy", "hard")) is None
    True
    """
    if sql is None:
        return None
    q = parse_query(sql, dialect)
    if q is None:
        return None
    shape = _shape(q)
    if shape.top_k:
        name = "top_k"
    elif shape.time_window:
        name = "time_window"
    elif shape.predicates >= 2:
        name = "multi_condition"
    elif shape.predicates == 1:
        name = "filtered_aggregate"
    else:
        name = "simple_aggregate"
    return name if name in difficulties else None
