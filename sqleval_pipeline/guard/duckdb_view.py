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

No serialization is trusted to be complete: the bound plan *folds* lambda bodies
(``list_reduce(l, lambda a, b: a + epoch_ms("current_timestamp"))`` shows a constant where the
clock was read), so every decision that can be taken on the parse tree is taken there. The
parse tree is complete by construction (it is the text, parsed): lambda bodies are walked like
everything else, and an unqualified column reference named like one of DuckDB's value
functions (:data:`VALUE_FUNCTIONS`) counts as a call: a clock or catalog name is refused
unqualified wherever it appears (a column of that name is read as ``t."current_date"``); a
session name (``"user"``) only where it names a served column outside a lambda body.

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
                                other than ``range`` / ``generate_series`` / ``unnest``, or a
                                name the binder turns into a clock/session read
                                (``"current_timestamp"`` naming no served column; any such
                                name inside a lambda body)
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
import duckdb

LAYER = "filter"

NOT_SINGLE_SELECT = "duckdb_not_single_select"
TABLE_NOT_ALLOWED = "duckdb_table_not_allowed"
FUNCTION_NOT_ALLOWED = "duckdb_function_not_allowed"
VIEWS_DISAGREE = "views_disagree"
REASONS = (NOT_SINGLE_SELECT, TABLE_NOT_ALLOWED, FUNCTION_NOT_ALLOWED, VIEWS_DISAGREE)

#: names DuckDB's binder turns into a function call when no column of that name is in scope
#: (``GetSQLValueFunctionName`` in DuckDB's binder): ``SELECT "current_timestamp"`` reads the
#: clock although the parse tree shows a column reference, not a call (and ``"user"``,
#: ``"current_role"`` ... are folded into constants at bind time: the plan shows no call)
VALUE_FUNCTIONS: dict[str, str] = {
    "current_catalog": "current_database", "current_date": "current_date",
    "current_schema": "current_schema", "current_role": "current_role",
    "current_time": "get_current_time", "current_timestamp": "get_current_timestamp",
    "current_user": "current_user", "localtime": "current_localtime",
    "localtimestamp": "current_localtimestamp", "session_user": "session_user", "user": "user",
}
#: value functions whose name is refused unqualified even when a served column has it: the
#: clock and the catalog/schema names. DuckDB's plan gives no sound evidence of which way a
#: name bound — it *folds* a clock read into a constant (``epoch_us("current_timestamp")``
#: shows only ``epoch_us`` over a constant), outside lambdas too — so a column with one of
#: these names is read qualified (``t."current_date"``), which never binds to a function.
#: The other names (``"user"`` ...) fold to the constant ``'duckdb'`` at worst: allowed when
#: a served column has the name.
STRICT_VALUE_FUNCTIONS = frozenset({"current_date", "current_time", "current_timestamp", "localtime",
                                    "localtimestamp", "current_catalog", "current_schema"})
#: functions that call the aggregate named by their second argument (``list_aggregate(l, 'sum')``,
#: and ``list_sum`` ... expand to them): the name must be a string constant naming an allowed
#: aggregate — decided on the parse tree, because the plan folds constant lambda bodies
AGGREGATE_BY_NAME = frozenset({"aggregate", "array_aggr", "array_aggregate", "list_aggr", "list_aggregate"})
#: stands for an aggregate name that is not a string constant (never on an allowlist)
NON_CONSTANT_NAME = "<not a string constant>"
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
    #: column references named like a value function (``"current_timestamp"``), outside any
    #: lambda / inside a lambda body (lambda parameters excluded)
    value_refs: set[str] = field(default_factory=set)
    lambda_value_refs: set[str] = field(default_factory=set)
    #: aggregates named in text by list_aggregate & co (lower-case, or NON_CONSTANT_NAME)
    named_aggregates: set[str] = field(default_factory=set)
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
            allowed_catalogs: Iterable[str] = (),
            columns: Iterable[str] | None = None) -> tuple[DuckDBView, Refusal | None]:
    """Check in stages: statement types and the parse tree first (no binding, so a refused
    table function such as ``read_blob`` is never even bound), then the bound plan.
    ``columns``: the served tables' column names (see :func:`decide`)."""
    kw = {"allowed_schemas": allowed_schemas, "allowed_catalogs": allowed_catalogs, "columns": columns}
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
    words = [w for w in re.split(r"[^A-Za-z]+", error_type) if w]
    cls = getattr(duckdb, "".join(w.title() for w in words) + "Exception", None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = duckdb.Error
    raise cls(f"{' '.join(w.title() for w in words) or 'SQL'} Error: {message}")


def _walk_parse(node: Any, view: DuckDBView) -> None:
    """Every function, table reference and value-function name of the parse tree, lambda
    bodies included (each stack entry carries the lambda parameters in scope, or None
    outside any lambda)."""
    stack: list[tuple[Any, frozenset[str] | None]] = [(node, None)]
    while stack:
        n, params = stack.pop()
        if isinstance(n, list):
            stack.extend((v, params) for v in n)
            continue
        if not isinstance(n, dict):
            continue
        kind = n.get("type")
        if kind == "LAMBDA":
            names = frozenset(_column_ref_names(n.get("lhs")))
            inner = (params or frozenset()) | names
            stack.extend((v, inner) for k, v in n.items() if k != "lhs" and isinstance(v, (dict, list)))
            continue
        if kind == "COLUMN_REF":
            parts = n.get("column_names") or []
            if len(parts) == 1:
                name = str(parts[0]).lower()
                if name in VALUE_FUNCTIONS and not (params and name in params):
                    (view.value_refs if params is None else view.lambda_value_refs).add(name)
        if kind == "TABLE_FUNCTION" and isinstance(n.get("function"), dict):
            fn = n["function"]
            view.parse_table_functions.add(str(fn.get("function_name", "")).lower())
            stack.append((fn.get("arguments") or fn.get("children") or [], params))
            stack.extend((v, params) for k, v in n.items() if k != "function")
            continue
        if kind == "BASE_TABLE":
            view.parse_tables.add((str(n.get("catalog_name") or "").lower(),
                                   str(n.get("schema_name") or "").lower(),
                                   str(n.get("table_name") or "").lower()))
        if "function_name" in n:
            args = n.get("arguments")
            if args is None:
                args = n.get("children") or []
            fname = str(n["function_name"]).lower()
            view.parse_functions.add((fname, len(args)))
            if fname in AGGREGATE_BY_NAME:
                view.named_aggregates.add(_string_constant(args[1] if len(args) > 1 else None))
        cte_map = n.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map") or []:
                if isinstance(entry, dict) and "key" in entry:
                    view.cte_names.add(str(entry["key"]).lower())
        stack.extend((v, params) for v in n.values() if isinstance(v, (dict, list)))


def _string_constant(arg: Any) -> str:
    """The lower-cased text of a string-constant argument, or :data:`NON_CONSTANT_NAME`."""
    expr = arg.get("expression", arg) if isinstance(arg, dict) else None
    if isinstance(expr, dict) and expr.get("class") == "CONSTANT":
        literal = expr.get("literal")
        if isinstance(literal, dict) and literal.get("kind") == "STRING" and isinstance(literal.get("text"), str):
            return literal["text"].lower()
        value = expr.get("value")
        if isinstance(value, dict) and not value.get("is_null") and isinstance(value.get("value"), str):
            return value["value"].lower()
    return NON_CONSTANT_NAME


def _column_ref_names(node: Any) -> list[str]:
    """The single-part column names under ``node`` (a lambda's parameter list)."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
        elif isinstance(n, dict):
            if n.get("type") == "COLUMN_REF" and len(n.get("column_names") or []) == 1:
                out.append(str(n["column_names"][0]).lower())
            stack.extend(v for v in n.values() if isinstance(v, (dict, list)))
    return out


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
           allowed_catalogs: Iterable[str] = (),
           columns: Iterable[str] | None = None) -> Refusal | None:
    """Refuse (see module doc) or return None when DuckDB's view is within the allowlists.

    ``columns`` are the served tables' column names (lower-case). An unqualified column
    reference named like a value function is a call for DuckDB's binder whenever no column of
    that name is in scope: a clock or catalog name (:data:`STRICT_VALUE_FUNCTIONS`) is refused
    wherever it appears; a session name (``"user"``) is allowed only outside lambda bodies and
    when a served column has it. ``None`` (unknown columns) refuses every such name."""
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
    bad_named = sorted(n for n in view.named_aggregates if not _callable(allowlist, n, None))
    if bad_named:
        what = "a computed name" if bad_named[0] == NON_CONSTANT_NAME else f"{bad_named[0]}()"
        return Refusal(FUNCTION_NOT_ALLOWED, f"list_aggregate() and its kind call the aggregate named by their "
                                             f"text; here {what}, which is not an allowed aggregate "
                                             "(the name must be a string constant on the allowlist).",
                       tuple(bad_named))
    value_refusal = _value_function_refusal(view, allowlist, columns)
    if value_refusal is not None:
        return value_refusal
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


def _value_function_refusal(view: DuckDBView, allowlist: Allowlist,
                            columns: Iterable[str] | None) -> Refusal | None:
    served = frozenset(c.lower() for c in columns) if columns is not None else frozenset()
    in_lambda = sorted(n for n in view.lambda_value_refs if not _callable(allowlist, VALUE_FUNCTIONS[n], 0))
    if in_lambda:
        name = in_lambda[0]
        return Refusal(FUNCTION_NOT_ALLOWED,
                       f'Inside a lambda, the name "{name}" can bind to {VALUE_FUNCTIONS[name]}() (the clock '
                       "or the session), and DuckDB's plan does not show lambda bodies; it is refused there. "
                       "Read the column outside the lambda and pass it in as a value.",
                       tuple(VALUE_FUNCTIONS[n] for n in in_lambda))
    outside = sorted(n for n in view.value_refs
                     if (n in STRICT_VALUE_FUNCTIONS or n not in served)
                     and not _callable(allowlist, VALUE_FUNCTIONS[n], 0))
    if outside:
        name = outside[0]
        why = ("wherever no column of that name is in scope DuckDB binds it to "
               f"{VALUE_FUNCTIONS[name]}(), which reads the clock or the catalog; if it is a column, "
               f'qualify it with its table (t."{name}")') if name in STRICT_VALUE_FUNCTIONS else \
            f"it names no served column, so DuckDB binds it to {VALUE_FUNCTIONS[name]}() (the session)"
        return Refusal(FUNCTION_NOT_ALLOWED, f'The unqualified name "{name}" is refused: {why}.',
                       tuple(VALUE_FUNCTIONS[n] for n in outside))
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
