"""Differential fuzz of ``compare`` with real DuckDB storage types against a brute-force reference.

The other property tests type every column ``UNION``, so the type-dependent rules (REAL's
float32 tolerance, DECIMAL vs DECIMAL by exact value) and the vectorised paths taken by typed
numeric columns never meet them. Here every column has a DuckDB type (BIGINT, DOUBLE,
DECIMAL(12,3), REAL) and values of that type, chosen to collide: noise within and beyond each
tolerance, roundings (including DuckDB's round() of the stored double), float32 casts, whole
numbers. The reference decides each reading by a perfect matching over the pairwise rule
(``values_equal`` with the two columns' types), trying every injective column map for
got-the-facts; results of up to 40 rows make the vectorised snapping and matching run.
"""

from __future__ import annotations

import itertools
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from sqleval_pipeline.grading import compare, values_equal
from sqleval_pipeline.results import ResultSet

BASES = [0.575, 2.675, 1.234, 1351.3333333333333, 12.0, 0.1, 3.655, 100.25, 7.0, 0.3333333333333333]
TYPES = ["BIGINT", "DOUBLE", "DECIMAL(12,3)", "REAL"]


def as_type(x: float, t: str):
    if t == "BIGINT":
        return int(round(x))
    if t == "REAL":
        return float(np.float32(x))
    if t.startswith("DECIMAL"):
        return Decimal(repr(x)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    return float(x)


def variant(draw, x: float) -> float:
    """A value near ``x``: itself, noise within or beyond the DOUBLE tolerance, a rounding."""
    kind = draw(st.sampled_from(["same", "noise", "far", "round2", "round_stored", "other"]))
    if kind == "noise":
        return x * (1 + 1e-12)
    if kind == "far":
        return x * (1 + 1e-7)
    if kind == "round2":
        return round(x, 2)
    if kind == "round_stored":
        return float(Decimal(x).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    if kind == "other":
        return draw(st.sampled_from(BASES))
    return x


@st.composite
def cases(draw):
    k = draw(st.integers(1, 3))
    n = draw(st.integers(1, 40))
    etypes = [draw(st.sampled_from(TYPES)) for _ in range(k)]
    base = [[draw(st.sampled_from(BASES)) for _ in range(k)] for _ in range(n)]
    erows = [[as_type(x, t) for x, t in zip(r, etypes, strict=True)] for r in base]
    # the candidate: same or other storage types per column, values near the expected ones
    gtypes = [t if draw(st.booleans()) else draw(st.sampled_from(TYPES)) for t in etypes]
    grows = [[as_type(variant(draw, x) if draw(st.integers(0, 3)) == 0 else x, t)
              for x, t in zip(r, gtypes, strict=True)] for r in base]
    if draw(st.booleans()):  # an extra candidate column
        gtypes = gtypes + ["DOUBLE"]
        grows = [r + [draw(st.sampled_from(BASES))] for r in grows]
    if draw(st.booleans()):  # columns in another order
        perm = draw(st.permutations(range(len(gtypes))))
        gtypes = [gtypes[p] for p in perm]
        grows = [[r[p] for p in perm] for r in grows]
    order = draw(st.permutations(range(n)))
    grows = [grows[i] for i in order]
    e = ResultSet(columns=[f"e{i}" for i in range(k)], types=etypes, rows=erows)
    g = ResultSet(columns=[f"g{i}" for i in range(len(gtypes))], types=gtypes, rows=grows)
    return e, g


def _distinct(values) -> tuple[list, list[int]]:
    """The distinct values of a column (told apart by type and exact text: 1, 1.0 and
    Decimal('1.000') are three values) and each row's index among them."""
    seen: dict[tuple[type, str], int] = {}
    firsts, index = [], []
    for v in values:
        key = (type(v), repr(v))
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(v)
        index.append(seen[key])
    return firsts, index


def _perfect(erows, grows, etypes, gtypes, cols, facts: bool) -> bool:
    """A perfect matching of expected to candidate rows where a row pair matches when
    ``values_equal`` holds for every mapped column pair (``cols[i]``: the candidate column of
    expected column i). The pairwise rule is decided once per pair of distinct values of two
    columns (it is a pure function of the two values and types) and spread over the rows."""
    if len(erows) != len(grows):
        return False
    if not erows:
        return True
    ok = np.ones((len(erows), len(grows)), dtype=bool)
    for i, j in enumerate(cols):
        evals, eidx = _distinct([er[i] for er in erows])
        gvals, gidx = _distinct([gr[j] for gr in grows])
        pair = np.array([[values_equal(a, b, facts=facts, expected_type=etypes[i], got_type=gtypes[j])
                          for b in gvals] for a in evals], dtype=bool)
        ok &= pair[np.ix_(eidx, gidx)]
    r, c = linear_sum_assignment(-ok.astype(float))
    return bool(ok[r, c].all())


def reference(e: ResultSet, g: ResultSet) -> tuple[bool, bool]:
    k = len(e.columns)
    exact = len(g.columns) == k and _perfect(e.rows, g.rows, e.types, g.types, list(range(k)), False)
    facts = any(_perfect(e.rows, g.rows, e.types, g.types, list(cols), True)
                for cols in itertools.permutations(range(len(g.columns)), k))
    return exact, facts


@settings(max_examples=400, deadline=None, derandomize=True,  # the same examples on every run (CI)
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_typed_results_match_the_reference(case):
    e, g = case
    c = compare(e, g)
    assert (c.exact, c.facts) == reference(e, g), (e.types, g.types, e.rows[:3], g.rows[:3])
