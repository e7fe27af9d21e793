"""``sqleval golden audit --suite`` on the demo project: the audit as before, then the test-suite
section (advisory: the exit code is the audit's)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.golden.conftest import demo_project, sqleval  # noqa: F401 - demo_project is a fixture

from sqleval_pipeline.suite.check import load_suite


def test_golden_audit_with_the_suite_section(demo_project):  # noqa: F811
    plain = sqleval(demo_project, "golden", "audit")
    res = sqleval(demo_project, "golden", "audit", "--suite", "--suite-neighbours", "2")
    assert res.returncode == plain.returncode, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("test suite:"))
    assert "2 neighbour(s)" in line and "built in" in line
    path = Path(line.rsplit("suite: ", 1)[1].strip())
    suite = load_suite(path)
    golden = [json.loads(t) for t in (demo_project / "evals" / "golden" / "commerce.jsonl").read_text().splitlines()
              if t.strip()]
    with_sql = {c["id"] for c in golden if c["reference_sql"]}
    assert set(suite.data.cases) == with_sql
    assert all(len(c.neighbours) >= 1 for c in suite.data.cases.values())
    again = sqleval(demo_project, "golden", "audit", "--suite", "--suite-neighbours", "2", "--cases", "com-041")
    assert again.returncode == 0, again.stderr
    assert "(reused)" in again.stdout
    assert load_suite(path).data.cases == suite.data.cases  # a subset audited, the whole set kept
    bad = sqleval(demo_project, "golden", "audit", "--suite", "--suite-neighbours", "0")
    assert bad.returncode != 0
