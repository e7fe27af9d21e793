"""What the dialect rules (:mod:`sqleval_pipeline.dialect.rules`) know about a statement: the
rewrite and refusal records, the type class and SQLite affinity of a DuckDB type, and the
names in scope at each node (tables, aliases, CTE and derived-table columns, with their types
from the served schema).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqleval_pipeline.errors import SqlevalError


Schema = Mapping[str, Sequence[tuple[str, str]]]


@dataclass(frozen=True)
class Rewrite:
    """One change of meaning-preserving translation: a rule code and the fragment it touched.

    >>> str(Rewrite("integer_division", "a / b: both integers, truncated as in SQLite"))
    'integer_division: a / b: both integers, truncated as in SQLite'
    """

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


class Refusal(SqlevalError):
    """The query cannot be translated faithfully; ``reason`` is a short code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
              "UINTEGER", "UBIGINT", "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "LONG",
              "SHORT", "SIGNED")


NUMERIC_CLASSES = ("int", "real")


def type_class(duckdb_type: str) -> str:
    """The coarse class of a DuckDB type string.

    >>> [type_class(t) for t in ("BIGINT", "DECIMAL(10,2)", "VARCHAR", "DATE", "BOOLEAN", "BLOB")]
    ['int', 'real', 'text', 'temporal', 'bool', 'other']
    >>> type_class("DECIMAL(9,0)")
    'int'
    """
    t = duckdb_type.strip().upper()
    base = t.split("(")[0].strip()
    if base in INTEGER_TYPES:
        return "int"
    if base in ("DECIMAL", "NUMERIC"):
        m = re.match(r"\w+\s*\(\s*\d+\s*,\s*(\d+)\s*\)", t)
        return "int" if m and int(m.group(1)) == 0 else "real"
    if base in ("DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8", "DOUBLE PRECISION"):
        return "real"
    if base in ("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "NVARCHAR", "UUID"):
        return "text"
    if base.startswith(("DATE", "TIME", "TIMESTAMP", "INTERVAL")):
        return "temporal"
    if base in ("BOOLEAN", "BOOL", "LOGICAL"):
        return "bool"
    return "other"


def class_of_cast(to: exp.DataType) -> str:
    return type_class(to.sql(dialect="duckdb"))


@dataclass(frozen=True)
class Info:
    """What SQLite's comparison rules need about an operand."""

    cls: str | None          # storage class, None when unknown
    affinity: str | None     # "numeric", "text" or None (no affinity)
    literal: bool = False


UNKNOWN_INFO = Info(None, None)


class ScopeNames:
    """Column resolution over sqlglot scopes, case-insensitive."""

    def __init__(self, tree: exp.Expr, schema: dict[str, dict[str, str]] | None) -> None:
        self.schema = schema
        try:
            self.scopes = traverse_scope(tree)
        except (OptimizeError, RecursionError) as exc:
            raise Refusal("scope", f"cannot resolve the query's scopes: {exc}") from None
        self.scope_of: dict[int, Scope] = {}
        for scope in self.scopes:
            for node in scope.walk():
                if isinstance(node, exp.Column):
                    self.scope_of[id(node)] = scope
        self._out: dict[int, dict[str, str | None] | None] = {}

    # output columns of a scope: name -> class (None unknown); None: the list is unknown
    def outputs(self, scope: Scope) -> dict[str, str | None] | None:
        key = id(scope)
        if key not in self._out:
            self._out[key] = None  # recursion guard
            self._out[key] = self._outputs(scope)
        return self._out[key]

    def _outputs(self, scope: Scope) -> dict[str, str | None] | None:
        q = scope.expression
        if isinstance(q, exp.SetOperation):
            left = q.left
            while isinstance(left, exp.SetOperation):
                left = left.left
            for s in scope.set_operation_scopes:
                if s.expression is left or any(n is left for n in s.expression.walk()):
                    return self.outputs(s)
            return self.outputs(scope.set_operation_scopes[0]) if scope.set_operation_scopes else None
        if not isinstance(q, exp.Select):
            return None
        out: dict[str, str | None] = {}
        for proj in q.selects:
            if isinstance(proj, exp.Star):
                for name in scope.selected_sources:
                    cols = self.source_columns(scope, name)
                    if cols is None:
                        return None
                    out.update(cols)
                continue
            if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star):
                cols = self.source_columns(scope, proj.table.lower())
                if cols is None:
                    return None
                out.update(cols)
                continue
            name = proj.alias_or_name.lower()
            out.setdefault(name, self.info(proj, scope).cls)
        return out

    def source_columns(self, scope: Scope, name: str) -> dict[str, str | None] | None:
        entry = lookup_name(scope.selected_sources, name)
        if entry is None:
            return None
        _node, source = entry
        if isinstance(source, Scope):
            return self.outputs(source)
        if isinstance(source, exp.Table):
            if self.schema is None:
                return None
            cols = self.schema.get(source.name.lower())
            return None if cols is None else dict(cols)
        return None

    def resolve(self, col: exp.Column) -> tuple[str, str | None, Scope | None]:
        """('column', class, owning scope) | ('alias', class, scope) | ('unknown', None, _)
        | ('none', None, None): not resolvable."""
        scope = self.scope_of.get(id(col))
        if scope is None:
            return "unknown", None, None
        name = col.name.lower()
        table = col.table.lower()
        s: Scope | None = scope
        while s is not None:
            if table:
                if lookup_name(s.selected_sources, table) is not None:
                    cols = self.source_columns(s, table)
                    if cols is None:
                        return "unknown", None, s
                    return ("column", cols.get(name), s) if name in cols else ("none", None, s)
            else:
                unknown = False
                for src in s.selected_sources:
                    cols = self.source_columns(s, src)
                    if cols is None:
                        unknown = True
                    elif name in cols:
                        return "column", cols[name], s
                alias = self._alias(s, name, exclude=col)
                if alias is not None:
                    return "alias", alias, s
                if unknown:
                    return "unknown", None, s
            s = outer_scope(s)
        return "none", None, None

    def _alias(self, scope: Scope, name: str, exclude: exp.Expr) -> str | None | bool:
        q = scope.expression
        if isinstance(q, exp.SetOperation):
            outs = self.outputs(scope)
            return outs.get(name) if outs and name in outs else None
        if not isinstance(q, exp.Select):
            return None
        for proj in q.selects:
            if isinstance(proj, exp.Alias) and proj.alias.lower() == name:
                if any(n is exclude for n in proj.walk()):
                    return None
                return self.info(proj.this, scope).cls or "?"
        return None

    def is_table_name(self, col: exp.Column) -> bool:
        scope = self.scope_of.get(id(col))
        s = scope
        while s is not None:
            if lookup_name(s.sources, col.name.lower()) is not None:
                return True
            s = s.parent
        return False

    # ----------------------------------------------------------------- expression info
    def info(self, e: exp.Expr, scope: Scope | None = None) -> Info:
        if isinstance(e, exp.Alias):
            return self.info(e.this, scope)
        if isinstance(e, exp.Paren):  # SQLite drops parentheses: the affinity stays
            return self.info(e.this, scope)
        if isinstance(e, exp.Column):
            kind, cls, _s = self.resolve(e)
            if kind == "column" and cls:
                return Info(cls, affinity_of(cls))
            if kind == "alias" and cls and cls != "?":
                return Info(cls, None)
            return UNKNOWN_INFO
        if isinstance(e, exp.Literal):
            if e.is_string:
                return Info("text", None, True)
            return Info("int" if e.is_int else "real", None, True)
        if isinstance(e, exp.Neg):
            inner = self.info(e.this, scope)
            return Info(inner.cls, None, inner.literal and isinstance(e.this, exp.Literal))
        if isinstance(e, exp.Null):
            return UNKNOWN_INFO
        if isinstance(e, exp.Cast | exp.TryCast):
            cls = class_of_cast(e.to)
            return Info(cls, affinity_of(cls))
        if isinstance(e, exp.IntDiv):
            return Info("int", None)
        if isinstance(e, exp.Div):
            a, b = self.info(e.left).cls, self.info(e.right).cls
            if a in NUMERIC_CLASSES and b in NUMERIC_CLASSES:
                return Info("int" if a == b == "int" and e.args.get("typed") else "real", None)
            return UNKNOWN_INFO
        if isinstance(e, exp.Add | exp.Sub | exp.Mul | exp.Mod):
            a, b = self.info(e.left).cls, self.info(e.right).cls
            if a == b == "int":
                return Info("int", None)
            if a in NUMERIC_CLASSES and b in NUMERIC_CLASSES:
                return Info("real", None)
            return UNKNOWN_INFO
        if isinstance(e, exp.DPipe | exp.Concat | exp.Upper | exp.Lower | exp.Substring
                      | exp.Trim | exp.GroupConcat | exp.TimeToStr | exp.Replace):
            return Info("text", None)
        if isinstance(e, exp.Count | exp.Length):
            return Info("int", None)
        if isinstance(e, exp.Avg | exp.Round):
            return Info("real", None)
        if isinstance(e, exp.Sum | exp.Abs):
            inner = self.info(e.this).cls
            return Info(inner if inner in NUMERIC_CLASSES else None, None)
        if isinstance(e, exp.Max | exp.Min) and not e.expressions:
            return Info(self.info(e.this).cls, None)
        if isinstance(e, exp.Subquery | exp.Select):
            q = e.this if isinstance(e, exp.Subquery) else e
            if isinstance(q, exp.Select) and len(q.selects) == 1:
                inner_scope = next((s for s in self.scopes if s.expression is q), None)
                return Info(self.info(q.selects[0], inner_scope).cls, None)
            return UNKNOWN_INFO
        if isinstance(e, exp.Predicate | exp.Connector | exp.Not):
            return Info("int", None)  # SQLite: 1 / 0
        if isinstance(e, exp.Case | exp.If | exp.Coalesce):
            branches = branches_of(e)
            classes = {self.info(b).cls for b in branches if not isinstance(b, exp.Null)}
            return Info(classes.pop(), None) if len(classes) == 1 else UNKNOWN_INFO
        return UNKNOWN_INFO


def branches_of(e: exp.Expr) -> list[exp.Expr]:
    if isinstance(e, exp.Case):
        out = [i.args["true"] for i in e.args.get("ifs") or []]
        if e.args.get("default") is not None:
            out.append(e.args["default"])
        return out
    if isinstance(e, exp.If):
        return [x for x in (e.args.get("true"), e.args.get("false")) if x is not None]
    return [e.this, *e.expressions]


def affinity_of(cls: str) -> str | None:
    if cls in NUMERIC_CLASSES:
        return "numeric"
    if cls == "text":
        return "text"
    return None


def lookup_name(d: Mapping, name: str):
    name = name.lower()
    for k, v in d.items():
        if k.lower() == name:
            return v
    return None


def outer_scope(scope: Scope) -> Scope | None:
    """The scope whose columns ``scope`` may reference (a correlated subquery's), else None.

    A subquery in an expression may be correlated; a derived table or a CTE sees nothing of
    its parent (LATERAL aside, which Spider-style SQL does not use); a branch of a set
    operation sees what the operation sees."""
    s = scope
    while s.parent is not None and s.parent.is_set_operation and not s.is_subquery:
        s = s.parent
    return s.parent if s.is_subquery else None


def wrap_node(node: exp.Expr, build) -> exp.Expr:
    """Replace ``node`` by ``build(node)`` (which contains it) without copying it."""
    holder = exp.Null()
    node.replace(holder)
    new = build(node)
    holder.replace(new)
    return new


def normalize_schema(schema: Schema | None) -> dict[str, dict[str, str]] | None:
    if schema is None:
        return None
    return {str(t).lower(): {str(c).lower(): type_class(str(ty)) for c, ty in cols}
            for t, cols in schema.items()}


def fragment(e: exp.Expr, limit: int = 80) -> str:
    text = e.sql(dialect="sqlite")
    return text if len(text) <= limit else text[: limit - 1] + "…"
