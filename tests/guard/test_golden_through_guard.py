"""Allowed queries still work: every golden reference passes all layers and reproduces exactly."""

from __future__ import annotations

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.grading import compare_any

GOLDEN = [c for c in load_golden(location.GOLDEN_DIR).cases if c.reference_sql and c.expected is not None]


@pytest.mark.parametrize("case", GOLDEN, ids=[c.id for c in GOLDEN])
def test_reference_passes_the_guard(case, guard, serving_snapshot):
    assert case.snapshot_id in (None, serving_snapshot.snapshot_id)
    for i, sql in enumerate([case.reference_sql, *case.alternative_sqls]):
        r = guard.execute(sql)
        assert r.ok and not r.truncated, f"{case.id}: {r.describe()}"
        cmp = compare_any(case.accepted_results(), r.result, case.order_matters, case.order_keys)
        assert cmp.exact, f"{case.id} (sql {i}): {cmp.mismatch}"
