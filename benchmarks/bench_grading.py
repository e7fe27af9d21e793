"""Grading throughput vs a straightforward pandas baseline, plus a full grading + scorecard run.

    .venv/bin/python benchmarks/bench_grading.py [--quick]

Scenarios per size (rows x columns of mixed types: ids, categories, dates, DECIMAL revenue,
DOUBLE metrics, counts):

- ``equal``: the candidate is the expected result with rows shuffled (exact passes);
- ``facts``: rows shuffled, columns shuffled and one extra column (only got-the-facts passes);
- ``one-off``: rows shuffled and one value changed (both fail; includes the mismatch report).

The pandas baseline is the usual implementation: build two DataFrames, sort both by every
column, then compare numeric columns with ``np.isclose`` and the others with ``==``. It gives
only an order-insensitive positional reading (no got-the-facts, no NULL/type rules), so it is
a lower bound on what a pandas grader would cost.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqleval_pipeline.golden.model import Case  # noqa: E402
from sqleval_pipeline.grading import compare, grade_attempt  # noqa: E402
from sqleval_pipeline.pipeline.records import Attempt, Execution  # noqa: E402
from sqleval_pipeline.results import ResultSet  # noqa: E402
from sqleval_pipeline.scoring import build_scorecard, diff  # noqa: E402

KINDS = ["id", "category", "date", "revenue", "metric", "count"]
TYPES = {"id": "BIGINT", "category": "VARCHAR", "date": "DATE", "revenue": "DECIMAL(18,2)",
         "metric": "DOUBLE", "count": "BIGINT"}


def make_result(n: int, k: int, seed: int = 0) -> ResultSet:
    rnd = random.Random(seed)
    kinds = [KINDS[i % len(KINDS)] for i in range(k)]
    cats = [f"cat_{i}" for i in range(50)]
    base = dt.date(2024, 1, 1)
    cols = []
    for j, kind in enumerate(kinds):
        if kind == "id":
            col = list(range(j * 10**7, j * 10**7 + n))
        elif kind == "category":
            col = [rnd.choice(cats) for _ in range(n)]
        elif kind == "date":
            col = [base + dt.timedelta(days=rnd.randint(0, 700)) for _ in range(n)]
        elif kind == "revenue":
            col = [Decimal(rnd.randint(0, 10**9)).scaleb(-2) for _ in range(n)]
        elif kind == "metric":
            col = [rnd.random() * 1000 for _ in range(n)]
        else:
            col = [rnd.randint(0, 500) for _ in range(n)]
        cols.append(col)
    rows = [list(r) for r in zip(*cols, strict=True)]
    return ResultSet(columns=[f"{kd}_{j}" for j, kd in enumerate(kinds)], types=[TYPES[kd] for kd in kinds], rows=rows)


def shuffled(rs: ResultSet, seed: int, *, columns: bool = False, extra: bool = False, change: bool = False,
             keep_order: bool = False) -> ResultSet:
    rnd = random.Random(seed)
    rows = [list(r) for r in rs.rows]
    if not keep_order:
        rnd.shuffle(rows)
    names, types = list(rs.columns), list(rs.types)
    if change:
        j = next(i for i, t in enumerate(types) if t == "DOUBLE") if "DOUBLE" in types else 0
        rows[len(rows) // 2][j] = rows[len(rows) // 2][j] + 1.0 if isinstance(rows[len(rows) // 2][j], float) else -1
    if columns:
        perm = list(range(len(names)))
        rnd.shuffle(perm)
        rows = [[r[p] for p in perm] for r in rows]
        names, types = [names[p] for p in perm], [types[p] for p in perm]
    if extra:
        rows = [r + [i] for i, r in enumerate(rows)]
        names, types = names + ["extra"], types + ["BIGINT"]
    return ResultSet(columns=names, types=types, rows=rows)


def pandas_baseline(e: ResultSet, g: ResultSet) -> bool:
    """Straightforward pandas grader: sort both by every column, then compare."""
    if len(e.columns) != len(g.columns) or len(e.rows) != len(g.rows):
        return False
    de = pd.DataFrame(e.rows, columns=range(len(e.columns)))
    dg = pd.DataFrame(g.rows, columns=range(len(g.columns)))
    for df in (de, dg):
        for c in df.columns:
            if df[c].map(type).eq(Decimal).any():
                df[c] = df[c].astype(float)
    de = de.sort_values(list(de.columns)).reset_index(drop=True)
    dg = dg.sort_values(list(dg.columns)).reset_index(drop=True)
    for c in de.columns:
        a, b = de[c], dg[c]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            if not np.allclose(a.to_numpy(float), b.to_numpy(float), rtol=1e-5, atol=5e-7, equal_nan=True):
                return False
        elif not (a == b).all():
            return False
    return True


def median_of(fn, repeat: int) -> tuple[float, object]:
    """Median wall time of ``repeat`` runs (the machine has 2 cores and may be shared)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_sizes(quick: bool) -> list[tuple]:
    sizes = [(10, 5), (10, 20), (10_000, 5), (10_000, 20), (100_000, 5), (100_000, 20)]
    if quick:
        sizes = sizes[:4]
    rows = []
    for n, k in sizes:
        e = make_result(n, k, seed=n + k)
        repeat = 21 if n <= 10 else (7 if n <= 10_000 else 5)
        scenarios = {
            "equal": shuffled(e, 1),
            "facts": shuffled(e, 2, columns=True, extra=True),
            "one-off": shuffled(e, 3, change=True),
        }
        for name, g in scenarios.items():
            t_ours, c = median_of(lambda g=g: compare(e, g), repeat)
            t_pd, verdict = median_of(lambda g=g: pandas_baseline(e, g), repeat)
            rows.append((n, k, name, t_ours, t_pd, c.exact, c.facts, verdict))
    return rows


def make_case(i: int) -> Case:
    rnd = random.Random(i)
    band = "should_refuse" if i % 10 == 9 else ("needs_definition" if i % 3 == 0 else "answerable")
    data = dict(id=f"q{i:02d}", question=f"question {i}?", difficulty=["simple_aggregate", "filtered_aggregate",
                "multi_condition", "time_window", "top_k", "trap"][i % 6], band=band, cluster=f"fact_{i % 6}",
                split="heldout" if i % 4 == 0 else "dev", status="verified",
                provenance={"source": "bench", "author": "bench"}, snapshot_id="snap")
    if band != "should_refuse":
        n = rnd.randint(1, 20)
        rs = make_result(n, 3, seed=i)
        data["reference_sql"] = "SELECT ..."
        data["expected"] = rs.to_json()
        data["order_matters"] = i % 6 == 4
        data["order_keys"] = [rs.columns[2]] if i % 6 == 4 else []
    return Case.model_validate(data)


def full_run() -> tuple[float, float, int]:
    cases = [make_case(i) for i in range(60)]
    t0 = time.perf_counter()
    grades = {"cfgA": [], "cfgB": []}
    for cfg, skill in (("cfgA", 0.7), ("cfgB", 0.8)):
        rnd = random.Random(cfg)
        for case in cases:
            for run in range(3):
                key = dict(config_version=cfg, case_id=case.id, run_index=run)
                roll = rnd.random()
                if not case.answerable:
                    att = Attempt(**key, kind="refusal") if roll < skill else Attempt(**key, kind="sql", sql="SELECT 1")
                    ex = None if roll < skill else Execution(**key, status="refused", layer="filter", reason="schema")
                elif roll > 0.97:
                    att, ex = Attempt(**key, kind="error", error_code="provider_timeout"), None
                elif roll > 0.92:
                    att, ex = Attempt(**key, kind="refusal", refusal_reason="unsure"), None
                else:
                    exp = case.accepted_results()[0]
                    right = roll < skill
                    got = shuffled(exp, run, extra=right and roll > skill * 0.8, change=not right,
                                   keep_order=case.order_matters)
                    att = Attempt(**key, kind="sql", sql="SELECT ...")
                    ex = Execution(**key, status="ok", result=got, elapsed_ms=1.0)
                grades[cfg].append(grade_attempt(case, att, ex))
    t_grade = time.perf_counter() - t0
    cards = [build_scorecard(grades[c]) for c in ("cfgA", "cfgB")]
    diff(*cards)
    t_total = time.perf_counter() - t0
    return t_grade, t_total, sum(len(v) for v in grades.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 100k-row sizes")
    args = ap.parse_args()
    console = Console(width=140)
    compare(make_result(10, 5), make_result(10, 5))  # warm imports (scipy) outside the timings
    t = Table(title="compare() vs pandas sort+compare (median of N runs, milliseconds)")
    for c in ("rows", "cols", "scenario", "sqleval ms", "pandas ms", "speed-up", "exact", "facts", "pandas verdict"):
        t.add_column(c, justify="right")
    speedups = {}
    for n, k, name, ours, pdt, ex, fa, verdict in bench_sizes(args.quick):
        if name == "facts":  # the pandas baseline has no got-the-facts reading: it just says False
            t.add_row(f"{n:,}", str(k), name, f"{ours * 1e3:.2f}", "n/a", "n/a", str(ex), str(fa), "n/a")
            continue
        speedups.setdefault((n, name), []).append(pdt / ours)
        t.add_row(f"{n:,}", str(k), name, f"{ours * 1e3:.2f}", f"{pdt * 1e3:.2f}", f"{pdt / ours:.1f}x",
                  str(ex), str(fa), str(verdict))
    console.print(t)
    runs = [full_run() for _ in range(5)]
    t_grade = statistics.median(r[0] for r in runs)
    t_total = statistics.median(r[1] for r in runs)
    n = runs[0][2]
    console.print(f"full run (median of 5): {n} attempts (60 cases x 3 runs x 2 configs) graded in {t_grade * 1e3:.0f} ms; "
                  f"grading + 2 scorecards (2000 bootstrap resamples each) + diff in {t_total * 1e3:.0f} ms")
    big = [v for (n, _), vs in speedups.items() if n == 100_000 for v in vs]
    if big:
        console.print(f"100k rows (equal, one-off): median speed-up {statistics.median(big):.1f}x, min {min(big):.1f}x")


if __name__ == "__main__":
    main()
