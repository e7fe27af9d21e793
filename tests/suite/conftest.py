"""Fixtures of the test-suite tests: the demo's golden set frozen on the session snapshot, a
small neighbour set of it and its distilled suite, built once per session."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.golden.freeze import freeze_cases, run_reference
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.pipeline.store import file_lock
from sqleval_pipeline.suite.audit import SuiteReport, run_suite
from sqleval_pipeline.snapshot import open_readonly
from sqleval_pipeline.suite.check import Suite, _Failed, load_suite
from sqleval_pipeline.suite.constraints import Constraints, load_dbt_constraints
from sqleval_pipeline.suite.neighbours import NeighbourRef, SetParams
from tests.conftest import share_between_workers

#: one neighbour of each kind, few rows: enough for the demo's golden set, fast to build
NEIGHBOURS = 6
ROWS = 150


@dataclass
class SuiteEnv:
    snapshot: object  # tests.conftest.BuiltSnapshot
    cases: dict[str, Case]
    constraints: Constraints
    params: SetParams
    report: SuiteReport
    suite: Suite
    root: Path
    dbt_manifest: dict

    @property
    def neighbours(self) -> list[NeighbourRef]:
        return self.report.nset.refs()


@pytest.fixture(scope="session")
def suite_env(serving_snapshot, tmp_path_factory) -> SuiteEnv:
    """The demo's golden cases frozen on the session snapshot (so nothing depends on the
    committed expected results), the data tests of the session's dbt build, a neighbour set
    and the distilled suite of every case."""
    snap = serving_snapshot
    gs = load_golden(location.GOLDEN_DIR)
    frozen = freeze_cases(gs.cases, snap.path, snap.snapshot_id, snap.manifest.as_of)
    target = snap.home.root / "dbt_target"
    sources = snap.manifest.sources or {t: f"marts.{t}" for t in snap.manifest.tables}
    constraints = load_dbt_constraints(target, sources)
    params = SetParams(neighbours=NEIGHBOURS, rows_per_table=ROWS)
    # under xdist, one folder for the workers: the first builds the set and distils the suite,
    # the next (the same snapshot, cases and parameters) reuses both through the product's own
    # reuse, after the first is done
    root = tmp_path_factory.mktemp("suite_env") / "neighbours"
    share_between_workers(tmp_path_factory, root, "suite-env-neighbours")
    with file_lock(root / ".suite_env.lock"):
        report = run_suite(frozen, serving=snap.path, snapshot=snap.manifest, constraints=constraints, root=root,
                           params=params)
    return SuiteEnv(snap, {c.id: c for c in frozen}, constraints, params, report, load_suite(report.path), root,
                    json.loads((target / "manifest.json").read_text()))


class _OpenRunner:
    """Candidates run read-only with the clock pinned, one connection per file kept open for
    the session (the pipeline passes the guard; :func:`readonly_runner` opens one per call)."""

    def __init__(self, as_of):
        self.as_of = as_of
        self.cons: dict[Path, object] = {}

    def __call__(self, sql: str, path: Path):
        if path not in self.cons:
            self.cons[path] = open_readonly(path)
        try:
            return run_reference(self.cons[path], sql, self.as_of)
        except Exception as exc:  # noqa: BLE001 - the SQL's fault, reported as the guard would
            return _Failed("error", str(exc).splitlines()[0])

    def close(self) -> None:
        for con in self.cons.values():
            con.close()


@pytest.fixture(scope="session")
def run(suite_env):
    runner = _OpenRunner(suite_env.snapshot.manifest.as_of)
    yield runner
    runner.close()
