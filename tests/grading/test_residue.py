"""The raw-row fast path and the residue path must give the full comparison's verdicts.

The residue path (rows left unpaired by the row-hash pass, closed over rigid columns) only
runs on large results; here its thresholds are lowered so that it runs on small, adversarial
inputs, and every verdict is checked against the full comparison (and a brute-force reference).
Hash collisions are forced with a constant hash: they may cost time, never a false pass.
"""

from __future__ import annotations

import datetime as dt
import importlib
import pkgutil
import random
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqleval_pipeline import grading
from sqleval_pipeline.grading import compare
from sqleval_pipeline.results import ResultSet

from .test_compare_properties import _bag_equal_matching

# typed columns whose values collide under the rules: trailing spaces, midnight timestamps,
# near-tolerance doubles, whole DECIMALs vs ints, NULLs
TYPED = {
    "BIGINT": [None, 0, 1, 2, 5, 10**7],
    "VARCHAR": [None, "", "a", "a ", "b", "cat_1"],
    "DATE": [None, dt.date(2024, 1, 1), dt.date(2024, 1, 2)],
    "TIMESTAMP": [None, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 12)],
    "DOUBLE": [None, 0.0, 0.0000004, 0.0000008, 1.234, 1.23, 5.0, 5.0000001, 4.9999996, 58920.000000000004],
    "DECIMAL(18,2)": [None, Decimal("1.23"), Decimal("5.00"), Decimal("58920.00"), Decimal("0.00")],
}
TYPE_NAMES = list(TYPED)

FAST = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: the grading package and its modules: a function looks a name up in the module that defines
#: or imports it, so a patched name is set on every one of them that holds it
GRADING_MODULES = [grading, *(importlib.import_module(f"{grading.__name__}.{m.name}")
                              for m in pkgutil.iter_modules(grading.__path__))]


def patch_grading(mp, name, value):
    """``mp.setattr(module, name, value)`` on every grading module holding ``name``."""
    holders = [m for m in GRADING_MODULES if hasattr(m, name)]
    assert holders, f"no grading module has {name!r}"
    for m in holders:
        mp.setattr(m, name, value)


@pytest.fixture
def residue_everywhere(monkeypatch):
    patch_grading(monkeypatch, "_RESIDUE_MIN_ROWS", 0)
    patch_grading(monkeypatch, "_RESIDUE_MAX_FRACTION", 1.0)


def full_compare(e, g, monkeypatch_ctx):
    """The comparison without the raw-row pass (the reference implementation)."""
    with monkeypatch_ctx() as mp:
        patch_grading(mp, "_fast_exact", lambda *a: grading._Fast(False))
        return compare(e, g)


@st.composite
def typed_pair(draw, max_rows=8):
    ncols = draw(st.integers(1, 3))
    etypes = [draw(st.sampled_from(TYPE_NAMES)) for _ in range(ncols)]
    # the candidate's column types: mostly the same, sometimes a compatible family member
    swap = {"DOUBLE": "DECIMAL(18,2)", "DECIMAL(18,2)": "DOUBLE", "DATE": "TIMESTAMP", "TIMESTAMP": "DATE",
            "BIGINT": "DOUBLE"}
    gtypes = [swap.get(t, t) if draw(st.integers(0, 4)) == 0 else t for t in etypes]
    n = draw(st.integers(0, max_rows))
    key = draw(st.booleans())  # a unique leading key column (the common case for the fast path)
    erows = [[draw(st.sampled_from(TYPED[t])) for t in etypes] for _ in range(n)]
    if key:
        for i, r in enumerate(erows):
            r[0] = i if etypes[0] == "BIGINT" else r[0]
    grows = [list(r) for r in erows]
    for r in grows:
        for j, t in enumerate(gtypes):
            if draw(st.integers(0, 5)) == 0 or t != etypes[j]:
                r[j] = draw(st.sampled_from(TYPED[t]))
    random.Random(draw(st.integers(0, 10**6))).shuffle(grows)
    return (ResultSet(columns=[f"c{i}" for i in range(ncols)], types=etypes, rows=erows),
            ResultSet(columns=[f"d{i}" for i in range(ncols)], types=gtypes, rows=grows))


@FAST
@given(typed_pair())
def test_residue_path_agrees_with_full_comparison(pair):
    e, g = pair
    with pytest.MonkeyPatch.context() as mp:
        patch_grading(mp, "_RESIDUE_MIN_ROWS", 0)
        patch_grading(mp, "_RESIDUE_MAX_FRACTION", 1.0)
        c = compare(e, g)
    ref = full_compare(e, g, pytest.MonkeyPatch.context)
    assert (c.exact, c.facts) == (ref.exact, ref.facts)
    assert c.exact == _bag_equal_matching(e.rows, g.rows, False)
    assert (c.exact_reason, c.facts_reason) == (ref.exact_reason, ref.facts_reason)


@FAST
@given(typed_pair())
def test_constant_hash_never_passes_wrongly(pair):
    e, g = pair
    with pytest.MonkeyPatch.context() as mp:
        patch_grading(mp, "_hashes", lambda items: np.zeros(len(items), dtype=np.int64))
        patch_grading(mp, "_RESIDUE_MIN_ROWS", 0)
        patch_grading(mp, "_RESIDUE_MAX_FRACTION", 1.0)
        c = compare(e, g)
    assert (c.exact, c.facts) == (lambda r: (r.exact, r.facts))(full_compare(e, g, pytest.MonkeyPatch.context))


def test_colliding_rows_are_not_paired(monkeypatch):
    # every row hashes alike: pairing by hash order pairs different rows, which verification
    # must reject
    patch_grading(monkeypatch, "_hashes", lambda items: np.zeros(len(items), dtype=np.int64))
    e = ResultSet(columns=["k", "v"], types=["BIGINT", "BIGINT"], rows=[[i, i] for i in range(50)])
    g = ResultSet(columns=["k", "v"], types=["BIGINT", "BIGINT"], rows=[[i, i + 1] for i in range(50)])
    assert grading._fast_exact(e, g, False).ok is False
    c = compare(e, g)
    assert not c.exact and not c.facts
    assert compare(e, ResultSet(columns=e.columns, types=e.types, rows=e.rows[::-1])).exact


def _big(n=5000, seed=0):
    rnd = random.Random(seed)
    rows = [[i, f"cat_{rnd.randint(0, 20)}", dt.date(2024, 1, 1) + dt.timedelta(days=rnd.randint(0, 30)),
             Decimal(rnd.randint(0, 10**6)).scaleb(-2), rnd.random() * 1000, rnd.randint(0, 50)] for i in range(n)]
    return ResultSet(columns=["id", "cat", "day", "revenue", "metric", "n"],
                     types=["BIGINT", "VARCHAR", "DATE", "DECIMAL(18,2)", "DOUBLE", "BIGINT"], rows=rows)


@pytest.mark.parametrize("change", ["metric_noise", "metric_off", "id_swap", "cat", "dup_row", "none"])
def test_large_results_residue_matches_full(change):
    e = _big()
    rows = [list(r) for r in e.rows]
    random.Random(1).shuffle(rows)
    if change == "metric_noise":  # within the tolerance: still exact
        rows[10][4] *= 1 + 1e-12
    elif change == "metric_off":
        rows[10][4] += 1.0
    elif change == "id_swap":  # two rows exchange their ids: the rest still lines up
        rows[3][0], rows[4][0] = rows[4][0], rows[3][0]
    elif change == "cat":
        rows[7][1] = "cat_99"
    elif change == "dup_row":
        rows[5] = list(rows[6])
    g = ResultSet(columns=e.columns, types=e.types, rows=rows)
    c = compare(e, g)
    ref = full_compare(e, g, pytest.MonkeyPatch.context)
    assert (c.exact, c.facts, c.exact_reason, c.facts_reason, c.mismatch) == (
        ref.exact, ref.facts, ref.exact_reason, ref.facts_reason, ref.mismatch)
    assert c.exact == (change in ("none", "metric_noise"))


# values whose keys and floats need care: infinities, NaN, -0.0, huge and inexact integers,
# integral doubles and DECIMALs equal to integer-typed values
EXOTIC = {
    "BIGINT": [None, 0, 5, -3, 2**53 + 1, 10**20],
    "DOUBLE": [None, 0.0, -0.0, 5.0, 0.5, 1.2345678, float("inf"), float("-inf"), float("nan"), 2.0**53,
               5.0000001],
    "DECIMAL(38,2)": [None, Decimal("5.00"), Decimal("0.50"), Decimal("1.23"), Decimal("9007199254740993"),
                      Decimal("-0.00")],
    "VARCHAR": [None, "", "a", "a ", "b"],
}
# Python-equal values of another type (the raw-row pass pairs them)
_EQUAL_OTHER = {5: [5.0, Decimal("5")], 0: [0.0, Decimal("0")], 5.0: [5, Decimal("5.00")], 0.5: [Decimal("0.5")],
                Decimal("5.00"): [5, 5.0], Decimal("0.50"): [0.5], 2**53 + 1: [Decimal(2**53 + 1)]}


@st.composite
def exotic_pair(draw, max_rows=10):
    ncols = draw(st.integers(1, 3))
    types = [draw(st.sampled_from(list(EXOTIC))) for _ in range(ncols)]
    n = draw(st.integers(0, max_rows))
    erows = [[i] + [draw(st.sampled_from(EXOTIC[t])) for t in types] for i in range(n)]
    grows = [list(r) for r in erows]
    for r in grows:
        for j in range(1, ncols + 1):
            roll = draw(st.integers(0, 7))
            if roll == 0:
                r[j] = draw(st.sampled_from(EXOTIC[types[j - 1]]))
            elif roll == 1 and r[j] in _EQUAL_OTHER and not isinstance(r[j], bool):
                r[j] = draw(st.sampled_from(_EQUAL_OTHER[r[j]]))
    random.Random(draw(st.integers(0, 10**6))).shuffle(grows)
    cols = ["id"] + [f"c{i}" for i in range(ncols)]
    return (ResultSet(columns=cols, types=["BIGINT", *types], rows=erows),
            ResultSet(columns=cols, types=["BIGINT", *types], rows=grows))


def _check_shifted(e, g):
    fast = grading._fast_exact(e, g, False)
    if fast.ok or fast.res_e is None:
        return
    for i in range(len(e.columns)):
        ke = [grading.canonical_key(e.rows[r][i]) for r in fast.res_e.tolist()]
        kg = [grading.canonical_key(g.rows[r][i]) for r in fast.res_g.tolist()]
        ec = grading._Col([r[i] for r in e.rows])
        try:
            want = grading._compatible(ec, grading._Col([r[i] for r in g.rows]))
        except (OverflowError, ValueError):
            continue
        got = grading._shifted_compatible(ec, ke, kg)
        assert got is None or got == want, (i, ke, kg)


@FAST
@given(st.one_of(typed_pair(), exotic_pair()), st.sampled_from([1, 2, 3, 4096]))
def test_shifted_column_summary_agrees_with_reading_the_column(pair, block):
    # the candidate column's summary built from the expected column and the residue
    e, g = pair
    with pytest.MonkeyPatch.context() as mp:
        patch_grading(mp, "_VERIFY_BLOCK", block)
        _check_shifted(e, g)


@FAST
@given(st.one_of(typed_pair(), exotic_pair()), st.sampled_from([1, 2, 3, 4096]))
def test_residue_comparison_identical_without_shortcuts(pair, block):
    # the whole comparison (verdicts, reasons, messages) does not depend on the shifted
    # summary nor on the verification block size
    e, g = pair
    with pytest.MonkeyPatch.context() as mp:
        patch_grading(mp, "_RESIDUE_MIN_ROWS", 0)
        patch_grading(mp, "_RESIDUE_MAX_FRACTION", 1.0)
        try:
            ref = compare(e, g)
        except (OverflowError, ValueError):
            return
        patch_grading(mp, "_VERIFY_BLOCK", block)
        patch_grading(mp, "_shifted_compatible", lambda *a: None)
        assert compare(e, g) == ref
        mp.undo()
    with pytest.MonkeyPatch.context() as mp:
        patch_grading(mp, "_RESIDUE_MIN_ROWS", 0)
        patch_grading(mp, "_RESIDUE_MAX_FRACTION", 1.0)
        patch_grading(mp, "_VERIFY_BLOCK", block)
        assert compare(e, g) == ref


@pytest.mark.parametrize("lead", ["id", "cat"])
@pytest.mark.parametrize("change", ["metric_off", "revenue_off", "revenue_to_int", "n_off", "n_to_null",
                                    "cat", "metric_inf", "two_blocks"])
def test_large_results_shifted_summary_matches_full(lead, change, monkeypatch):
    # >= 256 rows: leading-column hashing (unique ids, or a repeating category that forces
    # whole-row hashes), several verification blocks, the shifted column summary
    e = _big(3000, seed=2)
    if lead == "cat":
        e = ResultSet(columns=[e.columns[1], e.columns[0], *e.columns[2:]],
                      types=[e.types[1], e.types[0], *e.types[2:]],
                      rows=[[r[1], r[0], *r[2:]] for r in e.rows])
    col = {c: j for j, c in enumerate(e.columns)}
    rows = [list(r) for r in e.rows]
    random.Random(3).shuffle(rows)
    if change == "metric_off":
        rows[10][col["metric"]] += 1.0
    elif change == "revenue_off":
        rows[10][col["revenue"]] += Decimal("0.01")
    elif change == "revenue_to_int":  # a Python-equal value of another type, and one that differs
        rows[10][col["revenue"]] = int(rows[10][col["revenue"]]) + 1
        rows[11][col["n"]] = float(rows[11][col["n"]])
    elif change == "n_off":
        rows[10][col["n"]] += 1
    elif change == "n_to_null":
        rows[10][col["n"]] = None
    elif change == "cat":
        rows[7][col["cat"]] = "cat_99"
    elif change == "metric_inf":
        rows[10][col["metric"]] = float("inf")
    elif change == "two_blocks":
        rows[10][col["metric"]] += 1.0
        rows[2500][col["metric"]] -= 1.0
    g = ResultSet(columns=e.columns, types=e.types, rows=rows)
    patch_grading(monkeypatch, "_VERIFY_BLOCK", 1024)
    c = compare(e, g)
    ref = full_compare(e, g, pytest.MonkeyPatch.context)
    assert (c.exact, c.facts, c.exact_reason, c.facts_reason, c.mismatch) == (
        ref.exact, ref.facts, ref.exact_reason, ref.facts_reason, ref.mismatch)
    with pytest.MonkeyPatch.context() as mp:
        patch_grading(mp, "_shifted_compatible", lambda *a: None)
        assert compare(e, g) == c
    _check_shifted(e, g)
