"""Checking an answer on a case's suite: is it right, or right by accident on the snapshot?

The grading calls :func:`check_on_suite` for an answer it found correct on the pinned snapshot:

.. code-block:: python

    suite = load_suite(neighbour_set.directory / SUITE_FILE)
    hit = suite.check(sql, case, run)          # or check_on_suite(sql, case, suite.suite_for(case.id), run, ...)
    if hit is not None:
        hit.neighbour.id, hit.reason, hit.describe()

``run(sql, path)`` runs the *candidate* on one neighbour file and is injected: the pipeline
passes the guarded executor (its :class:`~sqleval_pipeline.guard.executor.GuardResult` is
understood as it is), a test a plain read-only DuckDB (:func:`readonly_runner`). The case's own
readings are trusted SQL: they run here, once per neighbour, on a read-only connection with a
timeout, and are frozen exactly as ``golden freeze`` does (ties at a LIMIT cut, rank groups),
or come from the suite file.

On each neighbour, the candidate's result is compared with the case's results on that
neighbour by the grader's own comparison (:func:`~sqleval_pipeline.grading.grade_against`):
a result that would grade CORRECT or CORRECT_FACTS there passes. The first neighbour where it
would not is returned as an :class:`AccidentalMatch`, with the grader's description and a few
rows on each side. A candidate that fails on a neighbour where the reference runs (a DuckDB
error) is an accidental match too (``candidate_failed:error``); a refusal, a timeout or a result
cut by the row cap says nothing about the SQL and that neighbour is skipped (listed in
``skipped`` when a list is passed).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.golden.freeze import FreezeError, freeze_case, run_reference
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.grading import canonical_key, grade_against
from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import open_readonly
from sqleval_pipeline.suite.model import FrozenOn, SuiteFile, reading_hash
from sqleval_pipeline.suite.neighbours import NeighbourRef, load_set
from sqleval_pipeline.suite.routes import Routes
from sqleval_pipeline.suite.source import deadline

#: rows shown on each side of an accidental match
MAX_DIFF_ROWS = 5
#: statement timeout of a reading run here, seconds
REFERENCE_TIMEOUT_S = 10.0

Runner = Callable[[str, Path], Any]


class SuiteError(SqlevalError, RuntimeError):
    """A suite file cannot be used; the message says what to do."""


@dataclass(frozen=True)
class AccidentalMatch:
    """The first neighbour where the candidate's result differs from the case's (see module doc)."""

    case_id: str
    neighbour: NeighbourRef
    #: ``result_mismatch:<grader reason>`` or ``candidate_failed:<status>``
    reason: str
    #: the grader's description of the difference (or the candidate's error)
    mismatch: str | None
    #: the case's primary result on the neighbour, at most MAX_DIFF_ROWS rows
    expected: ResultSet
    #: the candidate's result there, at most MAX_DIFF_ROWS rows (None when it failed)
    got: ResultSet | None
    expected_rows: int
    got_rows: int | None
    #: expected rows the candidate lacks, and candidate rows not expected (bounded)
    missing: list[list[Any]] = field(default_factory=list)
    unexpected: list[list[Any]] = field(default_factory=list)

    def describe(self) -> str:
        head = (f"right on the snapshot, wrong on neighbour {self.neighbour.id} ({self.neighbour.kind}): "
                f"{self.reason}")
        return f"{head}; {self.mismatch}" if self.mismatch else head


def _key(row: Sequence[Any]) -> Any:
    try:
        k = tuple(canonical_key(v) for v in row)
        hash(k)
        return k
    except TypeError:
        return repr(list(row))


def _difference(expected: ResultSet, got: ResultSet) -> tuple[list[list[Any]], list[list[Any]]]:
    """Rows on one side and not the other (a display, bounded; the verdict is the grader's)."""
    if len(expected.columns) != len(got.columns):
        return [list(r) for r in expected.rows[:MAX_DIFF_ROWS]], [list(r) for r in got.rows[:MAX_DIFF_ROWS]]
    want = Counter(_key(r) for r in expected.rows)
    have = Counter(_key(r) for r in got.rows)
    return _surplus(expected.rows, want - have), _surplus(got.rows, have - want)


def _surplus(rows: Sequence[Sequence[Any]], counts: Counter) -> list[list[Any]]:
    """The first rows of ``rows`` that ``counts`` (row key -> how many) says are in excess."""
    out: list[list[Any]] = []
    for r in rows:
        k = _key(r)
        if counts[k] > 0 and len(out) < MAX_DIFF_ROWS:
            counts[k] -= 1
            out.append(list(r))
    return out


def _head(rs: ResultSet) -> ResultSet:
    return ResultSet(columns=rs.columns, types=rs.types, rows=[list(r) for r in rs.rows[:MAX_DIFF_ROWS]])


def outcome(ran: Any) -> tuple[str, ResultSet | None, bool, str | None]:
    """(status, result, truncated, message) of what a runner returned: a :class:`ResultSet`, or
    anything with ``status``, ``result``, ``truncated`` and ``message`` (a guard result)."""
    if isinstance(ran, ResultSet):
        return "ok", ran, False, None
    status = getattr(ran, "status", None)
    if status is None:
        raise SuiteError(f"a runner returned {type(ran).__name__}; return a ResultSet or a guard result")
    error_source = getattr(ran, "error_source", "sql")
    if status == "error" and error_source == "harness":
        status = "harness_error"
    return status, getattr(ran, "result", None), bool(getattr(ran, "truncated", False)), getattr(ran, "message", None)


def accepts(frozen: Case, got: ResultSet) -> tuple[bool, Any]:
    """Whether the grader would pass ``got`` on the case frozen on a database, and its comparison."""
    c = grade_against(frozen, got)
    return (c.exact or c.facts), c


class ReferenceCache:
    """A case's accepted results on each neighbour, computed once (see module doc)."""

    def __init__(self, timeout_s: float = REFERENCE_TIMEOUT_S):
        self.timeout_s = timeout_s
        self._frozen: dict[tuple[str, str, str], Case | str] = {}

    def put(self, case: Case, neighbour_id: str, frozen: FrozenOn) -> None:
        self._frozen[(case.id, reading_hash(case), neighbour_id)] = case.model_copy(
            update={"expected": frozen.expected, "snapshot_id": neighbour_id, "order_keys": list(frozen.order_keys)})

    def get(self, case: Case, neighbour: NeighbourRef, con: Any = None) -> Case | str:
        """The case frozen on ``neighbour``, or why the reference cannot be run there."""
        key = (case.id, reading_hash(case), neighbour.id)
        if key not in self._frozen:
            self._frozen[key] = self._compute(case, neighbour, con)
        return self._frozen[key]

    def _compute(self, case: Case, neighbour: NeighbourRef, con: Any) -> Case | str:
        own = con is None
        try:
            con = con or open_readonly(neighbour.path)
        except SqlevalError as exc:
            return str(exc)
        try:
            with deadline(con, self.timeout_s):
                return freeze_case(case, con, neighbour.id, neighbour.as_of)
        except FreezeError as exc:
            return str(exc)
        finally:
            if own:
                con.close()


def readonly_runner(timeout_s: float = REFERENCE_TIMEOUT_S) -> Runner:
    """A runner for SQL that needs no guard: a read-only connection per call, the clock pinned
    to the neighbour's as-of date (read from the path's set), a timeout; errors are returned as
    a failed outcome, never raised."""
    def run(sql: str, path: Path, *, as_of: dt.date | None = None) -> Any:
        when = as_of or _as_of_of(path)
        try:
            con = open_readonly(path)
        except SqlevalError as exc:
            return _Failed("error", str(exc))
        try:
            with deadline(con, timeout_s):
                return run_reference(con, sql, when)
        except Exception as exc:  # noqa: BLE001 - DuckDB raises many types; the SQL's fault
            return _Failed("timeout" if "interrupt" in str(exc).lower() else "error", str(exc).splitlines()[0])
        finally:
            con.close()
    return run


@dataclass(frozen=True)
class _Failed:
    status: str
    message: str
    result: None = None
    truncated: bool = False
    error_source: str = "sql"


_AS_OF: dict[Path, dt.date] = {}


def _as_of_of(path: Path) -> dt.date:
    if path not in _AS_OF:
        _AS_OF[path] = load_set(path.parent).manifest.as_of
    return _AS_OF[path]


def check_on_suite(sql: str, case: Case, neighbours: Sequence[NeighbourRef], run: Runner, *,
                   references: ReferenceCache | None = None,
                   skipped: list[tuple[str, str]] | None = None) -> AccidentalMatch | None:
    """The first neighbour where ``sql`` (right on the snapshot) gives another result than
    ``case``'s readings there, or None when it agrees on every one (see module doc)."""
    references = references or ReferenceCache()
    for nb in neighbours:
        frozen = references.get(case, nb)
        if isinstance(frozen, str):
            if skipped is not None:
                skipped.append((nb.id, f"the reference cannot run there: {frozen}"))
            continue
        status, got, truncated, message = outcome(run(sql, nb.path))
        expected = frozen.accepted_results()[0]
        if status in ("refused", "timeout", "harness_error") or (status == "ok" and (got is None or truncated)):
            if skipped is not None:
                skipped.append((nb.id, f"the candidate's run says nothing there: {status}"
                                       + (" (truncated)" if truncated else "")))
            continue
        if status != "ok":
            return AccidentalMatch(case.id, nb, f"candidate_failed:{status}", message, _head(expected), None,
                                   expected.row_count, None)
        assert got is not None
        ok, comparison = accepts(frozen, got)
        if ok:
            continue
        missing, unexpected = _difference(expected, got)
        return AccidentalMatch(case.id, nb, f"result_mismatch:{comparison.reason}", comparison.mismatch,
                               _head(expected), _head(got), expected.row_count, got.row_count, missing, unexpected)
    return None


class GuardedRunner:
    """``run(sql, path)`` through the guard: one :class:`~sqleval_pipeline.guard.executor.GuardedExecutor`
    per neighbour file (opened on first use, with the neighbour's as-of date), the same policy
    for all. Close it (or use it as a context manager) to stop their workers."""

    def __init__(self, policy: Any, *, pool_size: int = 1):
        self.policy = policy
        self.pool_size = pool_size
        self._executors: dict[Path, Any] = {}

    def __call__(self, sql: str, path: Path) -> Any:
        path = Path(path)
        if path not in self._executors:
            self._executors[path] = GuardedExecutor(path, as_of=_as_of_of(path), policy=self.policy,
                                                    pool_size=self.pool_size)
        return self._executors[path].execute(sql)

    def close(self) -> None:
        for ex in self._executors.values():
            ex.close()
        self._executors.clear()

    def __enter__(self) -> GuardedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def suite_for(case_id: str, suite: Suite) -> list[NeighbourRef]:
    """The distilled neighbours of ``case_id`` in a loaded suite ([] when it has none)."""
    return suite.suite_for(case_id)


class Suite:
    """A loaded ``suite.json``: what grading asks of it (:meth:`suite_for`, :meth:`check`)."""

    def __init__(self, data: SuiteFile, neighbours: Sequence[NeighbourRef], path: Path | None = None):
        self.data = data
        self.path = path
        self.by_id = {n.id: n for n in neighbours}
        self.references = ReferenceCache()
        self._loaded: set[tuple[str, str]] = set()

    def suite_for(self, case_id: str) -> list[NeighbourRef]:
        """The distilled neighbours of a case ([] for a case without a suite)."""
        entry = self.data.cases.get(case_id)
        if entry is None:
            return []
        return [self.by_id[n] for n in entry.neighbours if n in self.by_id]

    def is_current(self, case: Case) -> bool:
        """The case's readings are those the suite was distilled for."""
        entry = self.data.cases.get(case.id)
        return entry is not None and entry.reading_hash == reading_hash(case)

    def check(self, sql: str, case: Case, run: Runner, *,
              skipped: list[tuple[str, str]] | None = None, routes: Routes | None = None) -> AccidentalMatch | None:
        """:func:`check_on_suite` on the case's distilled neighbours, with the results the suite
        file stored for them (when it was distilled for this very case).

        With ``routes`` (the served schema and the kept relationships tests), an answer that
        takes its values from a table no reading of the case reads is not run: the neighbours
        cannot judge it (:mod:`.routes`); every neighbour is listed in ``skipped`` with why."""
        if routes is not None:
            ok, why = routes.judgeable(sql, [s for s in (case.reference_sql, *case.alternative_sqls) if s])
            if not ok:
                if skipped is not None:
                    skipped.extend((n.id, f"not judged: {why}") for n in self.suite_for(case.id))
                return None
        entry = self.data.cases.get(case.id)
        if entry is not None and entry.reading_hash == reading_hash(case) and (case.id, entry.reading_hash) not in self._loaded:
            for nid, frozen in entry.frozen.items():
                self.references.put(case, nid, frozen)
            self._loaded.add((case.id, entry.reading_hash))
        return check_on_suite(sql, case, self.suite_for(case.id), run, references=self.references, skipped=skipped)


def load_suite(path: Path) -> Suite:
    """The suite file at ``path`` with the neighbours of its set (in the same folder)."""
    try:
        data = SuiteFile.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"no suite at {path}; run `sqleval golden audit --suite` to distil one") from None
    except ValueError as exc:
        raise SuiteError(f"{path}: not a suite file ({exc}); run `sqleval golden audit --suite` again") from exc
    nset = load_set(path.parent)
    if nset.set_id != data.set_id:
        raise SuiteError(f"{path}: distilled for {data.set_id}, but the folder holds {nset.set_id}; "
                         "run `sqleval golden audit --suite` again")
    return Suite(data, nset.refs(), path)
