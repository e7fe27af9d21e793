"""The data tests a neighbour database must keep: dbt's generic tests on the served models.

Four kinds are read from the dbt manifest (``unique``, ``not_null``, ``accepted_values``,
``relationships``), only for served models and, when the last ``dbt build``'s
``run_results.json`` is given, only those that ran and passed there: a test that did not pass
on the real data says nothing about what plausible data looks like. A ``unique`` test may name
an expression (``order_date || '|' || status``); it is kept as SQL. A ``relationships`` test
whose parent is not served cannot be kept by a file that holds served tables only, and is
listed in ``skipped`` with why.

:func:`violations` checks every constraint on a built file with SQL (one query each), so
a generator can prove what it wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqleval_pipeline.errors import InputError

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote(name: str) -> str:
    """A SQL identifier, always quoted."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """A SQL literal of a string, number or boolean (accepted values)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


@dataclass(frozen=True)
class Unique:
    table: str
    #: the column, or None when the test names an expression
    column: str | None
    #: the SQL the test groups by (the quoted column, or the expression as written)
    expression: str


@dataclass(frozen=True)
class NotNull:
    table: str
    column: str


@dataclass(frozen=True)
class AcceptedValues:
    table: str
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Relationship:
    table: str
    column: str
    parent: str
    field: str


@dataclass(frozen=True)
class Constraints:
    """The data tests of the served tables (see module doc)."""

    unique: tuple[Unique, ...] = ()
    not_null: tuple[NotNull, ...] = ()
    accepted: tuple[AcceptedValues, ...] = ()
    relationships: tuple[Relationship, ...] = ()
    #: tests left out, each with why
    skipped: tuple[str, ...] = field(default=(), compare=False)

    # -- lookups the generator uses
    def unique_columns(self, table: str) -> set[str]:
        return {u.column for u in self.unique if u.table == table and u.column}

    def unique_expressions(self, table: str) -> list[str]:
        return [u.expression for u in self.unique if u.table == table and u.column is None]

    def not_null_columns(self, table: str) -> set[str]:
        return {n.column for n in self.not_null if n.table == table}

    def accepted_values(self, table: str, column: str) -> tuple[Any, ...] | None:
        sets = [a.values for a in self.accepted if a.table == table and a.column == column]
        if not sets:
            return None
        allowed = [v for v in sets[0] if all(v in s for s in sets[1:])]
        return tuple(allowed)

    def parents_of(self, table: str) -> list[Relationship]:
        return [r for r in self.relationships if r.table == table]

    def to_json(self) -> dict[str, Any]:
        return {"unique": [asdict(u) for u in self.unique], "not_null": [asdict(n) for n in self.not_null],
                "accepted": [{**asdict(a), "values": list(a.values)} for a in self.accepted],
                "relationships": [asdict(r) for r in self.relationships]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Constraints:
        return cls(unique=tuple(Unique(**u) for u in data.get("unique", [])),
                   not_null=tuple(NotNull(**n) for n in data.get("not_null", [])),
                   accepted=tuple(AcceptedValues(a["table"], a["column"], tuple(a["values"]))
                                  for a in data.get("accepted", [])),
                   relationships=tuple(Relationship(**r) for r in data.get("relationships", [])))

    def describe(self) -> str:
        return (f"{len(self.unique)} unique, {len(self.not_null)} not_null, {len(self.accepted)} "
                f"accepted_values, {len(self.relationships)} relationships")


def served_models(manifest: Mapping[str, Any], sources: Mapping[str, str]) -> dict[str, str]:
    """dbt unique id → served table name, for the models a snapshot serves (``sources`` of its
    manifest: served table → ``schema.name`` of the warehouse relation it was copied from)."""
    wanted = {v.lower(): k for k, v in sources.items()}
    out: dict[str, str] = {}
    for uid, node in manifest.get("nodes", {}).items():
        if node.get("resource_type") not in ("model", "seed", "snapshot"):
            continue
        name = node.get("alias") or node.get("name") or ""
        key = f"{node.get('schema') or ''}.{name}".lower()
        if key in wanted:
            out[uid] = wanted[key]
    return out


def constraints_from_dbt(manifest: Mapping[str, Any], served: Mapping[str, str],
                         run_results: Mapping[str, Any] | None = None) -> Constraints:
    """The generic dbt tests on the served models (``served``: dbt unique id → served table)."""
    passed = None
    if run_results is not None:
        passed = {r.get("unique_id") for r in run_results.get("results", []) if r.get("status") == "pass"}
    unique: list[Unique] = []
    not_null: list[NotNull] = []
    accepted: list[AcceptedValues] = []
    rels: list[Relationship] = []
    skipped: list[str] = []
    for uid, node in sorted(manifest.get("nodes", {}).items()):
        if node.get("resource_type") != "test":
            continue
        meta = node.get("test_metadata") or {}
        name = meta.get("name")
        if name not in ("unique", "not_null", "accepted_values", "relationships"):
            continue
        target = node.get("attached_node") or next(iter((node.get("depends_on") or {}).get("nodes", [])), None)
        if target not in served:
            continue
        if passed is not None and uid not in passed:
            skipped.append(f"{uid}: did not run (or did not pass) in the last dbt build")
            continue
        kwargs = meta.get("kwargs") or {}
        table = served[target]
        column = node.get("column_name") or kwargs.get("column_name")
        if not column:
            skipped.append(f"{uid}: no column")
            continue
        plain = bool(_PLAIN.match(column))
        if name == "unique":
            unique.append(Unique(table, column if plain else None, quote(column) if plain else column))
            continue
        if not plain:
            skipped.append(f"{uid}: {name} on an expression ({column}) is not kept")
            continue
        if name == "not_null":
            not_null.append(NotNull(table, column))
        elif name == "accepted_values":
            values = kwargs.get("values")
            if not isinstance(values, list) or not values:
                skipped.append(f"{uid}: accepted_values without a literal list")
                continue
            accepted.append(AcceptedValues(table, column, tuple(values)))
        else:
            parents = [n for n in (node.get("depends_on") or {}).get("nodes", []) if n != target] or [target]
            parent = next((served[p] for p in parents if p in served), None)
            fld = kwargs.get("field")
            if parent is None or not isinstance(fld, str) or not _PLAIN.match(fld):
                skipped.append(f"{uid}: the parent of this relationships test is not served")
                continue
            rels.append(Relationship(table, column, parent, fld))
    return Constraints(tuple(unique), tuple(not_null), tuple(accepted), tuple(rels), tuple(skipped))


def load_dbt_constraints(target_dir: Path, sources: Mapping[str, str]) -> Constraints:
    """The constraints of the served tables from a dbt target folder (``manifest.json``, and
    ``run_results.json`` when it is the output of a ``dbt build``). No manifest: no constraint,
    and ``skipped`` says so."""
    manifest_file = target_dir / "manifest.json"
    if not manifest_file.exists():
        return Constraints(skipped=(f"no dbt manifest at {manifest_file}: no data test is kept "
                                    "(run `sqleval build` first)",))
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{manifest_file}: not a dbt manifest ({exc}); run `sqleval build` again") from exc
    run_results = None
    rr_file = target_dir / "run_results.json"
    if rr_file.exists():
        try:
            rr = json.loads(rr_file.read_text(encoding="utf-8"))
        except ValueError:
            rr = None
        if rr and (rr.get("args") or {}).get("which") == "build":
            run_results = rr
    return constraints_from_dbt(manifest, served_models(manifest, sources), run_results)


def violations(con: Any, constraints: Constraints, schema: str = "main") -> list[str]:
    """Every constraint that does not hold on the tables of ``con`` (empty: all hold)."""
    def t(name: str) -> str:
        return f"{quote(schema)}.{quote(name)}"

    out: list[str] = []
    for u in constraints.unique:
        n = con.execute(f"SELECT count(*) FROM (SELECT {u.expression} AS k FROM {t(u.table)} "
                        f"WHERE ({u.expression}) IS NOT NULL GROUP BY 1 HAVING count(*) > 1)").fetchone()[0]
        if n:
            out.append(f"{u.table}: {n} duplicated value(s) of {u.expression} (unique)")
    for nn in constraints.not_null:
        n = con.execute(f"SELECT count(*) FROM {t(nn.table)} WHERE {quote(nn.column)} IS NULL").fetchone()[0]
        if n:
            out.append(f"{nn.table}.{nn.column}: {n} NULL(s) (not_null)")
    for a in constraints.accepted:
        values = ", ".join(literal(v) for v in a.values)
        n = con.execute(f"SELECT count(*) FROM {t(a.table)} WHERE {quote(a.column)} IS NOT NULL "
                        f"AND {quote(a.column)} NOT IN ({values})").fetchone()[0]
        if n:
            out.append(f"{a.table}.{a.column}: {n} value(s) outside the accepted values")
    for r in constraints.relationships:
        n = con.execute(f"SELECT count(*) FROM {t(r.table)} c WHERE c.{quote(r.column)} IS NOT NULL AND "
                        f"c.{quote(r.column)} NOT IN (SELECT p.{quote(r.field)} FROM {t(r.parent)} p "
                        f"WHERE p.{quote(r.field)} IS NOT NULL)").fetchone()[0]
        if n:
            out.append(f"{r.table}.{r.column}: {n} value(s) without a parent in {r.parent}.{r.field}")
    return out
