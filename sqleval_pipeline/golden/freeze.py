"""Freeze expected results from reference SQL, and verify they still reproduce.

Freezing runs each reference query on the pinned serving snapshot (read-only, with the clock
pinned to the snapshot's as-of date), stores the typed result, the snapshot id and — for
``order_matters`` cases — the output columns of the reference's ORDER BY (``order_keys``), so
that ties can later be told apart from ordering mistakes.

Verification re-runs every reference and compares with what was frozen. Any difference is
*snapshot drift*: the evaluation must stop until someone decides whether the data or the
case is wrong.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from sqleval_pipeline.golden.model import Case, EncodedResult, Expected
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import open_readonly

#: a golden reference returns a small, reviewable result
MAX_REFERENCE_ROWS = 1000


class FreezeError(ValueError):
    """A reference query cannot be frozen; the message names the case and what to fix."""


def run_reference(con, sql: str, as_of: dt.date) -> ResultSet:
    """Execute a trusted reference query on an open read-only connection."""
    cur = con.execute(pin_clock(sql, as_of))
    columns = [d[0] for d in cur.description]
    types = [str(d[1]) for d in cur.description]
    rows = cur.fetchmany(MAX_REFERENCE_ROWS + 1)
    return ResultSet(columns=columns, types=types, rows=[list(r) for r in rows])


def order_keys_of(sql: str, output_columns: list[str] | None = None) -> list[str]:
    """Output column names of the outermost ORDER BY of ``sql``.

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


def freeze_case(case: Case, con, snapshot_id: str, as_of: dt.date) -> Case:
    """Return a copy of ``case`` with expected result(s), snapshot id and order keys frozen."""
    if not case.answerable or not case.reference_sql:
        return case.model_copy(update={"expected": None, "snapshot_id": snapshot_id,
                                       "order_keys": []})
    results = []
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
        results.append(EncodedResult.model_validate(rs.to_json()))
    keys: list[str] = []
    if case.order_matters:
        try:
            keys = order_keys_of(case.reference_sql, results[0].columns)
        except FreezeError as exc:
            raise FreezeError(f"case {case.id} (order_matters): {exc}") from exc
        except sqlglot.errors.ParseError as exc:
            raise FreezeError(f"case {case.id}: reference_sql does not parse: {exc}") from exc
    primary = results[0]
    expected = Expected(columns=primary.columns, types=primary.types, rows=primary.rows,
                        alternatives=results[1:])
    return case.model_copy(update={"expected": expected, "snapshot_id": snapshot_id,
                                   "order_keys": keys})


def freeze_cases(cases: list[Case], serving: Path, snapshot_id: str, as_of: dt.date) -> list[Case]:
    con = open_readonly(serving)
    try:
        return [freeze_case(c, con, snapshot_id, as_of) for c in cases]
    finally:
        con.close()


# --- verification -------------------------------------------------------------------------


def _canon(v: Any) -> Any:
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
        return ("list", tuple(_canon(x) for x in v))
    if isinstance(v, dict):
        return ("struct", tuple(sorted((k, _canon(x)) for k, x in v.items())))
    return (type(v).__name__, v)


def _canon_rows(rs: ResultSet, order_matters: bool, order_keys: list[str]) -> list:
    rows = [tuple(_canon(v) for v in r) for r in rs.rows]
    if not order_matters:
        return sorted(rows, key=repr)
    idx = [rs.columns.index(k) for k in order_keys if k in rs.columns]
    groups: list[list] = []
    last = object()
    for r in rows:
        key = tuple(r[i] for i in idx)
        if key != last:
            groups.append([])
            last = key
        groups[-1].append(r)
    return [sorted(g, key=repr) for g in groups]


def same_result(a: ResultSet, b: ResultSet, order_matters: bool, order_keys: list[str]) -> str | None:
    """None when ``b`` reproduces ``a`` exactly (ties on order keys aside), else why not."""
    if a.columns != b.columns:
        return f"columns {a.columns} → {b.columns}"
    if a.types != b.types:
        return f"types {a.types} → {b.types}"
    if a.row_count != b.row_count:
        return f"{a.row_count} rows → {b.row_count} rows"
    ca, cb = _canon_rows(a, order_matters, order_keys), _canon_rows(b, order_matters, order_keys)
    if ca != cb:
        flat_a = [r for g in ca for r in (g if order_matters else [g])]
        flat_b = [r for g in cb for r in (g if order_matters else [g])]
        for i, (x, y) in enumerate(zip(flat_a, flat_b, strict=False)):
            if x != y:
                return f"first difference at row {i}: {a.rows[i] if not order_matters else x} → " \
                       f"{b.rows[i] if not order_matters else y}"
        return "rows differ"
    return None


@dataclass
class Drift:
    case_id: str
    reading: str  # "reference_sql" or "alternative_sqls[i]"
    detail: str

    def __str__(self) -> str:
        return f"{self.case_id} ({self.reading}): {self.detail}"


def verify_cases(cases: list[Case], serving: Path, snapshot_id: str, as_of: dt.date) -> list[Drift]:
    """Re-run every frozen reference on the snapshot; return the drifts (empty = reproduced)."""
    drifts: list[Drift] = []
    con = open_readonly(serving)
    try:
        for case in cases:
            if not case.answerable or not case.reference_sql:
                continue
            if case.expected is None:
                if case.status != "verified":
                    continue  # not reviewed: execution-only until a reviewer accepts and freezes it
                drifts.append(Drift(case.id, "expected", "not frozen; run `sqleval golden freeze`"))
                continue
            if case.snapshot_id != snapshot_id:
                drifts.append(Drift(case.id, "snapshot_id", f"frozen against {case.snapshot_id}, "
                                    f"the pinned snapshot is {snapshot_id}"))
                continue
            frozen = case.accepted_results()
            for i, sql in enumerate([case.reference_sql, *case.alternative_sqls]):
                label = "reference_sql" if i == 0 else f"alternative_sqls[{i - 1}]"
                try:
                    now = run_reference(con, sql, as_of)
                except Exception as exc:
                    drifts.append(Drift(case.id, label, f"failed: {exc}"))
                    continue
                if i >= len(frozen):
                    drifts.append(Drift(case.id, label, "no frozen result; re-freeze"))
                    continue
                why = same_result(frozen[i], now, case.order_matters, case.order_keys)
                if why:
                    drifts.append(Drift(case.id, label, why))
    finally:
        con.close()
    return drifts
