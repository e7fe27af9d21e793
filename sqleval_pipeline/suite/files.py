"""Writing a neighbour: repair what the data tests forbid, then a reproducible DuckDB file.

The rows are loaded into an in-memory staging database with the snapshot's column types, then
repaired until every constraint holds (each step a SQL statement, the rows kept in the order
the generator gave them):

* a value outside an ``accepted_values`` list becomes the list's first value;
* a NULL where ``not_null`` forbids it removes the row;
* of rows sharing a ``unique`` value (a column or an expression), the first is kept;
* a key without its parent under ``relationships`` is given an existing parent key (the
  parents in their order, picked by the row's position), or NULL when there is no parent.

:func:`~sqleval_pipeline.suite.constraints.violations` must then find nothing, or nothing is
written. The file is written by one thread, tables in name order, rows in staging order.

**Reproducible bytes.** DuckDB stores two things in a file that do not come from its content:
the name of the catalog (the name it was attached under: always ``neighbour`` here) and a
random 16-byte database identifier in the file's main header. :func:`seal` replaces the
identifier with one derived from the neighbour's content id and recomputes the header's
checksum, after finding where the identifier is (the 16 bytes where four fresh files made alike
differ) and checking on the file itself that its header checksum is computed the way this
module computes it. When either check fails (a DuckDB whose format differs), the file is left
as DuckDB wrote it and ``seal`` says so: the content id is still reproducible, the bytes are
not.
"""

from __future__ import annotations

import hashlib
import struct
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.suite.constraints import Constraints, literal, quote, violations
from sqleval_pipeline.suite.source import TableInfo

CATALOG = "neighbour"
_HEADER = 4096
_MASK = (1 << 64) - 1
_MULT = 0xBF58476D1CE4E5B9


class NeighbourWriteError(SqlevalError, RuntimeError):
    """A neighbour could not be written with every data test holding."""


def _arrow(values: Sequence[Any]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def _changed(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> int:
    row = con.execute(sql, params or []).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def repair(con: duckdb.DuckDBPyConnection, constraints: Constraints, tables: Sequence[str]) -> int:
    """Repair the staging tables until every constraint holds (see module doc); rows changed."""
    present = set(tables)
    total = 0
    for _round in range(8):
        changed = 0
        for a in constraints.accepted:
            if a.table in present and a.values:
                vals = ", ".join(literal(v) for v in a.values)
                changed += _changed(con, f"UPDATE {quote(a.table)} SET {quote(a.column)} = {literal(a.values[0])} "
                                         f"WHERE {quote(a.column)} IS NOT NULL AND {quote(a.column)} NOT IN ({vals})")
        for n in constraints.not_null:
            if n.table in present:
                changed += _changed(con, f"DELETE FROM {quote(n.table)} WHERE {quote(n.column)} IS NULL")
        for u in constraints.unique:
            if u.table in present:
                changed += _changed(con, f"DELETE FROM {quote(u.table)} WHERE __ord IN (SELECT __ord FROM "
                                         f"(SELECT __ord, row_number() OVER (PARTITION BY ({u.expression}) ORDER BY __ord) "
                                         f"AS k FROM {quote(u.table)} WHERE ({u.expression}) IS NOT NULL) WHERE k > 1)")
        for r in constraints.relationships:
            if r.table not in present or r.parent not in present:
                continue
            c, f = quote(r.column), quote(r.field)
            orphan = (f"{c} IS NOT NULL AND {c} NOT IN (SELECT {f} FROM {quote(r.parent)} WHERE {f} IS NOT NULL)")
            n_parents = _changed(con, f"SELECT count(DISTINCT {f}) FROM {quote(r.parent)}")
            if n_parents == 0:
                changed += _changed(con, f"UPDATE {quote(r.table)} SET {c} = NULL WHERE {orphan}")
                continue
            con.execute(f"CREATE OR REPLACE TEMP TABLE __parents AS SELECT {f} AS v, row_number() OVER (ORDER BY "
                        f"min(__ord)) - 1 AS i FROM {quote(r.parent)} WHERE {f} IS NOT NULL GROUP BY {f}")
            changed += _changed(con, f"UPDATE {quote(r.table)} SET {c} = __parents.v FROM __parents "
                                     f"WHERE __parents.i = {quote(r.table)}.__ord % {n_parents} AND "
                                     f"{quote(r.table)}.{orphan}")
        total += changed
        if not changed:
            return total
    return total


def stage(tables: Mapping[str, TableInfo], data: Mapping[str, list[list[Any]]]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding ``data`` with the served column types (and ``__ord``)."""
    con = duckdb.connect(config={"threads": "1", "preserve_insertion_order": "true"})
    for name in sorted(tables):
        info = tables[name]
        cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(info.columns, info.types, strict=True))
        con.execute(f"CREATE TABLE {quote(name)} (__ord BIGINT, {cols})")
        rows = data.get(name, [])
        if not rows:
            continue
        arrays = {"__ord": pa.array(range(len(rows)), type=pa.int64())}
        for i, c in enumerate(info.columns):
            arrays[f"c{i}"] = _arrow([r[i] for r in rows])
        con.register("__rows", pa.table(arrays))
        casts = ", ".join(f"CAST(c{i} AS {t})" for i, t in enumerate(info.types))
        con.execute(f"INSERT INTO {quote(name)} SELECT __ord, {casts} FROM __rows ORDER BY __ord")
        con.unregister("__rows")
    return con


def write(path: Path, tables: Mapping[str, TableInfo], data: Mapping[str, list[list[Any]]],
          constraints: Constraints, *, schema: str = "main") -> dict[str, int]:
    """Stage, repair and write a neighbour file at ``path`` (which must not exist); rows per table."""
    con = stage(tables, data)
    try:
        repair(con, constraints, list(tables))
        problems = violations(con, constraints)
        if problems:
            raise NeighbourWriteError("a neighbour still breaks its data tests after repair: " + "; ".join(problems[:5]))
        con.execute(f"ATTACH '{str(path).replace(chr(39), chr(39) * 2)}' AS {CATALOG}")
        if schema != "main":
            con.execute(f"CREATE SCHEMA {CATALOG}.{quote(schema)}")
        counts = {}
        for name in sorted(tables):
            info = tables[name]
            cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(info.columns, info.types, strict=True))
            target = f"{CATALOG}.{quote(schema)}.{quote(name)}"
            con.execute(f"CREATE TABLE {target} ({cols})")
            con.execute(f"INSERT INTO {target} SELECT {', '.join(quote(c) for c in info.columns)} "
                        f"FROM {quote(name)} ORDER BY __ord")
            counts[name] = _changed(con, f"SELECT count(*) FROM {target}")
        con.execute(f"CHECKPOINT {CATALOG}")
        con.execute(f"DETACH {CATALOG}")
    finally:
        con.close()
    return counts


# --------------------------------------------------------------------------- reproducible bytes


def _checksum(block: bytes) -> int:
    """DuckDB's block checksum: 5381 XOR the product of every 8-byte word with a constant."""
    result = 5381
    for (word,) in struct.iter_unpack("<Q", block[: len(block) - len(block) % 8]):
        result ^= (word * _MULT) & _MASK
    return result


_SPAN: tuple[int, int] | None | bool = False  # False: not calibrated yet
#: the size of DuckDB's random database identifier
IDENTIFIER_BYTES = 16
#: fresh files compared to find it: two random identifiers agree on a given byte one time in 256,
#: so two files alone would place the span one byte short about once in 128 calibrations (and
#: leave that byte random in every sealed file); four agree on an edge byte about once in 2**24
CALIBRATION_FILES = 4


def span_of(heads: Sequence[bytes]) -> tuple[int, int] | None:
    """Where files made alike differ past their header checksum: ``(start, end)`` when that is
    one run of exactly :data:`IDENTIFIER_BYTES` inside the main header of same-sized DuckDB
    files, else None (a format this module does not know, or too few files to tell).

    >>> same = bytes(8) + b"DUCK" + bytes(4084)
    >>> heads = [same[:100] + bytes([i, 7 * i % 256]) * 8 + same[116:] for i in (1, 2, 3)]
    >>> span_of(heads)
    (100, 116)
    >>> span_of(heads[:1]) is None
    True
    """
    if len(heads) < 2 or len({len(h) for h in heads}) != 1 or any(h[8:12] != b"DUCK" for h in heads):
        return None
    first = heads[0]
    if any(h[_HEADER:] != first[_HEADER:] for h in heads[1:]):
        return None
    body = sorted({i for h in heads[1:] for i in range(8, min(_HEADER, len(first))) if h[i] != first[i]})
    if not body:
        return None
    lo, hi = body[0], body[-1] + 1
    return (lo, hi) if hi - lo == IDENTIFIER_BYTES else None


def identifier_span() -> tuple[int, int] | None:
    """Where DuckDB writes its random identifier in a file's main header (start, end), found by
    comparing :data:`CALIBRATION_FILES` empty files made alike (:func:`span_of`)."""
    global _SPAN
    if _SPAN is not False:
        return _SPAN  # type: ignore[return-value]
    heads = []
    with tempfile.TemporaryDirectory(prefix="sqleval-calibrate-") as tmp:
        for n in range(CALIBRATION_FILES):
            (Path(tmp) / str(n)).mkdir()
            p = Path(tmp) / str(n) / f"{CATALOG}.duckdb"
            con = duckdb.connect(str(p), config={"threads": "1"})
            con.execute("CREATE TABLE t (x INTEGER)")
            con.execute("CHECKPOINT")
            con.close()
            heads.append(p.read_bytes())
    _SPAN = span_of(heads)
    return _SPAN


def seal(path: Path, content_id: str) -> bool:
    """Give the file at ``path`` a database identifier derived from ``content_id`` (see module
    doc). True when the bytes are now reproducible."""
    span = identifier_span()
    if span is None:
        return False
    with path.open("r+b") as fh:
        head = bytearray(fh.read(_HEADER))
        if len(head) < _HEADER or head[8:12] != b"DUCK" or _checksum(bytes(head[8:])) != struct.unpack_from("<Q", head)[0]:
            return False
        lo, hi = span
        head[lo:hi] = hashlib.sha256(content_id.encode()).digest()[: hi - lo]
        struct.pack_into("<Q", head, 0, _checksum(bytes(head[8:])))
        fh.seek(0)
        fh.write(head)
    return True
