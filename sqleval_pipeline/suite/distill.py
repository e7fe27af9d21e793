"""Distillation: for each case, the few neighbours that tell its reference from its mutants.

For every verified-or-not answerable case with a reference and a frozen result:

1. its **mutants** (:mod:`~sqleval_pipeline.suite.mutants`) of the reference and of each
   alternative are run on the pinned snapshot (read-only connection, statement timeout) and
   compared with the frozen result by the grader's comparison
   (:func:`~sqleval_pipeline.suite.check.accepts`). A mutant that fails to run is *invalid*
   and not counted; one the grader would not pass is *killed by the snapshot*;
2. every other mutant is run on every neighbour, and compared with the case's results *on that
   neighbour* (its readings frozen there as ``golden freeze`` would, once per neighbour). A
   neighbour *kills* a mutant where the grader would not pass it, or where it fails while the
   reference runs. A mutant no database kills is *surviving*: it may be equivalent to the
   reference (``COUNT(order_id)`` for ``COUNT(*)`` when a test says ``order_id`` is never NULL),
   and is reported, not counted against the suite;
3. the **suite** of the case is chosen by greedy set cover: take the neighbour that kills the
   most mutants not yet killed (ties: the one that kills the most mutants in all, then the lower
   index), until every mutant some neighbour kills is killed. Greedy cover is within a factor
   ln(n) of the smallest cover and is what the test-suite literature uses; it is exact when one
   neighbour suffices. When the cover has fewer than ``min_size`` neighbours, more are added —
   first of a kind the suite does not have yet, then those that kill the most mutants, then the
   lowest index — so that every case with a suite is checked on at least ``min_size`` databases
   of different kinds. Every suite also keeps one neighbour of kind ``mixed`` (the one that
   kills the most mutants): the mistakes that are right by accident because some invariant
   holds in today's data (a fee that is zero whenever the order is large, a department every
   product of a category shares) are rarely a mutant of the reference, and only perturbed
   values break them.

The kill rate of a case is the share of its (valid) mutants killed by the snapshot or a
neighbour. Everything is written to ``suite.json`` beside the neighbours (:mod:`~sqleval_pipeline.suite.model`);
a suite file whose cases were distilled for the same readings, grader and mutator is reused case
by case.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqleval_pipeline.golden.freeze import run_pinned
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.grading import GRADER_VERSION
from sqleval_pipeline.grading.explain import verdicts_only
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import SnapshotManifest, open_readonly
from sqleval_pipeline.suite.check import ReferenceCache, accepts
from sqleval_pipeline.suite.constraints import Constraints
from sqleval_pipeline.suite.model import SUITE_FILE, CaseSuite, FrozenOn, MutantRecord, SuiteFile, reading_hash
from sqleval_pipeline.suite.mutants import DEFAULT_MAX_MUTANTS, MUTATOR_VERSION, mutants
from sqleval_pipeline.suite.neighbours import NeighbourRef, NeighbourSet
from sqleval_pipeline.suite.source import deadline
from sqleval_pipeline.textfiles import write_atomically

DEFAULT_MIN_SIZE = 2
#: kinds every suite keeps one neighbour of (see module doc)
ALWAYS_KINDS: tuple[str, ...] = ("mixed",)
#: statement timeout of a mutant, seconds
MUTANT_TIMEOUT_S = 10.0

Progress = Callable[[str, int, int], None]


def _run(con: Any, sql: str, as_of: Any, pinned: dict[tuple[str, Any], str | None]) -> ResultSet | None:
    """``sql`` on ``con`` with the clock at ``as_of`` (None when it fails); ``pinned`` keeps each
    text's pinned form, so a mutant run on every neighbour is tokenized once."""
    key = (sql, as_of)
    if key not in pinned:
        try:
            pinned[key] = pin_clock(sql, as_of)
        except Exception:  # noqa: BLE001 - a text sqlglot cannot tokenize is an invalid mutant
            pinned[key] = None
    text = pinned[key]
    if text is None:
        return None
    try:
        with deadline(con, MUTANT_TIMEOUT_S):
            return run_pinned(con, text)
    except Exception:  # noqa: BLE001 - DuckDB raises many types; a failing mutant is invalid
        return None


def greedy_cover(kills: Mapping[str, set[int]], order: Sequence[str], min_size: int = 0,
                 kinds: Mapping[str, str] | None = None) -> list[str]:
    """Neighbours (ids, from ``order``) covering every mutant any of them kills (see module doc);
    padded to ``min_size`` with neighbours of a kind not chosen yet first (``kinds``: id → kind).

    >>> greedy_cover({"a": {1}, "b": {1, 2}, "c": {3}}, ["a", "b", "c"])
    ['b', 'c']
    >>> greedy_cover({"a": set(), "b": set()}, ["a", "b"], min_size=1)
    ['a']
    >>> greedy_cover({"a": {1}, "b": set(), "c": set()}, ["a", "b", "c"], 2, {"a": "x", "b": "x", "c": "y"})
    ['a', 'c']
    >>> greedy_cover({"a": {1}, "b": set()}, ["a", "b"], 1, {"a": "nulls", "b": "mixed"})
    ['a', 'b']
    """
    kinds = kinds or {}
    rank = {n: i for i, n in enumerate(order)}
    left = set().union(*kills.values()) if kills else set()
    chosen: list[str] = []
    while left:
        best = max((n for n in order if n in kills and n not in chosen),
                   key=lambda n: (len(kills[n] & left), len(kills[n]), -rank[n]))
        if not kills[best] & left:
            break
        chosen.append(best)
        left -= kills[best]
    for kind in ALWAYS_KINDS:  # checked on every suite, whatever the mutants say
        of_kind = [n for n in order if n in kills and kinds.get(n) == kind]
        if of_kind and not any(kinds.get(n) == kind for n in chosen):
            chosen.append(min(of_kind, key=lambda n: (-len(kills[n]), rank[n])))
    while len(chosen) < min_size:
        seen = {kinds.get(n, n) for n in chosen}
        rest = [n for n in order if n in kills and n not in chosen]
        if not rest:
            break
        chosen.append(min(rest, key=lambda n: (kinds.get(n, n) in seen, -len(kills[n]), rank[n])))
    return chosen


class _Connections:
    """One read-only connection per database for the whole distillation. A neighbour (a few
    hundred rows a table) is read on one thread: DuckDB's scheduling of more costs each of its
    thousands of small queries about a fifth of its time; the serving snapshot keeps DuckDB's
    threads (it may be large)."""

    def __init__(self) -> None:
        self.open: dict[Path, Any] = {}

    def get(self, path: Path, *, small: bool = False) -> Any:
        if path not in self.open:
            con = open_readonly(path)
            if small:
                con.execute("SET threads = 1")
            self.open[path] = con
        return self.open[path]

    def close(self) -> None:
        for con in self.open.values():
            con.close()
        self.open.clear()


def distill_case(case: Case, *, serving_con: Any, snapshot: SnapshotManifest, neighbours: Sequence[NeighbourRef],
                 cons: _Connections, references: ReferenceCache, columns: Mapping[str, Mapping[str, str]],
                 literals: Mapping[tuple[str, str], Sequence[Any]], constraints: Constraints | None,
                 max_mutants: int, min_size: int) -> CaseSuite:
    """The suite of one frozen case (see module doc)."""
    readings = [case.reference_sql or "", *case.alternative_sqls]
    seen = set(readings)
    records: list[MutantRecord] = []
    for i, sql in enumerate(readings):
        for m in mutants(sql, columns, literals=literals, constraints=constraints, max_mutants=max_mutants):
            if m.sql not in seen:
                seen.add(m.sql)
                records.append(MutantRecord(kind=m.kind, detail=m.detail, sql=m.sql, reading=i))
    valid: list[int] = []
    alive: list[int] = []
    by_kind: dict[str, list[int]] = {}
    pinned: dict[tuple[str, Any], str | None] = {}
    for idx, m in enumerate(records):
        got = _run(serving_con, m.sql, snapshot.as_of, pinned)
        if got is None:
            continue
        valid.append(idx)
        by_kind.setdefault(m.kind, [0, 0])[0] += 1
        if accepts(case, got)[0]:
            alive.append(idx)
        else:
            by_kind[m.kind][1] += 1
    kills: dict[str, set[int]] = {}
    unusable: dict[str, str] = {}
    frozen_on: dict[str, Case] = {}
    executions = len(records) + len(neighbours) * len(readings)
    for nb in neighbours:
        con = cons.get(nb.path, small=True)
        frozen = references.get(case, nb, con)
        if isinstance(frozen, str):
            unusable[nb.id] = frozen[:300]
            continue
        frozen_on[nb.id] = frozen
        kills[nb.id] = set()
        executions += len(alive)
        for idx in alive:
            got = _run(con, records[idx].sql, nb.as_of, pinned)
            if got is None or not accepts(frozen, got)[0]:
                kills[nb.id].add(idx)
    killed = set().union(*kills.values()) if kills else set()
    for idx in killed:
        by_kind[records[idx].kind][1] += 1
    chosen = greedy_cover(kills, [n.id for n in neighbours], min_size, {n.id: n.kind for n in neighbours})
    return CaseSuite(
        case_id=case.id, reading_hash=reading_hash(case), neighbours=chosen, mutants=len(valid),
        invalid=len(records) - len(valid), killed_by_snapshot=len(valid) - len(alive),
        killed_by_neighbours=len(killed),
        surviving=[records[i] for i in alive if i not in killed],
        kills={n: len(k) for n, k in kills.items()}, unusable=unusable,
        frozen={n: FrozenOn(expected=frozen_on[n].expected, order_keys=frozen_on[n].order_keys)  # type: ignore[arg-type]
                for n in chosen},
        by_kind=by_kind, executions=executions)


def suitable(case: Case) -> str | None:
    """Why a case gets no suite (None: it gets one)."""
    if not case.answerable:
        return "should_refuse: no reference to distil"
    if not case.reference_sql:
        return "no reference SQL"
    if case.expected is None:
        return "no frozen result; run `sqleval golden freeze`"
    return None


def distill(cases: Sequence[Case], *, serving: Path, snapshot: SnapshotManifest, nset: NeighbourSet,
            columns: Mapping[str, Mapping[str, str]], literals: Mapping[tuple[str, str], Sequence[Any]],
            constraints: Constraints | None = None, max_mutants: int = DEFAULT_MAX_MUTANTS, min_size: int = DEFAULT_MIN_SIZE,
            previous: SuiteFile | None = None, progress: Progress | None = None) -> SuiteFile:
    """The suite file of ``cases`` on the neighbour set (see module doc); cases ``previous``
    distilled for the same readings (same grader, mutator and parameters) are kept as they were."""
    started = time.perf_counter()
    reuse = previous is not None and (previous.set_id, previous.grader_version, previous.mutator_version,
                                      previous.min_size, previous.max_mutants) == (
        nset.set_id, GRADER_VERSION, MUTATOR_VERSION, min_size, max_mutants)
    refs = nset.refs()
    out: dict[str, CaseSuite] = {}
    skipped: dict[str, str] = {}
    references = ReferenceCache()
    cons = _Connections()
    distilled = 0
    try:
        serving_con = cons.get(serving)
        for n, case in enumerate(cases):
            if progress is not None:
                progress("distilling", n, len(cases))
            why = suitable(case)
            if why is not None:
                skipped[case.id] = why
                continue
            old = previous.cases.get(case.id) if reuse and previous is not None else None
            if old is not None and old.reading_hash == reading_hash(case):
                out[case.id] = old
                continue
            with verdicts_only():
                out[case.id] = distill_case(case, serving_con=serving_con, snapshot=snapshot, neighbours=refs,
                                            cons=cons, references=references, columns=columns, literals=literals,
                                            constraints=constraints, max_mutants=max_mutants, min_size=min_size)
            distilled += 1
    finally:
        cons.close()
    elapsed = time.perf_counter() - started
    return SuiteFile(set_id=nset.set_id, snapshot_id=snapshot.snapshot_id, as_of=snapshot.as_of,
                     grader_version=GRADER_VERSION, mutator_version=MUTATOR_VERSION, min_size=min_size,
                     max_mutants=max_mutants, cases=out, skipped=skipped,
                     timings={"distill_seconds": round(elapsed, 3), "cases_distilled": distilled,
                              "cases_reused": len(out) - distilled})


def write_suite(nset: NeighbourSet, suite: SuiteFile) -> Path:
    path = nset.directory / SUITE_FILE
    write_atomically(path, suite.model_dump_json(indent=1) + "\n")
    return path


def read_previous(nset: NeighbourSet) -> SuiteFile | None:
    path = nset.directory / SUITE_FILE
    if not path.exists():
        return None
    try:
        return SuiteFile.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
