"""Fixture-driven tests: (expected, got, order_matters[, order_keys]) -> (exact, facts)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sqleval_pipeline.grading import compare
from sqleval_pipeline.grading.explain import NOT_EXPLAINED, verdicts_only
from sqleval_pipeline.results import ResultSet

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "grading"


def _load() -> list[dict]:
    cases = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        cases.extend(yaml.safe_load(path.read_text(encoding="utf-8")))
    return cases


CASES = _load()


def test_fixture_count_and_unique_ids():
    ids = [c["id"] for c in CASES]
    assert len(ids) >= 60
    assert len(ids) == len(set(ids))
    # both readings disagree somewhere, and every combination of verdicts is exercised
    combos = {(c["exact"], c["facts"]) for c in CASES}
    assert combos == {(True, True), (False, True), (False, False)}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_compare_fixture(case):
    e = ResultSet.from_json(case["e"])
    g = ResultSet.from_json(case["g"])
    c = compare(e, g, case.get("order_matters", False), case.get("order_keys", []))
    assert (c.exact, c.facts) == (case["exact"], case["facts"]), c.mismatch
    if c.exact:
        assert c.mismatch is None
    else:
        assert c.mismatch, "a failed comparison must say why"
    if c.facts:
        assert c.column_map is not None and len(set(c.column_map)) == len(e.columns)


def test_verdicts_only_gives_the_same_verdicts_and_explains_nothing():
    """Inside ``verdicts_only`` (distillation) every fixture gets the verdicts and reasons it gets
    outside; a mismatch's text is the placeholder there, and explained again after."""
    explained = 0
    for case in CASES:
        e, g = ResultSet.from_json(case["e"]), ResultSet.from_json(case["g"])
        args = (e, g, case.get("order_matters", False), case.get("order_keys", []))
        outside = compare(*args)
        with verdicts_only():
            inside = compare(*args)
        assert (inside.exact, inside.facts, inside.exact_reason, inside.facts_reason, inside.column_map) == (
            outside.exact, outside.facts, outside.exact_reason, outside.facts_reason, outside.column_map), case["id"]
        if outside.mismatch:  # outside the context every mismatch is explained
            assert NOT_EXPLAINED not in outside.mismatch, case["id"]
            explained += 1
        assert compare(*args).mismatch == outside.mismatch  # the context restored what it changed
    assert explained > 10  # fixtures whose mismatch has rows and hints to explain
    rows = ResultSet(columns=["k", "v"], types=["VARCHAR", "BIGINT"], rows=[["a", 1], ["b", 2]])
    other = ResultSet(columns=["k", "v"], types=["VARCHAR", "BIGINT"], rows=[["a", 1], ["b", 3]])
    with verdicts_only():
        assert compare(rows, other).mismatch and NOT_EXPLAINED in compare(rows, other).mismatch
    assert NOT_EXPLAINED not in compare(rows, other).mismatch and "3" in compare(rows, other).mismatch
