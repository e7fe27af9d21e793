"""Freeze expected results from reference SQL (their verification: :mod:`sqleval_pipeline.golden.verify`).

Freezing runs each reference query on the pinned serving snapshot (read-only, with the clock
pinned to the snapshot's as-of date), stores the typed result, the snapshot id and — for
``order_matters`` cases — the output columns of the reference's ORDER BY (``order_keys``), so
that ties can later be told apart from ordering mistakes.

Ties (docs/golden-set.md, "Ties at a LIMIT cut"): when the reference ends in
``ORDER BY … LIMIT k [OFFSET o]``, it is run a second time without its LIMIT (at most
``o + k + MAX_TIE_EXTRA_ROWS + 1`` rows are fetched), its ORDER BY keys added as hidden output
columns when they are not output columns already. When the row after the cut is tied with the
last kept row on *every* key, the whole tie group is recorded in the result's ``tie`` (and an
OFFSET cut through a tie in ``tie_at_offset``): any selection of the kept number of rows from it
is a right answer. For an ``order_matters`` case whose keys are not all output columns
(``SELECT name FROM singer ORDER BY age DESC``), the same run gives each frozen row its rank
group (``order_groups``): rows of one group may come in any order.

>>> limit_without_order("SELECT city FROM dim_customers LIMIT 5")
True
>>> limit_without_order("SELECT city FROM dim_customers ORDER BY city LIMIT 5")
False

Verification re-runs every reference and compares with what was frozen. Any difference is
*snapshot drift*: the evaluation must stop until someone decides whether the data or the
case is wrong. A re-run that keeps other rows of a recorded tie group is not drift.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from sqleval_pipeline.golden.model import Case, EncodedResult, Expected, TieAtCut
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import open_readonly
from sqleval_pipeline.errors import SqlevalError

#: a golden reference returns a small, reviewable result
MAX_REFERENCE_ROWS = 1000
#: rows fetched after a LIMIT cut, at most, to see the tie group through; a larger tie group is
#: recorded truncated (only its recorded rows are accepted) and freezing says so
MAX_TIE_EXTRA_ROWS = 1000
#: names of the ORDER BY keys added to the SELECT list of the second run
HIDDEN_KEY_PREFIX = "__sqleval_order_key_"


class FreezeError(SqlevalError, ValueError):
    """A reference query cannot be frozen; the message names the case and what to fix."""


def run_reference(con, sql: str, as_of: dt.date) -> ResultSet:
    """Execute a trusted reference query on an open read-only connection."""
    return run_pinned(con, pin_clock(sql, as_of))


def run_pinned(con, pinned_sql: str) -> ResultSet:
    """:func:`run_reference` of a text whose clock is already pinned (``pin_clock``): a caller
    running one query on many databases pins it once."""
    cur = con.execute(pinned_sql)
    columns = [d[0] for d in cur.description]
    types = [str(d[1]) for d in cur.description]
    rows = cur.fetchmany(MAX_REFERENCE_ROWS + 1)
    return ResultSet(columns=columns, types=types, rows=[list(r) for r in rows])


def order_keys_of(sql: str, output_columns: list[str] | None = None) -> list[str]:
    """Output column names of the outermost ORDER BY of ``sql``; raises :class:`FreezeError`
    when a key is not an output column. (Freezing itself does not raise then: it records the
    rows' rank groups instead, :func:`freeze_reading`.)

    ``output_columns`` are the names the database gave the result columns (used for
    unaliased expressions); without them an unaliased expression is named by its SQL text.

    >>> order_keys_of("SELECT a AS x, sum(b) AS s FROM t GROUP BY 1 ORDER BY s DESC, 1")
    ['s', 'x']
    """
    tree = sqlglot.parse_one(sql, read="duckdb")
    order = tree.args.get("order")
    if order is None:
        raise FreezeError("the reference has no top-level ORDER BY")
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    projections = select.expressions if isinstance(select, exp.Select) else []
    names = [p.alias_or_name or p.sql("duckdb") for p in projections]
    if output_columns is not None and len(output_columns) == len(names):
        names = list(output_columns)
    bodies = [(p.this if isinstance(p, exp.Alias) else p).sql("duckdb").lower() for p in projections]
    keys: list[str] = []
    for ordered in order.expressions:
        node = ordered.this
        name = None
        if isinstance(node, exp.Literal) and node.is_int:
            idx = int(node.this) - 1
            if 0 <= idx < len(names):
                name = names[idx]
        elif isinstance(node, exp.Column) and not node.table and node.name in names:
            name = node.name
        elif isinstance(node, exp.Column) and node.name in [
            p.alias_or_name for p in projections
        ]:
            name = names[[p.alias_or_name for p in projections].index(node.name)]
        else:
            text = node.sql("duckdb").lower()
            if text in bodies:
                name = names[bodies.index(text)]
        if name is None:
            raise FreezeError(
                f"ORDER BY {node.sql('duckdb')} is not an output column; add it to the SELECT "
                "list (with an alias) so ties can be recognised"
            )
        if name not in keys:
            keys.append(name)
    return keys


@dataclass(frozen=True)
class FreezeNote:
    """Something freezing recorded that a reviewer should know (not an error).

    ``code``: ``tie_at_cut`` (the LIMIT or OFFSET cuts through tied rows; the tie group is
    recorded), ``tie_truncated`` (the tie group is larger than :data:`MAX_TIE_EXTRA_ROWS`:
    only its recorded rows are accepted), ``limit_without_order`` (a top-level LIMIT/OFFSET
    without ORDER BY: the rows are not a reference), ``ties_not_checked`` (the query's shape
    does not let freezing look past the cut), ``order_not_checked`` (an ``order_matters``
    case whose ties could not be told apart: its rows must come in exactly the frozen order).
    """

    case_id: str
    reading: str
    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.case_id} ({self.reading}): {self.detail}"


def _top(sql: str) -> exp.Expression:
    tree = sqlglot.parse_one(sql, read="duckdb")
    while isinstance(tree, exp.Subquery | exp.Paren) and not tree.alias and isinstance(tree.this, exp.Query) \
            and not any(tree.args.get(k) for k in ("order", "limit", "offset")):
        tree = tree.this
    return tree


def _single_row(select: exp.Expression) -> bool:
    """An aggregate SELECT without GROUP BY returns exactly one row."""
    if not isinstance(select, exp.Select) or select.args.get("group") is not None:
        return False
    return any(agg.find_ancestor(exp.Window) is None
               for proj in select.expressions for agg in proj.find_all(exp.AggFunc))


def limit_without_order(sql: str) -> bool:
    """Does ``sql`` end in a LIMIT or OFFSET without ORDER BY (which rows it keeps is then up to
    the database)? Only the top-level query counts; an aggregate without GROUP BY (one row)
    is exempt. Raises :class:`sqlglot.errors.ParseError` on text that does not parse.

    >>> limit_without_order("SELECT a FROM t UNION SELECT b FROM u LIMIT 3")
    True
    >>> limit_without_order("SELECT max(a) FROM t LIMIT 1"), limit_without_order("SELECT a FROM t")
    (False, False)
    """
    tree = _top(sql)
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return False
    if tree.args.get("limit") is None and tree.args.get("offset") is None:
        return False
    return tree.args.get("order") is None and not _single_row(tree)


@dataclass
class _Key:
    text: str  # how TieAtCut.keys names it: the output column, or the expression's SQL
    index: int | None  # output column, or None: a hidden column of the second run
    expr: exp.Expression | None = None


@dataclass
class _Plan:
    """The top-level ORDER BY … LIMIT of a reference, resolved against its output columns."""

    top: exp.Expression  # Select or SetOperation
    keys: list[_Key]
    limit: int | None  # None: no LIMIT
    offset: int
    problem: str | None = None  # why the second run cannot be made (ties not checked)

    @property
    def hidden(self) -> list[_Key]:
        return [k for k in self.keys if k.index is None]


def _int_literal(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and node.is_int:
        return int(str(node.this))
    return None


def _plan(sql: str, columns: list[str]) -> _Plan | None:
    """The plan of ``sql``'s top-level ORDER BY, or None when it has none (ParseError raised)."""
    tree = _top(sql)
    order = tree.args.get("order")
    if order is None or not isinstance(tree, exp.Select | exp.SetOperation):
        return None
    problem = None
    limit: int | None = None
    offset = 0
    lim = tree.args.get("limit")
    if lim is not None:
        opts = lim.args.get("limit_options")
        count = lim.args.get("count") if isinstance(lim, exp.Fetch) else lim.args.get("expression")
        limit = _int_literal(count)
        if opts is not None and (opts.args.get("percent") or opts.args.get("with_ties")):
            problem, limit = f"{lim.sql('duckdb').strip()} is not a row count", None
        elif limit is None:
            problem = f"{lim.sql('duckdb').strip()} is not an integer literal"
        if lim.args.get("offset") is not None:
            offset = _int_literal(lim.args["offset"]) or 0
    off = tree.args.get("offset")
    if off is not None:
        o = _int_literal(off.args.get("expression"))
        if o is None:
            problem = f"{off.sql('duckdb').strip()} is not an integer literal"
        offset = o or 0
    lower = [c.lower() for c in columns]
    projections = tree.expressions if isinstance(tree, exp.Select) else []
    expanded = not isinstance(tree, exp.Select) or len(projections) != len(columns) or any(
        isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
        for p in projections)
    aliases = [p.alias_or_name.lower() for p in projections]
    bodies = [(p.this if isinstance(p, exp.Alias) else p).sql("duckdb").lower() for p in projections]
    keys: list[_Key] = []
    for ordered in order.expressions:
        node = ordered.this
        if isinstance(node, exp.Var) and node.name.upper() == "ALL":  # ORDER BY ALL
            keys += [_Key(c, i) for i, c in enumerate(columns)]
            continue
        idx = None
        pos = _int_literal(node)
        if pos is not None:
            idx = pos - 1 if 0 < pos <= len(columns) else None
        elif isinstance(node, exp.Column) and not node.table and not isinstance(node.this, exp.Star):
            name = node.name.lower()
            if not expanded and name in aliases:
                idx = aliases.index(name)  # a bare name binds an output alias first
            elif expanded and lower.count(name) == 1:
                idx = lower.index(name)
        if idx is None and not expanded:
            text = node.sql("duckdb").lower()
            if text in bodies:
                idx = bodies.index(text)
        if idx is not None:
            keys.append(_Key(columns[idx], idx))
        else:
            keys.append(_Key(node.sql("duckdb"), None, node))
    plan = _Plan(tree, keys, limit, offset, problem)
    if plan.hidden and isinstance(tree, exp.Select):
        distinct = tree.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is None:
            plan.problem = ("a SELECT DISTINCT ordered by an expression that is not an output column "
                            f"({plan.hidden[0].text}): which value ranks a row is up to the database")
    return plan


def _probe_sql(plan: _Plan, fetch: int) -> str:
    """The reference without its LIMIT/OFFSET, hidden key columns last, ``LIMIT fetch``."""
    hidden = [exp.alias_(k.expr.copy(), f"{HIDDEN_KEY_PREFIX}{i}", quoted=True)  # type: ignore[union-attr]
              for i, k in enumerate(plan.hidden)]
    if isinstance(plan.top, exp.Select):
        q = plan.top.copy()
        q.set("limit", None)
        q.set("offset", None)
        if hidden:
            q = q.select(*hidden, copy=False)
    else:  # a set operation: its ORDER BY names output columns; add the keys around it
        inner = plan.top.copy()
        for arg in ("order", "limit", "offset"):
            inner.set(arg, None)
        q = exp.select("*", *hidden).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__sqleval_q"))))
        q.set("order", plan.top.args["order"].copy())
    return q.limit(fetch, copy=False).sql(dialect="duckdb")


def _same_key(a: tuple, b: tuple) -> bool:
    """Tied on every ORDER BY key (NULLs tie with NULLs, NaN with NaN, as the sort sees them)."""
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


@dataclass
class FrozenReading:
    """One reading frozen: its encoded result (ties and rank groups recorded), its
    output-column order keys (None when some key is not an output column, or the query has no
    ORDER BY) and what freezing noted, as (code, detail) pairs (codes: :class:`FreezeNote`)."""

    result: EncodedResult
    order_keys: list[str] | None
    notes: list[tuple[str, str]]


def _encode_rows(rs: ResultSet, rows: list[list[Any]]) -> list[list[Any]]:
    return ResultSet(columns=rs.columns, types=rs.types, rows=rows).to_json()["rows"]


def canon(v: Any) -> Any:
    """A value in a form that compares and hashes the same for the same stored value (the
    drift check and tie matching, not grading: floats to 12 significant digits)."""
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan",)
        return ("float", float(f"{v:.12g}"))  # drift check, not grading: 12 significant digits
    if isinstance(v, Decimal):
        return ("decimal", str(v))
    if isinstance(v, dt.datetime):
        return ("ts", v.isoformat())
    if isinstance(v, dt.date):
        return ("date", v.isoformat())
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, list):
        return ("list", tuple(canon(x) for x in v))
    if isinstance(v, dict):
        return ("struct", tuple(sorted((k, canon(x)) for k, x in v.items())))
    return (type(v).__name__, v)


def freeze_reading(con, sql: str, rs: ResultSet, as_of: dt.date, *, order_matters: bool) -> FrozenReading:
    """Record the tie structure of ``rs`` (``sql``'s result, already run): ties at the LIMIT or
    OFFSET cut, and, for ``order_matters``, rank groups when the ORDER BY keys are not all
    output columns. Raises :class:`FreezeError` when the second run contradicts ``rs``."""
    result = EncodedResult.model_validate(rs.to_json())
    notes: list[tuple[str, str]] = []
    try:
        unordered = limit_without_order(sql)
        plan = _plan(sql, rs.columns)
    except (sqlglot.errors.SqlglotError, RecursionError) as exc:
        if order_matters:
            raise FreezeError(f"the reference does not parse, so its ORDER BY cannot be read: {exc}") from exc
        notes.append(("ties_not_checked", f"sqlglot cannot parse the query ({str(exc).splitlines()[0][:120]}); "
                                          "a tie at a LIMIT cut would not be recorded"))
        return FrozenReading(result, None, notes)
    if unordered:
        result.limit_without_order = True
        notes.append(("limit_without_order", "a LIMIT/OFFSET without ORDER BY: which rows it keeps is up to "
                                             "the database, so the frozen rows are not a reference; add an "
                                             "ORDER BY that decides them"))
    if plan is None:
        return FrozenReading(result, None, notes)
    output_keys = None if plan.hidden else list(dict.fromkeys(k.text for k in plan.keys))
    n = rs.row_count
    cut_possible = (plan.limit is not None and n == plan.limit and n > 0) or (plan.offset > 0 and n > 0)
    need_groups = order_matters and bool(plan.hidden) and n > 1
    if not (cut_possible or need_groups):
        return FrozenReading(result, output_keys, notes)
    if plan.problem is not None:
        if need_groups:
            notes.append(("order_not_checked", f"{plan.problem}: rows tied on the ORDER BY cannot be told "
                                               "apart, so they must come in exactly the frozen order"))
        elif cut_possible:
            notes.append(("ties_not_checked", f"{plan.problem}: a tie at the cut would not be recorded"))
        return FrozenReading(result, output_keys, notes)
    fetch = plan.offset + (plan.limit + MAX_TIE_EXTRA_ROWS if plan.limit is not None else MAX_REFERENCE_ROWS) + 1
    probe = _probe_sql(plan, fetch)
    try:
        cur = con.execute(pin_clock(probe, as_of))
        desc = cur.description
        probe_rows = [list(r) for r in cur.fetchmany(fetch)]
    except Exception as exc:  # duckdb raises many error types
        why = f"running it again with its ORDER BY keys shown failed: {str(exc).splitlines()[0][:300]}"
        if need_groups:  # order_matters cannot tell ties from ordering mistakes without them
            raise FreezeError(f"{why} (the query run was: {probe}); add the ORDER BY keys to the SELECT "
                              "list (with an alias)") from exc
        notes.append(("ties_not_checked", f"{why}: a tie at the cut would not be recorded"))
        return FrozenReading(result, output_keys, notes)
    m, hidden = len(rs.columns), plan.hidden
    if len(desc) != m + len(hidden) or [str(d[1]) for d in desc[:m]] != rs.types:
        raise FreezeError(f"running the reference again without its LIMIT gave other columns "
                          f"({[str(d[1]) for d in desc]} instead of {rs.types}); the query run was: {probe}")
    hidden_at = {id(k): m + j for j, k in enumerate(hidden)}
    pick = [k.index if k.index is not None else hidden_at[id(k)] for k in plan.keys]
    keys = [tuple(r[i] for i in pick) for r in probe_rows]
    groups: list[int] = []
    for i in range(len(keys)):
        groups.append(0 if i == 0 else groups[-1] + (0 if _same_key(keys[i - 1], keys[i]) else 1))
    o = plan.offset
    window = range(o, o + n)
    if len(probe_rows) < o + n or (plan.limit is None and len(probe_rows) != o + n) or (
            plan.limit is not None and min(plan.limit, max(0, len(probe_rows) - o)) != n):
        raise FreezeError(f"the reference returns {n} rows, but run again without its LIMIT it ranks "
                          f"{max(0, len(probe_rows) - o)} rows from its OFFSET on; is it deterministic? "
                          f"(the query run was: {probe})")
    out_rows = [r[:m] for r in probe_rows]
    end_cut = (plan.limit is not None and n == plan.limit and len(keys) > o + n
               and _same_key(keys[o + n - 1], keys[o + n]))
    start_cut = o > 0 and n > 0 and _same_key(keys[o - 1], keys[o])

    def group_rows(g: int) -> tuple[list[list[Any]], bool]:
        rows = [out_rows[i] for i, gi in enumerate(groups) if gi == g]
        truncated = len(probe_rows) == fetch and groups[-1] == g
        if truncated:
            # the rows the reference kept are tied rows too, whether or not the second run
            # fetched them before stopping: record them with the group
            seen = Counter(tuple(canon(v) for v in r) for r in rows)
            for i in window:
                if groups[i] == g:
                    key = tuple(canon(v) for v in rs.rows[i - o])
                    if seen[key] > 0:
                        seen[key] -= 1
                    else:
                        rows.append(list(rs.rows[i - o]))
        return rows, truncated

    cuts: list[tuple[str, int, int, int]] = []  # (field, before, take, group)
    g_first, g_last = groups[o], groups[o + n - 1]
    if end_cut and (not start_cut or g_first != g_last):
        first_of_last = next(i for i in window if groups[i] == g_last)
        cuts.append(("tie", first_of_last - o, o + n - first_of_last, g_last))
    if start_cut:
        take = sum(1 for i in window if groups[i] == g_first)
        cuts.append(("tie" if g_first == g_last else "tie_at_offset", 0, take, g_first))
    # the reference's own rows must be the second run's rows, group by group (tied rows aside)
    cut_groups = {g for *_x, g in cuts}
    for g in dict.fromkeys(groups[i] for i in window):
        mine = Counter(tuple(canon(v) for v in rs.rows[i - o]) for i in window if groups[i] == g)
        if g in cut_groups:
            pool = Counter(tuple(canon(v) for v in r) for r in group_rows(g)[0])
            ok = not (mine - pool)
        else:
            ok = mine == Counter(tuple(canon(v) for v in out_rows[i]) for i in window if groups[i] == g)
        if not ok:
            first = next(i for i in window if groups[i] == g)
            raise FreezeError(
                f"the reference's rows {first - o + 1}.. are not the rows its ORDER BY ranks there when it "
                f"is run again without its LIMIT; is it deterministic (random(), any_value(), a LIMIT "
                f"without ORDER BY inside)? (the query run was: {probe})")
    for field_name, before, take, g in cuts:
        rows, truncated = group_rows(g)
        tie = TieAtCut(keys=list(dict.fromkeys(k.text for k in plan.keys)), before=before, take=take,
                       rows=_encode_rows(rs, rows), truncated=truncated)
        setattr(result, field_name, tie)
        at_start, at_end = before == 0 and start_cut, before + take == n and end_cut
        where = "the LIMIT and the OFFSET cut" if at_start and at_end else (
            "the OFFSET cuts" if at_start else "the LIMIT cuts")
        span = f"row {before + 1}" if take == 1 else f"rows {before + 1}-{before + take}"
        notes.append(("tie_at_cut", f"{where} through {len(rows)}{'+' if truncated else ''} rows tied on "
                                    f"{', '.join(tie.keys)} ({span} of the result): any {take} of them "
                                    "are accepted"))
        if truncated:
            notes.append(("tie_truncated", f"more than {len(rows)} rows are tied at the cut; only the "
                                           f"{len(rows)} recorded are accepted (an answer keeping another "
                                           "tied row is graded WRONG): add a tie-breaker to the ORDER BY"))
    if need_groups:
        result.order_groups = [groups[i] - g_first for i in window]
    result = EncodedResult.model_validate(result.model_dump())
    return FrozenReading(result, output_keys, notes)


def freeze_case(case: Case, con, snapshot_id: str, as_of: dt.date, *,
                notes: list[FreezeNote] | None = None) -> Case:
    """Return a copy of ``case`` with expected result(s), snapshot id and order keys frozen.

    ``notes`` (optional) receives what a reviewer should know: ties at a cut, truncated tie
    groups, a LIMIT without ORDER BY (:class:`FreezeNote`).
    """
    if not case.answerable or not case.reference_sql:
        return case.model_copy(update={"expected": None, "snapshot_id": snapshot_id,
                                       "order_keys": []})
    readings: list[FrozenReading] = []
    for i, sql in enumerate([case.reference_sql, *case.alternative_sqls]):
        label = "reference_sql" if i == 0 else f"alternative_sqls[{i - 1}]"
        try:
            rs = run_reference(con, sql, as_of)
        except Exception as exc:  # duckdb raises many error types
            raise FreezeError(f"case {case.id}: {label} failed on {snapshot_id}: {exc}") from exc
        if rs.row_count > MAX_REFERENCE_ROWS:
            raise FreezeError(
                f"case {case.id}: {label} returns more than {MAX_REFERENCE_ROWS} rows; golden "
                "answers must be small enough to review"
            )
        try:
            reading = freeze_reading(con, sql, rs, as_of, order_matters=case.order_matters)
        except FreezeError as exc:
            raise FreezeError(f"case {case.id}: {label}: {exc}") from exc
        readings.append(reading)
        if notes is not None:
            notes.extend(FreezeNote(case.id, label, code, detail) for code, detail in reading.notes)
    keys: list[str] = []
    if case.order_matters:
        try:
            if _plan(case.reference_sql, readings[0].result.columns) is None:
                raise FreezeError("the reference has no top-level ORDER BY")
        except FreezeError as exc:
            raise FreezeError(f"case {case.id} (order_matters): {exc}") from exc
        except sqlglot.errors.ParseError as exc:
            raise FreezeError(f"case {case.id}: reference_sql does not parse: {exc}") from exc
        # output-column keys; when a key is not an output column, the rank groups recorded
        # with the result (order_groups) take their place
        keys = readings[0].order_keys or []
    primary = readings[0].result
    expected = Expected(**primary.model_dump(), alternatives=[r.result for r in readings[1:]])
    return case.model_copy(update={"expected": expected, "snapshot_id": snapshot_id,
                                   "order_keys": keys})


def freeze_cases(cases: list[Case], serving: Path, snapshot_id: str, as_of: dt.date, *,
                 notes: list[FreezeNote] | None = None) -> list[Case]:
    """Freeze ``cases`` on the serving file (one read-only connection); see :func:`freeze_case`."""
    con = open_readonly(serving)
    try:
        return [freeze_case(c, con, snapshot_id, as_of, notes=notes) for c in cases]
    finally:
        con.close()


# --- verification -------------------------------------------------------------------------


