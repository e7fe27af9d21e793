"""Generate the guard's function allowlist (``data/functions.yaml``) from ``duckdb_functions()``.

    .venv/bin/python -m sqleval_pipeline.guard.allowlist_gen > sqleval_pipeline/data/functions.yaml

The allowlist is *derived*, then reviewed and checked in: every scalar, aggregate and window
function and every scalar macro DuckDB offers (with the extensions the worker loads:
``core_functions``, ``icu``, ``json``, ``parquet``) is kept unless it falls in an excluded
family below. Each family has a one-line reason that is written into the YAML. Macros are
judged by their *body*: a macro whose body calls an excluded function, reads the clock
(a bare ``current_timestamp`` ...), or contains a query (``SELECT`` / ``FROM``) is excluded,
to a fixed point (a macro calling an excluded macro is excluded too).

Two purity rules read DuckDB's own metadata rather than names, so a function added by an
upgrade is judged too:

* **state and volatility**: a function DuckDB marks ``has_side_effects`` or ``VOLATILE`` is
  excluded (``setval``/``nextval`` write a sequence, ``vector_type`` reads the engine's
  vectors) unless it is in :data:`REVIEWED_VOLATILE` with the reason it stays;
* **names looked up**: a function with a text parameter that names a catalog object or a
  function (:data:`NAME_PARAMETERS`: ``index_key(path, name)``, ``make_type(name)``,
  ``to_aggregate_state(data, name, ...)``) is excluded — each is an existence oracle for the
  catalog or calls a function the allowlist never saw — unless reviewed in
  :data:`REVIEWED_NAME_PARAMETERS`.

Table functions are excluded except ``range``, ``generate_series`` and ``unnest`` (their size
is left to the sandbox's limits). The clock is closed by construction: :mod:`clock` rewrites
``now()``, ``current_date`` ... into literals at the as-of date *before* DuckDB sees the text,
so no clock reader is needed on the allowlist, and none is on it: a clock source the rewrite
misses is refused instead of reading the machine's date.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

import duckdb

#: Table functions that stay allowed (size is bounded by the sandbox: memory, address space, timeout).
TABLE_FUNCTIONS: tuple[str, ...] = ("range", "generate_series", "unnest")

#: Functions allowed only with at least this many arguments (fewer read the clock).
MIN_ARGS: dict[str, int] = {"age": 2}

#: Volatile or side-effecting functions that stay allowed, with the reason (see module doc).
REVIEWED_VOLATILE: dict[str, str] = {
    "random": "ORDER BY random() sampling is ordinary analytical SQL; reads nothing, and repeated runs expose the variance",
    "setseed": "seeds random() for the rest of the query only (each query has a fresh connection)",
    "error": "raises the caller's own message; reads and writes nothing",
}

#: Parameter names that mean "a catalog object or a function, looked up by this text".
NAME_PARAMETERS = frozenset({"name", "sequence_name", "catalog", "schema", "table", "table_name",
                             "index_name", "type_name", "function_name", "setting", "variable"})

#: Functions with such a parameter that look nothing up, with the reason.
REVIEWED_NAME_PARAMETERS: dict[str, str] = {
    "hive_partition_component": "formats its arguments into a path segment (name=value); looks nothing up",
    **dict.fromkeys(("aggregate", "array_aggr", "array_aggregate", "list_aggr", "list_aggregate"),
                    "calls the aggregate its text names: DuckDB's view requires that text to be a string "
                    "constant naming an allowed aggregate (parse tree), and the bound plan names it too"),
}

#: Excluded families: name -> (reason, full-match name patterns). Order matters only for the report.
EXCLUDED_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "clock": (
        "reads the wall clock; clock.py rewrites now()/current_date/... to the as-of date before "
        "DuckDB sees the text, so a clock reader that reaches DuckDB is one the rewrite missed",
        (r"now", r"today", r"current_date", r"current_time", r"current_timestamp", r"localtime",
         r"localtimestamp", r"current_localtime", r"current_localtimestamp", r"get_current_time",
         r"get_current_timestamp", r"transaction_timestamp", r"statement_timestamp",
         r"current_datetime", r"ago", r"pg_conf_load_time", r"pg_postmaster_start_time")),
    "nondeterministic": (
        "unique ids differ between runs and uuidv7 embeds the machine's clock (uuid_extract_timestamp "
        "reads it back); random()/setseed() stay allowed: ORDER BY random() sampling is ordinary "
        "analytical SQL, reads nothing, and the grader's repeated runs expose the variance",
        (r"uuid", r"uuidv4", r"uuidv7", r"gen_random_uuid", r"uuid_extract_.*", r"reservoir_quantile")),
    "settings_and_session": (
        "reads settings, variables or the session (database, schema, user, query text, ids)",
        (r"current_setting", r"getvariable", r"getenv", r"current_database", r"current_catalog",
         r"current_schema", r"current_schemas", r"current_user", r"current_role", r"session_user",
         r"user", r"current_query", r"current_query_id", r"current_connection_id",
         r"current_transaction_id", r"txid_current", r"in_search_path", r"version", r"platform",
         r"inet_.*", r"pg_backend_pid")),
    "catalog_and_metadata": (
        "reads the catalog, storage or statistics (system views, table/column metadata, sizes)",
        (r"duckdb_.*", r"pragma_.*", r"pg_.*", r"has_.*_privilege", r"col_description",
         r"obj_description", r"shobj_description", r"format_pg_type", r"format_type",
         r"map_to_pg_oid", r"map_type_id_to_pg_oid", r"stats", r"get_block_size", r"nextval",
         r"currval", r"icu_calendar_names", r"sqlite_.*", r"information_schema.*",
         r"histogram_values", r"summary")),
    "files_urls_blobs": (
        "reads files, URLs, blobs or external resources (paths, globs, parquet/csv/json readers)",
        (r"read_.*", r"glob", r"parquet_.*", r"sniff_csv", r"parse_path", r"parse_dirpath",
         r"parse_filename", r"path_join", r"iceberg_.*", r"delta_.*", r"postgres_.*", r"mysql_.*",
         r"ducklake_.*", r".*_external_resource.*", r"load_aws_credentials", r"arrow_scan.*",
         r"python_.*", r"pandas_scan", r"seq_scan", r"index_scan")),
    "sql_in_strings": (
        "runs or parses SQL held in a string (a second parser the guard cannot see through)",
        (r"query", r"query_table", r"json_execute_serialized_sql", r"json_deserialize_sql",
         r"json_serialize_sql", r"json_serialize_plan", r"sql_auto_complete",
         r".*_grammar_extension")),
    "secrets_logs_profiling_extensions": (
        "secrets, logging, profiling, checkpoints, extensions: state of the engine, not data",
        (r"(.*_)?secrets?(_.*)?", r"write_log", r"parse_duckdb_log_message", r".*_logging",
         r"truncate_duckdb_logs", r".*_profiling", r"checkpoint", r"force_checkpoint",
         r"load_extension", r"install_extension", r".*_extension")),
    "test_and_resource": (
        "test generators and sleeps (no analytical use; sleeps only burn the timeout)",
        (r"test_.*", r"repeat_row", r"sleep_ms", r"pg_sleep")),
    "state_and_volatile": (
        "DuckDB marks it volatile or side-effecting (sequence writes, engine internals); see REVIEWED_VOLATILE",
        ()),
    "names_looked_up": (
        "looks a catalog object or a function up by a text argument (an existence oracle, or a call "
        "the allowlist never saw)",
        (r"index_key", r"make_type", r"to_aggregate_state", r"setval", r"nextval", r"currval")),
    "internal": (
        "engine internals (table-filter pushdown, storage compression, COPY helpers), not for queries",
        (r"__internal_.*",)),
}

_CALL = re.compile(r'"?([A-Za-z_][A-Za-z_0-9]*)"?\s*\(')
_QUERY = re.compile(r"\b(select|from)\b", re.IGNORECASE)
_CLOCK_WORDS = re.compile(r"\b(current_timestamp|current_date|current_time|localtime|localtimestamp|now)\b",
                          re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")


def _family_of(name: str) -> str | None:
    for family, (_reason, patterns) in EXCLUDED_FAMILIES.items():
        if any(re.fullmatch(p, name) for p in patterns):
            return family
    return None


def _catalog(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str | None]]:
    return con.execute(
        "SELECT DISTINCT lower(function_name), function_type, macro_definition "
        "FROM duckdb_functions() ORDER BY 1, 2, 3 NULLS FIRST").fetchall()


def impure(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Function name -> the purity rule it breaks (module doc), from DuckDB's own metadata."""
    out: dict[str, str] = {}
    for name, effects, stability, params, types in con.execute(
            "SELECT lower(function_name), has_side_effects, stability, parameters, parameter_types "
            "FROM duckdb_functions()").fetchall():
        if (effects or stability == "VOLATILE") and name not in REVIEWED_VOLATILE:
            out.setdefault(name, "state_and_volatile")
        named = [p for p, t in zip(params or [], types or []) if str(p).lower() in NAME_PARAMETERS
                 and str(t).upper() in ("VARCHAR", "STRUCT", "ANY")]
        if named and name not in REVIEWED_NAME_PARAMETERS:
            out.setdefault(name, "names_looked_up")
    return out


def generate(con: duckdb.DuckDBPyConnection | None = None) -> dict:
    """The allowlist document (see module doc)."""
    con = con or duckdb.connect()
    rows = _catalog(con)
    excluded: dict[str, set[str]] = {f: set() for f in EXCLUDED_FAMILIES}
    excluded["table_functions"] = set()
    excluded["macro_body"] = set()
    excluded["pragma"] = set()
    candidates: set[str] = set()
    macro_bodies: dict[str, list[str]] = {}
    by_rule = impure(con)
    for name, ftype, body in rows:
        family = _family_of(name) or (by_rule.get(name) if ftype not in ("table", "table_macro", "pragma")
                                      else None)
        if family is not None:
            excluded[family].add(name)
            continue
        if ftype == "table":
            if name not in TABLE_FUNCTIONS:
                excluded["table_functions"].add(name)
            continue
        if ftype in ("table_macro",):
            excluded["table_functions"].add(name)
            continue
        if ftype == "pragma":
            excluded["pragma"].add(name)
            continue
        if ftype == "macro":
            macro_bodies.setdefault(name, []).append(body or "")
        if not re.fullmatch(r"[a-z_][a-z_0-9]*", name):
            continue  # operators (+, ~~ ...) are not called by name in the parse tree
        candidates.add(name)
    # macros: judged by their bodies, to a fixed point
    changed = True
    while changed:
        changed = False
        for name, bodies in macro_bodies.items():
            if name not in candidates:
                continue
            for body in bodies:
                text = _STRING.sub("''", body)
                called = {m.group(1).lower() for m in _CALL.finditer(text)}
                bad = [c for c in called if c not in candidates and c not in _SYNTAX
                       and c not in TABLE_FUNCTIONS]
                if bad or _QUERY.search(text) or _CLOCK_WORDS.search(text):
                    candidates.discard(name)
                    excluded["macro_body"].add(name)
                    changed = True
                    break
    # the allowed table functions are also callable in a select list (unnest(list) is syntax
    # there, range/generate_series are list functions too)
    candidates.update(TABLE_FUNCTIONS)
    for name in TABLE_FUNCTIONS:
        excluded["table_functions"].discard(name)
    for fam in excluded.values():
        fam.difference_update(candidates)
    version = con.execute("SELECT library_version FROM pragma_version()").fetchone()[0]
    return {"duckdb_version": version, "allowed": sorted(candidates),
            "table_functions": list(TABLE_FUNCTIONS), "min_args": dict(MIN_ARGS),
            "excluded": excluded}


#: words that look like calls in a macro body or a plan but are syntax (CAST(x AS T), types)
_SYNTAX = frozenset({"cast", "try_cast", "coalesce", "case", "when", "then", "else", "exists",
                     "in", "not", "and", "or", "decimal", "numeric", "struct", "map", "union",
                     "enum", "lambda", "varchar", "interval", "filter", "over", "row", "columns",
                     "unpack", "is"})


def _q(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z_0-9]*", name) else f'"{name}"'


def render(doc: dict) -> str:
    """The YAML text (hand-written layout: one name per line, a reason per excluded family)."""
    reasons = {f: r for f, (r, _p) in EXCLUDED_FAMILIES.items()}
    reasons["table_functions"] = ("table functions other than range/generate_series/unnest read "
                                  "files, the catalog, settings or run SQL in strings")
    reasons["macro_body"] = "macro whose body reads the clock, the catalog or runs a query"
    reasons["pragma"] = "pragmas are commands (settings, catalog, storage), never query functions"
    out = [
        "# The guard's function allowlist (generated, then reviewed and checked in).",
        "#   .venv/bin/python -m sqleval_pipeline.guard.allowlist_gen > sqleval_pipeline/data/functions.yaml",
        "# Untrusted SQL may call only the functions listed under `allowed` (scalar, aggregate,",
        "# window functions and scalar macros) and the table functions under `table_functions`.",
        "# Both the statement filter (sqlglot) and DuckDB's own view (parse tree + bound plan) check",
        "# against this list; a policy override can only narrow it (denied_functions).",
        f"duckdb_version: {doc['duckdb_version']}",
        "table_functions: [" + ", ".join(doc["table_functions"]) + "]",
        "min_args:  # fewer arguments read the clock (age(x) = age(now(), x))",
    ]
    out += [f"  {k}: {v}" for k, v in sorted(doc["min_args"].items())]
    out.append("excluded:")
    for fam, names in doc["excluded"].items():
        out.append(f"  {fam}:")
        out.append(f"    reason: {reasons[fam]!r}".replace("'", '"') if "'" not in reasons[fam]
                   else f"    reason: {reasons[fam]!r}")
        out.append("    names: [" + ", ".join(_q(n) for n in sorted(names)) + "]")
    out.append(f"allowed:  # {len(doc['allowed'])} functions")
    out += [f"  - {_q(n)}" for n in doc["allowed"]]
    return "\n".join(out) + "\n"


def main(argv: Iterable[str] | None = None) -> None:
    sys.stdout.write(render(generate()))


if __name__ == "__main__":
    main()
