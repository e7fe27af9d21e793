"""The golden set's suites end to end, and what they say about the cases.

:func:`run_suite` builds (or reuses) the neighbour set of the pinned snapshot, distils (or
reuses) every case's suite, writes ``suite.json`` and sorts the cases an auditor should look
at:

* **insensitive**: no mutant of the reference changes its result, on the snapshot or on any
  neighbour (or it has no mutant at all): the result does not depend on what the question asks;
* **weak**: a kill rate below ``weak_below`` (default 0.8): many plausible mistakes give the
  same answer on every database the suite has, so an answer may pass while wrong. The
  surviving mutants say which (often legitimately equivalent, e.g. a ``COUNT`` of a column a
  ``not_null`` test guards).

:func:`project_suite` does the same for a project: its pinned snapshot, its golden set, the
data tests of its last ``dbt build``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.snapshot import SnapshotManifest, ensure_verified, pinned_snapshot
from sqleval_pipeline.suite.constraints import Constraints, load_dbt_constraints
from sqleval_pipeline.suite.distill import (
    DEFAULT_MIN_SIZE, Progress, distill, read_previous, write_suite,
)
from sqleval_pipeline.suite.model import CaseSuite, SuiteFile
from sqleval_pipeline.suite.mutants import DEFAULT_MAX_MUTANTS
from sqleval_pipeline.suite.neighbours import (
    DEFAULT_MAX_SECONDS, NeighbourSet, SetParams, ensure_neighbours, neighbours_root, readings, served_columns,
)
from sqleval_pipeline.suite.probes import analyse

WEAK_KILL_RATE = 0.8


@dataclass
class SuiteReport:
    nset: NeighbourSet
    suite: SuiteFile
    path: Path
    weak: list[CaseSuite]
    insensitive: list[CaseSuite]
    build_seconds: float
    distill_seconds: float

    def summary(self) -> str:
        n = len(self.suite.cases)
        sizes = [len(c.neighbours) for c in self.suite.cases.values()]
        mean = sum(sizes) / len(sizes) if sizes else 0.0
        return (f"test suite: {n} case(s) on {len(self.nset.manifest.neighbours)} neighbour(s) "
                f"({'reused' if self.nset.reused else f'built in {self.build_seconds:.1f} s'}); "
                f"{mean:.1f} neighbour(s) per case kept; {len(self.weak)} weak, "
                f"{len(self.insensitive)} insensitive")


def literals_for(cases: Sequence[Case], snapshot: SnapshotManifest, constraints: Constraints
                 ) -> dict[tuple[str, str], list[Any]]:
    """Constants the mutants may add as conditions: those the golden references compare each
    column with, and the accepted values of each ``accepted_values`` test."""
    out = {k: list(v) for k, v in analyse(readings(cases), served_columns(snapshot), snapshot.as_of).literals.items()}
    for a in constraints.accepted:
        vals = out.setdefault((a.table, a.column), [])
        vals.extend(v for v in a.values if v not in vals)
    return out


def weak_cases(suite: SuiteFile, weak_below: float = WEAK_KILL_RATE) -> list[CaseSuite]:
    return [c for c in suite.cases.values() if c.mutants and (c.kill_rate or 0.0) < weak_below
            and not insensitive(c)]


def insensitive(c: CaseSuite) -> bool:
    return c.mutants == 0 or c.killed_by_snapshot + c.killed_by_neighbours == 0


def run_suite(cases: Sequence[Case], *, serving: Path, snapshot: SnapshotManifest, constraints: Constraints,
              root: Path, params: SetParams | None = None, min_size: int = DEFAULT_MIN_SIZE,
              max_mutants: int = DEFAULT_MAX_MUTANTS, weak_below: float = WEAK_KILL_RATE,
              max_seconds: float = DEFAULT_MAX_SECONDS, progress: Progress | None = None) -> SuiteReport:
    """Neighbours, suites and findings for ``cases`` (see module doc)."""
    t0 = time.perf_counter()
    if progress is not None:
        progress("building neighbours", 0, 1)
    nset = ensure_neighbours(serving, snapshot, cases, constraints, root=root, params=params, max_seconds=max_seconds)
    t1 = time.perf_counter()
    suite = distill(cases, serving=serving, snapshot=snapshot, nset=nset, columns=served_columns(snapshot),
                    literals=literals_for(cases, snapshot, constraints), constraints=constraints,
                    max_mutants=max_mutants, min_size=min_size,
                    previous=read_previous(nset), progress=progress)
    path = write_suite(nset, suite)
    t2 = time.perf_counter()
    return SuiteReport(nset, suite, path, weak_cases(suite, weak_below),
                       [c for c in suite.cases.values() if insensitive(c)], t1 - t0, t2 - t1)


def project_suite(project: Any, cases: Sequence[Case], *, params: SetParams | None = None,
                  progress: Progress | None = None) -> SuiteReport:
    """:func:`run_suite` for a project: its pinned snapshot and the data tests of its dbt build."""
    sid, manifest, serving = pinned_snapshot(project.manifest_dir, project.home.snapshot_dir)
    ensure_verified(serving, manifest)
    constraints = load_dbt_constraints(project.dbt_target_dir, manifest.sources)
    return run_suite(cases, serving=serving, snapshot=manifest, constraints=constraints,
                     root=neighbours_root(project.home.snapshot_dir, sid), params=params, progress=progress)
