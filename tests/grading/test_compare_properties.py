"""Property tests, including a cross-check against a brute-force reference on small inputs."""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import numpy as np
from scipy.optimize import linear_sum_assignment

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqleval_pipeline.grading import compare, values_equal
from sqleval_pipeline.results import ResultSet

# values chosen to collide: near-tolerance floats, roundings, whole numbers, NULL/''/0/false
POOL = [None, 0, 1, 2, "", "a", "a ", "b", False, True, 0.5, 0.01, 0.0100004, 0.0100008,
        1.234, 1.23, 1.2345, Decimal("1.23"), 2.0,
        # integer-typed vs whole DOUBLE/DECIMAL vs noisy DOUBLE (rule revision 2)
        Decimal("2.00"), 2.0000004, 1.9999997]
value = st.sampled_from(POOL)


@st.composite
def result_sets(draw, max_rows=5, max_cols=3):
    ncols = draw(st.integers(1, max_cols))
    nrows = draw(st.integers(0, max_rows))
    rows = [[draw(value) for _ in range(ncols)] for _ in range(nrows)]
    return ResultSet(columns=[f"c{i}" for i in range(ncols)], types=["UNION"] * ncols, rows=rows)


def _bag_equal_brute(erows, grows, facts):
    if len(erows) != len(grows):
        return False
    for perm in itertools.permutations(range(len(grows))):
        if all(all(values_equal(a, b, facts=facts) for a, b in zip(er, grows[p], strict=True))
               for er, p in zip(erows, perm, strict=True)):
            return True
    return False


def brute(e: ResultSet, g: ResultSet) -> tuple[bool, bool]:
    exact = len(e.columns) == len(g.columns) and _bag_equal_brute(e.rows, g.rows, False)
    facts = False
    if len(e.rows) == len(g.rows):
        for cols in itertools.permutations(range(len(g.columns)), len(e.columns)):
            proj = [[r[j] for j in cols] for r in g.rows]
            if _bag_equal_brute(e.rows, proj, True):
                facts = True
                break
    return exact, facts


FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(result_sets(max_rows=4), st.data())
def test_matches_brute_force_reference(e, data):
    # candidates built from the expected rows (so that matches are common) or drawn freely
    if data.draw(st.booleans()):
        g = data.draw(result_sets(max_rows=4))
    else:
        extra = data.draw(st.integers(0, 1))
        rows = [list(r) + [data.draw(value) for _ in range(extra)] for r in e.rows]
        rows = [[data.draw(value) if data.draw(st.integers(0, 5)) == 0 else v for v in r] for r in rows]
        perm = data.draw(st.permutations(range(len(rows))))
        g = ResultSet(columns=[f"g{i}" for i in range(len(e.columns) + extra)],
                      types=["UNION"] * (len(e.columns) + extra), rows=[rows[p] for p in perm])
    c = compare(e, g)
    assert (c.exact, c.facts) == brute(e, g)


@FAST
@given(result_sets(), st.data())
def test_permuting_rows_and_columns_keeps_verdict(e, data):
    g = data.draw(result_sets())
    base = compare(e, g)
    rperm = data.draw(st.permutations(range(len(g.rows))))
    cperm = data.draw(st.permutations(range(len(g.columns))))
    g_rows = ResultSet(columns=g.columns, types=g.types, rows=[g.rows[i] for i in rperm])
    assert compare(e, g_rows).exact == base.exact
    assert compare(e, g_rows).facts == base.facts
    g_both = ResultSet(columns=[g.columns[j] for j in cperm], types=[g.types[j] for j in cperm],
                       rows=[[g.rows[i][j] for j in cperm] for i in rperm])
    assert compare(e, g_both).facts == base.facts


@FAST
@given(result_sets(), st.data())
def test_self_and_shuffled_self_always_match(e, data):
    rperm = data.draw(st.permutations(range(len(e.rows))))
    g = ResultSet(columns=e.columns, types=e.types, rows=[e.rows[i] for i in rperm])
    c = compare(e, g)
    assert c.exact and c.facts


@FAST
@given(result_sets(), st.data())
def test_extra_column_never_breaks_facts(e, data):
    g = data.draw(result_sets())
    if not compare(e, g).facts:
        g = e  # make sure the property is exercised on passing pairs too
    pos = data.draw(st.integers(0, len(g.columns)))
    extra = [data.draw(value) for _ in g.rows]
    g2 = ResultSet(columns=g.columns[:pos] + ["extra"] + g.columns[pos:],
                   types=g.types[:pos] + ["UNION"] + g.types[pos:],
                   rows=[r[:pos] + [x] + r[pos:] for r, x in zip(g.rows, extra, strict=True)])
    assert compare(e, g2).facts
    assert not compare(e, g2).exact


@FAST
@given(result_sets(max_rows=6, max_cols=4).filter(lambda r: r.rows), st.data())
def test_changing_one_value_breaks_both(e, data):
    i = data.draw(st.integers(0, len(e.rows) - 1))
    j = data.draw(st.integers(0, len(e.columns) - 1))
    replacement = data.draw(st.sampled_from(["zz-unseen", 987654321, 3.75e9 + 0.5]))
    rows = [list(r) for r in e.rows]
    rows[i][j] = replacement
    rperm = data.draw(st.permutations(range(len(rows))))
    g = ResultSet(columns=e.columns, types=e.types, rows=[rows[k] for k in rperm])
    c = compare(e, g)
    assert not c.exact and not c.facts


@settings(max_examples=100, deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(-1e6, 1e6, allow_nan=False))
def test_value_rule_symmetric_for_exact(a, b):
    assert values_equal(a, b) == values_equal(b, a)


# ------------------------------------------------------------------ keyed results, larger bags
# A key column (rigid) plus numeric columns drawn from values that collide under the tolerance,
# so that the grouping by rigid codes, the forced pairs and the tolerant groups all occur.
NUMS = [0, 1, 5, 5.0, Decimal("5.00"), 5.0000001, 4.9999996, 5.0000006, Decimal("58920.00"),
        58920.000000000004, 58920.0, 1.23, 1.2345, 1.2349, 0.0100004, 0.0100008, 0.01, None]
KEYS = ["a", "b", "c", 1, 2]


def _bag_equal_matching(erows, grows, facts):
    """Reference: a perfect matching in the row compatibility graph (assignment problem)."""
    n = len(erows)
    if n != len(grows):
        return False
    if n == 0:
        return True
    cost = np.ones((n, n))
    for i, er in enumerate(erows):
        for j, gr in enumerate(grows):
            if all(values_equal(a, b, facts=facts) for a, b in zip(er, gr, strict=True)):
                cost[i, j] = 0
    r, c = linear_sum_assignment(cost)
    return bool(cost[r, c].sum() == 0)


@st.composite
def keyed(draw, max_rows=12):
    n = draw(st.integers(0, max_rows))
    ncols = draw(st.integers(1, 2))
    rows = [[draw(st.sampled_from(KEYS))] + [draw(st.sampled_from(NUMS)) for _ in range(ncols)] for _ in range(n)]
    return ResultSet(columns=[f"c{i}" for i in range(ncols + 1)], types=["UNION"] * (ncols + 1), rows=rows)


@FAST
@given(keyed(), st.data())
def test_keyed_bags_match_assignment_reference(e, data):
    rows = [list(r) for r in e.rows]
    for r in rows:  # perturb some values, keep the rest
        for j in range(1, len(r)):
            if data.draw(st.integers(0, 3)) == 0:
                r[j] = data.draw(st.sampled_from(NUMS))
    random.Random(data.draw(st.integers(0, 10**6))).shuffle(rows)
    g = ResultSet(columns=e.columns, types=e.types, rows=rows)
    c = compare(e, g)
    assert c.exact == _bag_equal_matching(e.rows, g.rows, False)
    # got-the-facts with the identity column map must agree with the reference too (it is the
    # only map when every column holds different data; otherwise facts may pass with another)
    if _bag_equal_matching(e.rows, g.rows, True):
        assert c.facts


def test_whole_decimal_vs_noisy_double_large_bag():
    rnd = random.Random(5)
    rows = [[i, Decimal(rnd.randint(0, 10**6)).scaleb(-2).quantize(Decimal("1.00")) if i % 3 else Decimal(i * 100)]
            for i in range(3000)]
    e = ResultSet(columns=["id", "v"], types=["BIGINT", "DECIMAL(18,2)"], rows=rows)
    got = [[i, float(v) * (1 + 2e-16) + (1e-12 if i % 7 == 0 else 0.0)] for i, v in rows]
    rnd.shuffle(got)
    g = ResultSet(columns=["id", "v"], types=["BIGINT", "DOUBLE"], rows=got)
    assert compare(e, g).exact
    ints = ResultSet(columns=["id", "v"], types=["BIGINT", "BIGINT"], rows=[[i, i * 100] for i in range(100)])
    noisy = ResultSet(columns=["id", "v"], types=["BIGINT", "DOUBLE"],
                      rows=[[i, i * 100 + (1e-9 if i == 50 else 0.0)] for i in range(100)])
    c = compare(ints, noisy)
    assert not c.exact and not c.facts
    assert "1 expected row(s) missing, 1 unexpected row(s)" in c.mismatch
