"""Verdict fingerprint: a fixed corpus of comparisons whose verdicts are hashed.

Changing the grader changes the metric (docs/grading.md): every scorecard records the grader
version, and comparisons across versions are refused unless re-based. That only protects users
if *any* change of a verdict changes ``GRADER_VERSION``. This test runs a fixed, deterministic
corpus (hand-picked edge cases plus seeded random results with DuckDB's Python value types:
int, float, Decimal, str, date, datetime, None; one and many rows, so the vectorised paths
run) through ``compare`` and hashes every (exact, facts) verdict.

* The hash differs and ``GRADER_VERSION`` is the same: a verdict changed silently. Either the
  change is a bug, or bump ``RULE_REVISION`` in ``grading/values.py`` (the rules changed).
* ``GRADER_VERSION`` is new: record the new fingerprint in ``verdict_fingerprint.json`` (the
  failure message prints the line to add). Keep the old entries: they document history.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from decimal import Decimal
from pathlib import Path

from sqleval_pipeline.grading import GRADER_VERSION, compare
from sqleval_pipeline.results import ResultSet

FINGERPRINTS = Path(__file__).with_name("verdict_fingerprint.json")

#: (expected value, candidate value, expected type, candidate type): single-value edge cases
PAIRS = [
    (1, 1.0, "BIGINT", "DOUBLE"), (5, 5.0000001, "BIGINT", "DOUBLE"), (1000000, 1000009.0, "BIGINT", "DOUBLE"),
    (Decimal("1000000.00"), 1000009.0, "DECIMAL(12,2)", "DOUBLE"), (Decimal("58920.00"), 58920.000000000004,
                                                                     "DECIMAL(12,2)", "DOUBLE"),
    (0.1 + 0.2, Decimal("0.3"), "DOUBLE", "DECIMAL(4,1)"), (1351.3333333333333, 1351.33, "DOUBLE", "DOUBLE"),
    (123456.45, 123456.0, "DOUBLE", "DOUBLE"), (0.575, 0.57, "DOUBLE", "DOUBLE"), (0.575, 0.58, "DOUBLE", "DOUBLE"),
    (2.675, 2.67, "DOUBLE", "DOUBLE"), (3.655, 3.65, "DOUBLE", "DOUBLE"), (1.234, 1.2300000190734863, "DOUBLE", "REAL"),
    (1.2345678, 1.23, "DOUBLE", "DOUBLE"), (1.2345678, 1.2, "DOUBLE", "DOUBLE"), (1.2345678, 1.235, "DOUBLE", "DOUBLE"),
    (Decimal("2.345"), Decimal("2.35"), "DECIMAL(6,3)", "DECIMAL(6,2)"), (Decimal("2.345"), 2.34, "DECIMAL(6,3)", "DOUBLE"),
    (None, 0, "BIGINT", "BIGINT"), (None, None, "BIGINT", "BIGINT"), (0, False, "BIGINT", "BOOLEAN"),
    ("4", 4, "VARCHAR", "BIGINT"), ("a ", "a", "VARCHAR", "VARCHAR"), ("A", "a", "VARCHAR", "VARCHAR"),
    (dt.date(2025, 1, 2), dt.datetime(2025, 1, 2), "DATE", "TIMESTAMP"),
    (dt.date(2025, 1, 2), "2025-01-02", "DATE", "VARCHAR"),
    (dt.datetime(2025, 1, 2, 3), dt.datetime(2025, 1, 2, 3, 0, 1), "TIMESTAMP", "TIMESTAMP"),
    (float("nan"), float("nan"), "DOUBLE", "DOUBLE"), (1e-13, 0.0, "DOUBLE", "DOUBLE"), (-0.005, -0.01, "DOUBLE", "DOUBLE"),
]


def _rs(values, types):
    return ResultSet(columns=[f"c{i}" for i in range(len(types))], types=list(types), rows=values)


def _corpus():
    """(expected, got, order_matters) triples, in a fixed order."""
    out = []
    for e, g, te, tg in PAIRS:  # one row, and the same pair among many rows (vectorised paths)
        out.append((_rs([[e]], [te]), _rs([[g]], [tg]), False))
        fill_e = [[e]] + [[Decimal(i) / 7 if te.startswith("DECIMAL") else i * 1.5] for i in range(1, 40)]
        fill_g = [[g]] + [[Decimal(i) / 7 if tg.startswith("DECIMAL") else i * 1.5] for i in range(1, 40)]
        if te.startswith(("DECIMAL", "DOUBLE")) and tg.startswith(("DECIMAL", "DOUBLE", "REAL")):
            out.append((_rs(fill_e, [te]), _rs(list(reversed(fill_g)), [tg]), False))
    rnd = random.Random(20261201)
    kinds = [("BIGINT", lambda: rnd.randint(-5, 5)), ("DOUBLE", lambda: rnd.choice([0.5, 1.25, 1 / 3, 2.0, -7.125])),
             ("DECIMAL(8,2)", lambda: Decimal(rnd.randint(-500, 500)) / 100), ("VARCHAR", lambda: rnd.choice("abc")),
             ("DATE", lambda: dt.date(2025, 1, rnd.randint(1, 3))), ("BIGINT", lambda: rnd.choice([None, 1, 2]))]
    for _ in range(150):
        k = rnd.randint(1, 3)
        cols = [rnd.choice(kinds) for _ in range(k)]
        n = rnd.choice([1, 2, 5, 30])
        rows = [[make() for _t, make in cols] for _ in range(n)]
        types = [t for t, _m in cols]
        expected = _rs(rows, types)
        got_rows = [list(r) for r in rows]
        move = rnd.randrange(6)
        if move == 0:
            rnd.shuffle(got_rows)
        elif move == 1:  # one value changed
            i, j = rnd.randrange(n), rnd.randrange(k)
            got_rows[i][j] = cols[j][1]()
        elif move == 2:  # an extra column
            got_rows = [r + [rnd.randint(0, 9)] for r in got_rows]
            types = types + ["BIGINT"]
        elif move == 3:  # DOUBLE noise on numeric columns
            got_rows = [[v * (1 + 1e-12) if isinstance(v, float) else v for v in r] for r in got_rows]
        elif move == 4:  # roundings
            got_rows = [[round(v, 2) if isinstance(v, float) else v for v in r] for r in got_rows]
        else:  # columns reversed
            got_rows = [list(reversed(r)) for r in got_rows]
            types = list(reversed(types))
        out.append((expected, _rs(got_rows, types), rnd.random() < 0.3))
    return out


def fingerprint() -> tuple[str, int]:
    h = hashlib.sha256()
    corpus = _corpus()
    for expected, got, order in corpus:
        c = compare(expected, got, order_matters=order)
        h.update(f"{int(c.exact)}{int(c.facts)};".encode())
    return h.hexdigest()[:16], len(corpus)


def test_verdicts_change_only_with_the_grader_version():
    recorded = json.loads(FINGERPRINTS.read_text(encoding="utf-8"))
    value, n = fingerprint()
    assert n >= 180
    expected = recorded.get(GRADER_VERSION)
    assert expected is not None, (
        f"grader version {GRADER_VERSION} has no recorded verdict fingerprint: after checking that "
        f"the verdict changes are the ones intended, add \"{GRADER_VERSION}\": \"{value}\" to {FINGERPRINTS.name}")
    assert value == expected, (
        f"verdicts changed ({expected} -> {value}) while GRADER_VERSION stayed {GRADER_VERSION}: a changed "
        "verdict changes the metric; bump RULE_REVISION in grading/values.py (or fix the regression)")


def test_the_corpus_exercises_both_readings_both_ways():
    """A fingerprint over verdicts that are all alike would prove nothing."""
    seen = set()
    for expected, got, order in _corpus():
        c = compare(expected, got, order_matters=order)
        seen.add((c.exact, c.facts))
    assert {(True, True), (False, True), (False, False)} <= seen


def test_a_looser_tolerance_would_be_caught(monkeypatch):
    """The fingerprint is sensitive to a plausible rule change (revision 2's 1e-5 relative
    tolerance for DOUBLEs instead of revision 3's 1e-9)."""
    from sqleval_pipeline.grading import values

    before, _ = fingerprint()
    monkeypatch.setattr(values, "DOUBLE_REL_TOL", 1e-5)
    after, _ = fingerprint()
    assert after != before
