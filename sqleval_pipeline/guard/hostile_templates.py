"""Hostile-suite templates, instantiated per project from its served snapshot.

The attacks under ``sqleval_pipeline/data/hostile/*.jsonl`` (package data, :data:`HOSTILE_DIR`)
are *templates*: the tables they attack are placeholders filled from the project's serving
snapshot, so the same suite proves the guard on any dbt warehouse (``docs/hostile-suite.md``
has the full reference).

**Placeholders** (in ``sql`` or ``question``; ``{{`` and ``}}`` are literal braces)

==========================  ================================================================
``{table}``                 a served table (default: the largest by rows; ``HostileContext.table``)
``{big_table}``             the largest served table by rows
``{table2}``                the second largest (the largest again when only one is served)
``{column}``                a column of ``{table}`` (its first)
``{numeric_column}``        the first numeric column of ``{table}``, else ``{column}``
``{text_column}``           the first VARCHAR column of ``{table}``, else ``CAST({column} AS VARCHAR)``
``{sensitive}``             a sensitive relation ``schema.name``: it exists in the warehouse but
                            is not served (first in priority order whose name is not also served)
``{sensitive_schema}``      its schema
``{sensitive_name}``        its name
``{serving_schema}``        the serving file's schema (``main``)
``{database_name}``         the serving file's DuckDB database name (the snapshot id)
``{absent:STEM}``           a name that exists nowhere in the snapshot: ``STEM`` itself unless
                            a served table, the serving schema or database (or ``main``,
                            ``system``, ``temp``, ``memory``) is called that, else ``STEM_1``,
                            ``STEM_2`` ... (``{absent}`` alone: stem ``no_such_table``)
==========================  ================================================================

Modifiers follow a colon and can be chained: ``upper``, ``lower``, ``title`` change case;
``quoted`` always double-quotes each name part, ``raw`` inserts the bare text, ``str`` the
text for use inside a SQL string literal (``'`` doubled). Without one, a name is an SQL
identifier, double-quoted only when it needs to be (``{sensitive:quoted}`` →
``"hr"."salaries"``; ``{sensitive_schema:upper}.{sensitive_name:title}`` → ``HR.Salaries``).
On ``{absent:STEM:...}`` the modifiers follow the stem.

**Template fields** besides ``id``, ``category``, ``sql``/``question``, ``expect``, ``note``:
``for_each: "sensitive"`` instantiates the case once per sensitive relation (the first
:data:`FOR_EACH_CAP` in sorted order), ids suffixed ``[schema.name]``; ``min_cross_rows: N``
skips a resource bomb unless the product of the row counts of every served-table placeholder
it names (each occurrence) is at least N — a cross join of small tables is not a bomb;
``requires: [table, ...]`` skips the case unless those tables are served (the demo's stored
payloads live in ``dim_products``).

**Names that must be absent.** Every name a bundled case relies on being absent (guessed
tables, catalog views, the harness's variables, scratch names) is an ``{absent:STEM}``
placeholder, so the bundled suite instantiates on any warehouse: on the demo the names are the
stems themselves, on a project serving ``policy`` the case asks for ``policy_1``
(:attr:`Instantiation.notes` says so). A case file of your own may name real served tables:
every table a case writes literally is recorded in :attr:`HostileCase.fixed_tables`, and the
case is judged by what the guard does with it (:func:`sqleval_pipeline.guard.hostile.run_case`):
refused whatever table it names, or — when the guard lets it read a served table it names,
and the same SQL naming an absent table is refused only for the unknown table — reported as
*not hostile on this project*, never an error that stops the run.

A placeholder that cannot be filled for this project (``{sensitive}`` with no sensitive
relations, a ``requires`` table not served, a bomb on tables too small, a sensitive relation
whose bare name is also served) skips the case with a reason recorded in
:attr:`Instantiation.skipped`; an unknown placeholder is a :class:`HostileCaseError` naming
file:line when the templates are loaded.

>>> ctx = HostileContext(served={"policy": ServedTable("policy", 10)}, database_name="snap-0")
>>> ctx.absent_name("policy"), ctx.absent_name("expected_df")
('policy_1', 'expected_df')
>>> ctx = HostileContext.from_manifest(manifest, sensitive=["hr.salaries"])   # doctest: +SKIP
>>> suite = instantiate(load_templates(), ctx)                                # doctest: +SKIP
>>> suite.cases[0].sql, suite.skipped[:1]                                     # doctest: +SKIP
('DROP TABLE fct_order_items', [])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqleval_pipeline.data import resource
from sqleval_pipeline.guard.executor import NON_PROMPT_LAYERS
from sqleval_pipeline.guard.hostile_obey import obey
from sqleval_pipeline.guard.hostile_refs import referenced_tables  # noqa: F401 (re-exported)
from sqleval_pipeline.guard.hostile_render import (  # noqa: F401 (re-exported)
    _TOKEN, ABSENT, CASE_MODIFIERS, DEFAULT_ABSENT_STEM, RENDER_MODIFIERS, _Binding, _ident, _render, _Unfillable,
    absent_parts, sql_name,
)
from sqleval_pipeline.textfiles import BadJsonLine, json_lines
from sqleval_pipeline.errors import InputError, SqlevalError

HOSTILE_DIR = resource("hostile")
DEFAULT_CASE_FILES: tuple[Path, ...] = (HOSTILE_DIR / "sql.jsonl", HOSTILE_DIR / "questions.jsonl",
                                        HOSTILE_DIR / "guard_v2.jsonl", HOSTILE_DIR / "guard_v3_bounds.jsonl",
                                        HOSTILE_DIR / "guard_v3_clock_session.jsonl")

#: The layers a case may expect to stop it (the executor's non-prompt layers).
LAYERS: tuple[str, ...] = NON_PROMPT_LAYERS

#: A ``for_each: "sensitive"`` template is instantiated for at most this many relations.
FOR_EACH_CAP = 5

#: Names ``{absent:STEM}`` never draws besides the project's own: DuckDB's built-in catalogs
#: and its default schema (a stem in a schema or catalog position must not name one).
RESERVED_NAMES = frozenset({"main", "system", "temp", "memory"})

SERVED_PLACEHOLDERS = ("table", "big_table", "table2")
SENSITIVE_PLACEHOLDERS = ("sensitive", "sensitive_schema", "sensitive_name")
COLUMN_PLACEHOLDERS = ("column", "numeric_column", "text_column")
CONTEXT_PLACEHOLDERS = ("serving_schema", "database_name")
PLACEHOLDERS = (SERVED_PLACEHOLDERS + COLUMN_PLACEHOLDERS + SENSITIVE_PLACEHOLDERS + CONTEXT_PLACEHOLDERS
                + (ABSENT,))
FOR_EACH = ("sensitive",)

_FIELDS = {"id", "category", "sql", "question", "expect", "note", "for_each", "min_cross_rows", "requires"}
_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|"
                      r"UHUGEINT|FLOAT|DOUBLE|REAL|DECIMAL|NUMERIC)\b", re.IGNORECASE)


class HostileCaseError(SqlevalError, ValueError):
    """A hostile case file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class HostileCase:
    """One attack: SQL to run as given, or a question for the system under test."""

    id: str
    category: str
    sql: str | None = None
    question: str | None = None
    expect: tuple[str, ...] = ()
    note: str | None = None
    source: str | None = None
    template_id: str | None = None
    #: the project it was instantiated for (aims the default adversarial double)
    context: HostileContext | None = field(default=None, compare=False, repr=False)
    #: names of the tables the case writes literally (not from a served-table or ``{absent}``
    #: placeholder; for a question, in the SQL it tells the model to run): if the guard lets
    #: the case read one of them, the case may not be hostile on this project
    fixed_tables: tuple[str, ...] = ()
    #: from the bundled case files: never "not hostile" — allowed means failed
    bundled: bool = False

    @property
    def kind(self) -> str:
        return "sql" if self.sql is not None else "question"


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ServedTable:
    """A table of the serving snapshot: row count and (name, DuckDB type) columns."""

    name: str
    rows: int
    columns: tuple[tuple[str, str], ...] = ()


@dataclass
class HostileContext:
    """What the suite needs to know about one project's serving snapshot (see module doc).

    ``sensitive``: ``(schema, name)`` of every relation that exists in the warehouse but is
    not served — the dbt project's models that are not served, plus the relations of its
    declared sensitive schemas. ``table`` chooses ``{table}`` (default: the largest).
    """

    served: dict[str, ServedTable]
    database_name: str
    serving_schema: str = "main"
    sensitive: list[tuple[str, str]] = field(default_factory=list)
    table: str | None = None

    def __post_init__(self) -> None:
        served = {}
        for key, t in self.served.items():
            if not isinstance(t, ServedTable):  # a mapping {"rows": ..., "columns": [(name, type), ...]}
                t = ServedTable(str(key), int(t["rows"]), tuple(tuple(c) for c in t.get("columns", ())))
            served[t.name] = t
        self.served = served
        # the caller's priority order (a project's declared sensitive schemas first), deduplicated
        self.sensitive = list(dict.fromkeys(_relation(s) for s in self.sensitive))
        if self.table is not None and self.table.lower() not in self.served_names:
            raise InputError(f"table {self.table!r} is not a served table ({sorted(self.served)})")

    @classmethod
    def from_manifest(cls, manifest: Any, sensitive: Iterable[tuple[str, str] | str] = (), *,
                      table: str | None = None) -> HostileContext:
        """The context of a :class:`~sqleval_pipeline.snapshot.SnapshotManifest`.

        The database name is the snapshot id (the serving file is ``<snapshot_id>.duckdb``).
        """
        served = {name: ServedTable(name, info.rows, tuple((c.name, c.type) for c in info.columns))
                  for name, info in manifest.tables.items()}
        return cls(served=served, database_name=manifest.snapshot_id,
                   serving_schema=getattr(manifest, "serving_schema", None) or "main",
                   sensitive=list(sensitive), table=table)

    @property
    def served_names(self) -> set[str]:
        return {n.lower() for n in self.served}

    @property
    def taken_names(self) -> set[str]:
        """Lower-cased names that exist in the snapshot: served tables, the serving schema, the
        database (snapshot id) and DuckDB's own catalogs (:data:`RESERVED_NAMES`)."""
        return self.served_names | {self.serving_schema.lower(), self.database_name.lower()} | RESERVED_NAMES

    def absent_name(self, stem: str = DEFAULT_ABSENT_STEM) -> str:
        """``stem`` when nothing in the snapshot is called that, else ``stem_1``, ``stem_2`` ...
        (compared case-insensitively; the same stem always gives the same name)."""
        taken = self.taken_names
        name, n = stem, 0
        while name.lower() in taken:
            n += 1
            name = f"{stem}_{n}"
        return name

    def ranked(self) -> list[ServedTable]:
        """Served tables, largest first (ties by name)."""
        return sorted(self.served.values(), key=lambda t: (-t.rows, t.name))

    def default_sensitive(self) -> tuple[str, str] | None:
        """The relation ``{sensitive}`` means outside ``for_each``: the first whose name is not served."""
        for rel in self.sensitive:
            if rel[1].lower() not in self.served_names:
                return rel
        return self.sensitive[0] if self.sensitive else None


def _relation(s: tuple[str, str] | Sequence[str] | str) -> tuple[str, str]:
    if isinstance(s, str):
        schema, dot, name = s.partition(".")
        if not dot or not schema or not name or "." in name:
            raise InputError(f"a sensitive relation is 'schema.name', got {s!r}")
        return schema, name
    schema, name = s
    return str(schema), str(name)


def sensitive_from_dbt(dbt_manifest: dict[str, Any], manifest: Any,
                       sensitive_schemas: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``(schema, name)`` of a dbt project's relations that the serving snapshot does not serve.

    Every model (its alias, in its schema) except those copied into the snapshot (schema in
    ``manifest.source_schemas`` and name a served table), plus every model, seed, snapshot or
    source in one of ``sensitive_schemas``. ``dbt_manifest`` is dbt's ``target/manifest.json``.
    """
    served = {n.lower() for n in manifest.tables}
    sources = {s.lower() for s in manifest.source_schemas}
    declared = {s.lower() for s in sensitive_schemas}
    out: set[tuple[str, str]] = set()
    for section in ("nodes", "sources"):
        for node in (dbt_manifest.get(section) or {}).values():
            kind = node.get("resource_type")
            if kind not in ("model", "seed", "snapshot", "source"):
                continue
            schema = node.get("schema")
            name = node.get("identifier") if kind == "source" else node.get("alias") or node.get("name")
            if not schema or not name:
                continue
            in_declared = schema.lower() in declared
            if kind == "model" and not (schema.lower() in sources and name.lower() in served) or in_declared:
                out.add((schema, name))
    return sorted(out)


# --------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class HostileTemplate:
    """One line of a hostile case file: a case, possibly with placeholders (see module doc)."""

    id: str
    category: str
    sql: str | None = None
    question: str | None = None
    expect: tuple[str, ...] = ()
    note: str | None = None
    for_each: str | None = None
    min_cross_rows: int | None = None
    requires: tuple[str, ...] = ()
    source: str | None = None
    bundled: bool = False

    @property
    def kind(self) -> str:
        return "sql" if self.sql is not None else "question"

    @property
    def text(self) -> str:
        return self.sql if self.sql is not None else self.question or ""

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(m.group(1) for m in _TOKEN.finditer(self.text) if m.group(1))

    @property
    def needs_context(self) -> bool:
        return bool(self.placeholders or self.for_each or self.min_cross_rows or self.requires)

    def as_case(self) -> HostileCase:
        """The case of a template without placeholders (braces unescaped)."""
        text = _TOKEN.sub(lambda m: m.group(0)[0] if not m.group(1) else m.group(0), self.text)
        fixed, _ = _fixed_tables(self, text, {}, None)
        return HostileCase(self.id, self.category, text if self.sql is not None else None,
                           text if self.sql is None else None, self.expect, self.note, self.source, self.id,
                           fixed_tables=fixed, bundled=self.bundled)


def load_templates(files: Iterable[Path | str] | None = None) -> list[HostileTemplate]:
    """Load hostile case templates (default: every built-in file); ids must be unique.

    Malformed lines, unknown fields, unknown placeholders or modifiers raise
    :class:`HostileCaseError` naming file:line.
    """
    out: list[HostileTemplate] = []
    seen: dict[str, str] = {}
    bundled_dir = HOSTILE_DIR.resolve()
    for f in files or DEFAULT_CASE_FILES:
        path = Path(f)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise HostileCaseError(f"no hostile case file at {path}") from None
        bundled = path.resolve().parent == bundled_dir
        for n, _line, d in json_lines(path, text, _bad_line):
            where = f"{path}:{n}"
            t = _parse_line(d, where, bundled)
            if t.id in seen:
                raise HostileCaseError(f"{where}: duplicate id {t.id!r} (first in {seen[t.id]})")
            seen[t.id] = where
            out.append(t)
    return out


def _bad_line(b: BadJsonLine) -> None:
    if b.error is not None:
        raise HostileCaseError(f"{b.where}: not JSON: {b.error}") from None
    raise HostileCaseError(f"{b.where}: a case must be a JSON object")


def _parse_line(d: dict[str, Any], where: str, bundled: bool = False) -> HostileTemplate:
    unknown = set(d) - _FIELDS
    if unknown:
        raise HostileCaseError(f"{where}: unknown field(s) {sorted(unknown)}")
    if not d.get("id") or not d.get("category"):
        raise HostileCaseError(f"{where}: 'id' and 'category' are required")
    if (d.get("sql") is None) == (d.get("question") is None):
        raise HostileCaseError(f"{where}: give exactly one of 'sql' or 'question'")
    text = d.get("sql") if d.get("sql") is not None else d.get("question")
    if not isinstance(text, str):
        raise HostileCaseError(f"{where}: 'sql' / 'question' must be a string")
    expect = d.get("expect") or ()
    expect = (expect,) if isinstance(expect, str) else tuple(expect)
    bad = [e for e in expect if e not in LAYERS]
    if bad:
        raise HostileCaseError(f"{where}: expect {bad} is not a layer {LAYERS}")
    for m in _TOKEN.finditer(text):
        name, mods = m.group(1), [x for x in (m.group(2) or "").split(":") if x]
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise HostileCaseError(f"{where}: unknown placeholder {{{name}}} in case {d['id']!r} "
                                   f"(known: {', '.join(PLACEHOLDERS)}; write {{{{ }}}} for a literal brace)")
        if name == ABSENT:  # {absent:STEM:modifier...}: the first segment is the stem
            mods = absent_parts(mods)[1]
        for mod in mods:
            if mod not in CASE_MODIFIERS + RENDER_MODIFIERS or (name == "text_column"):
                raise HostileCaseError(f"{where}: modifier {mod!r} is not allowed on {{{name}}} "
                                       f"(modifiers: {', '.join(CASE_MODIFIERS + RENDER_MODIFIERS)}; "
                                       "{text_column} takes none)")
    for_each = d.get("for_each")
    if for_each is not None and for_each not in FOR_EACH:
        raise HostileCaseError(f"{where}: for_each {for_each!r} is not one of {FOR_EACH}")
    mcr = d.get("min_cross_rows")
    if mcr is not None and (not isinstance(mcr, int) or isinstance(mcr, bool) or mcr < 1):
        raise HostileCaseError(f"{where}: min_cross_rows must be a positive integer")
    requires = d.get("requires") or ()
    requires = (requires,) if isinstance(requires, str) else tuple(str(r) for r in requires)
    return HostileTemplate(id=str(d["id"]), category=str(d["category"]), sql=d.get("sql"),
                           question=d.get("question"), expect=expect, note=d.get("note"),
                           for_each=for_each, min_cross_rows=mcr, requires=requires, source=where,
                           bundled=bundled)


# --------------------------------------------------------------------------- instantiation


@dataclass
class Instantiation:
    """The cases of one project, the templates skipped (with why) and notes (e.g. a for_each cap)."""

    cases: list[HostileCase]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    context: HostileContext | None = None


def _base_binding(ctx: HostileContext) -> _Binding:
    names: dict[str, tuple[str, ...]] = {"serving_schema": (ctx.serving_schema,),
                                         "database_name": (ctx.database_name,)}
    origins = {"serving_schema": "context", "database_name": "context"}
    exprs: dict[str, str] = {}
    ranked = ctx.ranked()
    if ranked:
        big = ranked[0]
        second = ranked[1] if len(ranked) > 1 else ranked[0]
        table = next((t for t in ranked if ctx.table and t.name.lower() == ctx.table.lower()), big)
        names.update(table=(table.name,), big_table=(big.name,), table2=(second.name,))
        origins.update(table="served", big_table="served", table2="served")
        if table.columns:
            first = table.columns[0][0]
            numeric = next((c for c, t in table.columns if _NUMERIC.match(t.strip())), first)
            text = next((c for c, t in table.columns if t.strip().upper().startswith("VARCHAR")), None)
            names.update(column=(first,), numeric_column=(numeric,))
            origins.update(column="column", numeric_column="column")
            exprs["text_column"] = (_ident(text, "ident") if text is not None
                                    else f"CAST({_ident(first, 'ident')} AS VARCHAR)")
    return _Binding(names, origins, exprs, ctx.absent_name)


def _with_sensitive(b: _Binding, rel: tuple[str, str] | None) -> _Binding:
    names, origins = dict(b.names), dict(b.origins)
    if rel is not None:
        names.update(sensitive=rel, sensitive_schema=(rel[0],), sensitive_name=(rel[1],))
        origins.update(sensitive="sensitive", sensitive_schema="sensitive", sensitive_name="sensitive")
    return _Binding(names, origins, b.exprs, b.absent)


def _why_unfillable(name: str, ctx: HostileContext) -> str:
    if name in SENSITIVE_PLACEHOLDERS:
        return "no sensitive relations in this project"
    if name in SERVED_PLACEHOLDERS:
        return "no served tables in this project"
    if name in COLUMN_PLACEHOLDERS:
        return "no served table with columns in this project" if ctx.served else "no served tables in this project"
    return f"placeholder {{{name}}} cannot be filled in this project"


def instantiate(templates: Sequence[HostileTemplate], ctx: HostileContext) -> Instantiation:
    """Fill every template from ``ctx`` (see module doc): cases, skipped templates with reasons.

    Never refuses a case for naming a served table: the tables a case writes literally are
    recorded in :attr:`HostileCase.fixed_tables` and the guard's verdict decides (see
    :func:`sqleval_pipeline.guard.hostile.run_case`).
    """
    base = _base_binding(ctx)
    served = ctx.served_names
    rows = {t.name: t.rows for t in ctx.served.values()}
    inst = Instantiation(cases=[], context=ctx)
    for t in templates:
        missing = [r for r in t.requires if r.lower() not in served]
        if missing:
            inst.skipped.append((t.id, f"needs served table(s) {', '.join(missing)}, which this project "
                                       "does not serve"))
            continue
        if t.for_each == "sensitive":
            if not ctx.sensitive:
                inst.skipped.append((t.id, "no sensitive relations in this project"))
                continue
            rels = ctx.sensitive[:FOR_EACH_CAP]
            if len(ctx.sensitive) > FOR_EACH_CAP:
                _note(inst, f"for_each sensitive: {len(ctx.sensitive)} relations, instantiated for the first "
                            f"{FOR_EACH_CAP} in priority order")
            variants = [(f"{t.id}[{s}.{n}]", (s, n)) for s, n in rels]
        else:
            variants = [(t.id, ctx.default_sensitive())]
        for case_id, rel in variants:
            b = _with_sensitive(base, rel)
            try:
                text = _render(t.text, b)
                sentinels: dict[str, tuple[str, str]] = {}
                traced = _render(t.text, b, sentinels=sentinels)
            except _Unfillable as u:
                inst.skipped.append((case_id, _why_unfillable(str(u), ctx)))
                continue
            if t.min_cross_rows:
                product = 1
                for m in _TOKEN.finditer(t.text):
                    if m.group(1) in SERVED_PLACEHOLDERS:
                        product *= rows[b.names[m.group(1)][0]]
                if product < t.min_cross_rows:
                    inst.skipped.append((case_id, f"the served tables it crosses give {product:,} rows, fewer "
                                                  f"than the {t.min_cross_rows:,} that make it a bomb (too "
                                                  "small to exhaust a resource)"))
                    continue
            fixed, skip = _fixed_tables(t, traced, sentinels, ctx)
            if skip is not None:
                inst.skipped.append((case_id, skip))
                continue
            for stem in _absent_stems(t.text):
                drawn = ctx.absent_name(stem)
                if drawn != stem:
                    _note(inst, f"{{absent:{stem}}} is {drawn}: the project has a table, schema or database "
                                f"named {stem}")
            inst.cases.append(HostileCase(
                id=case_id, category=t.category, sql=text if t.sql is not None else None,
                question=text if t.sql is None else None, expect=t.expect, note=t.note,
                source=t.source, template_id=t.id, context=ctx, fixed_tables=fixed, bundled=t.bundled))
    return inst


def _note(inst: Instantiation, note: str) -> None:
    if note not in inst.notes:
        inst.notes.append(note)


def _absent_stems(text: str) -> list[str]:
    mods = [[x for x in (m.group(2) or "").split(":") if x] for m in _TOKEN.finditer(text) if m.group(1) == ABSENT]
    return list(dict.fromkeys(absent_parts(x)[0] for x in mods))


def _fixed_tables(t: HostileTemplate, traced: str, sentinels: dict[str, tuple[str, str]],
                  ctx: HostileContext | None) -> tuple[tuple[str, ...], str | None]:
    """(names of the tables the case writes literally, a reason to skip it or None).

    A name is *literal* when no placeholder filled it; a question's tables are those of the SQL
    it tells the model to run. The case is skipped when a sensitive relation's bare name is
    also a served table (``{sensitive}`` would then read the served table).
    """
    sql = traced
    if t.sql is None:
        sql = obey(traced) or ""
    if not sql:
        return (), None

    def real(part: str | None) -> tuple[str | None, str]:
        if part is None:
            return None, "fixed"
        hit = sentinels.get(part.lower())
        if hit:
            return hit[0], hit[1]
        for fake, (value, _origin) in sentinels.items():   # a sentinel inside a longer name
            part = part.replace(fake, value)
        return part, "fixed"

    served = ctx.served_names if ctx is not None else set()
    schema = ctx.serving_schema.lower() if ctx is not None else "main"
    db_name = ctx.database_name.lower() if ctx is not None else ""
    fixed: list[str] = []
    for catalog, db, name in referenced_tables(sql):
        (cat, _), (sch, _), (nm, origin) = real(catalog), real(db), real(name)
        if nm is None:
            continue
        if origin == "fixed":
            fixed.append(nm)
            continue
        if origin != "sensitive" or nm.lower() not in served:
            continue
        if cat is not None:
            clash = cat.lower() == db_name and (sch or "").lower() == schema
        elif sch is not None:
            clash = sch.lower() in (schema, db_name)
        else:
            clash = True
        if clash:
            shown = ".".join(p for p in (cat, sch, nm) if p)
            return (), (f"sensitive relation name {nm!r} is also a served table, so {shown} would read "
                        "the served table")
    return tuple(dict.fromkeys(fixed)), None


def project_suite(manifest: Any, sensitive: Iterable[tuple[str, str] | str] = (),
                  files: Iterable[Path | str] | None = None, *, table: str | None = None) -> Instantiation:
    """The hostile suite of one project: templates (default: the bundled files) filled from its
    snapshot manifest and sensitive relations."""
    return instantiate(load_templates(files), HostileContext.from_manifest(manifest, sensitive, table=table))


__all__ = [
    "DEFAULT_CASE_FILES", "FOR_EACH_CAP", "HOSTILE_DIR", "HostileCase", "HostileCaseError", "HostileContext",
    "HostileTemplate", "Instantiation", "PLACEHOLDERS", "RESERVED_NAMES", "ServedTable", "instantiate",
    "load_templates", "project_suite", "referenced_tables", "sensitive_from_dbt", "sql_name",
]
