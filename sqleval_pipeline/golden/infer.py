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

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from sqleval_pipeline.dialect import resolve_dialect

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


@functools.lru_cache(maxsize=1024)
def _parse(sql: str, dialect: str | None) -> exp.Query | None:
    """The one query statement of ``sql``, or None when it is not exactly one query.

    Cached: :func:`infer` calls every function on the same text, which parses it once. The
    tree is shared between callers, so nothing in this module modifies it.
    """
    if not isinstance(sql, str) or not sql.strip():
        return None
    try:
        read = resolve_dialect(dialect) or "duckdb"
        statements = [s for s in sqlglot.parse(sql, read=read)
                      if s is not None and not isinstance(s, exp.Semicolon)]
    except Exception:  # sqlglot's errors, an unknown dialect, 3,000 parentheses
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    if any(not s.expressions for s in statements[0].find_all(exp.Select)):
        return None  # a bare "SELECT": sqlglot accepts it, no engine does
    return statements[0]


def _guarded(default):
    """Return ``default`` instead of raising (a pathological tree may still exhaust the stack)."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception:  # RecursionError included
                return default
        return inner
    return wrap


def _unwrap(q: exp.Expression) -> exp.Expression:
    """A parenthesised query's inside: ``(SELECT ...)`` -> ``SELECT ...``."""
    while isinstance(q, exp.Subquery) and isinstance(q.this, exp.Query):
        q = q.this
    return q


def _top_arg(q: exp.Expression, key: str) -> exp.Expression | None:
    """A modifier (``order``, ``limit``, ``offset``) of the outermost query: of the root, or of
    the query inside the root's parentheses (``(SELECT .. ORDER BY a) LIMIT 1`` has both)."""
    while True:
        if q.args.get(key) is not None:
            return q.args[key]
        if not (isinstance(q, exp.Subquery) and isinstance(q.this, exp.Query)):
            return None
        q = q.this


def _local(node: exp.Expression | None) -> Iterator[exp.Expression]:
    """``node`` and its descendants, without entering a nested query: a query at or below
    ``node`` is yielded itself, its inside is not."""
    if node is None:
        return
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, exp.Query):
            continue
        stack.extend(reversed(list(n.iter_expressions())))


def _nested_queries(node: exp.Expression | None) -> int:
    """How many queries ``node`` is or holds (not counting queries inside those)."""
    return sum(1 for n in _local(node) if isinstance(n, exp.Query))


def _cond(node: exp.Expression | None) -> exp.Expression | None:
    """The condition of a WHERE/HAVING/QUALIFY node (or the node itself)."""
    if isinstance(node, (exp.Where, exp.Having, exp.Qualify)):
        return node.this
    return node


def _atoms(cond: exp.Expression | None) -> list[exp.Expression]:
    """The atomic predicates of a boolean condition: the leaves under AND / OR / NOT / ( )."""
    out: list[exp.Expression] = []
    stack = [cond] if cond is not None else []
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.And, exp.Or, exp.Xor)):
            stack.extend([n.right, n.left])
        elif isinstance(n, (exp.Not, exp.Paren)):
            stack.append(n.this)
        elif n is not None:
            out.append(n)
    return out


def _is_negated(n: exp.Expression) -> bool:
    return isinstance(n, exp.Not) or bool(n.args.get("negate"))


def _is_agg(n: exp.Expression) -> bool:
    return isinstance(n, exp.AggFunc)


def _aggregates(node: exp.Expression | None) -> int:
    """Aggregate calls in ``node`` (outside nested queries; an aggregate inside another counts once)."""
    count = 0
    for n in _local(node):
        if _is_agg(n) and not any(_is_agg(a) for a in _ancestors(n, node)):
            count += 1
    return count


def _ancestors(n: exp.Expression, stop: exp.Expression | None) -> Iterator[exp.Expression]:
    p = n.parent
    while p is not None and n is not stop:
        yield p
        if p is stop:
            return
        n, p = p, p.parent


def _join_conditions(select: exp.Select) -> list[exp.Expression]:
    return [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on") is not None]


def _top_select(q: exp.Expression) -> exp.Select | None:
    """The query Spider calls the top level: the first SELECT of a set operation."""
    q = _unwrap(q)
    while isinstance(q, exp.SetOperation):
        q = _unwrap(q.this)
    return q if isinstance(q, exp.Select) else None


# --------------------------------------------------------------------------- Spider hardness


@_guarded(None)
def spider_hardness(sql: str, dialect: str | None = "sqlite") -> str | None:
    """Spider's hardness of ``sql``: ``"easy"``, ``"medium"``, ``"hard"`` or ``"extra"``.

    The rules are Spider's (``evaluation.py``: ``count_component1``, ``count_component2``,
    ``count_others``, ``Evaluator.eval_hardness``), counted on the *top-level* query — the first
    SELECT of a set operation; an ORDER BY or LIMIT after a UNION belongs, for Spider, to its
    last branch and is not counted:

    * component 1: +1 each for WHERE, GROUP BY, ORDER BY, LIMIT; +1 per table of the FROM
      beyond the first (JOIN or comma, a derived table or CTE included); +1 per OR and per
      LIKE (NOT LIKE too) in the ON, WHERE and HAVING conditions;
    * component 2: +1 per query nested in an ON, WHERE or HAVING condition (``IN (SELECT ..)``,
      ``> (SELECT ..)``, ``EXISTS``), +1 for a set operation (INTERSECT / UNION / EXCEPT);
    * others: +1 when the "aggregate count" exceeds 1, +1 for more than one SELECT column, +1
      for more than one WHERE condition, +1 for more than one GROUP BY key. The aggregate
      count is Spider's, quirks kept: aggregated SELECT columns + aggregates in ORDER BY and
      GROUP BY + *negated* WHERE conditions + AND/OR connectors and negated conditions of
      HAVING (Spider's ``has_agg`` reads the first field of a condition, its NOT flag, and of a
      connector string, its first letter);
    * easy: c1 <= 1, others 0, c2 0; medium: (others <= 2, c1 <= 1, c2 0) or (c1 <= 2,
      others < 2, c2 0); hard: (others > 2, c1 <= 2, c2 0) or (2 < c1 <= 3, others <= 2, c2 0)
      or (c1 <= 1, others 0, c2 <= 1); else extra.

    Beyond Spider's grammar: a query nested in the SELECT list counts in component 2, any
    aggregate function (not only Spider's five) counts as one, and ORDER BY an alias or
    position of an aggregated output column counts as an aggregate in ORDER BY. A CTE is read
    like a derived table (a table of the FROM, not a nested query). None for SQL that does not
    parse as one query.

    >>> spider_hardness("SELECT count(*) FROM singer")
    'easy'
    >>> spider_hardness("SELECT name FROM singer WHERE age > 30 ORDER BY age DESC LIMIT 1")
    'hard'
    >>> spider_hardness("SELECT name FROM a INTERSECT SELECT name FROM b")
    'hard'
    >>> spider_hardness("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer) AND country = 'FR'")
    'extra'
    """
    q = _parse(sql, dialect)
    if q is None:
        return None
    top = _top_select(q)
    if top is None:
        return None
    c1 = _component1(top)
    c2 = _component2(top, set_operation=isinstance(_unwrap(q), exp.SetOperation))
    others = _others(top)
    if c1 <= 1 and others == 0 and c2 == 0:
        return "easy"
    if (others <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and others < 2 and c2 == 0):
        return "medium"
    if ((others > 2 and c1 <= 2 and c2 == 0) or (2 < c1 <= 3 and others <= 2 and c2 == 0)
            or (c1 <= 1 and others == 0 and c2 <= 1)):
        return "hard"
    return "extra"


def _conditions(select: exp.Select) -> list[exp.Expression]:
    """The ON, WHERE and HAVING conditions of one SELECT (Spider's from.conds, where, having)."""
    out = _join_conditions(select)
    for key in ("where", "having"):
        c = _cond(select.args.get(key))
        if c is not None:
            out.append(c)
    return out


def _component1(s: exp.Select) -> int:
    count = sum(1 for key in ("where", "group", "order", "limit") if s.args.get(key) is not None)
    count += len(s.args.get("joins") or [])
    for cond in _conditions(s):
        for n in _local(cond):
            if isinstance(n, exp.Or):
                count += 1
            elif isinstance(n, (exp.Like, exp.ILike)):
                count += 1
    return count


def _component2(s: exp.Select, *, set_operation: bool) -> int:
    nested = sum(_nested_queries(c) for c in _conditions(s))
    nested += sum(_nested_queries(e) for e in s.expressions)
    return nested + (1 if set_operation else 0)


def _others(s: exp.Select) -> int:
    agg = sum(1 for e in s.expressions if _aggregates(e) > 0)
    where = _cond(s.args.get("where"))
    agg += sum(1 for a in _atoms_with_not(where) if a)
    group = s.args.get("group")
    keys = list(group.expressions) if group is not None else []
    agg += sum(_aggregates(k) for k in keys)
    order = s.args.get("order")
    if order is not None:
        for o in order.expressions:
            key = o.this if isinstance(o, exp.Ordered) else o
            agg += _aggregates(key) or (1 if _output_is_aggregate(s, key) else 0)
    having = _cond(s.args.get("having"))
    if having is not None:
        agg += sum(1 for n in _local(having) if isinstance(n, (exp.And, exp.Or, exp.Xor)))
        agg += sum(1 for a in _atoms_with_not(having) if a)
    count = 1 if agg > 1 else 0
    count += 1 if len(s.expressions) > 1 else 0
    count += 1 if where is not None and len(_atoms(where)) > 1 else 0
    count += 1 if len(keys) > 1 else 0
    return count


def _atoms_with_not(cond: exp.Expression | None) -> list[bool]:
    """For each atomic condition of ``cond``: is it negated (``NOT IN``, ``NOT LIKE``, ``NOT
    BETWEEN``, ``IS NOT NULL``, ``NOT EXISTS``)? ``!=`` is a comparison, not a negation."""
    out: list[bool] = []
    stack: list[tuple[exp.Expression, bool]] = [(cond, False)] if cond is not None else []
    while stack:
        n, negated = stack.pop()
        if isinstance(n, (exp.And, exp.Or, exp.Xor)):
            stack.extend([(n.right, negated), (n.left, negated)])
        elif isinstance(n, exp.Not):
            stack.append((n.this, True))
        elif isinstance(n, exp.Paren):
            stack.append((n.this, negated))
        else:
            out.append(negated or _is_negated(n))
    return out


def _output_is_aggregate(s: exp.Select, key: exp.Expression) -> bool:
    """Does ORDER BY ``key`` name (by alias or position) an aggregated output column of ``s``?"""
    target = _output_expression(s, key)
    return target is not None and _aggregates(target) > 0


def _output_expression(s: exp.Select, key: exp.Expression) -> exp.Expression | None:
    """The SELECT expression an ORDER BY / GROUP BY key refers to by position or alias."""
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        i = int(key.this)
        return s.expressions[i - 1] if 1 <= i <= len(s.expressions) else None
    if isinstance(key, exp.Column) and not key.table:
        for e in s.expressions:
            if isinstance(e, exp.Alias) and e.alias.lower() == key.name.lower():
                return e.this
    return None


# --------------------------------------------------------------------------- order and cuts


@_guarded(False)
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
    q = _parse(sql, dialect)
    return q is not None and _top_arg(q, "order") is not None


@_guarded(False)
def limit_without_order(sql: str, dialect: str | None = None) -> bool:
    """True when the outermost query cuts its rows — LIMIT, FETCH FIRST, TOP or OFFSET — with no
    ORDER BY of its own: which rows come back is then up to the engine. A cut inside a
    subquery or CTE is not looked at. False for SQL that does not parse.

    >>> limit_without_order("SELECT a FROM t LIMIT 5")
    True
    >>> limit_without_order("SELECT a FROM t ORDER BY a LIMIT 5")
    False
    """
    q = _parse(sql, dialect)
    if q is None:
        return False
    cut = _top_arg(q, "limit") is not None or _top_arg(q, "offset") is not None
    return cut and _top_arg(q, "order") is None


# --------------------------------------------------------------------------- main table

_FILE = re.compile(r"[/\\]|\.(csv|tsv|parquet|json|jsonl|ndjson|txt|gz|zst|xlsx?)$", re.I)


@_guarded(None)
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
    q = _parse(sql, dialect)
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
    return any(isinstance(c, exp.Column) and not _is_quoted_date(c) for c in _local(n))


def _is_time_predicate(atom: exp.Expression) -> bool:
    """A predicate that reads a column against a date/time value or through a date function."""
    nodes = list(_local(atom))
    return any(_is_time_node(n) for n in nodes) and _reads_column(atom)


def _is_time_key(s: exp.Select, key: exp.Expression) -> bool:
    """A GROUP BY key that buckets a column by time (``date_trunc('month', d)``, ``strftime``)."""
    target = _output_expression(s, key) or key
    return any(_is_time_node(n) and not isinstance(n, exp.Literal) and _reads_column(n)
               for n in _local(target))


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
    ordered = _top_arg(q, "order")
    top_k = False
    if ordered is not None:
        cut = _top_arg(q, "limit") is not None
        first = ordered.expressions[0] if ordered.expressions else None
        key = first.this if isinstance(first, exp.Ordered) else first
        by_measure = False
        if key is not None:
            select = _top_select(q)
            by_measure = _aggregates(key) > 0 or (
                select is not None and _output_is_aggregate(select, key))
        top_k = cut or by_measure
    predicates = 0
    time_window = False
    for s in q.find_all(exp.Select):
        conditions = [_cond(s.args.get(k)) for k in ("where", "having", "qualify")]
        atoms = [a for c in conditions for a in _atoms(c) if not _is_join_key(a, qualified=True)]
        atoms += [a for on in _join_conditions(s) for a in _atoms(on) if not _is_join_key(a)]
        for e in s.expressions:  # aggregate FILTER (WHERE ..) clauses
            for f in _local(e):
                if isinstance(f, exp.Filter):
                    atoms += _atoms(_cond(f.expression))
        predicates += len(atoms) + sum(_nested_queries(a) for a in atoms)
        time_window = time_window or any(_is_time_predicate(a) for a in atoms)
        group = s.args.get("group")
        if group is not None and not time_window:
            time_window = any(_is_time_key(s, k) for k in group.expressions)
    return _Shape(top_k=top_k, time_window=time_window, predicates=predicates)


@_guarded(None)
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
    q = _parse(sql, dialect)
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
