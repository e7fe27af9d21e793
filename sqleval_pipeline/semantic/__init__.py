"""A glossary derived from the dbt semantic layer (``semantic_models`` and ``metrics`` of a
dbt ``manifest.json``), in the shape of the curated glossary (:mod:`sqleval_pipeline.semantic.glossary`).

What becomes a term
-------------------
* every **measure** → a ``metric`` term: ``sql`` is the DuckDB aggregate of its ``agg`` and
  ``expr`` (``sum(paid_amount)``, ``count(DISTINCT customer_id)``, ``avg(x)``,
  ``sum(CASE WHEN <expr> THEN 1 ELSE 0 END)`` for ``sum_boolean``, ``quantile_cont(x, p)`` /
  ``quantile_disc`` / ``approx_quantile`` for ``percentile``, ``median(x)``); ``tables`` is
  the served name of the semantic model's dbt model; ``time_column`` its agg-time dimension.
  A measure with a ``non_additive_dimension`` (semi-additive: a balance, a snapshot count) has
  no single aggregate expression and is skipped with that reason.
* every **metric** → a ``metric`` term (a metric and a measure of the same name: the metric
  wins and the measure is listed as skipped):

  - ``simple``: its measure's aggregate; the metric's ``filter`` (and the measure input's)
    rendered to SQL as the term's ``filter``; ``fill_nulls_with`` → ``coalesce(agg, n)``;
  - ``ratio``: ``numerator / nullif(denominator, 0)``;
  - ``derived``: its ``expr`` with every input metric (name or alias) replaced by the
    input's expression; an input with ``offset_window``/``offset_to_grain`` is skipped (it
    needs a time shift, not one expression).

  When the parts of a ratio or derived metric carry different filters, each part's filter is
  pushed into its aggregate (``count(claim_id) FILTER (WHERE status_cd = 'S')``); a filter
  every part shares becomes the term's ``filter``. When the parts live on *different* tables
  (a loss ratio: claims paid over earned premium), the ``sql`` is a self-contained scalar
  expression of subqueries (``(SELECT sum(a) FROM t1) / nullif((SELECT sum(b) FROM t2), 0)``),
  the term's ``tables`` lists every table, its ``filter`` is empty, its definition says so,
  and a note is recorded. ``cumulative`` and ``conversion`` metrics are skipped with a reason.
* every **dimension** → a ``dimension`` term (``sql`` = its ``expr`` or name); time dimensions
  also set ``time_column``. A dimension of the same name and expression in several semantic
  models is one term listing every table; different expressions get entity-qualified names
  (``claim__status``).
* **entities** are not terms: they are join keys, used here only to resolve filter
  references such as ``{{ Entity('claim') }}`` and ``{{ Dimension('claim__status_cd') }}``.

Term names are the dbt names (``loss_ratio``); aliases are the label and the name with
underscores as spaces. Definitions come from ``description`` (else the label).

Filters
-------
dbt metric filters are Jinja templates over the semantic graph; :func:`render_filter`
turns them into SQL: ``{{ Dimension('claim__status_cd') }} = 'S'`` → ``status_cd = 'S'``,
``{{ TimeDimension('claim__loss_date', 'month') }}`` → ``date_trunc('month', loss_date)``
(no truncation at the dimension's own grain), ``.grain('g')`` and ``.date_part('p')``,
``{{ TimeDimension('metric_time', ...) }}`` → the measure's agg-time dimension,
``{{ Entity('claim') }}`` → the entity's expression. A filter that names a dimension of
another semantic model (it needs a join) or uses ``Metric(...)`` is not rendered: the item
is skipped with the reason.

Serving
-------
``served`` maps a dbt model's unique id or name to the table name the system under test
sees. When it is given, a semantic model whose dbt model is not in it is skipped ("not
served") with everything defined on it, so sensitive models never reach the glossary. When it
is omitted, every semantic model is taken as served under its relation name (the model's
alias) — callers that serve a selection should pass the mapping.

Nothing is dropped silently: :func:`glossary_from_manifest` returns the glossary together
with the ``skipped`` items and their reasons, and ``notes`` on terms that need care.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from sqlglot.tokens import Tokenizer, TokenType

from sqleval_pipeline.semantic.glossary import Glossary, Term, load_glossary
from sqleval_pipeline.semantic.terms import (  # noqa: F401 (measure_sql, term_key: public here too)
    _aliases, _definition, _filters_of, _Unsupported, measure_sql, term_key,
)
from sqleval_pipeline.semantic.filters import (  # noqa: F401 (ColumnRef, render_filter: public here too)
    ColumnRef, Lookup, UnsupportedFilter, render_filter,
)

__all__ = [
    "ColumnRef", "SemanticGlossary", "Skipped", "UnsupportedFilter", "glossary_from_manifest",
    "merge_glossaries", "measure_sql", "render_filter", "term_key",
]

AS_OF_NOTE = ("Relative time (last month, last 30 days, this year) is measured from the "
              "snapshot's as-of date, never the wall clock.")



# ----------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Skipped:
    """An item of the semantic layer that produced no term, and why."""

    kind: str  # semantic_model | measure | metric | dimension
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: {self.reason}"


@dataclass
class SemanticGlossary:
    glossary: Glossary
    skipped: list[Skipped] = field(default_factory=list)
    #: caveats on terms that were produced (e.g. a metric spanning two tables)
    notes: list[str] = field(default_factory=list)



# ----------------------------------------------------------------------------------------
# the semantic graph
# ----------------------------------------------------------------------------------------

@dataclass
class _Model:
    name: str
    table: str
    primary_entity: str
    default_time: str | None
    entities: dict[str, str]  # name -> expr
    dimensions: dict[str, dict[str, Any]]
    measures: dict[str, dict[str, Any]]

    def dim_expr(self, name: str) -> str:
        d = self.dimensions[name]
        return str(d.get("expr") or d["name"])

    def dim_grain(self, name: str) -> str | None:
        tp = self.dimensions[name].get("type_params") or {}
        return (tp.get("time_granularity") or None) if isinstance(tp, dict) else None

    def time_dimension_of(self, measure: dict[str, Any]) -> str | None:
        name = measure.get("agg_time_dimension") or self.default_time
        return name if name in self.dimensions else None


@dataclass(frozen=True)
class _Atom:
    """One aggregate over one table, with its (unrendered) filter templates."""

    agg: str
    model: str
    measure: str
    filters: tuple[str, ...] = ()

    def with_filters(self, more: tuple[str, ...]) -> _Atom:
        return _Atom(self.agg, self.model, self.measure,
                     self.filters + tuple(f for f in more if f not in self.filters))


Part = Union[str, _Atom]


@dataclass(frozen=True)
class _Expr:
    parts: tuple[Part, ...]

    @property
    def atoms(self) -> list[_Atom]:
        return [p for p in self.parts if isinstance(p, _Atom)]

    def wrapped(self) -> tuple[Part, ...]:
        return self.parts if len(self.parts) == 1 else ("(", *self.parts, ")")

    def filtered(self, filters: tuple[str, ...]) -> _Expr:
        if not filters:
            return self
        return _Expr(tuple(p.with_filters(filters) if isinstance(p, _Atom) else p
                           for p in self.parts))


class _Builder:
    def __init__(self, manifest: Mapping[str, Any], served: Mapping[str, str] | None):
        self.manifest = manifest
        self.served = served
        self.skipped: list[Skipped] = []
        self.notes: list[str] = []
        self.models: dict[str, _Model] = {}
        self.measure_home: dict[str, str] = {}  # measure name -> semantic model name
        self.metrics = {m["name"]: m for m in (manifest.get("metrics") or {}).values()
                        if (m.get("config") or {}).get("enabled", True)}
        self._load_models()

    # --- semantic models ----------------------------------------------------------------
    def _table_of(self, sm: Mapping[str, Any]) -> str | None:
        nodes = self.manifest.get("nodes") or {}
        uid = next((n for n in (sm.get("depends_on") or {}).get("nodes", [])
                    if n.startswith("model.")), None)
        node = nodes.get(uid) if uid else None
        model_name = node["name"] if node else None
        if model_name is None:
            m = re.search(r"ref\(\s*['\"]([^'\"]+)['\"]", str(sm.get("model") or ""))
            model_name = m.group(1) if m else None
        relation = (sm.get("node_relation") or {}).get("alias") or (
            node.get("alias") if node else None) or model_name
        if self.served is None:
            return relation
        for key in (uid, model_name, relation):
            if key and key in self.served:
                return self.served[key]
        return None

    def _load_models(self) -> None:
        sms = self.manifest.get("semantic_models") or {}
        for sm in sorted(sms.values(), key=lambda s: s["name"]):
            if not (sm.get("config") or {}).get("enabled", True):
                continue
            name = sm["name"]
            table = self._table_of(sm)
            if table is None:
                self.skipped.append(Skipped(
                    "semantic_model", name,
                    f"its dbt model ({sm.get('model')}) is not served; its "
                    f"{len(sm.get('measures') or [])} measures and "
                    f"{len(sm.get('dimensions') or [])} dimensions are left out"))
                for ms in sm.get("measures") or []:
                    self.measure_home.setdefault(ms["name"], f"!{name}")
                continue
            entities = {e["name"]: str(e.get("expr") or e["name"]) for e in sm.get("entities") or []}
            primary = next((e["name"] for e in sm.get("entities") or []
                            if e.get("type") == "primary"), None) or sm.get("primary_entity") or name
            model = _Model(
                name=name, table=table, primary_entity=primary,
                default_time=(sm.get("defaults") or {}).get("agg_time_dimension"),
                entities=entities,
                dimensions={d["name"]: d for d in sm.get("dimensions") or []},
                measures={ms["name"]: ms for ms in sm.get("measures") or []},
            )
            self.models[name] = model
            for ms in model.measures:
                self.measure_home[ms] = name

    # --- references -----------------------------------------------------------------------
    def _lookup_for(self, atom: _Atom) -> Lookup:
        home = self.models[atom.model]

        def lookup(kind: str, full: str) -> ColumnRef:
            parts = full.split("__")
            name, entity = parts[-1], (parts[-2] if len(parts) > 1 else None)
            if kind == "Entity":
                if name in home.entities:
                    return ColumnRef(home.entities[name], home.name)
                raise UnsupportedFilter(f"entity {name!r} is not on semantic model {home.name} "
                                        f"(table {home.table}): the filter needs a join")
            if name == "metric_time" and entity is None:
                tdim = home.time_dimension_of(home.measures[atom.measure])
                if tdim is None:
                    raise UnsupportedFilter(f"metric_time: semantic model {home.name} has no "
                                            "agg_time_dimension")
                return ColumnRef(home.dim_expr(tdim), home.name, home.dim_grain(tdim))
            if name in home.dimensions and (entity is None or entity in home.entities):
                return ColumnRef(home.dim_expr(name), home.name, home.dim_grain(name))
            owner = next((m for m in self.models.values() if name in m.dimensions and
                          (entity is None or m.primary_entity == entity)), None)
            where = f"semantic model {owner.name} (table {owner.table})" if owner else \
                "no served semantic model"
            raise UnsupportedFilter(
                f"{kind}({full!r}) is on {where}, not on {home.name} (table {home.table}): "
                "the filter needs a join")

        return lookup

    def _render_atom_filters(self, atom: _Atom) -> list[str]:
        lookup = self._lookup_for(atom)
        return [render_filter(f, lookup) for f in atom.filters]

    # --- measures and metrics ---------------------------------------------------------------
    def _measure_expr(self, measure: str, filters: tuple[str, ...] = ()) -> _Expr:
        home = self.measure_home.get(measure)
        if home is None:
            raise _Unsupported(f"measure {measure!r} is not defined in any semantic model")
        if home.startswith("!"):
            raise _Unsupported(f"measure {measure!r} is on semantic model {home[1:]}, which "
                               "is not served")
        ms = self.models[home].measures[measure]
        return _Expr((_Atom(measure_sql(ms), home, measure, filters),))

    def metric_expr(self, name: str, stack: tuple[str, ...] = ()) -> _Expr:
        if name in stack:
            raise _Unsupported(f"metric cycle {' -> '.join((*stack, name))}")
        metric = self.metrics.get(name)
        if metric is None:
            raise _Unsupported(f"input metric {name!r} is not in the manifest")
        kind = metric.get("type")
        tp = metric.get("type_params") or {}
        own = _filters_of(metric.get("filter"))
        stack = (*stack, name)
        if kind == "simple":
            m = tp.get("measure")
            if m:
                expr = self._measure_expr(m["name"], _filters_of(m.get("filter")) + own)
                if m.get("fill_nulls_with") is not None:
                    expr = _Expr(("coalesce(", *expr.parts, f", {int(m['fill_nulls_with'])})"))
                return expr
            agg = tp.get("metric_aggregation_params")
            if agg:  # a simple metric defined without a measure (newer YAML spec)
                home = agg.get("semantic_model")
                if home not in self.models:
                    raise _Unsupported(f"semantic model {home!r} of the metric is not served")
                fake = {"name": name, "agg": agg.get("agg"), "expr": agg.get("expr"),
                        "agg_params": agg.get("agg_params"),
                        "non_additive_dimension": agg.get("non_additive_dimension"),
                        "agg_time_dimension": agg.get("agg_time_dimension")}
                self.models[home].measures.setdefault(f"__metric__{name}", fake)
                return _Expr((_Atom(measure_sql(fake), home, f"__metric__{name}", own),))
            raise _Unsupported("simple metric without a measure")
        if kind == "ratio":
            num = self._input_expr(tp.get("numerator"), stack)
            den = self._input_expr(tp.get("denominator"), stack)
            return _Expr((*num.wrapped(), " / nullif(", *den.parts, ", 0)")).filtered(own)
        if kind == "derived":
            inputs = tp.get("metrics") or []
            if not inputs or not tp.get("expr"):
                raise _Unsupported("derived metric without expr or input metrics")
            by_name = {}
            for inp in inputs:
                by_name[(inp.get("alias") or inp["name"]).lower()] = self._input_expr(inp, stack)
            return _substitute(str(tp["expr"]), by_name).filtered(own)
        if kind == "cumulative":
            raise _Unsupported("cumulative metric: a running total over a time window, not one "
                               "aggregate expression (compute it with a window over the time "
                               "dimension)")
        if kind == "conversion":
            raise _Unsupported("conversion metric: needs an event-to-event join within a window, "
                               "not one aggregate expression")
        raise _Unsupported(f"metric type {kind!r} is not supported")

    def _input_expr(self, inp: Any, stack: tuple[str, ...]) -> _Expr:
        if inp is None:
            raise _Unsupported("ratio metric without numerator or denominator")
        if isinstance(inp, str):
            inp = {"name": inp}
        if inp.get("offset_window") or inp.get("offset_to_grain"):
            raise _Unsupported(
                f"input {inp.get('alias') or inp['name']!r} is offset in time "
                f"(offset_window/offset_to_grain): it compares periods, not one expression")
        return self.metric_expr(inp["name"], stack).filtered(_filters_of(inp.get("filter")))

    # --- rendering ----------------------------------------------------------------------
    def render(self, expr: _Expr) -> tuple[str, str | None, list[str], str | None, bool]:
        """(sql, filter, tables, time_column, self_contained)"""
        atoms = expr.atoms
        rendered = {id(a): self._render_atom_filters(a) for a in atoms}
        tables = list(dict.fromkeys(self.models[a.model].table for a in atoms))
        if len(tables) == 1:
            common = [f for f in rendered[id(atoms[0])]
                      if all(f in rendered[id(a)] for a in atoms)]
            out = []
            for p in expr.parts:
                if isinstance(p, _Atom):
                    rest = [f for f in rendered[id(p)] if f not in common]
                    out.append(f"{p.agg} FILTER (WHERE {_and(rest)})" if rest else p.agg)
                else:
                    out.append(p)
            times = {self._time_column(a) for a in atoms}
            time_column = times.pop() if len(times) == 1 else None
            return "".join(out), (_and(common) if common else None), tables, time_column, False
        out = []
        for p in expr.parts:
            if isinstance(p, _Atom):
                fs = rendered[id(p)]
                where = f" WHERE {_and(fs)}" if fs else ""
                out.append(f"(SELECT {p.agg} FROM {self.models[p.model].table}{where})")
            else:
                out.append(p)
        return "".join(out), None, tables, None, True

    def _time_column(self, atom: _Atom) -> str | None:
        home = self.models[atom.model]
        tdim = home.time_dimension_of(home.measures[atom.measure])
        return home.dim_expr(tdim) if tdim else None


def _and(filters: list[str]) -> str:
    """AND the predicates; one with an OR is parenthesised (callers AND more onto it)."""
    return " AND ".join(f"({f})" if re.search(r"\bor\b", f, re.IGNORECASE) else f
                        for f in filters)


def _substitute(text: str, inputs: Mapping[str, _Expr]) -> _Expr:
    """Replace input metric names in a derived metric's expr by their expressions."""
    try:
        tokens = Tokenizer().tokenize(text)
    except Exception as exc:  # noqa: BLE001 - sqlglot raises several error types
        raise _Unsupported(f"cannot read derived expr {text!r}: {exc}") from None
    parts: list[Part] = []
    pos = 0
    used = set()
    for i, tok in enumerate(tokens):
        key = tok.text.lower()
        if key not in inputs or tok.token_type == TokenType.STRING:
            continue
        if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            continue  # a function call of the same name
        parts.append(text[pos:tok.start])
        parts.extend(inputs[key].wrapped())
        pos = tok.end + 1
        used.add(key)
    parts.append(text[pos:])
    missing = set(inputs) - used
    if missing:
        raise _Unsupported(f"derived expr {text!r} does not use its inputs {sorted(missing)}")
    return _Expr(tuple(p for p in parts if p != ""))


# ----------------------------------------------------------------------------------------
# entry points
# ----------------------------------------------------------------------------------------

def _load(manifest: Mapping[str, Any] | Path | str) -> Mapping[str, Any]:
    if isinstance(manifest, (str, Path)):
        return json.loads(Path(manifest).read_text(encoding="utf-8"))
    return manifest


def glossary_from_manifest(manifest: Mapping[str, Any] | Path | str,
                           served: Mapping[str, str] | None = None) -> SemanticGlossary:
    """Glossary terms from a dbt manifest's semantic layer (see the module doc)."""
    b = _Builder(_load(manifest), served)
    terms: list[Term] = []
    names: set[str] = set()
    metric_terms: dict[str, Term] = {}

    # metrics first: a measure of the same name yields to its metric
    for name in sorted(b.metrics):
        metric = b.metrics[name]
        try:
            expr = b.metric_expr(name)
            sql, flt, tables, time_column, self_contained = b.render(expr)
        except (_Unsupported, UnsupportedFilter) as exc:
            b.skipped.append(Skipped("metric", name, str(exc)))
            continue
        definition = _definition(metric, f"Metric {name}.")
        if self_contained:
            definition += (f" Spans tables {', '.join(tables)}: the sql is a self-contained "
                           "scalar expression (run it as SELECT <sql>).")
            b.notes.append(f"metric {name}: parts on different tables ({', '.join(tables)}); "
                           "sql is self-contained (scalar subqueries), filter left empty")
        metric_terms[name] = Term(
            term=name, kind="metric", aliases=_aliases(name, metric.get("label"), name),
            definition=definition, sql=sql, filter=flt, time_column=time_column, tables=tables)

    for model in b.models.values():
        for mname, ms in model.measures.items():
            if mname.startswith("__metric__"):
                continue
            if mname in metric_terms:
                b.skipped.append(Skipped("measure", mname, f"metric {mname} has the same name; "
                                         "the metric's term is used"))
                continue
            try:
                sql = measure_sql(ms)
            except _Unsupported as exc:
                b.skipped.append(Skipped("measure", mname, str(exc)))
                continue
            tdim = model.time_dimension_of(ms)
            terms.append(Term(
                term=mname, kind="metric", aliases=_aliases(mname, ms.get("label"), mname),
                definition=_definition(ms, f"{ms.get('agg')} of {ms.get('expr') or mname} "
                                           f"in {model.table}."),
                sql=sql, time_column=model.dim_expr(tdim) if tdim else None,
                tables=[model.table]))
            names.add(term_key(mname))
    for name in sorted(metric_terms):
        if term_key(name) in names:
            b.skipped.append(Skipped("metric", name, "a measure term has the same name "
                                     "(after normalisation)"))
            continue
        terms.append(metric_terms[name])
        names.add(term_key(name))
    # keep measures and metrics in a stable, readable order: metrics after measures
    terms.extend(_dimension_terms(b, names))
    return SemanticGlossary(
        glossary=Glossary(version=1, as_of_note=AS_OF_NOTE, terms=terms),
        skipped=b.skipped, notes=b.notes)


def _dimension_terms(b: _Builder, names: set[str]) -> list[Term]:
    groups: dict[str, list[tuple[_Model, dict[str, Any]]]] = {}
    for model in b.models.values():
        for dname, dim in model.dimensions.items():
            groups.setdefault(dname, []).append((model, dim))
    out: list[Term] = []
    for dname in sorted(groups):
        members = groups[dname]
        variants: dict[tuple[str, str], list[tuple[_Model, dict[str, Any]]]] = {}
        for model, dim in members:
            variants.setdefault((model.dim_expr(dname), str(dim.get("type"))), []).append(
                (model, dim))
        qualify = len(variants) > 1 or term_key(dname) in names
        for (expr, dtype), group in variants.items():
            term = f"{group[0][0].primary_entity}__{dname}" if qualify else dname
            if term_key(term) in names:
                for model, _ in group:
                    b.skipped.append(Skipped("dimension", f"{model.name}.{dname}",
                                             f"term name {term!r} is already taken"))
                continue
            names.add(term_key(term))
            dim = group[0][1]
            tables = list(dict.fromkeys(m.table for m, _ in group))
            definition = next((_definition(d, "") for _, d in group if _definition(d, "")),
                              f"{dtype} dimension {dname}")
            is_time = dtype == "time"
            if is_time:
                grain = group[0][0].dim_grain(dname)
                definition += f" (time dimension{', granularity ' + grain if grain else ''})"
            out.append(Term(
                term=term, kind="dimension", aliases=_aliases(dname, dim.get("label"), term),
                definition=definition, sql=expr, time_column=expr if is_time else None,
                tables=tables))
    return out


def merge_glossaries(base: Glossary | None, override: Glossary | None) -> Glossary | None:
    """``base`` (e.g. from the semantic layer) overridden and extended by ``override`` (the
    hand-written glossary), term by term. Terms match by :func:`term_key` (so a hand-written
    "loss ratio" replaces the semantic ``loss_ratio``); a replaced term keeps its position,
    new terms follow. The override's version and as-of note win."""
    if base is None or override is None:
        return (override or base).model_copy(deep=True) if (override or base) else None
    replacing = {term_key(t.term): t for t in override.terms}
    terms = [replacing.pop(term_key(t.term), t) for t in base.terms]
    done = {term_key(t.term) for t in terms}
    terms += [t for t in override.terms if term_key(t.term) not in done]
    return Glossary(version=override.version, as_of_note=override.as_of_note,
                    terms=[t.model_copy(deep=True) for t in terms])


# --------------------------------------------------------------------------- a project's glossary


def project_glossary(project: Any) -> Glossary | None:
    """The effective glossary of a project: its dbt semantic layer's terms, overridden by its
    glossary file (``paths.glossary``); None when it has neither."""
    override = None
    if project.glossary_path is not None:
        override = load_glossary(project.glossary_path)
    semantic = None
    if (project.dbt_project_dir / "dbt_project.yml").exists():
        from sqleval_pipeline.warehouse import dbt  # dbt's manifest helpers: only when the project has dbt

        manifest_file = dbt.last_manifest(project)
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        if manifest.get("semantic_models"):
            served = {r.unique_id: r.name for r in dbt.served_selection(project, manifest_file).served}
            built = glossary_from_manifest(manifest, served=served)
            semantic = getattr(built, "glossary", built)
            if isinstance(semantic, tuple):
                semantic = semantic[0]
        if semantic is not None:
            return merge_glossaries(semantic, override)
    return override


#: glossary digests computed in this process, by what they are computed from (see below)
_DIGESTS: dict[tuple, str | None] = {}


def _glossary_sources(project: Any) -> tuple:
    """What the effective glossary is read from, by size and time: the project file, its
    glossary file and (dbt projects) the manifest of the last parse or build, as
    :func:`project_glossary` reads it."""
    paths = [project.file]
    if project.glossary_path is not None:
        paths.append(project.glossary_path)
    if (project.dbt_project_dir / "dbt_project.yml").exists():
        from sqleval_pipeline.warehouse import dbt  # dbt's manifest helpers: only when the project has dbt

        paths.append(dbt.last_manifest(project))
    out = []
    for p in paths:
        try:
            st = Path(p).stat()
            out.append((str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(p), None, None))
    return tuple(out)


def glossary_digest(project: Any) -> str | None:
    """A content hash of the project's effective glossary (part of a curated version);
    computed once per process for unchanged sources (a run loads its configurations many
    times)."""
    key = _glossary_sources(project)
    if key not in _DIGESTS:
        g = project_glossary(project)
        if len(_DIGESTS) >= 64:
            _DIGESTS.clear()
        _DIGESTS[key] = None if g is None else hashlib.sha256(g.model_dump_json().encode()).hexdigest()[:16]
    return _DIGESTS[key]
