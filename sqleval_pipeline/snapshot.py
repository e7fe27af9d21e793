"""The pinned serving snapshot: freeze, identify, verify and open read-only.

A snapshot is a separate DuckDB file holding *only* the served models of the warehouse (the
project's dbt selection; tables and views alike become tables), copied into one serving
schema (``main`` unless the project says otherwise). Sensitive schemas are never copied: in the
serving file "not granted" means "not there".

Its id is a content hash that does not depend on the machine or the DuckDB version: each
table is reduced to its column names, coarse type families and the sorted SHA-256 digests of
its rows in a canonical JSON encoding (:mod:`sqleval_pipeline.results`); the id hashes those
per-table checksums with the as-of date. The manifest (``snapshots/<id>.json``) is committed;
the built file lives under ``$SQLEVAL_HOME/snapshots`` and is not.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from decimal import Decimal
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
from pydantic import BaseModel

from sqleval_pipeline.results import encode_value
from sqleval_pipeline.textfiles import file_sha256, write_atomically
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.warehouse.validation import SnapshotValidationError

ALLOWLISTED_SCHEMAS: tuple[str, ...] = ("marts",)
SERVING_SCHEMA = "main"
PINNED_FILE = "pinned"
_ID_RE = re.compile(r"^snap-[0-9a-f]{12}$")


class SnapshotError(SqlevalError, RuntimeError):
    """A snapshot could not be built, found or verified; the message says what to do."""


class SnapshotDrift(SnapshotError):
    """The data no longer matches the pinned snapshot (the serving file's content is not
    what its pinned manifest describes)."""


class ColumnInfo(BaseModel):
    name: str
    type: str
    family: str


class TableInfo(BaseModel):
    rows: int
    columns: list[ColumnInfo]
    checksum: str


class SnapshotManifest(BaseModel):
    snapshot_id: str
    as_of: dt.date
    source_schemas: list[str]
    serving_schema: str = SERVING_SCHEMA
    tables: dict[str, TableInfo]
    #: served table -> the warehouse relation (schema.name) it was copied from
    sources: dict[str, str] = {}
    #: the dbt selection that chose the served models, and what it named but could not serve
    selection: str | None = None
    skipped: list[str] = []
    dbt_manifest_hash: str | None = None
    expectations_passed: int | None = None

    def to_file(self, path: Path) -> None:
        text = json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
        write_atomically(path, text)

    @classmethod
    def from_file(cls, path: Path) -> SnapshotManifest:
        try:
            return cls.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise SnapshotError(
                f"no snapshot manifest at {path}; run `sqleval snapshot build`"
            ) from None
        except ValueError as exc:
            raise SnapshotError(f"{path}: not a valid snapshot manifest: {exc}") from exc


def type_family(duckdb_type: str) -> str:
    """Coarse, version-independent family of a DuckDB type.

    >>> type_family("HUGEINT"), type_family("DECIMAL(38,2)"), type_family("TIMESTAMP WITH TIME ZONE")
    ('integer', 'decimal(2)', 'timestamp')
    """
    t = duckdb_type.upper()
    if t in {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT", "UHUGEINT"}:
        return "integer"
    m = re.match(r"DECIMAL\(\d+,\s*(\d+)\)", t)
    if m:
        return f"decimal({m.group(1)})"
    if t in {"FLOAT", "DOUBLE", "REAL"}:
        return "float"
    if t.startswith("VARCHAR"):
        return "string"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    return t.lower()


#: the row encoding of a checksum: compact JSON, non-ASCII text as is (one encoder, made once:
#: ``json.dumps`` with arguments builds a new one per call)
_ROW_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
#: values :func:`~sqleval_pipeline.results.encode_value` returns as they are (exact types) ...
_AS_IS = frozenset({type(None), bool, int, str})
#: ... and those it turns into text, with the same function (every other value goes through it)
_AS_TEXT = {Decimal: str, dt.date: dt.date.isoformat, dt.datetime: dt.datetime.isoformat}


def table_fingerprint(con: duckdb.DuckDBPyConnection, qualified: str) -> TableInfo:
    """Row count, columns and canonical checksum of one table (order-independent)."""
    rel = con.execute(f"SELECT * FROM {qualified}")
    desc = rel.description
    columns = [
        ColumnInfo(name=d[0], type=str(d[1]), family=type_family(str(d[1]))) for d in desc
    ]
    digests: list[bytes] = []
    sha256, encode, as_is, as_text = hashlib.sha256, _ROW_JSON, _AS_IS, _AS_TEXT
    while True:
        chunk = rel.fetchmany(20_000)
        if not chunk:
            break
        for row in chunk:
            payload = encode([v if (t := type(v)) in as_is else as_text[t](v) if t in as_text
                              else encode_value(v) for v in row])
            digests.append(sha256(payload.encode()).digest())
    digests.sort()
    h = hashlib.sha256()
    h.update(json.dumps([[c.name, c.family] for c in columns]).encode())
    for d in digests:
        h.update(d)
    return TableInfo(rows=len(digests), columns=columns, checksum=h.hexdigest())


def compute_snapshot_id(as_of: dt.date, tables: dict[str, TableInfo]) -> str:
    h = hashlib.sha256()
    h.update(as_of.isoformat().encode())
    for name in sorted(tables):
        h.update(f"\n{name}:{tables[name].checksum}".encode())
    return "snap-" + h.hexdigest()[:12]


def dbt_manifest_hash(manifest_path: Path) -> str | None:
    """A machine-independent hash of the dbt project: node ids and their file checksums."""
    if not manifest_path.exists():
        return None
    data = json.loads(manifest_path.read_text())
    items = []
    for section in ("nodes", "sources", "unit_tests"):
        for uid, node in sorted(data.get(section, {}).items()):
            if node.get("package_name") not in (None, data["metadata"].get("project_name")):
                continue
            checksum = node.get("checksum") or ""
            if isinstance(checksum, dict):
                checksum = checksum.get("checksum", "")
            items.append(f"{uid}:{checksum}")
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:16]


def serving_path(snapshot_dir: Path, snapshot_id: str) -> Path:
    return snapshot_dir / f"{snapshot_id}.duckdb"


def manifest_path(manifest_dir: Path, snapshot_id: str) -> Path:
    return manifest_dir / f"{snapshot_id}.json"


def read_pinned(manifest_dir: Path) -> str | None:
    p = manifest_dir / PINNED_FILE
    if not p.exists():
        return None
    sid = p.read_text().strip()
    if not _ID_RE.match(sid):
        raise SnapshotError(f"{p}: '{sid}' is not a snapshot id (expected snap-<12 hex>)")
    return sid


def pinned_snapshot(manifest_dir: Path, snapshot_dir: Path) -> tuple[str, SnapshotManifest, Path]:
    """(id, manifest, serving file path) of the pinned snapshot; raises SnapshotError with what
    to do when nothing is pinned."""
    pinned = read_pinned(manifest_dir)
    if pinned is None:
        raise SnapshotError(f"no pinned snapshot in {manifest_dir}; run `sqleval build` "
                            "(or materialize serving_snapshot)")
    manifest = SnapshotManifest.from_file(manifest_path(manifest_dir, pinned))
    return pinned, manifest, serving_path(snapshot_dir, pinned)


def write_pinned(manifest_dir: Path, snapshot_id: str) -> None:
    (manifest_dir / PINNED_FILE).write_text(snapshot_id + "\n")


def list_serving_objects(path: Path) -> list[tuple[str, str, str]]:
    """(database, schema, name) of every table and view in a serving file."""
    con = open_readonly(path)
    try:
        return [
            tuple(r)
            for r in con.execute(
                "SELECT database_name, schema_name, table_name FROM duckdb_tables() "
                "WHERE NOT internal UNION ALL "
                "SELECT database_name, schema_name, view_name FROM duckdb_views() "
                "WHERE NOT internal ORDER BY 1, 2, 3"
            ).fetchall()
        ]
    finally:
        con.close()


def fingerprint_serving(path: Path, schema: str = SERVING_SCHEMA) -> dict[str, TableInfo]:
    con = open_readonly(path)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = ? AND NOT internal "
                "ORDER BY table_name",
                [schema],
            ).fetchall()
        ]
        return {n: table_fingerprint(con, f'"{schema}"."{n}"') for n in names}
    finally:
        con.close()


def freeze_snapshot(
    warehouse: Path,
    snapshot_dir: Path,
    manifest_dir: Path,
    as_of: dt.date,
    *,
    relations: Sequence[Any] | None = None,
    schemas: tuple[str, ...] = ALLOWLISTED_SCHEMAS,
    serving_schema: str = SERVING_SCHEMA,
    dbt_manifest: Path | None = None,
    validator: Callable[[Path, str], Any] | None = None,
    selection: str | None = None,
    skipped: Sequence[str] = (),
    sensitive_schemas: Sequence[str] = (),
) -> SnapshotManifest:
    """Copy the served relations into a serving file, validate it and identify it.

    ``relations`` are the served dbt models (objects with ``database``, ``schema`` and
    ``name``: tables or views, both become tables); without them, every table and view of
    ``schemas`` is served. ``validator(path, schema)`` (Great Expectations) runs on the
    built file and returns a report whose ``success`` decides; a failure discards the file.
    Writes ``snapshot_dir/<id>.duckdb`` (read-only file mode) and ``manifest_dir/<id>.json``.
    Nothing is replaced unless the new file was built, validated and hashed completely.
    """
    if not warehouse.exists():
        raise SnapshotError(f"no warehouse at {warehouse}; run `sqleval warehouse build` first")
    snapshot_dir.mkdir(parents=True, exist_ok=True)
    manifest_dir.mkdir(parents=True, exist_ok=True)
    building = snapshot_dir / f".building-{os.getpid()}.duckdb"
    building.unlink(missing_ok=True)
    sources: dict[str, str] = {}
    con = duckdb.connect(str(building))
    try:
        alias = _attach_name(relations, warehouse)
        con.execute(f"ATTACH '{_sql_str(warehouse.as_posix())}' AS \"{alias}\" (READ_ONLY)")
        if relations is None:
            pairs = con.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
                "AND schema_name IN (SELECT unnest(?)) UNION ALL "
                "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ? "
                "AND schema_name IN (SELECT unnest(?)) AND NOT internal ORDER BY 1, 2",
                [alias, list(schemas), alias, list(schemas)]).fetchall()
            todo = [(s, t, f'"{alias}"."{s}"."{t}"') for s, t in pairs]
        else:
            todo = [(r.schema, r.name, f'"{alias}"."{r.schema}"."{r.name}"') for r in relations]
        if not todo:
            raise SnapshotError(f"warehouse {warehouse} has nothing to serve in {schemas}; "
                                "run dbt build")
        sensitive = {s.lower() for s in sensitive_schemas}
        leaked = sorted({s for s, _, _ in todo if s.lower() in sensitive})
        if leaked:  # defence in depth: the selection already leaves these out
            raise SnapshotError(f"schema '{leaked[0]}' is declared sensitive and can never be "
                                "served; narrow the selection")
        if serving_schema != "main":
            con.execute(f'CREATE SCHEMA "{serving_schema}"')
        for s, t, qualified in todo:
            if t.lower() in {k.lower() for k in sources}:
                raise SnapshotError(f"two served relations are named '{t}' ({sources[t]} and "
                                    f"{qualified}); serve only one of them")
            try:
                con.execute(f'CREATE TABLE "{serving_schema}"."{t}" AS SELECT * FROM {qualified}')
            except duckdb.CatalogException as exc:
                raise SnapshotError(f"cannot read served relation {s}.{t} from {warehouse}: "
                                    f"{exc}; run `sqleval build` (dbt build) first") from exc
            sources[t] = f"{s}.{t}"
        con.execute(f'DETACH "{alias}"')
        con.execute("CHECKPOINT")
    except Exception:
        con.close()
        building.unlink(missing_ok=True)
        raise
    con.close()

    passed = None
    if validator is not None:
        try:
            report = validator(building, serving_schema)
        except Exception:
            building.unlink(missing_ok=True)
            raise
        if not report.success:
            building.unlink(missing_ok=True)
            raise SnapshotValidationError(report)
        passed = report.evaluated

    infos = fingerprint_serving(building, serving_schema)
    sid = compute_snapshot_id(as_of, infos)
    manifest = SnapshotManifest(
        snapshot_id=sid,
        as_of=as_of,
        source_schemas=sorted({s for s, _, _ in todo}),
        serving_schema=serving_schema,
        tables=infos,
        sources=sources,
        selection=selection,
        skipped=list(skipped),
        dbt_manifest_hash=dbt_manifest_hash(dbt_manifest) if dbt_manifest else None,
        expectations_passed=passed,
    )
    final = serving_path(snapshot_dir, sid)
    if final.exists():
        final.chmod(0o644)
    building.chmod(0o444)
    building.replace(final)
    manifest.to_file(manifest_path(manifest_dir, sid))
    write_stamp(final, manifest)  # its content was just fingerprinted: these bytes are the manifest's
    return manifest


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def _attach_name(relations: Sequence[Any] | None, warehouse: Path) -> str:
    """The name the warehouse is attached under: the dbt database name of the served models,
    so views that name their upstream relations with it resolve."""
    names = {r.database for r in relations or () if getattr(r, "database", "")}
    if len(names) > 1:
        raise SnapshotError(f"served models come from several databases {sorted(names)}; "
                            "sqleval serves one DuckDB warehouse file")
    return names.pop() if names else warehouse.stem


def compare_tables(expected: dict[str, TableInfo], actual: dict[str, TableInfo]) -> list[str]:
    """Human-readable differences between two sets of table fingerprints."""
    problems = []
    for name in sorted(set(expected) | set(actual)):
        e, a = expected.get(name), actual.get(name)
        if e is None:
            problems.append(f"{name}: present now but not in the pinned snapshot")
        elif a is None:
            problems.append(f"{name}: in the pinned snapshot but missing now")
        elif e.checksum != a.checksum:
            detail = []
            if e.rows != a.rows:
                detail.append(f"rows {e.rows} → {a.rows}")
            ecols = [(c.name, c.family) for c in e.columns]
            acols = [(c.name, c.family) for c in a.columns]
            if ecols != acols:
                detail.append(f"columns {ecols} → {acols}")
            if not detail:
                detail.append("same shape, different values")
            problems.append(f"{name}: " + "; ".join(detail))
    return problems


def verify_snapshot(path: Path, manifest: SnapshotManifest) -> list[str]:
    """Re-hash a serving file against its manifest; return the problems (empty = intact)."""
    if not path.exists():
        raise SnapshotError(
            f"serving file {path} is missing; run `sqleval snapshot build` to rebuild it"
        )
    problems = compare_tables(manifest.tables, fingerprint_serving(path, manifest.serving_schema))
    forbidden = [o for o in list_serving_objects(path) if o[1] != manifest.serving_schema]
    problems += [f"unexpected object {'.'.join(o)} in the serving file" for o in forbidden]
    if compute_snapshot_id(manifest.as_of, manifest.tables) != manifest.snapshot_id:
        problems.append("manifest id does not match its own table checksums (edited by hand?)")
    return problems


# --------------------------------------------------------------------------- verified on use

STAMP_SUFFIX = ".verified.json"


def stamp_path(path: Path) -> Path:
    """Where the digest of a serving file verified against its manifest is kept (beside it,
    in the build directory: file bytes depend on the DuckDB build, the manifest does not)."""
    return path.with_name(path.name + STAMP_SUFFIX)


def write_stamp(path: Path, manifest: SnapshotManifest) -> None:
    """Record that ``path``'s bytes (SHA-256, size) were verified against ``manifest``."""
    stamp = {"snapshot_id": manifest.snapshot_id, "sha256": file_checksum(path),
             "size": path.stat().st_size, "verified_at": dt.datetime.now(dt.timezone.utc).isoformat()}
    write_atomically(stamp_path(path), json.dumps(stamp, indent=2) + "\n")


def ensure_verified(path: Path, manifest: SnapshotManifest) -> str:
    """Check the serving file against its pinned manifest before anything reads it; returns
    how (``"digest"``: its SHA-256 equals the one recorded when its content was last verified;
    ``"content"``: no usable stamp, so every table was re-fingerprinted against the manifest,
    and the stamp rewritten).

    A file whose digest differs from the stamp is re-verified by content; a file whose content
    differs from the manifest raises :class:`SnapshotDrift` naming the file, the tables that
    differ and what to do. Cost: one SHA-256 of the file per check (measured in
    docs/project.md); the content check only when the bytes changed or were never stamped.
    """
    if not path.exists():
        raise SnapshotError(f"serving file {path} is missing; run `sqleval build` to rebuild it")
    stamp_file = stamp_path(path)
    try:
        stamp = json.loads(stamp_file.read_text())
        if not isinstance(stamp, dict):
            stamp = {}
    except (OSError, ValueError):
        stamp = {}
    size = path.stat().st_size
    if (stamp.get("snapshot_id") == manifest.snapshot_id and stamp.get("size") == size
            and stamp.get("sha256") == file_checksum(path)):
        return "digest"
    problems = verify_snapshot(path, manifest)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; … ({len(problems) - 5} more)" if len(problems) > 5 else "")
        raise SnapshotDrift(
            f"snapshot drift: the serving file {path} is not the pinned snapshot "
            f"{manifest.snapshot_id} ({shown}). Nothing was evaluated. Rebuild it from the warehouse "
            "with `sqleval snapshot build` (same data: same id), or, if the data changed on purpose, "
            "`sqleval build --repin` and re-freeze the golden set")
    write_stamp(path, manifest)
    return "content"


def file_checksum(path: Path) -> str:
    """SHA-256 of the serving file's bytes (to prove nothing wrote to it)."""
    return file_sha256(path)


def open_readonly(path: Path, **config: Any) -> duckdb.DuckDBPyConnection:
    """A short-lived read-only connection to a serving file, external access off. Every
    in-process reader of a serving file opens it here, with the same settings: DuckDB refuses
    a second connection to an open file with other settings ("different configuration than
    existing connections"), which evaluations running side by side in one process would hit."""
    if not path.exists():
        raise SnapshotError(f"serving file {path} is missing; run `sqleval snapshot build`")
    cfg = {"enable_external_access": False, "autoload_known_extensions": False,
           "autoinstall_known_extensions": False}
    cfg.update(config)
    return duckdb.connect(str(path), read_only=True, config=cfg)
