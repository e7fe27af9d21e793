"""The pinned snapshot as neighbour generation reads it: numbered, profiled, with witnesses.

The served tables are copied into an in-memory DuckDB, each row numbered (``__rn``) in a
canonical order: sorted on every column, NULLs last. That order depends on the content only,
never on how the serving file happens to store its rows, so a generator that picks rows by
number picks the same rows on every machine.

Each column gets a **domain** from the whole table: the observed range of a number, a date or a
timestamp; the set of values of a text column with few of them (a category), extended by a
``accepted_values`` test's list; "text" otherwise (a generator then draws from other rows of
the neighbour). The witness queries of :mod:`~sqleval_pipeline.suite.probes` are run once
here, each with a statement timeout; their row numbers are the pools a generator draws from.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.suite.constraints import Constraints, quote
from sqleval_pipeline.suite.probes import RN, Probes

#: a text column with at most this many distinct values is a category
MAX_CATEGORY_VALUES = 64
#: statement timeout of a witness query, seconds
WITNESS_TIMEOUT_S = 10.0

_INTEGER = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "UHUGEINT"}
_SORTABLE_PREFIXES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                      "UINTEGER", "UBIGINT", "UHUGEINT", "DECIMAL", "DOUBLE", "FLOAT", "REAL", "VARCHAR",
                      "DATE", "TIMESTAMP", "BOOLEAN", "TIME", "UUID", "INTERVAL", "BLOB")


class SourceError(SqlevalError, RuntimeError):
    """The serving snapshot cannot be read for neighbour generation; the message says why."""


def kind_of(type_: str) -> str:
    """integer | decimal | float | date | timestamp | boolean | string | other."""
    t = type_.upper()
    if t in _INTEGER:
        return "integer"
    if t.startswith("DECIMAL"):
        return "decimal"
    if t in ("DOUBLE", "FLOAT", "REAL"):
        return "float"
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    if t == "BOOLEAN":
        return "boolean"
    if t.startswith("VARCHAR"):
        return "string"
    return "other"


def decimal_scale(type_: str) -> int:
    t = type_.upper()
    if t.startswith("DECIMAL(") and "," in t:
        return int(t.split(",")[1].rstrip(") "))
    return 0


@dataclass(frozen=True)
class Domain:
    """What values a column takes in the snapshot (see module doc)."""

    kind: str
    type: str
    low: Any = None
    high: Any = None
    #: a category's values (sorted), or None
    values: tuple[Any, ...] | None = None
    nulls: int = 0

    @property
    def category(self) -> bool:
        return self.values is not None


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: int


class _Watchdog:
    """One daemon thread that interrupts connections whose deadline passed (a thread per
    statement would cost more than the statement: measured ~0.7 ms to start one)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._due: dict[int, tuple[float, duckdb.DuckDBPyConnection]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def add(self, con: duckdb.DuckDBPyConnection, seconds: float) -> int:
        with self._cv:
            self._next += 1
            self._due[self._next] = (time.monotonic() + seconds, con)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sqleval-suite-deadline", daemon=True)
                self._thread.start()
            self._cv.notify()
            return self._next

    def remove(self, token: int) -> None:
        with self._cv:
            self._due.pop(token, None)

    def _loop(self) -> None:
        while True:
            with self._cv:
                now = time.monotonic()
                for token, (at, con) in list(self._due.items()):
                    if at <= now:
                        del self._due[token]
                        try:
                            con.interrupt()
                        except duckdb.Error:  # pragma: no cover - closed meanwhile
                            pass
                wait = min((at for at, _ in self._due.values()), default=now + 60.0) - now
                self._cv.wait(timeout=max(wait, 0.001))


_WATCHDOG = _Watchdog()


@contextmanager
def deadline(con: duckdb.DuckDBPyConnection, seconds: float) -> Iterator[None]:
    """Interrupt whatever ``con`` runs after ``seconds`` (a statement timeout that works on any
    connection, whatever its configuration)."""
    token = _WATCHDOG.add(con, seconds)
    try:
        yield
    finally:
        _WATCHDOG.remove(token)


class Source:
    """The numbered working copy of a serving file (see module doc). Close it when done."""

    def __init__(self, serving: Path, tables: Mapping[str, Sequence[tuple[str, str]]], constraints: Constraints,
                 *, schema: str = "main"):
        if not serving.exists():
            raise SourceError(f"serving file {serving} is missing; run `sqleval build`")
        self.constraints = constraints
        self.con = duckdb.connect(config={"threads": "1"})
        self.tables: dict[str, TableInfo] = {}
        self.domains: dict[tuple[str, str], Domain] = {}
        try:
            self.con.execute(f"ATTACH '{str(serving).replace(chr(39), chr(39) * 2)}' AS __snap (READ_ONLY)")
            for name, cols in sorted(tables.items()):
                order = ", ".join((quote(c) if t.upper().startswith(_SORTABLE_PREFIXES) else f"CAST({quote(c)} AS VARCHAR)")
                                  + " ASC NULLS LAST" for c, t in cols)
                self.con.execute(f"CREATE TABLE {quote(name)} AS SELECT row_number() OVER (ORDER BY {order}) "
                                 f"AS {RN}, * FROM __snap.{quote(schema)}.{quote(name)} ORDER BY {RN}")
                n = self.con.execute(f"SELECT count(*) FROM {quote(name)}").fetchone()[0]
                self.tables[name] = TableInfo(name, tuple(c for c, _ in cols), tuple(t for _, t in cols), n)
            self.con.execute("DETACH __snap")
        except duckdb.Error as exc:
            self.con.close()
            raise SourceError(f"cannot read the serving file {serving}: {exc}") from exc
        for name, info in self.tables.items():
            for c, t in zip(info.columns, info.types, strict=True):
                self.domains[(name, c)] = self._domain(name, c, t)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _domain(self, table: str, column: str, type_: str) -> Domain:
        kind = kind_of(type_)
        q, t = quote(column), quote(table)
        nulls, distinct = self.con.execute(
            f"SELECT count(*) FILTER (WHERE {q} IS NULL), count(DISTINCT {q}) FROM {t}").fetchone()
        accepted = self.constraints.accepted_values(table, column)
        if kind in ("integer", "decimal", "float", "date", "timestamp"):
            low, high = self.con.execute(f"SELECT min({q}), max({q}) FROM {t}").fetchone()
            return Domain(kind, type_, low, high, None, nulls)
        if kind == "boolean":
            return Domain(kind, type_, None, None, (False, True), nulls)
        if kind == "string" and (accepted is not None or distinct <= MAX_CATEGORY_VALUES):
            observed = [r[0] for r in self.con.execute(
                f"SELECT DISTINCT {q} FROM {t} WHERE {q} IS NOT NULL ORDER BY 1 LIMIT {MAX_CATEGORY_VALUES + 1}"
            ).fetchall()] if distinct <= MAX_CATEGORY_VALUES else []
            values = tuple(accepted) if accepted is not None else tuple(observed)
            return Domain("category", type_, None, None, tuple(sorted(set(values), key=str)), nulls)
        return Domain(kind if kind == "string" else "other", type_, None, None, None, nulls)

    # ------------------------------------------------------------------ reading rows

    def rows(self, table: str, rns: Sequence[int]) -> dict[int, list[Any]]:
        """The rows numbered ``rns`` (row number → values in column order)."""
        if not rns:
            return {}
        cur = self.con.execute(f"SELECT * FROM {quote(table)} WHERE {RN} IN (SELECT unnest(?::BIGINT[])) "
                               f"ORDER BY {RN}", [sorted(set(int(r) for r in rns))])
        return {int(r[0]): list(r[1:]) for r in cur.fetchall()}

    def numbers_where(self, table: str, column: str, values: Sequence[Any]) -> list[int]:
        """The first row number of each of ``values`` in ``table.column`` (parents of kept rows)."""
        if not values:
            return []
        found = self.con.execute(f"SELECT min({RN}) FROM {quote(table)} WHERE {quote(column)} IN "
                                 f"(SELECT unnest(?::{self.type_of(table, column)}[])) GROUP BY {quote(column)} "
                                 "ORDER BY 1", [list(values)]).fetchall()
        return [int(r[0]) for r in found]

    def type_of(self, table: str, column: str) -> str:
        info = self.tables[table]
        return info.types[info.columns.index(column)]

    def max_of(self, table: str, column: str) -> Any:
        return self.con.execute(f"SELECT max({quote(column)}) FROM {quote(table)}").fetchone()[0]

    def witness_pools(self, probes: Probes, as_of: dt.date) -> tuple[list[list[tuple[int, ...]]], list[str]]:
        """Row numbers of each witness query (a list of tuples, one number per table it reads);
        a query that fails or times out gets an empty pool and a note."""
        pools: list[list[tuple[int, ...]]] = []
        notes: list[str] = []
        for w in probes.witnesses:
            try:
                with deadline(self.con, WITNESS_TIMEOUT_S):
                    rows = self.con.execute(pin_clock(w.sql, as_of)).fetchall()
                pools.append([tuple(int(x) for x in r) for r in rows if all(x is not None for x in r)])
            except duckdb.Error as exc:
                pools.append([])
                notes.append(f"{w.label}: witness query failed ({str(exc).splitlines()[0][:160]})")
        return pools, notes
