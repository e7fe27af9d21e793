"""Neighbour snapshots: small, plausible variations of the pinned snapshot (docs/test-suite.md).

A *neighbour set* is K DuckDB files of the served tables, derived from the pinned serving
snapshot by a seeded generator (:mod:`~sqleval_pipeline.suite.generate`), each keeping the
served models' dbt tests (:mod:`~sqleval_pipeline.suite.constraints`). What the set is made
from — the snapshot id, the generator version, K, the rows per table, the seed, the data tests
and what the golden references look at (:mod:`~sqleval_pipeline.suite.probes`) — is hashed into
the set's id (``set-<12 hex>``). Each neighbour is content-addressed like the snapshot: its id
(``nbr-<12 hex>``) hashes the as-of date and the canonical checksums of its tables
(:func:`sqleval_pipeline.snapshot.compute_snapshot_id`), so the same inputs give the same ids on
every machine. Files live in the build directory, beside the snapshot::

    <build>/snapshots/neighbours/<snapshot id>/<set id>/
        set.json               the set: inputs, and per neighbour its id, kind, rows, SHA-256
        nbr-<12 hex>.duckdb    one file per neighbour (read-only file mode)
        suite.json             the distilled suite of each case (:mod:`~sqleval_pipeline.suite.distill`)

A golden set with no reference to distil (a project just built) gets a set of no neighbour:
a set's id depends on the references, so neighbours built before the first cases would not be
theirs. A set whose ``set.json`` lists files that are present with the recorded SHA-256 is reused as
it is; a missing or changed file is built again (the same bytes). Building is bounded: rows per
table (plus witnesses, parents and boundary rows), and ``max_seconds`` of wall-clock time, past
which the build stops with an error rather than leave a set that depends on the machine.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from sqleval_pipeline.errors import InputError, SqlevalError
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.snapshot import SnapshotManifest, compute_snapshot_id, fingerprint_serving
from sqleval_pipeline.suite.files import CATALOG, seal, write as write_file
from sqleval_pipeline.suite.constraints import Constraints
from sqleval_pipeline.suite.generate import PROFILES, generate, kind_for
from sqleval_pipeline.suite.probes import Probes, analyse
from sqleval_pipeline.suite.source import Source
from sqleval_pipeline.textfiles import file_sha256, write_atomically

#: changes whenever the same inputs would give other neighbours
GENERATOR_VERSION = "g1"
DEFAULT_NEIGHBOURS = 12
DEFAULT_ROWS_PER_TABLE = 400
DEFAULT_SEED = 20240917
DEFAULT_MAX_SECONDS = 900.0
SET_FILE = "set.json"
#: the note of a set built for a golden set with no reference (:func:`ensure_neighbours`)
EMPTY_NOTE = "no case has a reference to distil: no neighbour built (built when cases come)"


class NeighbourError(SqlevalError, RuntimeError):
    """A neighbour set could not be built or read; the message says what to do."""


@dataclass(frozen=True)
class NeighbourRef:
    """One neighbour database: its content id, its file, its kind and its as-of date."""

    id: str
    path: Path
    kind: str
    index: int
    as_of: dt.date


class NeighbourEntry(BaseModel):
    id: str
    index: int
    kind: str
    file: str
    rows: dict[str, int]
    checksums: dict[str, str]
    sha256: str
    size: int
    #: the file's bytes are reproducible (:func:`sqleval_pipeline.suite.files.seal`)
    sealed: bool


class SetParams(BaseModel):
    neighbours: int = Field(DEFAULT_NEIGHBOURS, ge=1, le=200)
    rows_per_table: int = Field(DEFAULT_ROWS_PER_TABLE, ge=1, le=1_000_000)
    seed: int = DEFAULT_SEED


class NeighbourSetManifest(BaseModel):
    set_id: str
    snapshot_id: str
    as_of: dt.date
    generator_version: str
    params: SetParams
    constraints: str
    notes: list[str] = []
    neighbours: list[NeighbourEntry]
    build_seconds: float = 0.0


@dataclass
class NeighbourSet:
    directory: Path
    manifest: NeighbourSetManifest
    #: True when every file was already there (nothing was built)
    reused: bool = False

    @property
    def set_id(self) -> str:
        return self.manifest.set_id

    def refs(self) -> list[NeighbourRef]:
        return [NeighbourRef(e.id, self.directory / e.file, e.kind, e.index, self.manifest.as_of)
                for e in self.manifest.neighbours]

    def ref(self, neighbour_id: str) -> NeighbourRef:
        for r in self.refs():
            if r.id == neighbour_id:
                return r
        raise NeighbourError(f"{self.directory / SET_FILE}: no neighbour {neighbour_id}; build the set again")


def neighbours_root(snapshot_dir: Path, snapshot_id: str) -> Path:
    """Where the neighbour sets of one snapshot live (beside its serving file)."""
    return snapshot_dir / "neighbours" / snapshot_id


def readings(cases: Sequence[Case]) -> list[tuple[str, str]]:
    """(origin, SQL) of every reference and alternative of ``cases`` that has SQL."""
    out = []
    for c in cases:
        if not c.answerable or not c.reference_sql:
            continue
        out.append((c.id, c.reference_sql))
        out.extend((f"{c.id}#alt{i + 1}", s) for i, s in enumerate(c.alternative_sqls))
    return out


def served_columns(snapshot: SnapshotManifest) -> dict[str, dict[str, str]]:
    return {t: {c.name: c.type for c in info.columns} for t, info in snapshot.tables.items()}


def set_spec(snapshot: SnapshotManifest, probes: Probes, constraints: Constraints, params: SetParams) -> dict[str, Any]:
    return {"generator": GENERATOR_VERSION, "snapshot_id": snapshot.snapshot_id, "as_of": snapshot.as_of.isoformat(),
            "params": params.model_dump(), "constraints": constraints.to_json(), "probes": probes.to_json(),
            "profiles": {k: vars(p) for k, p in sorted(PROFILES.items())}}


def set_id_of(spec: dict[str, Any]) -> str:
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return "set-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def load_set(directory: Path) -> NeighbourSet:
    path = directory / SET_FILE
    try:
        return NeighbourSet(directory, NeighbourSetManifest.model_validate_json(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise NeighbourError(f"no neighbour set at {directory}; run `sqleval golden audit --suite`") from None
    except ValueError as exc:
        raise NeighbourError(f"{path}: not a neighbour set ({exc}); delete the folder and build it again") from exc


def _intact(directory: Path, entry: NeighbourEntry) -> bool:
    p = directory / entry.file
    return p.exists() and p.stat().st_size == entry.size and file_sha256(p) == entry.sha256


def damaged(nset: NeighbourSet) -> list[str]:
    """The files of a set that are missing or not what ``set.json`` recorded (size, SHA-256)."""
    return [e.file for e in nset.manifest.neighbours if not _intact(nset.directory, e)]


def ensure_neighbours(serving: Path, snapshot: SnapshotManifest, cases: Sequence[Case], constraints: Constraints,
                      *, root: Path, params: SetParams | None = None,
                      max_seconds: float = DEFAULT_MAX_SECONDS) -> NeighbourSet:
    """The neighbour set of ``snapshot`` for ``cases`` (see module doc): reused when present and
    intact, built (or completed) otherwise."""
    params = params or SetParams()
    columns = served_columns(snapshot)
    found = readings(cases)
    probes = analyse(found, columns, snapshot.as_of)
    spec = set_spec(snapshot, probes, constraints, params)
    if not found:
        spec["empty"] = True  # (only then: the ids of sets with readings are as they were)
    set_id = set_id_of(spec)
    directory = root / set_id
    if not found:
        return _empty(snapshot, constraints, params, directory, set_id)
    existing: dict[int, NeighbourEntry] = {}
    if (directory / SET_FILE).exists():
        try:
            old = load_set(directory)
        except NeighbourError:
            old = None
        if old is not None and old.manifest.set_id == set_id:
            existing = {e.index: e for e in old.manifest.neighbours if _intact(directory, e)}
            if len(existing) == params.neighbours:
                old.reused = True
                return old
    return _build(serving, snapshot, probes, constraints, params, directory, set_id, existing, max_seconds)


def _empty(snapshot: SnapshotManifest, constraints: Constraints, params: SetParams, directory: Path,
           set_id: str) -> NeighbourSet:
    """The set of a golden set with no reference to distil (a project just built, its golden
    set still empty): no neighbour. A set's id depends on the references it is made for, so
    neighbours built now would not be the ones the first cases need; the set of those is built
    when they come."""
    manifest = NeighbourSetManifest(
        set_id=set_id, snapshot_id=snapshot.snapshot_id, as_of=snapshot.as_of,
        generator_version=GENERATOR_VERSION, params=params, constraints=constraints.describe(),
        notes=[EMPTY_NOTE], neighbours=[])
    text = manifest.model_dump_json(indent=2) + "\n"
    try:
        reused = (directory / SET_FILE).read_text(encoding="utf-8") == text
    except (OSError, ValueError):
        reused = False
    if not reused:  # missing, or not what it should be (damaged): written again
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(directory / SET_FILE, text)
    return NeighbourSet(directory, manifest, reused=reused)


def _build(serving: Path, snapshot: SnapshotManifest, probes: Probes, constraints: Constraints, params: SetParams,
           directory: Path, set_id: str, existing: dict[int, NeighbourEntry], max_seconds: float) -> NeighbourSet:
    started = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    tables = {t: [(c.name, c.type) for c in info.columns] for t, info in snapshot.tables.items()}
    notes = [*probes.skipped, *constraints.skipped]
    entries: list[NeighbourEntry] = []
    with Source(serving, tables, constraints, schema=snapshot.serving_schema) as src:
        pools, pool_notes = src.witness_pools(probes, snapshot.as_of)
        notes += pool_notes
        for k in range(params.neighbours):
            if k in existing:
                entries.append(existing[k])
                continue
            if time.perf_counter() - started > max_seconds:
                raise NeighbourError(
                    f"building neighbours of {snapshot.snapshot_id} took more than {max_seconds:.0f} s "
                    f"({k} of {params.neighbours} built); use fewer neighbours or rows per table")
            kind = kind_for(k)
            rng = np.random.default_rng(np.random.SeedSequence([params.seed, k]))
            data = generate(src, probes, pools, constraints, PROFILES[kind], params.rows_per_table,
                            snapshot.as_of, rng)
            entries.append(_write(directory, src, data, constraints, snapshot, k, kind))
    manifest = NeighbourSetManifest(
        set_id=set_id, snapshot_id=snapshot.snapshot_id, as_of=snapshot.as_of,
        generator_version=GENERATOR_VERSION, params=params, constraints=constraints.describe(),
        notes=notes, neighbours=entries, build_seconds=round(time.perf_counter() - started, 3))
    write_atomically(directory / SET_FILE, manifest.model_dump_json(indent=2) + "\n")
    return NeighbourSet(directory, manifest)


def _write(directory: Path, src: Source, data: dict[str, list[list[Any]]], constraints: Constraints,
           snapshot: SnapshotManifest, index: int, kind: str) -> NeighbourEntry:
    work = directory / f".build-{os.getpid()}-{index}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        path = work / f"{CATALOG}.duckdb"
        rows = write_file(path, src.tables, data, constraints, schema=snapshot.serving_schema)
        infos = fingerprint_serving(path, snapshot.serving_schema)
        nid = "nbr-" + compute_snapshot_id(snapshot.as_of, infos)[len("snap-"):]
        sealed = seal(path, nid)
        if sealed and fingerprint_serving(path, snapshot.serving_schema) != infos:
            raise NeighbourError(f"neighbour {nid} changed when its header was sealed; report this with the "
                                 "DuckDB version")
        final = directory / f"{nid}.duckdb"
        if final.exists():
            final.chmod(0o644)
        path.chmod(0o444)
        path.replace(final)
        return NeighbourEntry(id=nid, index=index, kind=kind, file=final.name, rows=rows,
                              checksums={t: i.checksum for t, i in sorted(infos.items())},
                              sha256=file_sha256(final), size=final.stat().st_size, sealed=sealed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_params(neighbours: int | None, rows_per_table: int | None) -> SetParams:
    """Set parameters from command-line values (None: the default), with errors naming the option."""
    try:
        return SetParams(neighbours=neighbours or DEFAULT_NEIGHBOURS,
                         rows_per_table=rows_per_table or DEFAULT_ROWS_PER_TABLE)
    except ValueError as exc:
        raise InputError(f"neighbour set parameters: {exc}; use 1-200 neighbours and at least 1 row per table") from exc
