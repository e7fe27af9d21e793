"""Layer 1, the statement filter: decide from the SQL text alone whether it may run at all.

The filter parses with sqlglot (dialect ``duckdb``) and refuses, with a reason code and a
human sentence, anything that is not exactly one read-only query over allowlisted tables:

=========================  ===============================================================
reason                     when
=========================  ===============================================================
``not_text``               the input is not a string
``empty``                  no statement at all (only whitespace, comments or semicolons)
``too_large``              more UTF-8 bytes than ``policy.max_sql_bytes``
``control_character``      a NUL or other control character (the text DuckDB sees could
                           differ from the text that was checked)
``parse_error``            sqlglot cannot tokenize or parse it (fails closed)
``too_deep``               nesting deeper than 100 brackets, or deep enough to raise
                           RecursionError (fails closed)
``too_complex``            more than 20,000 tokens, or a shape whose parse cost grows with
                           its size (chained method calls, deeply nested lambdas): bounds.py
``literal_too_large``      a numeric literal over 100 characters or with an exponent beyond
                           ±1000, judged on its text before any arithmetic (bounds.py)
``filter_budget_exceeded`` the checks took longer than the filter's time budget (1 s, at
                           most the statement timeout; budget.py)
``multiple_statements``    more than one statement (stacked queries)
``write_statement``        the root is DML (INSERT, UPDATE, DELETE, MERGE, COPY)
``ddl_statement``          the root is DDL (CREATE, DROP, ALTER, TRUNCATE ...)
``command_statement``      the root is a command (SET, RESET, PRAGMA, LOAD, INSTALL, ATTACH,
                           CALL, EXPORT, USE, DESCRIBE, SHOW, CHECKPOINT ...)
``root_not_allowed``       any other root that is not SELECT / UNION / INTERSECT / EXCEPT
``nested_write``           DML or DDL anywhere inside the tree (writable CTE ...)
``nested_command``         a command node anywhere inside the tree
``select_into``            SELECT ... INTO
``parameter``              a bind parameter / session variable (``$1``, ``?``, ``@@x``)
``unsupported_construct``  a node type outside the allowlist of query constructs
``table_function``         a function or LATERAL call used as a table, other than ``range``,
                           ``generate_series`` and ``unnest``
``series_too_large``       ``range`` / ``generate_series`` in FROM with constant bounds that
                           produce more than ``policy.max_series_rows`` rows (series.py)
``file_reference``         a table reference that names a file or URL (``FROM 'x.csv'``)
``qualifier_not_allowed``  a catalog/schema qualifier other than ``main`` / the snapshot
``table_not_allowed``      a table that is not on the allowlist (after CTE resolution)
``unresolved_table``       a table reference the scope analysis did not account for
``scope_error``            the scope analysis failed (fails closed)
``denied_function``        a function on the policy's denylist (an override narrowing further)
``function_not_allowed``   a function not on the function allowlist (``guard/functions.yaml``;
                           clock calls pass here because :mod:`clock` rewrites them next)
=========================  ===============================================================

Node types are *allowlisted*: the root must be a SELECT or a set operation, and every node in
the tree must be an expression (:class:`sqlglot.exp.Condition`, which includes functions,
columns, literals and operators) or one of a fixed set of query-structure nodes. Tables are
resolved per scope (:func:`sqleval_pipeline.dialect.tables.table_refs`): a CTE name is valid only
in the scopes that can see it, and a non-recursive CTE referring to its own name reads the
*outside* table, as DuckDB does. Identifiers are compared lower-cased, because DuckDB matches
them case-insensitively even when quoted.

>>> from sqleval_pipeline.guard.policy import load_policy
>>> f = StatementFilter(load_policy(served=["fct_orders"]), database_names={"snap-c898c146fddf"})
>>> f.check("SELECT count(*) FROM fct_orders").allowed
True
>>> v = f.check("SELECT 1; DROP TABLE fct_orders")
>>> v.reason, v.message
('multiple_statements', 'Exactly one statement is allowed; found 2 (stacked statements are refused).')
>>> f.check("WITH x AS (SELECT * FROM hr.salaries) SELECT * FROM x").reason
'qualifier_not_allowed'
>>> f.check("SELECT * FROM 'data/orders.csv'").reason
'file_reference'
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from sqlglot import exp
from sqlglot.errors import SqlglotError

from sqleval_pipeline.dialect.tables import ScopeError, table_refs
from sqleval_pipeline.guard._names import function_names
from sqleval_pipeline.guard.bounds import GUARD_DIALECT, check_tokens, may_read_clock
from sqleval_pipeline.guard.budget import BUDGET_REASON, FILTER_BUDGET_S, Budget, BudgetExceeded
from sqleval_pipeline.guard.characters import scan
from sqleval_pipeline.guard.clock import CLOCK_FUNCTIONS, residual_clock_calls
from sqleval_pipeline.guard.lru import LRU, deep_size, text_key
from sqleval_pipeline.guard.policy import GuardPolicy
from sqleval_pipeline.guard.series import UNSIZEABLE, series_length
from sqleval_pipeline.errors import SqlevalError

LAYER = "filter"

#: Root node types a statement may have (an allowlist).
ALLOWED_ROOTS: tuple[type[exp.Expression], ...] = (exp.Select, exp.Union, exp.Intersect, exp.Except)

#: Query-structure node types allowed anywhere, besides :class:`exp.Condition` (expressions).
ALLOWED_STRUCTURE: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Select", "Union", "Intersect", "Except", "Subquery", "From", "Join", "Table", "TableAlias",
        "Alias", "Aliases", "Identifier", "Star", "With", "CTE", "Where", "Group", "Having", "Qualify",
        "Order", "Ordered", "Limit", "Offset", "Fetch", "LimitOptions", "WindowSpec", "Lambda",
        "Tuple", "Distinct", "DataType", "DataTypeParam", "Interval", "IntervalSpan", "Var",
        "Comprehension", "TableSample", "Lateral", "Values", "GroupingSets", "Rollup", "Cube",
        "Filter", "WithinGroup", "IgnoreNulls", "RespectNulls", "Slice", "JSONPath", "JSONPathRoot",
        "JSONPathKey", "JSONPathSubscript", "JSONPathWildcard", "JSONPathSlice", "JSONPathPart",
        "Pivot", "PivotAlias", "PivotAny", "UnpivotColumns", "ColumnDef", "ColumnPosition",
        "Window", "Column", "Dot", "Paren", "Semicolon", "Hint",
    )
    if hasattr(exp, name)
)

#: sqlglot function nodes that stand for syntax, not for a DuckDB function called by name
#: (CAST, CASE, EXTRACT, list/struct literals, subscripts ...). DuckDB's own view checks
#: the functions they bind to.
SYNTAX_FUNCTIONS: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name)
    for name in ("Cast", "TryCast", "Case", "If", "Extract", "Array", "Struct", "Map", "VarMap",
                 "Interval", "Bracket", "Coalesce", "Nullif", "Explode", "Unnest", "Collate",
                 "JSONExtract", "JSONExtractScalar", "Lambda", "ArrayAll", "ArrayAny", "Columns",
                 "PropertyEQ", "ToMap", "CastToStrType", "Convert", "Exists")
    if hasattr(exp, name)
)

#: Node types that make a statement a write, a command or a definition, wherever they appear.
_DML = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Copy)
_DDL_NAMES = ("Create", "Drop", "Alter", "TruncateTable", "Comment", "Grant", "Revoke", "Analyze",
              "Refresh", "Cache", "Uncache", "LoadData", "AlterColumn", "AlterRename",
              "RenameTable", "Returning", "OnConflict")
_DDL = tuple(getattr(exp, n) for n in _DDL_NAMES if hasattr(exp, n))
_COMMAND_NAMES = ("Command", "Set", "SetItem", "Pragma", "Use", "Install", "Attach", "Detach",
                  "Describe", "Summarize", "Show", "Transaction", "Commit", "Rollback", "Kill",
                  "Export", "Execute", "ExecuteSql", "Lock", "Directory", "Block", "Heredoc",
                  "Stream", "UserDefinedFunction", "Property", "Properties", "Tag")
_COMMANDS = tuple(getattr(exp, n) for n in _COMMAND_NAMES if hasattr(exp, n))
_PARAMETERS = tuple(getattr(exp, n) for n in ("Placeholder", "Parameter", "SessionParameter")
                    if hasattr(exp, n))

_PATHLIKE = re.compile(r"[./\\:*?~]|^\$|^(https?|s3|gcs?|az|hf|file)$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class FilterVerdict:
    """What the filter decided. ``reason`` is None when the statement is allowed.

    ``tables`` lists the allowlisted tables the statement reads (lower-cased); ``elapsed_ms``
    is the filter's own cost. For an allowed text, ``clock_calls`` are the clock calls left in
    it (:func:`~.clock.residual_clock_calls`; empty once pinned) and ``clock_tokens`` says
    whether :func:`~.clock.pin_clock` could change it at all (False: it leaves it as it is).
    A verdict keeps no parse tree: it is cached, and a tree costs hundreds of bytes per character.
    """

    allowed: bool
    reason: str | None = None
    message: str | None = None
    tables: tuple[str, ...] = ()
    elapsed_ms: float = 0.0
    layer: str = LAYER
    detail: dict = field(default_factory=dict)
    clock_calls: tuple[str, ...] = ()
    clock_tokens: bool = True


class Refusal(SqlevalError):
    """Raised inside the filter to stop at the first refusal."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def _describe(node: exp.Expression) -> str:
    name = type(node).__name__
    if isinstance(node, exp.Command):
        return _short(str(node.this).upper(), 60)
    if isinstance(node, exp.Column) and not node.table:  # a bare keyword: CHECKPOINT, ABORT ...
        return _short(node.name.upper(), 60) or name.upper()
    return name.upper()


class StatementFilter:
    """The statement filter for one policy and one serving database.

    ``database_names``: catalog names that mean the serving snapshot (its DuckDB database
    name, i.e. the snapshot id); a qualifier naming any other catalog is refused.
    ``budget_s``: the time budget per text (default :data:`~.budget.FILTER_BUDGET_S`), never
    more than the policy's statement timeout.
    """

    #: verdicts cached (entries, and bytes they keep alive: keys are SHA-256 digests)
    CACHE_ENTRIES = 4096
    CACHE_BYTES = 16 << 20

    def __init__(self, policy: GuardPolicy, database_names: Iterable[str] = (),
                 budget_s: float | None = None):
        self.policy = policy
        self.catalogs = frozenset(n.lower() for n in database_names) | policy.catalogs
        self.schemas = policy.schemas
        self.tables = policy.tables
        self.budget_s = min(FILTER_BUDGET_S if budget_s is None else budget_s, policy.statement_timeout_s)
        self._cache: LRU[bytes, FilterVerdict] = LRU(self.CACHE_ENTRIES, max_bytes=self.CACHE_BYTES,
                                                     weigh=_verdict_bytes)

    # ---------------------------------------------------------------- public

    def check(self, sql: object, *, budget_s: float | None = None) -> FilterVerdict:
        """Check one SQL text; never raises (every failure is a refusal).

        Verdicts are cached by the exact text (the filter is a pure function of the text for
        its policy): a repeated text costs a lookup, reported as its ``elapsed_ms``.
        ``budget_s`` lowers the time budget for this call (a budget refusal under a lowered
        budget is not cached, nor one where the wall-clock ceiling ran out: both depend on
        the call or the machine's load, not on the text)."""
        t0 = time.perf_counter()
        key = text_key(sql) if isinstance(sql, str) else None
        if key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                return replace(hit, elapsed_ms=_ms(t0))
        limit = self.budget_s if budget_s is None else min(budget_s, self.budget_s)
        verdict = self._check_uncached(sql, t0, Budget(limit, t0))
        if key is not None and (verdict.reason != BUDGET_REASON
                                or (limit >= self.budget_s and verdict.detail.get("ran_out") == "cpu")):
            self._cache.put(key, verdict)
        return verdict

    def _check_uncached(self, sql: object, t0: float, budget: Budget) -> FilterVerdict:
        # layer 0: characters, before any parser (characters.py)
        if isinstance(sql, str) and len(sql) <= self.policy.max_sql_bytes and (bad := scan(sql)):
            return FilterVerdict(False, bad.filter_reason, bad.message, elapsed_ms=_ms(t0), detail=bad.as_detail())
        try:
            budget.check("characters")
            tables, (clock_calls, clock_tokens) = self._check(sql, budget)
        except Refusal as r:
            return FilterVerdict(False, r.reason, r.message, elapsed_ms=_ms(t0))
        except BudgetExceeded as b:
            return FilterVerdict(False, BUDGET_REASON, b.message, elapsed_ms=_ms(t0), detail=b.as_detail())
        except RecursionError:
            return FilterVerdict(False, "too_deep", "The statement is nested too deeply to be checked.",
                                 elapsed_ms=_ms(t0))
        except Exception as exc:  # noqa: BLE001 - fail closed on anything unexpected
            return FilterVerdict(False, "parse_error",
                                 f"The statement could not be analysed ({type(exc).__name__}: "
                                 f"{_short(str(exc))}).", elapsed_ms=_ms(t0))
        return FilterVerdict(True, tables=tuple(sorted(tables)), elapsed_ms=_ms(t0),
                             clock_calls=clock_calls, clock_tokens=clock_tokens)

    # ---------------------------------------------------------------- steps

    def _check(self, sql: object, budget: Budget | None = None) -> tuple[set[str], tuple[tuple[str, ...], bool]]:
        """(tables read, (clock calls left, whether pin_clock could change the text)); raises
        :class:`Refusal`, :class:`~.budget.BudgetExceeded` or RecursionError."""
        budget = budget or Budget(self.budget_s)
        if not isinstance(sql, str):
            raise Refusal("not_text", f"The statement must be text, not {type(sql).__name__}.")
        size = len(sql.encode("utf-8", errors="surrogatepass"))
        if size > self.policy.max_sql_bytes:
            raise Refusal("too_large", f"The statement is {size} bytes; the limit is "
                                       f"{self.policy.max_sql_bytes}.")
        if _CONTROL.search(sql):
            raise Refusal("control_character", "The statement contains a NUL or control character.")
        try:
            tokens = GUARD_DIALECT.tokenize(sql)
        except SqlglotError as exc:
            raise Refusal("parse_error", f"The statement does not parse as DuckDB SQL: {_short(str(exc))}.") from None
        budget.check("tokens")
        bound = check_tokens(tokens)  # sizes and shapes, before the parser sees them (bounds.py)
        if bound is not None:
            raise Refusal(*bound)
        budget.check("bounds")
        root = self._parse_one(sql, tokens)
        budget.check("parse")
        self._check_root(root)
        self._walk(root, budget)
        tables = self._resolve_tables(root, budget)
        clock_calls = tuple(residual_clock_calls(root))
        budget.check("clock")
        return tables, (clock_calls, may_read_clock(tokens))

    def _parse_one(self, sql: str, tokens: list) -> exp.Expression:
        try:
            parsed = GUARD_DIALECT.parser().parse(tokens, sql)
        except RecursionError:
            raise
        except SqlglotError as exc:
            raise Refusal("parse_error", f"The statement does not parse as DuckDB SQL: {_short(str(exc))}.") from None
        statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
        if not statements:
            raise Refusal("empty", "There is no statement to run.")
        if len(statements) > 1:
            raise Refusal("multiple_statements",
                          f"Exactly one statement is allowed; found {len(statements)} "
                          "(stacked statements are refused).")
        return statements[0]

    def _check_root(self, root: exp.Expression) -> None:
        node = root
        while isinstance(node, exp.Subquery) and not node.args.get("alias"):
            node = node.this  # a parenthesised query: judge what is inside
        if isinstance(node, ALLOWED_ROOTS):
            return
        what = _describe(node)
        if isinstance(node, _DML):
            raise Refusal("write_statement", f"{what} writes data; only queries (SELECT) are allowed.")
        if isinstance(node, _DDL):
            raise Refusal("ddl_statement", f"{what} changes the schema; only queries (SELECT) are allowed.")
        if isinstance(node, _COMMANDS) or (isinstance(node, exp.Column) and not node.table):
            raise Refusal("command_statement", f"{what} is a command; only queries (SELECT) are allowed.")
        raise Refusal("root_not_allowed", f"A {what} statement is not a query; only SELECT, UNION, "
                                          "INTERSECT and EXCEPT are allowed.")

    def _walk(self, root: exp.Expression, budget: Budget) -> None:
        policy = self.policy
        for k, node in enumerate(root.walk()):
            if not k & 255:
                budget.check("walk")
            if isinstance(node, exp.Into):
                raise Refusal("select_into", "SELECT ... INTO creates a table; only queries are allowed.")
            if isinstance(node, _DML) or isinstance(node, _DDL):
                raise Refusal("nested_write", f"The query contains {_describe(node)}, which writes or "
                                              "changes the schema (e.g. a writable CTE).")
            if isinstance(node, _COMMANDS):
                raise Refusal("nested_command", f"The query contains a {_describe(node)} command.")
            if isinstance(node, _PARAMETERS):
                raise Refusal("parameter", "Bind parameters and session variables are not allowed.")
            if isinstance(node, exp.Func):
                self._check_function(node)
                if isinstance(node, exp.Unnest) and _in_table_position(node) \
                        and not policy.table_function_allowed("unnest"):
                    raise Refusal("table_function", "UNNEST used as a table is not allowed.")
                continue
            if isinstance(node, exp.Condition) or isinstance(node, ALLOWED_STRUCTURE):
                if isinstance(node, exp.Lateral) and not isinstance(node.this, exp.Subquery):
                    raise Refusal("table_function", "LATERAL is allowed only with a subquery.")
                if isinstance(node, exp.Values) and not isinstance(node.parent, (exp.From, exp.Join,
                                                                                   exp.Subquery)):
                    raise Refusal("unsupported_construct", "VALUES is allowed only as a derived table.")
                continue
            raise Refusal("unsupported_construct",
                          f"The construct {type(node).__name__} is not on the allowlist of query constructs.")

    def _check_function(self, node: exp.Func) -> None:
        """The function allowlist (guard/functions.yaml, narrowed by the policy's denylist)."""
        policy = self.policy
        names = function_names(node)
        for name in sorted(names):
            if policy.function_denied(name):
                raise Refusal("denied_function",
                              f"The function {_short(name, 80)}() is not allowed (introspection, files, "
                              "settings or SQL in strings).")
        if names & CLOCK_FUNCTIONS:
            return  # rewritten to the as-of date by clock.pin_clock; a survivor is refused later
        if isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if not policy.function_allowed(name, len(node.expressions)):
                raise Refusal("function_not_allowed",
                              f"The function {_short(name, 80)}() is not on the function allowlist (or not with "
                              f"{len(node.expressions)} argument(s)).")
            return
        if isinstance(node, SYNTAX_FUNCTIONS) or isinstance(node, (exp.Binary, exp.Unary)):
            return  # syntax or an operator: DuckDB's view checks what it binds to
        if any(policy.function_allowed(n) for n in names):
            if "age" in names and len([a for a in node.args.values() if a is not None]) < 2:
                raise Refusal("function_not_allowed", "age() with one argument reads the clock; "
                                                      "pass both timestamps.")
            return
        label = _func_label(node)
        raise Refusal("function_not_allowed", f"The function {_short(label, 80)} is not on the function allowlist.")

    # ---------------------------------------------------------------- tables

    def _resolve_tables(self, root: exp.Expression, budget: Budget) -> set[str]:
        for t in root.find_all(exp.Table):  # table functions / string tables first: clearest reason
            if not isinstance(t.this, exp.Identifier):
                self._check_series(t.this)
        budget.check("series")
        try:  # CTEs resolved per scope (dialect/tables.py); the budget checked at each scope
            refs = table_refs(root, functions=True, strict=True, tick=lambda: budget.check("tables"))
        except ScopeError as exc:  # fail closed
            raise Refusal("scope_error", f"The query's scopes could not be analysed: {_short(str(exc))}.") from None
        read = {self._check_table(r.node) for r in refs if r.scoped and not r.function}
        missing = [r for r in refs if not r.scoped]
        if missing:
            raise Refusal("unresolved_table", f"The table reference {_short(missing[0].node.sql(dialect='duckdb'))} "
                                              "could not be resolved to a scope.")
        return read

    def _check_series(self, node: exp.Expression) -> None:
        """A table function in FROM: only range / generate_series (series.py), within the
        policy's ``max_series_rows`` when its bounds are constants."""
        label = _func_label(node)
        name = _short(label, 80)
        if not (isinstance(node, exp.GenerateSeries)
                and self.policy.table_function_allowed(label.rstrip("()"))):
            raise Refusal("table_function", f"The table function {name} is not allowed; "
                                            "query the allowlisted tables directly.")
        n = series_length(node)
        if n is not None and n >= UNSIZEABLE:
            raise Refusal("series_too_large", f"The table function {name} has a constant bound too large "
                                              f"to size; at most {self.policy.max_series_rows:,} rows "
                                              "are allowed.")
        if n is not None and n > self.policy.max_series_rows:
            raise Refusal("series_too_large", f"The table function {name} would produce {n:,} rows; "
                                              f"at most {self.policy.max_series_rows:,} are allowed.")

    def _check_table(self, table: exp.Table) -> str:
        name = table.name
        lname = name.lower()
        db = table.args.get("db")
        catalog = table.args.get("catalog")
        if catalog is None and (db is None or db.name.lower() in self.schemas | self.catalogs) \
                and lname in self.tables:
            return lname  # the common case: an allowlisted table, bare or in the serving schema
        shown = _short(table.sql(dialect="duckdb"))
        if lname not in self.tables and (_PATHLIKE.search(name) or _is_string_table(table)):
            raise Refusal("file_reference", f"The table reference {shown} names a file or URL; only "
                                            "allowlisted tables can be read.")
        if catalog is not None:
            if catalog.name.lower() not in self.catalogs or db is None or db.name.lower() not in self.schemas:
                raise Refusal("qualifier_not_allowed", f"The table {shown} is qualified with another "
                                                       "database; only the serving snapshot's main "
                                                       "schema can be read.")
        elif db is not None and db.name.lower() not in self.schemas | self.catalogs:
            raise Refusal("qualifier_not_allowed", f"The table {shown} is in schema {_short(db.name)!r}; "
                                                   "only the serving snapshot's main schema can be read.")
        if lname not in self.tables:
            raise Refusal("table_not_allowed", f"The table {_short(name)!r} is not on the allowlist.")
        return lname


def _verdict_bytes(key: bytes, v: FilterVerdict) -> int:
    """What a cached verdict keeps alive, over-estimated (4 bytes per character of its
    strings; the detail dict measured): cheaper than :func:`~.lru.deep_size` on every miss."""
    strings = [v.reason or "", v.message or "", *v.tables, *v.clock_calls]
    return 700 + len(key) + sum(80 + 4 * len(x) for x in strings) + (deep_size(v.detail) if v.detail else 0)


def _is_string_table(table: exp.Table) -> bool:
    ident = table.this
    return isinstance(ident, exp.Identifier) and bool(ident.args.get("quoted")) and (
        " " in ident.name or ident.name == "" or ident.name != ident.name.strip()
    )


def _in_table_position(node: exp.Expression) -> bool:
    parent = node.parent
    return isinstance(parent, (exp.From, exp.Join, exp.Lateral, exp.Table))


def _func_label(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return f"{node.name}()"
    if isinstance(node, exp.Func):
        # the name as DuckDB spells this call (range() stays range(), not sqlglot's
        # generate_series()), else sqlglot's first name for the node type
        try:
            m = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(", node.sql(dialect="duckdb"))
        except Exception:  # noqa: BLE001 - a message must never fail
            m = None
        return f"{(m.group(1) if m else type(node).sql_names()[0]).lower()}()"
    return type(node).__name__


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


__all__ = ["FilterVerdict", "StatementFilter", "ALLOWED_ROOTS", "ALLOWED_STRUCTURE"]
