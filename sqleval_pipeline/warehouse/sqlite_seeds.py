"""SQLite databases (Spider's, BIRD's, your own) as dbt seeds a DuckDB warehouse can build.

A benchmark such as Spider or BIRD ships one SQLite file per database. sqleval serves a DuckDB
snapshot built by dbt, so :func:`sqlite_to_dbt_seeds` writes every table of the given SQLite
files as one CSV seed (``<project>/seeds/<table>.csv``) plus ``seeds/_seeds.yml``, which pins
each column's DuckDB type (dbt's ``column_types``) from the column's SQLite declared type.
:func:`write_serving_models` then writes one served view per table, named like the SQLite
table, so that the benchmark's SQL reads the same names in the snapshot.

Types. SQLite keeps a value's own storage class and gives a column only an *affinity*, chosen
from its declared type by these rules, in this order (https://sqlite.org/datatype3.html,
section 3.1); the DuckDB type follows from the affinity:

================================================  ===========  ======================
declared type                                     affinity     DuckDB type
================================================  ===========  ======================
contains ``INT`` (INTEGER, int, BIGINT, POINT…)   INTEGER      BIGINT
contains ``CHAR``, ``CLOB`` or ``TEXT``           TEXT         VARCHAR
contains ``BLOB``, or no declared type            BLOB (none)  VARCHAR
contains ``REAL``, ``FLOA`` or ``DOUB``           REAL         DOUBLE
contains ``NUMERIC`` or ``DECIMAL``               NUMERIC      DOUBLE, or BIGINT when
                                                                every stored value is an
                                                                integer (SQLite then
                                                                computes with integers:
                                                                ``credits / 2`` divides
                                                                integers)
anything else (DATE, DATETIME, BOOLEAN, YEAR…)    NUMERIC      VARCHAR (such columns
                                                                hold text in practice:
                                                                ``'2019-03-01'``, ``'T'``)
================================================  ===========  ======================

Affinity is a preference, not a constraint: an ``INTEGER`` column may still hold ``'n/a'``,
and a ``date`` column may hold the integer 2019. Every stored value is therefore checked
against the chosen type. With ``strict=True`` (the default) a value the type cannot hold
faithfully (text in a BIGINT column, a number in a VARCHAR column, a fraction in a BIGINT
column) is an error naming the database, table, column and rowid; with ``strict=False`` the
column gets the narrowest of BIGINT, DOUBLE, VARCHAR that holds every stored value (BIGINT
when all are integers, DOUBLE when all are numbers, else VARCHAR, where the numbers become
their text: ``1`` and ``'n/a'`` are read back as ``'1'`` and ``'n/a'``), and ``_seeds.yml``
records the change in the column's description. BLOB values are always an
error (a CSV cell cannot carry bytes).

NULL and the empty string. Values are written so that DuckDB's CSV reader (which dbt-duckdb's
seed loader uses, ``COPY … FROM`` the file) reads them back exactly: NULL is an empty,
unquoted cell and every text value is quoted. DuckDB reads an empty cell *and* a quoted empty
cell (``""``) as NULL, and dbt's own agate reader (used when a seed sets ``fast: false``)
reads ``""`` and the text ``null`` as NULL too, so an empty string cannot survive a seed.
``empty_strings="error"`` (the default) refuses a table holding one, naming where;
``empty_strings="null"`` accepts that such values become NULL (a ``WHERE x = ''`` then
matches nothing). The text ``'NULL'`` is kept as text by the default (fast) loader.

Names. SQLite and DuckDB match table names case-insensitively, so two databases holding
tables whose names differ only by case clash as surely as equal names: the conversion refuses
any clash between databases before writing anything (rename the table in one database, or
convert the databases into separate projects). Column names are written as they are and
seeds quote them (``quote_columns: true``), so ``"Year"`` or ``Singer_ID`` keep their case.

>>> duckdb_type("INTEGER"), duckdb_type("int"), duckdb_type("varchar(20)"), duckdb_type("REAL")
('BIGINT', 'BIGINT', 'VARCHAR', 'DOUBLE')
>>> duckdb_type("NUMERIC"), duckdb_type("decimal(10,2)"), duckdb_type("datetime"), duckdb_type("")
('DOUBLE', 'DOUBLE', 'VARCHAR', 'VARCHAR')
>>> sqlite_affinity("FLOATING POINT")   # contains INT: SQLite's first rule wins
'INTEGER'
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from sqleval_pipeline.errors import SqlevalError

#: the first line of every file this module writes (a file without it is never overwritten)
MARKER = "# written by sqleval_pipeline.warehouse.sqlite_seeds"
SEEDS_YML = "_seeds.yml"
#: dbt node names: a seed's file stem becomes its name, and ref() needs a plain identifier
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SeedConversionError(SqlevalError, ValueError):
    """The SQLite data cannot be written as dbt seeds faithfully; the message says where and
    what to do."""


def sqlite_affinity(declared: str | None) -> str:
    """SQLite's column affinity for a declared type (datatype3.html, section 3.1).

    >>> [sqlite_affinity(t) for t in ("BIGINT", "NVARCHAR(8)", "blob", None, "DOUBLE", "bool")]
    ['INTEGER', 'TEXT', 'BLOB', 'BLOB', 'REAL', 'NUMERIC']
    """
    t = (declared or "").upper()
    if "INT" in t:
        return "INTEGER"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "TEXT"
    if "BLOB" in t or not t.strip():
        return "BLOB"
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "REAL"
    return "NUMERIC"


def duckdb_type(declared: str | None) -> str:
    """The DuckDB type of a column declared ``declared`` in SQLite, before its values are seen
    (see the module's table; :func:`sqlite_to_dbt_seeds` then checks every value)."""
    affinity = sqlite_affinity(declared)
    if affinity == "INTEGER":
        return "BIGINT"
    if affinity == "REAL":
        return "DOUBLE"
    if affinity == "NUMERIC" and re.search(r"NUMERIC|DECIMAL", (declared or "").upper()):
        return "DOUBLE"
    return "VARCHAR"


@dataclass
class _Column:
    name: str
    declared: str
    type: str
    note: str | None = None


@dataclass
class _Table:
    database: str  # file stem
    source: Path
    name: str
    columns: list[_Column] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def _fits(value: Any, duck: str) -> bool:
    if value is None:
        return True
    if duck == "BIGINT":
        return isinstance(value, int)
    if duck == "DOUBLE":
        return isinstance(value, int | float)
    return isinstance(value, str)


def _narrowest(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if all(isinstance(v, int) for v in present):
        return "BIGINT"
    if all(isinstance(v, int | float) for v in present):
        return "DOUBLE"
    return "VARCHAR"


def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file, or an error naming it."""
    if not path.is_file():
        raise SeedConversionError(f"{path}: no such SQLite file")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise SeedConversionError(f"{path}: cannot open as SQLite: {exc}") from None
    con.text_factory = str
    return con


def _table_names(con: sqlite3.Connection, path: Path) -> list[str]:
    """The file's own tables, in creation order."""
    try:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
    except sqlite3.DatabaseError as exc:
        raise SeedConversionError(f"{path}: not a SQLite database ({exc})") from None


def _read_database(path: Path, strict: bool, empty_strings: str) -> list[_Table]:
    con = _connect(path)
    tables: list[_Table] = []
    try:
        names = _table_names(con, path)
        for name in names:
            where = f"{path.name}: table {name!r}"
            if not _NAME_RE.match(name):
                raise SeedConversionError(
                    f"{where}: the name is not a plain identifier (letters, digits, '_'), so it "
                    "cannot be a dbt seed; rename the table in the SQLite file")
            info = con.execute(f'PRAGMA table_info("{name}")').fetchall()
            table = _Table(path.stem, path, name,
                           [_Column(c[1], c[2] or "", duckdb_type(c[2])) for c in info])
            cols = ", ".join(f'"{c.name}"' for c in table.columns)
            try:
                con.execute(f'SELECT rowid FROM "{name}" LIMIT 0')
                select = f'SELECT rowid, {cols} FROM "{name}" ORDER BY rowid'
            except sqlite3.OperationalError:  # a WITHOUT ROWID table: row numbers instead
                select = f'SELECT row_number() OVER (), {cols} FROM "{name}"'
            try:
                fetched = con.execute(select).fetchall()
            except sqlite3.OperationalError as exc:  # e.g. text that is not UTF-8
                raise SeedConversionError(f"{where}: cannot be read ({exc}); fix the data in "
                                          "the SQLite file") from None
            rowids = [r[0] for r in fetched]
            table.rows = [tuple(r[1:]) for r in fetched]
            for j, col in enumerate(table.columns):
                values = [r[j] for r in table.rows]
                _check_column(where, col, values, rowids, strict, empty_strings)
            tables.append(table)
    finally:
        con.close()
    return tables


def _check_column(where: str, col: _Column, values: list[Any], rowids: list[Any],
                  strict: bool, empty_strings: str) -> None:
    at = f"{where}, column {col.name!r} (declared {col.declared or 'without a type'!r})"
    for v, rid in zip(values, rowids, strict=True):
        if isinstance(v, bytes):
            raise SeedConversionError(
                f"{at}: rowid {rid} holds a BLOB; a CSV seed cannot carry bytes — drop the "
                "column or store the data as text")
        if isinstance(v, float) and not math.isfinite(v):
            raise SeedConversionError(f"{at}: rowid {rid} holds {v!r}; a seed cannot carry it")
    if col.type == "DOUBLE" and sqlite_affinity(col.declared) == "NUMERIC" and values \
            and all(v is None or isinstance(v, int) for v in values) \
            and any(v is not None for v in values):
        col.type = "BIGINT"  # NUMERIC affinity keeps integers as integers: SQLite computes with them
    bad = next(((v, rid) for v, rid in zip(values, rowids, strict=True)
                if not _fits(v, col.type)), None)
    if bad is not None:
        v, rid = bad
        if strict:
            raise SeedConversionError(
                f"{at}: rowid {rid} holds {type(v).__name__} {v!r}, which {col.type} (the type "
                f"its declaration maps to) cannot hold as it is; fix the value in the SQLite "
                "file, or convert with strict=False to give the column the narrowest type "
                "that holds every value")
        wider = _narrowest(values)
        col.note = (f"SQLite declared {col.declared or 'no type'!r} maps to {col.type}, but "
                    f"rowid {rid} holds {v!r}: {wider} holds every stored value")
        col.type = wider
    if col.type == "VARCHAR":
        empty = next((rid for v, rid in zip(values, rowids, strict=True) if v == ""), None)
        if empty is not None and empty_strings == "error":
            raise SeedConversionError(
                f"{at}: rowid {empty} holds an empty string, which a dbt seed reads back as "
                "NULL; store NULL instead in the SQLite file, or convert with "
                "empty_strings='null' to accept that empty strings become NULL")


def _cell(value: Any) -> str:
    if value is None:
        return ""  # empty, unquoted: NULL
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back as the same double
    return '"' + str(value).replace('"', '""') + '"'  # text is always quoted


def _csv_text(table: _Table) -> str:
    header = ",".join('"' + c.name.replace('"', '""') + '"' for c in table.columns)
    body = "".join(",".join(_cell(v) for v in row) + "\n" for row in table.rows)
    return header + "\n" + body


def _written_here(path: Path) -> bool:
    """Whether ``path`` was written by this module (its first line is the marker; a CSV seed
    counts when the ``_seeds.yml`` beside it, written here, lists it)."""
    if path.suffix == ".csv":
        yml = path.parent / SEEDS_YML
        if not _written_here(yml):
            return False
        seeds = (yaml.safe_load(yml.read_text(encoding="utf-8")) or {}).get("seeds") or []
        return any(isinstance(s, dict) and s.get("name") == path.stem for s in seeds)
    if not path.is_file():
        return False
    with path.open(encoding="utf-8", errors="replace") as fh:
        return MARKER.lstrip("# ") in fh.readline()


def _check_writable(path: Path, overwrite: bool) -> None:
    if path.exists() and not overwrite and not _written_here(path):
        raise SeedConversionError(f"{path} exists and was not written by this converter; move "
                                  "it away or pass overwrite=True")


def sqlite_to_dbt_seeds(sqlite_files: Sequence[Path], project_dir: Path, *,
                        seed_schema: str | None = "raw", strict: bool = True,
                        empty_strings: Literal["error", "null"] = "error",
                        overwrite: bool = False) -> list[str]:
    """Write every table of ``sqlite_files`` as a dbt seed of the dbt project ``project_dir``.

    Writes ``seeds/<table>.csv`` per table and ``seeds/_seeds.yml`` (``column_types`` from the
    SQLite declared types, ``quote_columns: true``, ``+schema: seed_schema`` unless None; each
    seed's ``meta`` names its database and the SQLite declared types). Returns the seed names
    (the table names), in file order then table order. Nothing is written when any check
    fails: a table-name clash between databases (names compared case-insensitively, as SQLite
    and DuckDB compare them), a name that is not a plain identifier, a value the column's type
    cannot hold (``strict``), an empty string (``empty_strings``), a BLOB, or a file that
    exists and was not written by this converter (``overwrite``).

    >>> import sqlite3, tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> con = sqlite3.connect(tmp / "pets.sqlite")
    >>> _ = con.executescript("CREATE TABLE pet (id INTEGER, name varchar(20), weight REAL);"
    ...                       "INSERT INTO pet VALUES (1, 'Rex', 12.5), (2, NULL, 3);")
    >>> con.close()
    >>> sqlite_to_dbt_seeds([tmp / "pets.sqlite"], tmp / "dbt")
    ['pet']
    >>> print((tmp / "dbt" / "seeds" / "pet.csv").read_text(), end="")
    "id","name","weight"
    1,"Rex",12.5
    2,,3.0
    >>> yaml.safe_load((tmp / "dbt" / "seeds" / "_seeds.yml").read_text())["seeds"][0]["config"]
    {'column_types': {'id': 'BIGINT', 'name': 'VARCHAR', 'weight': 'DOUBLE'}, 'quote_columns': True, 'schema': 'raw'}
    """
    if empty_strings not in ("error", "null"):
        raise ValueError(f"empty_strings must be 'error' or 'null', not {empty_strings!r}")
    if not sqlite_files:
        raise SeedConversionError("no SQLite file given")
    tables: list[_Table] = []
    seen: dict[str, _Table] = {}
    for f in sqlite_files:
        for t in _read_database(Path(f), strict, empty_strings):
            other = seen.get(t.name.lower())
            if other is not None:
                raise SeedConversionError(
                    f"table name clash: {t.source.name} and {other.source.name} both have a "
                    f"table {t.name!r}" + (f" ({other.name!r})" if other.name != t.name else "")
                    + "; SQLite and DuckDB compare table names case-insensitively and one "
                    "snapshot serves each name once — rename the table in one database, or "
                    "convert the databases into separate projects")
            seen[t.name.lower()] = t
            tables.append(t)
    seeds_dir = Path(project_dir) / "seeds"
    yml_path = seeds_dir / SEEDS_YML
    for t in tables:
        _check_writable(seeds_dir / f"{t.name}.csv", overwrite)
    _check_writable(yml_path, overwrite)
    seeds_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for t in tables:
        (seeds_dir / f"{t.name}.csv").write_text(_csv_text(t), encoding="utf-8", newline="")
        config: dict[str, Any] = {"column_types": {c.name: c.type for c in t.columns},
                                  "quote_columns": True}
        if seed_schema:
            config["schema"] = seed_schema
        entry: dict[str, Any] = {
            "name": t.name,
            "description": f"table {t.name} of the SQLite database {t.source.name}",
            "config": config,
            "meta": {"sqlite_database": t.database,
                     "sqlite_declared_types": {c.name: c.declared for c in t.columns}},
        }
        notes = [{"name": c.name, "description": c.note} for c in t.columns if c.note]
        if notes:
            entry["columns"] = notes
        entries.append(entry)
    text = yaml.safe_dump({"version": 2, "seeds": entries}, sort_keys=False, allow_unicode=True)
    yml_path.write_text(f"{MARKER}: one seed per SQLite table, DuckDB types from SQLite's "
                        f"declared types (see the module's docstring)\n{text}", encoding="utf-8")
    return [t.name for t in tables]


@dataclass(frozen=True)
class DeclaredConstraints:
    """What a SQLite table's schema declares: its primary key, its NOT NULL columns and its
    single-column foreign keys ((column, parent table, parent column))."""

    primary_key: tuple[str, ...] = ()
    not_null: tuple[str, ...] = ()
    foreign_keys: tuple[tuple[str, str, str], ...] = ()


def declared_constraints(sqlite_files: Sequence[Path]) -> dict[str, DeclaredConstraints]:
    """Table name → what its schema declares, for every table of ``sqlite_files`` (read from
    ``PRAGMA table_info`` and ``PRAGMA foreign_key_list``; nothing of the data is read). A
    foreign key without a named parent column names the parent's primary key; composite
    foreign keys, and keys whose two columns get different DuckDB types, are left out.

    >>> import sqlite3, tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> con = sqlite3.connect(tmp / "s.sqlite")
    >>> _ = con.executescript("CREATE TABLE c (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    ...                       "CREATE TABLE o (oid INT NOT NULL, cid INT REFERENCES c, PRIMARY KEY (oid));")
    >>> con.close()
    >>> d = declared_constraints([tmp / "s.sqlite"])
    >>> d["c"]
    DeclaredConstraints(primary_key=('id',), not_null=('name',), foreign_keys=())
    >>> d["o"]
    DeclaredConstraints(primary_key=('oid',), not_null=('oid',), foreign_keys=(('cid', 'c', 'id'),))
    """
    out: dict[str, DeclaredConstraints] = {}
    for f in sqlite_files:
        con = _connect(Path(f))
        try:
            names = _table_names(con, Path(f))
            pks: dict[str, tuple[str, ...]] = {}
            info = {}
            types: dict[tuple[str, str], str] = {}
            for name in names:
                cols = con.execute(f'PRAGMA table_info("{name}")').fetchall()
                info[name] = cols
                types.update({(name.lower(), c[1].lower()): duckdb_type(c[2]) for c in cols})
                pks[name.lower()] = tuple(c[1] for c in sorted((c for c in cols if c[5]), key=lambda c: c[5]))
            for name in names:
                fks: dict[int, list] = {}
                for row in con.execute(f'PRAGMA foreign_key_list("{name}")').fetchall():
                    fks.setdefault(row[0], []).append(row)
                keys = []
                for rows in fks.values():
                    if len(rows) != 1:
                        continue  # a composite foreign key: not a single-column relationship
                    _id, _seq, parent, col, to = rows[0][:5]
                    to = to or (pks.get(parent.lower()) or (None,))[0]
                    # a key whose two sides get other DuckDB types (Spider joins text with
                    # integers) cannot be a dbt relationships test: DuckDB refuses the comparison
                    if to and len(pks.get(parent.lower(), ())) <= 1 and \
                            types.get((name.lower(), col.lower())) == types.get((parent.lower(), to.lower())):
                        keys.append((col, parent, to))
                out[name] = DeclaredConstraints(pks[name.lower()], tuple(c[1] for c in info[name] if c[3]),
                                                tuple(keys))
        finally:
            con.close()
    return out


def _tests_yml(tables: Sequence[str], prefix: str, constraints: dict[str, DeclaredConstraints]) -> str:
    """``_served.yml``: the declared constraints as dbt tests on the served views, each with
    severity ``warn`` (a declared key the data breaks, as in some of Spider's databases, warns
    and is not kept as a data test; it does not stop the build)."""
    warn = {"config": {"severity": "warn"}}
    known = {t.lower(): t for t in tables}
    models = []
    for table in tables:
        dc = constraints.get(table)
        if dc is None:
            continue
        tests: dict[str, list] = {}
        single_pk = dc.primary_key[0] if len(dc.primary_key) == 1 else None
        for col in dict.fromkeys([*dc.primary_key, *dc.not_null]):
            tests.setdefault(col, []).append({"not_null": warn})
        if single_pk:
            tests.setdefault(single_pk, []).append({"unique": warn})
        for col, parent, to in dc.foreign_keys:
            if parent.lower() in known and _NAME_RE.match(to):
                tests.setdefault(col, []).append({"relationships": {
                    "arguments": {"to": f"ref('{prefix}{known[parent.lower()]}')", "field": to}, **warn}})
        columns = [{"name": c, "data_tests": t} for c, t in tests.items() if _NAME_RE.match(c)]
        if columns:
            models.append({"name": f"{prefix}{table}", "columns": columns})
    text = yaml.safe_dump({"version": 2, "models": models}, sort_keys=False, allow_unicode=True)
    return f"{MARKER}: the SQLite schemas' declared keys as dbt tests (severity warn)\n{text}"


def write_serving_models(tables: Sequence[str], project_dir: Path, *, subdir: str = "served",
                         prefix: str = "srv_", tag: str = "serving",
                         overwrite: bool = False,
                         constraints: dict[str, DeclaredConstraints] | None = None) -> list[str]:
    """One served view per seed: ``models/<subdir>/<prefix><table>.sql`` selecting everything
    from the seed, with ``alias`` the table's own name and tag ``tag`` (select them with
    ``serve.select: tag:<tag>``). dbt forbids a model named like a seed, hence the prefix; the
    snapshot serves a model under its alias, so the benchmark's SQL reads the SQLite names.
    Returns the model names. With ``constraints`` (:func:`declared_constraints`), also
    ``models/<subdir>/_served.yml``: each table's declared primary key (``not_null``, and
    ``unique`` for a one-column key), NOT NULL columns and foreign keys (``relationships``) as
    dbt tests of severity ``warn`` on the served views — the data tests the test suite's
    neighbour databases keep (docs/test-suite.md).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> write_serving_models(["pet"], root)
    ['srv_pet']
    >>> print((root / "models" / "served" / "srv_pet.sql").read_text(), end="")
    -- written by sqleval_pipeline.warehouse.sqlite_seeds
    {{ config(alias='pet', materialized='view', tags=['serving']) }}
    select * from {{ ref('pet') }}
    """
    folder = Path(project_dir) / "models" / subdir
    names = []
    for table in tables:
        if not _NAME_RE.match(table):
            raise SeedConversionError(f"table {table!r}: not a plain identifier")
        path = folder / f"{prefix}{table}.sql"
        _check_writable(path, overwrite)
        names.append((path, table))
    if constraints is not None:
        _check_writable(folder / "_served.yml", overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    if constraints is not None:
        (folder / "_served.yml").write_text(_tests_yml([t for _p, t in names], prefix, constraints),
                                            encoding="utf-8")
    for path, table in names:
        path.write_text(f"-- {MARKER.lstrip('# ')}\n"
                        f"{{{{ config(alias='{table}', materialized='view', tags=['{tag}']) }}}}\n"
                        f"select * from {{{{ ref('{table}') }}}}\n", encoding="utf-8")
    return [p.stem for p, _ in names]


__all__ = ["MARKER", "DeclaredConstraints", "SeedConversionError", "declared_constraints", "duckdb_type",
           "sqlite_affinity", "sqlite_to_dbt_seeds", "write_serving_models"]
