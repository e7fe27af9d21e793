"""DuckDB's own view of a statement, checked against the guard's allowlists before it runs.

The statement filter judges the text through sqlglot; DuckDB executes it through its own
parser and binder. Wherever the two disagree (Unicode whitespace, scoping of a recursive
CTE's own name, macros, quoted keywords that bind to clock functions) an attacker can show
sqlglot one query and run another. This module asks DuckDB itself, on the worker's fresh,
locked connection, *before* executing anything:

1. **statement types** (``extract_statements``): exactly one SELECT;
2. **the parse tree** (``json_serialize_sql``): every function called by name (macros
   before expansion, table functions, arity) and every table reference (with schema and
   catalog); CTE names are collected so a reference to a CTE is not mistaken for a table;
3. **the unoptimized bound plan** (``json_serialize_plan(sql, optimize := false)``, a
   structured plan on the same connection, so the same search path): the tables actually
   scanned after binding (``LOGICAL_GET`` of ``seq_scan`` with catalog/schema/table), the
   table functions that scan (views expand here: ``sqlite_master`` shows up as
   ``duckdb_tables``), and every bound scalar, aggregate and window function (a quoted
   ``"current_timestamp"`` binds to ``get_current_timestamp``).

   Measured: ``EXPLAIN (FORMAT json)`` with ``explain_output='all'`` also shows the
   unoptimized plan, but as *strings* in which a projection prints its alias:
   ``SELECT "current_timestamp" AS t`` shows ``t``, hiding the clock read. The serialized
   plan has no such gap (and needs no setting: ``explain_output`` stays untouched).

The parse tree is checked *before* anything is bound (:func:`inspect`): a refused table
function (``read_blob``, ``query``) is never bound, so its bind-time side effects (globs,
nested binding) never happen.

:func:`decide` refuses, with a reason code, anything not on the allowlists:

==============================  ===========================================================
``duckdb_not_single_select``    DuckDB does not parse the text as exactly one SELECT
``duckdb_table_not_allowed``    a scanned table or table-producing operator that is not an
                                allowlisted served table (system views included)
``duckdb_function_not_allowed`` a function (by name, in the parse tree or the bound plan)
                                that is not on the function allowlist, or a table function
                                other than ``range`` / ``generate_series`` / ``unnest``
``views_disagree``              (executor) sqlglot's tables differ from DuckDB's scans
==============================  ===========================================================

Every view is computed on the query's own fresh connection from the query's own text. The
worker keeps the verdict per exact text (``sandbox._VIEW_CACHE``): for one worker the
snapshot, the policy and the connection settings never change, so the same text always gets
the same view. The plan is used only to read names; its content never leaves the worker (a
refusal carries the reason code and the offending names).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

LAYER = "filter"

NOT_SINGLE_SELECT = "duckdb_not_single_select"
TABLE_NOT_ALLOWED = "duckdb_table_not_allowed"
FUNCTION_NOT_ALLOWED = "duckdb_function_not_allowed"
VIEWS_DISAGREE = "views_disagree"
REASONS = (NOT_SINGLE_SELECT, TABLE_NOT_ALLOWED, FUNCTION_NOT_ALLOWED, VIEWS_DISAGREE)

#: functions only the binder itself inserts (never resolvable by name from SQL text)
_BINDER_INTERNAL = frozenset({"__cast"})
_IDENT = re.compile(r"[a-z_][a-z_0-9$]*\Z")
_OPERATOR = re.compile(r"[^\w\s\"']+\Z")


class Allowlist(Protocol):
    """What :func:`decide` needs from a policy (a :class:`~sqleval_pipeline.guard.policy.GuardPolicy`)."""

    def function_allowed(self, name: str, nargs: int | None = None) -> bool: ...
    def table_function_allowed(self, name: str) -> bool: ...


@dataclass(frozen=True)
class Refusal:
    """A refusal by DuckDB's view: a reason code, a sentence and the offending names."""

    code: str
    message: str
    names: tuple[str, ...] = ()


@dataclass
class DuckDBView:
    """What DuckDB makes of one SQL text (see module doc). Names are lower-cased."""

    statement_types: tuple[str, ...] = ()
    database: str | None = None
    #: (name, number of arguments) of every function called by name in the parse tree
    parse_functions: set[tuple[str, int]] = field(default_factory=set)
    parse_table_functions: set[str] = field(default_factory=set)
    #: (catalog, schema, table) of every table reference in the parse tree ('' when absent)
    parse_tables: set[tuple[str, str, str]] = field(default_factory=set)
    cte_names: set[str] = field(default_factory=set)
    parse_error: str | None = None
    #: (catalog, schema, table) of every table the bound plan scans
    plan_tables: set[tuple[str, str, str]] = field(default_factory=set)
    plan_table_functions: set[str] = field(default_factory=set)
    plan_functions: set[str] = field(default_factory=set)
    plan_error: str | None = None
    parse_ms: float = 0.0
    plan_ms: float = 0.0

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables DuckDB scans (bare, lower-cased names), sorted."""
        return tuple(sorted({t for _c, _s, t in self.plan_tables}))

    @property
    def functions(self) -> tuple[str, ...]:
        """Every function name DuckDB sees (parse tree, table functions, bound plan), sorted."""
        return tuple(sorted({n for n, _ in self.parse_functions} | self.parse_table_functions
                            | self.plan_table_functions | self.plan_functions))


# --------------------------------------------------------------------------- computing the view


def compute_view(con: Any, sql: str, statements: list | None = None) -> DuckDBView:
    """DuckDB's full view of ``sql`` on connection ``con`` (parse tree and bound plan).

    Binder and catalog errors of the plan step are raised as the DuckDB exception the
    statement itself would raise. Nothing is executed. (The worker uses :func:`inspect`,
    which checks the parse tree *before* binding anything.)
    """
    view = parse_view(con, sql, statements)
    if view.statement_types == ("SELECT",) and not view.parse_error:
        add_plan(con, sql, view)
    return view


def inspect(con: Any, sql: str, statements: list, policy: Allowlist, tables: Iterable[str], *,
            allowed_schemas: Iterable[str] = ("main",),
            allowed_catalogs: Iterable[str] = ()) -> tuple[DuckDBView, Refusal | None]:
    """Check in stages: statement types and the parse tree first (no binding, so a refused
    table function such as ``read_blob`` is never even bound), then the bound plan."""
    kw = {"allowed_schemas": allowed_schemas, "allowed_catalogs": allowed_catalogs}
    view = parse_view(con, sql, statements)
    refusal = decide(view, policy, tables, **kw)
    if refusal is not None:
        return view, refusal
    add_plan(con, sql, view)
    return view, decide(view, policy, tables, **kw)


def parse_view(con: Any, sql: str, statements: list | None = None) -> DuckDBView:
    """Statement types and the parse tree (``json_serialize_sql``): nothing is bound."""
    if statements is None:
        statements = con.extract_statements(sql)
    view = DuckDBView(statement_types=tuple(str(st.type).rsplit(".", 1)[-1] for st in statements))
    if view.statement_types != ("SELECT",):
        return view
    t0 = time.perf_counter()
    text = con.execute("SELECT json_serialize_sql(?::VARCHAR), current_database()", [sql]).fetchone()
    view.database = str(text[1]).lower()
    try:
        doc = json.loads(text[0])
    except (TypeError, ValueError) as exc:
        view.parse_error = f"unreadable parse tree ({exc})"
        doc = None
    if isinstance(doc, dict):
        if doc.get("error"):
            view.parse_error = str(doc.get("error_message") or doc.get("error_type") or "error")
        elif len(doc.get("statements") or ()) != 1:
            view.parse_error = f"{len(doc.get('statements') or ())} statements in the parse tree"
        else:
            _walk_parse(doc.get("statements"), view)
    elif doc is not None:
        view.parse_error = "unexpected parse tree"
    view.parse_ms = (time.perf_counter() - t0) * 1000
    return view


def add_plan(con: Any, sql: str, view: DuckDBView) -> None:
    """The unoptimized bound plan (``json_serialize_plan(..., optimize := false)``), on the
    same connection (same search path). Structured, so an alias cannot hide what an
    expression binds to (EXPLAIN prints ``t`` for ``"current_timestamp" AS t``)."""
    t1 = time.perf_counter()
    raw = con.execute("SELECT json_serialize_plan(?::VARCHAR, skip_null := true, skip_empty := true, "
                      "skip_default := true, optimize := false)", [sql]).fetchone()[0]
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError) as exc:
        view.plan_error = f"unreadable plan ({exc})"
        return
    if not isinstance(doc, dict):
        view.plan_error = "unexpected plan"
        return
    if doc.get("error"):
        _raise_as_duckdb(str(doc.get("error_type") or ""), str(doc.get("error_message") or ""))
    plans = doc.get("plans") or []
    if len(plans) != 1:
        view.plan_error = f"{len(plans)} plans"
        return
    try:
        _walk_plan(plans, view)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        view.plan_error = f"unreadable plan ({type(exc).__name__})"
    view.plan_ms = (time.perf_counter() - t1) * 1000


def _raise_as_duckdb(error_type: str, message: str) -> None:
    """Raise the DuckDB exception the statement itself would raise (binder, catalog ...)."""
    import duckdb

    words = [w for w in re.split(r"[^A-Za-z]+", error_type) if w]
    cls = getattr(duckdb, "".join(w.title() for w in words) + "Exception", None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = duckdb.Error
    raise cls(f"{' '.join(w.title() for w in words) or 'SQL'} Error: {message}")


def _walk_parse(node: Any, view: DuckDBView) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
            continue
        if not isinstance(n, dict):
            continue
        kind = n.get("type")
        if kind == "TABLE_FUNCTION" and isinstance(n.get("function"), dict):
            fn = n["function"]
            view.parse_table_functions.add(str(fn.get("function_name", "")).lower())
            stack.append(fn.get("arguments") or fn.get("children") or [])
            stack.extend(v for k, v in n.items() if k != "function")
            continue
        if kind == "BASE_TABLE":
            view.parse_tables.add((str(n.get("catalog_name") or "").lower(),
                                   str(n.get("schema_name") or "").lower(),
                                   str(n.get("table_name") or "").lower()))
        if "function_name" in n:
            args = n.get("arguments")
            if args is None:
                args = n.get("children") or []
            view.parse_functions.add((str(n["function_name"]).lower(), len(args)))
        cte_map = n.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map") or []:
                if isinstance(entry, dict) and "key" in entry:
                    view.cte_names.add(str(entry["key"]).lower())
        stack.extend(v for v in n.values() if isinstance(v, (dict, list)))


def _walk_plan(node: Any, view: DuckDBView) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
            continue
        if not isinstance(n, dict):
            continue
        kind = str(n.get("type") or "")
        qname = n.get("qname")
        if isinstance(qname, dict):
            path = [str(p).lower() for p in qname.get("path") or []]
            name = path[-1] if path else ""
            if kind == "LOGICAL_GET":
                if name == "seq_scan":
                    fd = n.get("function_data") or {}
                    view.plan_tables.add((str(fd.get("catalog") or "").lower(),
                                          str(fd.get("schema") or "").lower(),
                                          str(fd.get("table") or "").lower()))
                else:
                    view.plan_table_functions.add(name)
            elif kind in _PLAN_FUNCTION_TYPES or kind.startswith("WINDOW_"):
                view.plan_functions.add(name)
        elif kind == "LOGICAL_GET":
            view.plan_table_functions.add("<unnamed scan>")  # fail closed
        stack.extend(v for v in n.values() if isinstance(v, (dict, list)))


_PLAN_FUNCTION_TYPES = frozenset({"BOUND_FUNCTION", "BOUND_AGGREGATE", "AGGREGATE"})


# --------------------------------------------------------------------------- the decision


def decide(view: DuckDBView, allowlist: Allowlist, allowed_tables: Iterable[str], *,
           allowed_schemas: Iterable[str] = ("main",),
           allowed_catalogs: Iterable[str] = ()) -> Refusal | None:
    """Refuse (see module doc) or return None when DuckDB's view is within the allowlists."""
    tables = frozenset(t.lower() for t in allowed_tables)
    schemas = frozenset(s.lower() for s in allowed_schemas)
    catalogs = frozenset(c.lower() for c in allowed_catalogs) | ({view.database} if view.database else set())
    if view.statement_types != ("SELECT",):
        return Refusal(NOT_SINGLE_SELECT, f"DuckDB parses this text as {list(view.statement_types) or 'no statement'}; "
                                          "exactly one SELECT is allowed.")
    if view.parse_error:
        return Refusal(NOT_SINGLE_SELECT, f"DuckDB's parse tree could not be checked: {view.parse_error[:200]}.")
    if view.plan_error:
        return Refusal(NOT_SINGLE_SELECT, f"DuckDB's plan could not be checked: {view.plan_error}.")
    # 1. the parse tree: names as written (macros before expansion, arity)
    bad_tf = sorted(n for n in view.parse_table_functions if not allowlist.table_function_allowed(n))
    if bad_tf:
        return Refusal(FUNCTION_NOT_ALLOWED, f"The table function {bad_tf[0]}() is not allowed "
                                             "(only range, generate_series and unnest).", tuple(bad_tf))
    bad_fn = sorted({n for n, k in view.parse_functions if not _callable(allowlist, n, k)})
    if bad_fn:
        return Refusal(FUNCTION_NOT_ALLOWED, f"The function {bad_fn[0]}() is not on the function allowlist "
                                             "(or not with this number of arguments).", tuple(bad_fn))
    bad_ref = sorted(".".join(p for p in ref if p) for ref in view.parse_tables
                     if not _table_ref_ok(ref, tables, view.cte_names, schemas, catalogs))
    if bad_ref:
        return Refusal(TABLE_NOT_ALLOWED, f"The table {bad_ref[0]!r} is not an allowlisted served table.",
                       tuple(bad_ref))
    # 2. the bound plan: what is actually scanned and called after binding
    bad_scan = sorted(".".join(p for p in ref if p) for ref in view.plan_tables
                      if not _scan_ok(ref, tables, schemas, catalogs))
    bad_scan += sorted(n for n in view.plan_table_functions if not allowlist.table_function_allowed(n))
    if bad_scan:
        return Refusal(TABLE_NOT_ALLOWED, f"DuckDB would read {bad_scan[0]!r}, which is not an allowlisted "
                                          "served table (system views and catalog functions included).",
                       tuple(bad_scan))
    bad_bound = sorted(n for n in view.plan_functions if not _callable(allowlist, n, None))
    if bad_bound:
        return Refusal(FUNCTION_NOT_ALLOWED, f"The statement binds to {bad_bound[0]}(), which is not on the "
                                             "function allowlist (e.g. a quoted keyword reading the clock).",
                       tuple(bad_bound))
    return None


def _callable(allowlist: Allowlist, name: str, nargs: int | None) -> bool:
    if not _IDENT.match(name):
        return bool(_OPERATOR.match(name))  # operators (+, ~~, ->>) are called by symbol
    if name in _BINDER_INTERNAL:
        return True
    return allowlist.function_allowed(name, nargs)


def _table_ref_ok(ref: tuple[str, str, str], tables: frozenset[str], ctes: set[str],
                  schemas: frozenset[str], catalogs: frozenset[str] | set[str]) -> bool:
    catalog, schema, table = ref
    if catalog and catalog not in catalogs:
        return False
    if schema and schema not in schemas and not (not catalog and schema in catalogs):
        return False
    if catalog or schema:
        return table in tables  # a qualified name never means a CTE
    return table in tables or table in ctes


def _scan_ok(ref: tuple[str, str, str], tables: frozenset[str], schemas: frozenset[str],
             catalogs: frozenset[str] | set[str]) -> bool:
    catalog, schema, table = ref
    return table in tables and (not schema or schema in schemas) and (not catalog or catalog in catalogs)


def refusal_reply(refusal: Refusal, view: DuckDBView, elapsed_ms: float) -> dict:
    """The worker's reply for a refusal (no plan content leaves the worker, only names)."""
    return {"ok": False, "guard_refusal": refusal.code, "error_message": refusal.message,
            "duckdb_tables": list(view.tables), "duckdb_functions": list(view.functions),
            "duckdb_offending": list(refusal.names),
            "elapsed_ms": elapsed_ms}


__all__ = ["DuckDBView", "Refusal", "compute_view", "inspect", "parse_view", "add_plan", "decide",
           "refusal_reply", "REASONS",
           "NOT_SINGLE_SELECT", "TABLE_NOT_ALLOWED", "FUNCTION_NOT_ALLOWED", "VIEWS_DISAGREE"]
