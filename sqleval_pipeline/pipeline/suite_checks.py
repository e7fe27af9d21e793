"""Grading on the test suite (docs/test-suite.md): an answer right on the pinned snapshot is run
on its case's neighbour databases, through the same guard, before it counts as right.

* :func:`current_suite` — the suite of the environment's snapshot and golden set: the one the
  foundation built (``neighbours/<snapshot>/current.json`` names it) when it was built for the
  same golden set and its files are intact, else built (or completed: only cases whose readings
  changed are distilled again) here, once per process.
* :func:`grader_for` — what grades a batch: the grader's rules and, when the configuration keeps
  the suite on, that suite. Its ``version`` (``<rules>+suite-<digest>``) is what the grades are
  stored under, so a changed suite re-grades, and what a comparison re-grades the other side
  with, so both sides of a diff are graded the same way.
* :class:`SuiteChecker` — the check of one answer, cached by content in the store
  (``suite_cache/``): each distinct SQL of a case runs once per neighbour, whatever the batch,
  run or comparison asks for it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqleval_pipeline.golden.model import Case, golden_hash
from sqleval_pipeline.grading import GRADER_VERSION
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError, Progress
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.pipeline.store import file_lock
from sqleval_pipeline.suite.audit import run_suite
from sqleval_pipeline.suite.check import AccidentalMatch, GuardedRunner, Suite, SuiteError, load_suite
from sqleval_pipeline.suite.constraints import load_dbt_constraints
from sqleval_pipeline.suite.model import SUITE_FILE, reading_hash
from sqleval_pipeline.suite.neighbours import NeighbourError, damaged, load_set, neighbours_root, served_columns
from sqleval_pipeline.suite.routes import Routes
from sqleval_pipeline.textfiles import write_atomically

log = logging.getLogger(__name__)

#: names the suite the foundation built for a snapshot (in its neighbours folder)
POINTER_FILE = "current.json"
#: changes when what a check decides changes (part of each cached check's key)
CHECK_VERSION = "check-3"
#: marks a grader version that grades on the test suite
SUITE_MARK = "+suite-"
#: outcomes the suite re-checks
RIGHT_ON_SNAPSHOT = ("CORRECT", "CORRECT_FACTS")


@dataclass(frozen=True)
class SuiteHandle:
    """A loaded suite and the digest of its file (part of the grader's version)."""

    suite: Suite
    path: Path
    digest: str


def suite_root(env: Environment) -> Path:
    """Where the neighbour sets of the environment's snapshot live (beside its serving file)."""
    return neighbours_root(env.serving.parent, env.snapshot_id)


def _digest(suite: Suite) -> str:
    """The digest of what the suite file says (its timings left out: distilling again the same
    suite gives the same digest), with the check's own version (a grade names both)."""
    content = json.dumps(suite.data.model_dump(mode="json", exclude={"timings"}), sort_keys=True,
                         separators=(",", ":"), default=str)
    return hashlib.sha256((content + CHECK_VERSION).encode()).hexdigest()[:12]


def _usable(path: Path) -> SuiteHandle | None:
    """The suite at ``path`` when it loads and every neighbour file is intact."""
    try:
        suite = load_suite(path)
        handle = SuiteHandle(suite, path, _digest(suite))
        broken = damaged(load_set(path.parent))
    except (SuiteError, NeighbourError, OSError) as exc:
        log.info("test suite %s not reused: %s", path, exc)
        return None
    if broken:
        log.warning("test suite %s not reused: damaged neighbour file(s) %s", path, ", ".join(broken))
        return None
    return handle


#: suites loaded in this process: (neighbours folder, golden hash) -> handle
_LOADED: dict[tuple[str, str], SuiteHandle] = {}


def current_suite(env: Environment, *, progress: Progress | None = None) -> SuiteHandle:
    """The test suite of ``env``'s snapshot and golden set (see module doc)."""
    root = suite_root(env)
    gh = golden_hash(env.cases)
    key = (str(root), gh)
    handle = _LOADED.get(key)
    if handle is not None and handle.path.exists():
        return handle
    pointer = root / POINTER_FILE
    try:
        named = json.loads(pointer.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        named = None
    if isinstance(named, dict) and named.get("golden_hash") == gh and isinstance(named.get("set_id"), str):
        handle = _usable(root / named["set_id"] / SUITE_FILE)
    if handle is None:
        handle = build_suite(env, progress=progress)
    _LOADED[key] = handle
    return handle


def build_suite(env: Environment, *, progress: Progress | None = None):
    """Build (or reuse) the neighbour set and distil every case's suite, then name it in
    ``current.json``; the handle of the suite written."""
    root = suite_root(env)
    constraints = load_dbt_constraints(env.dbt_target_dir, env.manifest.sources)
    root.mkdir(parents=True, exist_ok=True)
    try:
        # two evaluations that find the suite missing at once: one builds, the other then reuses
        with file_lock(root / ".build.lock"):
            report = run_suite(env.cases, serving=env.serving, snapshot=env.manifest, constraints=constraints,
                               root=root, progress=progress)
    except (SuiteError, NeighbourError) as exc:
        raise EvaluationError(f"the test suite cannot be built: {exc}; fix that, or set "
                              "`test_suite: false` in the configuration to grade on the snapshot alone") from exc
    handle = _usable(report.path)
    if handle is None:
        raise EvaluationError(f"the test suite just written at {report.path} cannot be read back; "
                              "delete the folder and run again")
    write_atomically(root / POINTER_FILE, json.dumps(
        {"set_id": report.nset.set_id, "golden_hash": golden_hash(env.cases)}, indent=2, sort_keys=True) + "\n")
    log.info("%s", report.summary())
    return handle


@dataclass(frozen=True)
class Grader:
    """What grades a batch (see module doc). ``cache_dir``: where the suite's verdicts are
    cached (default: the store's ``suite_cache/``); ``stats`` adds up, over the batches it
    grades, the answers checked, the checks run (not cached) and the guarded executions made
    on neighbours."""

    version: str
    suite: SuiteHandle | None = None
    cache_dir: Path | None = None
    stats: Counter = field(default_factory=Counter, compare=False)


def grader_for(env: Environment, test_suite: bool = True, *, progress: Progress | None = None) -> Grader:
    """The grader of a configuration: the rules, plus the suite unless ``test_suite`` is off."""
    if not test_suite:
        return Grader(GRADER_VERSION)
    handle = current_suite(env, progress=progress)
    return Grader(f"{GRADER_VERSION}{SUITE_MARK}{handle.digest}", handle)


def _rows(rs: Any) -> dict[str, Any] | None:
    return None if rs is None else rs.model_dump(mode="json")


def detail(hit: AccidentalMatch) -> dict[str, Any]:
    """What ``sqleval show`` and the case report need of an accidental match (JSON-able)."""
    return {"neighbour": hit.neighbour.id, "kind": hit.neighbour.kind, "reason": hit.reason,
            "mismatch": hit.mismatch, "expected": _rows(hit.expected), "got": _rows(hit.got),
            "expected_rows": hit.expected_rows, "got_rows": hit.got_rows,
            "missing": json.loads(json.dumps(hit.missing, default=str)),
            "unexpected": json.loads(json.dumps(hit.unexpected, default=str)),
            "summary": hit.describe()}


@dataclass
class SuiteChecker:
    """Checks answers right on the snapshot on their cases' suites (see module doc). Use it as
    a context manager: it holds one guarded executor per neighbour it ran on."""

    env: Environment
    handle: SuiteHandle
    policy: Any
    #: where verdicts are cached (default: the store's ``suite_cache/``)
    cache_dir: Path | None = None
    checked: int = 0
    ran: int = 0
    #: guarded executions made on neighbours (answers run there, cached verdicts excluded)
    executions: int = 0
    _runner: GuardedRunner | None = field(default=None, repr=False)
    _routes: Routes | None = field(default=None, repr=False)

    @property
    def routes(self) -> Routes:
        """The served schema and the relationships tests the neighbours keep (suite/routes.py)."""
        if self._routes is None:
            constraints = load_dbt_constraints(self.env.dbt_target_dir, self.env.manifest.sources)
            self._routes = Routes(served_columns(self.env.manifest),
                                  {(r.table, r.parent) for r in constraints.relationships})
        return self._routes

    def __enter__(self) -> SuiteChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            self._runner.close()

    def add_to(self, stats: Counter) -> None:
        """Add this checker's counts to ``stats`` (checked, ran, executions)."""
        stats.update(checked=self.checked, ran=self.ran, executions=self.executions)

    def _cache_path(self, case: Case, sql: str) -> Path:
        neighbours = [n.id for n in self.handle.suite.suite_for(case.id)]
        key = hashlib.sha256(json.dumps(
            [CHECK_VERSION, self.handle.suite.data.set_id, case.id, reading_hash(case), neighbours, sql, self.policy.version,
             GRADER_VERSION], separators=(",", ":")).encode()).hexdigest()
        return (self.cache_dir or self.env.store.root / "suite_cache") / key[:2] / f"{key}.json"

    def check(self, case: Case, sql: str) -> tuple[str, dict[str, Any] | None]:
        """(``passed`` | ``accidental_match`` | ``no_suite`` | ``inconclusive``, detail)."""
        if not self.handle.suite.suite_for(case.id):
            return "no_suite", None
        self.checked += 1
        path = self._cache_path(case, sql)
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if cached.get("status") in ("passed", "accidental_match", "inconclusive"):
                return cached["status"], cached.get("detail")
        except (OSError, ValueError, AttributeError):
            pass  # not there, or damaged: checked again and written anew
        if self._runner is None:
            self._runner = GuardedRunner(self.policy)
        skipped: list[tuple[str, str]] = []
        self.ran += 1

        def run(text: str, path: Path) -> Any:
            self.executions += 1
            return self._runner(text, path)

        hit = self.handle.suite.check(sql, case, run, skipped=skipped, routes=self.routes)
        if hit is not None:
            status, info = "accidental_match", detail(hit)
        elif len(skipped) >= len(self.handle.suite.suite_for(case.id)):
            status, info = "inconclusive", {"skipped": [list(s) for s in skipped]}
        else:
            status, info = "passed", ({"skipped": [list(s) for s in skipped]} if skipped else None)
        write_atomically(path, json.dumps({"status": status, "detail": info}, sort_keys=True, default=str))
        return status, info


def suite_grade(grade: Grade, case: Case, attempt: Attempt, execution: Execution | None,
                checker: SuiteChecker | None) -> Grade:
    """``grade`` after the suite's check: unchanged unless it is right on the snapshot; WRONG
    with reason ``accidental_match`` when a neighbour shows the answer differs from the case.
    The SQL checked is the DuckDB text that ran on the snapshot (a dialect's, transpiled)."""
    sql = (execution.executed_sql if execution is not None else None) or attempt.sql
    if checker is None or grade.outcome not in RIGHT_ON_SNAPSHOT or not sql:
        return grade
    status, info = checker.check(case, sql)
    if status != "accidental_match":
        return grade.model_copy(update={"suite_check": status, "suite_detail": info})
    assert info is not None
    return grade.model_copy(update={
        "suite_check": status, "snapshot_outcome": grade.outcome, "suite_detail": info,
        "outcome": "WRONG", "exact": False, "facts": False, "reason": "accidental_match",
        "mismatch": info["summary"]})
