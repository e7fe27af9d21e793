"""The rows of one neighbour database, drawn from the snapshot with a seeded generator.

Every neighbour starts the same way, then its *kind* decides what is done to the rows:

1. **sample**: ``rows_per_table`` rows of every table (a quarter for ``sparse``), chosen by row
   number with the neighbour's own :class:`numpy.random.Generator`;
2. **witnesses**: a few rows of every witness query of the golden references (rows that
   satisfy a reference's conditions, or all but one of them);
3. **closure**: the parent of every kept row under each ``relationships`` test, so keys
   reference rows that are there;
4. what the kind does, in this order — ``sparse`` deletes rows; ``perturbed`` redraws values
   within each column's domain (a key that references a parent is redrawn among the parents
   kept); ``nulls`` puts NULLs where no ``not_null`` or ``unique`` test forbids them;
   ``duplicates`` copies rows (with fresh values of their integer ``unique`` columns);
   ``mixed`` does all four, less often; ``boundary`` none of them;
5. **boundaries** (every kind): for each constant a reference compares a column with, rows
   exactly on it, just below and just above it (one day, one unit, and the smallest step of a
   decimal), copied from witness rows that satisfy the reference's other conditions — numbers
   stay within the column's observed range, dates do not have to;
6. **witness copies**: each kept row that satisfies every condition of a reference (with the
   rows it joins) is copied once per date column, moved to the day after the as-of date (every
   kind), and, for ``nulls``, once per nullable column set to NULL (``mixed``: one column). A
   copied parent gets a fresh key and the copied rows that join it point at the copy, so the
   joined row appears once more with one value changed;
7. **as-of rows** (every kind): rows of every date and timestamp column moved to the day
   before the as-of date, the as-of date and the day after.

What the tests forbid (a duplicate of a ``unique`` value, an orphan key) is repaired when the
file is written (:mod:`~sqleval_pipeline.suite.files`). Only the generator passed in draws:
the same seed gives the same rows.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from sqleval_pipeline.suite.constraints import Constraints
from sqleval_pipeline.suite.probes import Boundary, Probes
from sqleval_pipeline.suite.source import Domain, Source, decimal_scale

KINDS: tuple[str, ...] = ("boundary", "nulls", "duplicates", "perturbed", "sparse", "mixed")


@dataclass(frozen=True)
class Profile:
    """How a kind of neighbour treats the sampled rows (rates are per row or per cell)."""

    kind: str
    base_fraction: float = 1.0
    witnesses: int = 3
    null_rate: float = 0.0
    dup_rate: float = 0.0
    perturb_rate: float = 0.0
    delete_rate: float = 0.0
    as_of_rows: int = 1
    #: copies of each complete witness row with one column NULL: that many columns, -1 every one
    null_copies: int = 0


PROFILES: dict[str, Profile] = {
    "boundary": Profile("boundary", as_of_rows=2),
    "nulls": Profile("nulls", null_rate=0.4, null_copies=-1),
    "duplicates": Profile("duplicates", dup_rate=0.25),
    "perturbed": Profile("perturbed", perturb_rate=0.25),
    "sparse": Profile("sparse", base_fraction=0.25, witnesses=1, delete_rate=0.3),
    "mixed": Profile("mixed", witnesses=2, null_rate=0.1, dup_rate=0.1, perturb_rate=0.1, delete_rate=0.1,
                     null_copies=1),
}


def kind_for(index: int) -> str:
    """The kind of the neighbour at ``index`` (the kinds in turn)."""
    return KINDS[index % len(KINDS)]


def draw(dom: Domain, rng: np.random.Generator, pool: Sequence[Any]) -> Any:
    """A value of ``dom`` (a text column: one of ``pool``, the column's values in the neighbour)."""
    if dom.values is not None:
        return dom.values[int(rng.integers(len(dom.values)))] if dom.values else None
    if dom.kind in ("string", "other"):
        return pool[int(rng.integers(len(pool)))] if pool else None
    lo, hi = dom.low, dom.high
    if lo is None or hi is None:
        return None
    if dom.kind == "integer":
        if hi - lo >= 2**62:
            return pool[int(rng.integers(len(pool)))] if pool else lo
        return int(lo + int(rng.integers(0, hi - lo + 1)))
    if dom.kind == "decimal":
        s = decimal_scale(dom.type)
        a, b = int(Decimal(lo).scaleb(s)), int(Decimal(hi).scaleb(s))
        if b - a >= 2**62:
            return pool[int(rng.integers(len(pool)))] if pool else lo
        return Decimal(a + int(rng.integers(0, b - a + 1))).scaleb(-s)
    if dom.kind == "float":
        return float(lo) + float(rng.random()) * (float(hi) - float(lo))
    if dom.kind == "date":
        return lo + dt.timedelta(days=int(rng.integers(0, (hi - lo).days + 1)))
    if dom.kind == "timestamp":
        span = int((hi - lo).total_seconds())
        return lo + dt.timedelta(seconds=int(rng.integers(0, max(span, 0) + 1)))
    return None


def placements(b: Boundary, dom: Domain) -> list[Any]:
    """Values on, just below and just above a boundary (numbers kept in the observed range)."""
    v = b.value
    if dom.kind == "date" and isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return [v - dt.timedelta(days=1), v, v + dt.timedelta(days=1)]
    if dom.kind == "timestamp" and isinstance(v, dt.datetime):
        return [v - dt.timedelta(days=1), v - dt.timedelta(seconds=1), v, v + dt.timedelta(seconds=1),
                v + dt.timedelta(days=1)]
    if dom.kind == "integer" and isinstance(v, int):
        out = [v - 1, v, v + 1]
    elif dom.kind == "decimal" and isinstance(v, Decimal):
        step = Decimal(1).scaleb(-decimal_scale(dom.type))
        out = [v - 1, v - step, v, v + step, v + 1] if step < 1 else [v - 1, v, v + 1]
    elif dom.kind == "float" and isinstance(v, (int, float, Decimal)):
        out = [float(v) - 1, float(v), float(v) + 1]
    else:
        return []
    if dom.low is None or dom.high is None:
        return out
    return [x for x in dict.fromkeys(out) if dom.low <= x <= dom.high]


def as_of_values(kind: str, as_of: dt.date) -> list[Any]:
    if kind == "date":
        return [as_of - dt.timedelta(days=1), as_of, as_of + dt.timedelta(days=1)]
    midnight = dt.datetime.combine(as_of, dt.time())
    return [midnight - dt.timedelta(hours=12), midnight, midnight + dt.timedelta(hours=23, minutes=59, seconds=59),
            midnight + dt.timedelta(days=1)]


class _Keys:
    """Fresh values of the integer ``unique`` columns of one table (above the snapshot's)."""

    def __init__(self, src: Source, table: str, columns: set[str]):
        info = src.tables[table]
        self.at: dict[int, int] = {}
        self.blocked = False  # a unique column that cannot be made fresh: copies are not possible
        for c in sorted(columns):
            i = info.columns.index(c)
            if src.domains[(table, c)].kind == "integer":
                self.at[i] = int(src.max_of(table, c) or 0)
            else:
                self.blocked = True

    def fresh(self, row: list[Any]) -> list[Any]:
        out = list(row)
        for i in self.at:
            self.at[i] += 1
            out[i] = self.at[i]
        return out


def _expression_columns(expr: str, columns: Sequence[str]) -> list[int]:
    try:
        names = {c.name.lower() for c in sqlglot.parse_one(expr, read="duckdb").find_all(exp.Column)}
    except (sqlglot.errors.SqlglotError, RecursionError):
        return []
    return [i for i, c in enumerate(columns) if c.lower() in names]


def generate(src: Source, probes: Probes, pools: Sequence[Sequence[tuple[int, ...]]], constraints: Constraints,
             profile: Profile, rows_per_table: int, as_of: dt.date, rng: np.random.Generator
             ) -> dict[str, list[list[Any]]]:
    """The rows of one neighbour, table by table in their final order (see module doc)."""
    tables = sorted(src.tables)
    chosen: dict[str, set[int]] = {}
    for t in tables:
        n_all = src.tables[t].rows
        n = min(n_all, max(1, math.ceil(rows_per_table * profile.base_fraction)))
        chosen[t] = {int(x) + 1 for x in rng.choice(n_all, size=n, replace=False)} if n_all else set()
    picked: list[list[tuple[int, ...]]] = []
    for w, pool in zip(probes.witnesses, pools, strict=True):
        m = min(profile.witnesses, len(pool))
        idx = sorted(int(i) for i in rng.choice(len(pool), size=m, replace=False)) if m else []
        picked.append([pool[i] for i in idx])
        for tup in picked[-1]:
            for table, rn in zip(w.tables, tup, strict=True):
                chosen[table].add(rn)

    fetched: dict[str, dict[int, list[Any]]] = {t: {} for t in tables}

    def fetch(t: str) -> dict[int, list[Any]]:
        missing = sorted(chosen[t] - fetched[t].keys())
        if missing:
            fetched[t].update(src.rows(t, missing))
        return fetched[t]

    for _round in range(len(tables) + 1):  # parents of kept rows, until nothing is added
        grew = False
        for r in sorted(constraints.relationships, key=lambda r: (r.table, r.column, r.parent, r.field)):
            rows = fetch(r.table)
            ci = src.tables[r.table].columns.index(r.column)
            values = sorted({row[ci] for rn, row in rows.items() if rn in chosen[r.table] and row[ci] is not None},
                            key=str)
            parents = set(src.numbers_where(r.parent, r.field, values)) - chosen[r.parent]
            if parents:
                chosen[r.parent] |= parents
                grew = True
        if not grew:
            break

    pristine = {t: {rn: row for rn, row in fetch(t).items() if rn in chosen[t]} for t in tables}
    data = {t: [list(pristine[t][rn]) for rn in sorted(pristine[t])] for t in tables}
    keys = {t: _Keys(src, t, constraints.unique_columns(t)) for t in tables}
    info = src.tables

    def column_pool(t: str, i: int) -> list[Any]:
        return [r[i] for r in data[t] if r[i] is not None]

    if profile.delete_rate:
        for t in tables:
            keep = rng.random(len(data[t])) >= profile.delete_rate
            data[t] = [r for r, k in zip(data[t], keep, strict=True) if k]

    if profile.perturb_rate:
        for t in tables:
            unique = constraints.unique_columns(t)
            fk = {r.column: r for r in constraints.parents_of(t)}
            for i, c in enumerate(info[t].columns):
                mask = rng.random(len(data[t])) < profile.perturb_rate
                if c in unique or not mask.any():
                    continue
                if c in fk:
                    pi = info[fk[c].parent].columns.index(fk[c].field)
                    pool = sorted({r[pi] for r in data[fk[c].parent] if r[pi] is not None}, key=str)
                    values = [pool[int(rng.integers(len(pool)))] if pool else None for _ in range(int(mask.sum()))]
                else:
                    dom, cp = src.domains[(t, c)], column_pool(t, i)
                    values = [draw(dom, rng, cp) for _ in range(int(mask.sum()))]
                for row, v in zip((r for r, m in zip(data[t], mask, strict=True) if m), values, strict=True):
                    if v is not None or c not in constraints.not_null_columns(t):
                        row[i] = v

    if profile.null_rate:
        for t in tables:
            forbidden = constraints.not_null_columns(t) | constraints.unique_columns(t)
            for i, c in enumerate(info[t].columns):
                mask = rng.random(len(data[t])) < profile.null_rate
                if c in forbidden or src.domains[(t, c)].kind == "other":
                    continue
                for row, m in zip(data[t], mask, strict=True):
                    if m:
                        row[i] = None

    if profile.dup_rate:
        for t in tables:
            if keys[t].blocked:
                continue
            spread = sorted({i for e in constraints.unique_expressions(t)
                             for i in _expression_columns(e, info[t].columns)})
            mask = rng.random(len(data[t])) < profile.dup_rate
            copies = []
            for row, m in zip(data[t], mask, strict=True):
                if not m:
                    continue
                copy = keys[t].fresh(row)
                if spread:  # a unique expression: change one of its columns, or the copy is dropped
                    i = spread[int(rng.integers(len(spread)))]
                    copy[i] = draw(src.domains[(t, info[t].columns[i])], rng, column_pool(t, i)) or copy[i]
                copies.append(copy)
            data[t].extend(copies)

    for b in probes.boundaries:  # rows on, below and above each boundary (every kind)
        t = b.table
        ci = info[t].columns.index(b.column)
        sources = [pristine[t][tup[pos]] for w, pos in b.witnesses for tup in picked[w] if tup[pos] in pristine[t]]
        if not sources:
            sources = list(pristine[t].values())
        if not sources:
            continue
        start = int(rng.integers(len(sources)))
        for j, v in enumerate(placements(b, src.domains[(t, b.column)])):
            base = sources[(start + j) % len(sources)]
            if keys[t].blocked or b.column in constraints.unique_columns(t):
                target = next((r for r in data[t] if r == base), None)  # no copy possible: move it
                if target is not None:
                    target[ci] = v
                continue
            copy = keys[t].fresh(base)
            copy[ci] = v
            data[t].append(copy)

    def copy_joined(tabs: Sequence[str], rows: Sequence[list[Any]], pos: int, i: int, value: Any) -> None:
        """Row ``pos`` of a witness tuple copied with column ``i`` set to ``value``, and every row of
        the tuple that references a copied row (a ``relationships`` test) copied too, pointing at the
        copy: the joined row appears once more with one value changed."""
        if keys[tabs[pos]].blocked:
            return
        copies = {pos: keys[tabs[pos]].fresh(rows[pos])}
        copies[pos][i] = value
        grew = True
        while grew:
            grew = False
            for q, (tq, rq) in enumerate(zip(tabs, rows, strict=True)):
                if q in copies or keys[tq].blocked:
                    continue
                for r in constraints.parents_of(tq):
                    ci, hit = info[tq].columns.index(r.column), None
                    for p, cp in copies.items():
                        fi = info[tabs[p]].columns.index(r.field) if tabs[p] == r.parent else None
                        if fi is not None and rq[ci] is not None and rq[ci] == rows[p][fi] and cp[fi] != rows[p][fi]:
                            hit = cp[fi]
                    if hit is not None:
                        copies[q] = keys[tq].fresh(rq)
                        copies[q][ci] = hit
                        grew = True
                        break
        for q, row in sorted(copies.items()):
            data[tabs[q]].append(row)

    for w, tuples in zip(probes.witnesses, picked, strict=True):  # the rows that satisfy everything, changed
        if not w.complete:
            continue
        for tup in tuples:
            rows = [pristine[t].get(rn) for t, rn in zip(w.tables, tup, strict=True)]
            if any(r is None for r in rows):
                continue
            for pos, t in enumerate(w.tables):
                cols = info[t].columns
                if profile.null_copies:  # with a value missing
                    forbidden = constraints.not_null_columns(t) | constraints.unique_columns(t)
                    nullable = [i for i, c in enumerate(cols) if c not in forbidden and rows[pos][i] is not None
                                and src.domains[(t, c)].kind != "other"]
                    if profile.null_copies > 0 and len(nullable) > profile.null_copies:
                        nullable = [nullable[int(x)] for x in sorted(
                            rng.choice(len(nullable), size=profile.null_copies, replace=False))]
                    for i in nullable:
                        copy_joined(w.tables, rows, pos, i, None)
                for i, c in enumerate(cols):  # dated the day after the as-of date
                    kind = src.domains[(t, c)].kind
                    if kind in ("date", "timestamp") and c not in constraints.unique_columns(t):
                        copy_joined(w.tables, rows, pos, i, as_of_values(kind, as_of)[-1])

    for t in tables:  # rows moved around the as-of date (every kind)
        if not data[t]:
            continue
        for i, c in enumerate(info[t].columns):
            kind = src.domains[(t, c)].kind
            if kind not in ("date", "timestamp"):
                continue
            for v in as_of_values(kind, as_of):
                for _ in range(profile.as_of_rows):
                    base = data[t][int(rng.integers(len(data[t])))]
                    if keys[t].blocked or c in constraints.unique_columns(t):
                        base[i] = v
                        continue
                    copy = keys[t].fresh(base)
                    copy[i] = v
                    data[t].append(copy)
    return data
