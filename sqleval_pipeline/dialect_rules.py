"""Schema-aware fidelity rules applied while translating another dialect's SQL to DuckDB.

sqlglot translates syntax; these rules keep *meaning* where SQLite (and, for some rules,
Postgres, T-SQL and MySQL) answer a query differently from DuckDB. Each rule rewrites the
parsed tree in place and reports a :class:`Rewrite`; a construct that no simple DuckDB text
answers the same way raises :class:`Refusal` with a reason code. ``docs/dialects.md``
documents every rule code and reason code.

Rule codes (the ``rule`` of a :class:`Rewrite`):

- ``sqlite_double_quoted_string``: a double-quoted token that names no column, alias or
  table in scope is a string literal in SQLite (and becomes one).
- ``sqlite_double_quoted_assumed_identifier``: the same token without a schema (or next to
  a table the schema does not know) cannot be decided; it stays an identifier.
- ``bare_column_arg_max`` / ``bare_column_arg_min``: a bare column of an aggregate query
  with exactly one ``max()``/``min()`` takes the value of the row holding it.
- ``bare_column_any_value``: any other bare column takes the value of some row of its group.
- ``affinity_numeric_literal``: a numeric-looking text literal compared with a numeric
  column becomes a number.
- ``affinity_text_literal``: a number compared with a text column becomes SQLite's text
  rendering of it.
- ``affinity_text_cast``: a numeric-typed expression compared with a text column is cast to
  text; ``affinity_numeric_cast``: a text column or expression compared with a numeric
  column is cast to DOUBLE (a value that is not a number then fails loudly in DuckDB).
- ``integer_division``: ``int / int`` truncates (DuckDB ``//``); ``division_types_unknown``:
  an operand's type is unknown, DuckDB's float division is kept.
- ``like_case_insensitive``: LIKE / NOT LIKE become ILIKE / NOT ILIKE;
  ``like_non_text_subject``: a numeric or temporal LIKE subject is cast to text first.
- ``null_ordering``: ORDER BY keys get the source dialect's NULL placement explicitly.
- ``modulo_by_zero``: ``a % b`` is NULL for ``b = 0`` as in SQLite (DuckDB raises);
  ``modulo_integer_operands``: SQLite's ``%`` truncates real operands to integers first.
- ``cast_integer_truncates``: SQLite's CAST(x AS INTEGER) truncates; DuckDB's rounds.
- ``round_decimal``: ROUND of a real rounds its decimal value (SQLite: round(1.65, 1) = 1.7,
  DuckDB's double: 1.6).
- ``aggregate_text_as_number``: avg()/sum() of a text column reads it as numbers.
- ``boolean_as_integer``: a top-level predicate column is 1/0 in SQLite (DuckDB: BOOLEAN).

Refusal reasons: ``affinity``, ``bare_column_star``, ``scope``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope

Schema = Mapping[str, Sequence[tuple[str, str]]]

#: dialects whose double-quoted tokens fall back to string literals (MySQL's reader already
#: reads "x" as a string, so it needs no rule)
_DQ_STRING_DIALECTS = {"sqlite"}
#: dialects whose LIKE ignores ASCII case
_LIKE_CI_DIALECTS = {"sqlite", "mysql"}
#: dialects that return 1/0 for predicates
_INT_BOOL_DIALECTS = {"sqlite", "mysql"}


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


class Refusal(Exception):
    """The query cannot be translated faithfully; ``reason`` is a short code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


# ---------------------------------------------------------------------------------------
# types: a coarse class per expression ("int", "real", "text", "temporal", "bool", "other")

_INT_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
              "UINTEGER", "UBIGINT", "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "LONG",
              "SHORT", "SIGNED")
_NUMERIC = ("int", "real")


def type_class(duckdb_type: str) -> str:
    """The coarse class of a DuckDB type string.

    >>> [type_class(t) for t in ("BIGINT", "DECIMAL(10,2)", "VARCHAR", "DATE", "BOOLEAN", "BLOB")]
    ['int', 'real', 'text', 'temporal', 'bool', 'other']
    >>> type_class("DECIMAL(9,0)")
    'int'
    """
    t = duckdb_type.strip().upper()
    base = t.split("(")[0].strip()
    if base in _INT_TYPES:
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


def _cast_class(to: exp.DataType) -> str:
    return type_class(to.sql(dialect="duckdb"))


@dataclass(frozen=True)
class Info:
    """What SQLite's comparison rules need about an operand."""

    cls: str | None          # storage class, None when unknown
    affinity: str | None     # "numeric", "text" or None (no affinity)
    literal: bool = False


_UNKNOWN = Info(None, None)


# ---------------------------------------------------------------------------------------
# scopes and name resolution


class _Names:
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
        entry = _lookup(scope.selected_sources, name)
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
                if _lookup(s.selected_sources, table) is not None:
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
            s = _outer(s)
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
            if _lookup(s.sources, col.name.lower()) is not None:
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
                return Info(cls, _affinity(cls))
            if kind == "alias" and cls and cls != "?":
                return Info(cls, None)
            return _UNKNOWN
        if isinstance(e, exp.Literal):
            if e.is_string:
                return Info("text", None, True)
            return Info("int" if e.is_int else "real", None, True)
        if isinstance(e, exp.Neg):
            inner = self.info(e.this, scope)
            return Info(inner.cls, None, inner.literal and isinstance(e.this, exp.Literal))
        if isinstance(e, exp.Null):
            return _UNKNOWN
        if isinstance(e, exp.Cast | exp.TryCast):
            cls = _cast_class(e.to)
            return Info(cls, _affinity(cls))
        if isinstance(e, exp.IntDiv):
            return Info("int", None)
        if isinstance(e, exp.Div):
            a, b = self.info(e.left).cls, self.info(e.right).cls
            if a in _NUMERIC and b in _NUMERIC:
                return Info("int" if a == b == "int" and e.args.get("typed") else "real", None)
            return _UNKNOWN
        if isinstance(e, exp.Add | exp.Sub | exp.Mul | exp.Mod):
            a, b = self.info(e.left).cls, self.info(e.right).cls
            if a == b == "int":
                return Info("int", None)
            if a in _NUMERIC and b in _NUMERIC:
                return Info("real", None)
            return _UNKNOWN
        if isinstance(e, exp.DPipe | exp.Concat | exp.Upper | exp.Lower | exp.Substring
                      | exp.Trim | exp.GroupConcat | exp.TimeToStr | exp.Replace):
            return Info("text", None)
        if isinstance(e, exp.Count | exp.Length):
            return Info("int", None)
        if isinstance(e, exp.Avg | exp.Round):
            return Info("real", None)
        if isinstance(e, exp.Sum | exp.Abs):
            inner = self.info(e.this).cls
            return Info(inner if inner in _NUMERIC else None, None)
        if isinstance(e, exp.Max | exp.Min) and not e.expressions:
            return Info(self.info(e.this).cls, None)
        if isinstance(e, exp.Subquery | exp.Select):
            q = e.this if isinstance(e, exp.Subquery) else e
            if isinstance(q, exp.Select) and len(q.selects) == 1:
                inner_scope = next((s for s in self.scopes if s.expression is q), None)
                return Info(self.info(q.selects[0], inner_scope).cls, None)
            return _UNKNOWN
        if isinstance(e, exp.Predicate | exp.Connector | exp.Not):
            return Info("int", None)  # SQLite: 1 / 0
        if isinstance(e, exp.Case | exp.If | exp.Coalesce):
            branches = _branches(e)
            classes = {self.info(b).cls for b in branches if not isinstance(b, exp.Null)}
            return Info(classes.pop(), None) if len(classes) == 1 else _UNKNOWN
        return _UNKNOWN


def _branches(e: exp.Expr) -> list[exp.Expr]:
    if isinstance(e, exp.Case):
        out = [i.args["true"] for i in e.args.get("ifs") or []]
        if e.args.get("default") is not None:
            out.append(e.args["default"])
        return out
    if isinstance(e, exp.If):
        return [x for x in (e.args.get("true"), e.args.get("false")) if x is not None]
    return [e.this, *e.expressions]


def _affinity(cls: str) -> str | None:
    if cls in _NUMERIC:
        return "numeric"
    if cls == "text":
        return "text"
    return None


def _lookup(d: Mapping, name: str):
    name = name.lower()
    for k, v in d.items():
        if k.lower() == name:
            return v
    return None


def _outer(scope: Scope) -> Scope | None:
    """The scope whose columns ``scope`` may reference (a correlated subquery's), else None.

    A subquery in an expression may be correlated; a derived table or a CTE sees nothing of
    its parent (LATERAL aside, which Spider-style SQL does not use); a branch of a set
    operation sees what the operation sees."""
    s = scope
    while s.parent is not None and s.parent.is_set_operation and not s.is_subquery:
        s = s.parent
    return s.parent if s.is_subquery else None


def _wrap(node: exp.Expr, build) -> exp.Expr:
    """Replace ``node`` by ``build(node)`` (which contains it) without copying it."""
    holder = exp.Null()
    node.replace(holder)
    new = build(node)
    holder.replace(new)
    return new


# ---------------------------------------------------------------------------------------
# the rules


def apply_rules(tree: exp.Expr, dialect: str, sql: str,
                schema: Schema | None) -> list[Rewrite]:
    """Rewrite ``tree`` (parsed as ``dialect``) in place; the rewrites made, in order."""
    norm = _normalize_schema(schema)
    rewrites: list[Rewrite] = []
    if dialect in _DQ_STRING_DIALECTS:
        rewrites += _double_quoted(tree, sql, norm)
    if dialect == "sqlite":
        rewrites += _bare_columns(tree, norm)
        rewrites += _affinity_rules(tree, norm)
        rewrites += _casts(tree, norm)
        rewrites += _modulo(tree, norm)
        rewrites += _round(tree, norm)
        rewrites += _text_aggregates(tree, norm)
    if any(isinstance(d, exp.Div) and d.args.get("typed") for d in tree.find_all(exp.Div)):
        rewrites += _division(tree, norm)
    if dialect in _LIKE_CI_DIALECTS:
        rewrites += _like(tree, norm, dialect)
    if dialect in _INT_BOOL_DIALECTS:
        rewrites += _booleans(tree)
    rewrites += _null_ordering(tree, dialect)
    return rewrites


def _normalize_schema(schema: Schema | None) -> dict[str, dict[str, str]] | None:
    if schema is None:
        return None
    return {str(t).lower(): {str(c).lower(): type_class(str(ty)) for c, ty in cols}
            for t, cols in schema.items()}


def _frag(e: exp.Expr, limit: int = 80) -> str:
    text = e.sql(dialect="sqlite")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- rule 1: double-quoted tokens


def _double_quoted(tree: exp.Expr, sql: str, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for col in list(tree.find_all(exp.Column)):
        ident = col.this
        if col.table or not isinstance(ident, exp.Identifier) or not ident.quoted:
            continue
        start = ident.meta.get("start")
        if start is None or start >= len(sql) or sql[start] != '"':
            continue  # [x] and `x` are always identifiers
        if isinstance(col.parent, exp.Dot | exp.Table) or col.find_ancestor(exp.Table):
            continue
        kind, _cls, _scope = names.resolve(col)
        if kind in ("column", "alias") or names.is_table_name(col):
            continue
        if kind == "unknown":
            why = ("no schema was given" if schema is None
                   else "a table in scope is not in the schema")
            out.append(Rewrite("sqlite_double_quoted_assumed_identifier",
                               f'"{ident.name}" kept as an identifier ({why}; SQLite reads it '
                               "as a string when no column of that name is in scope)"))
            continue
        col.replace(exp.Literal.string(ident.name))
        out.append(Rewrite("sqlite_double_quoted_string",
                           f'"{ident.name}" is a string in SQLite (no column, alias or table '
                           f"named {ident.name} in scope)"))
    return out


# ---- rule 2: bare columns


def _in_aggregate(node: exp.Expr, stop: exp.Expr) -> bool:
    p = node.parent
    while p is not None and p is not stop:
        if isinstance(p, exp.AggFunc) and not isinstance(p.parent, exp.Window):
            return True
        p = p.parent
    return False


def _aggregates(select: exp.Select, scope: Scope) -> list[exp.AggFunc]:
    found = []
    for node in scope.walk():
        if isinstance(node, exp.AggFunc) and not isinstance(node.parent, exp.Window) \
                and not _in_aggregate(node, select):
            found.append(node)
    return found


def _bare_columns(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    for scope in names.scopes:  # resolve every output before any rewrite changes one
        names.outputs(scope)
    out: list[Rewrite] = []
    for scope in names.scopes:
        sel = scope.expression
        if not isinstance(sel, exp.Select):
            continue
        group = sel.args.get("group")
        aggs = _aggregates(sel, scope)
        if group is None and not aggs:
            continue
        keys = _group_keys(sel, group)
        key_sql = {k.sql().lower() for k in keys}
        key_cols = {_col_key(names, k) for k in keys if isinstance(k, exp.Column)}
        aliases = {p.alias.lower() for p in sel.selects if isinstance(p, exp.Alias)}
        bare: list[exp.Column] = []
        for node in scope.walk():
            if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
                continue
            clause = _clause(node, sel)
            if clause is None or _in_aggregate(node, sel):
                continue
            if clause != "select" and not node.table and node.name.lower() in aliases:
                continue  # a reference to a result column
            kind, _cls, owner = names.resolve(node)
            if kind not in ("column", "unknown") or owner is not scope:
                continue  # an alias, an outer (correlated) column, or an error anyway
            if _col_key(names, node) in key_cols or _under_key(node, sel, key_sql):
                continue
            bare.append(node)
        if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
               for p in sel.selects) and (bare or group is not None or aggs):
            raise Refusal("bare_column_star",
                          "SELECT * in an aggregate query takes bare columns SQLite fills from "
                          "an arbitrary row; list the columns instead")
        if not bare:
            continue
        minmax = {a.sql().lower(): a for a in aggs
                  if isinstance(a, exp.Max | exp.Min) and not a.expressions}
        if len(minmax) == 1:
            agg = next(iter(minmax.values()))
            fn = "ARG_MAX_NULL" if isinstance(agg, exp.Max) else "ARG_MIN_NULL"
            rule = "bare_column_arg_max" if isinstance(agg, exp.Max) else "bare_column_arg_min"
            why = (f"takes the value of the row holding {_frag(agg)} (SQLite's rule for one "
                   "min/max; the group's last row when it has no non-NULL value)")
        else:
            agg, fn, rule = None, "ANY_VALUE", "bare_column_any_value"
            why = ("takes the value of some row of its group, as in SQLite (deterministic when "
                   "the column is determined by the GROUP BY keys)")
            if len(minmax) > 1:
                why += "; with several min()/max() SQLite picks one of their rows"
        for col in bare:
            if agg is None:
                new: exp.Expr = exp.Anonymous(this=fn, expressions=[col.copy()])
            else:
                # SQLite: with no non-NULL value to compare, the group's last row
                new = exp.Case(ifs=[exp.If(
                    this=exp.GT(this=exp.Count(this=agg.this.copy()), expression=exp.Literal.number(0)),
                    true=exp.Anonymous(this=fn, expressions=[col.copy(), agg.this.copy()]))],
                    default=exp.Anonymous(this="LAST", expressions=[col.copy()]))
            if col.parent is sel and col.arg_key == "expressions":
                new = exp.alias_(new, col.name, quoted=col.this.quoted if col.this else False)
            col.replace(new)
            out.append(Rewrite(rule, f"bare column {_frag(col)} {why}"))
    return out


def _clause(node: exp.Expr, sel: exp.Select) -> str | None:
    child, p = node, node.parent
    while p is not None and p is not sel:
        child, p = p, p.parent
    if p is None:
        return None
    key = child.arg_key
    return {"expressions": "select", "having": "having", "order": "order"}.get(key)


def _group_keys(sel: exp.Select, group: exp.Group | None) -> list[exp.Expr]:
    if group is None:
        return []
    keys = []
    projections = sel.selects
    by_alias = {p.alias.lower(): p.this for p in projections if isinstance(p, exp.Alias)}
    for k in group.expressions:
        if isinstance(k, exp.Literal) and k.is_int and 1 <= int(k.this) <= len(projections):
            p = projections[int(k.this) - 1]
            keys.append(p.this if isinstance(p, exp.Alias) else p)
        elif isinstance(k, exp.Column) and not k.table and k.name.lower() in by_alias:
            keys.append(by_alias[k.name.lower()])
            keys.append(k)
        else:
            keys.append(k)
    return keys


def _col_key(names: _Names, col: exp.Column) -> tuple:
    scope = names.scope_of.get(id(col))
    name = col.name.lower()
    if col.table:
        return (col.table.lower(), name)
    if scope is not None:
        owners = [src for src in scope.selected_sources
                  if (cols := names.source_columns(scope, src)) is not None and name in cols]
        if len(owners) == 1:
            return (owners[0].lower(), name)
        if not owners and len(scope.selected_sources) == 1:
            return (next(iter(scope.selected_sources)).lower(), name)
    return ("", name)


def _under_key(node: exp.Expr, sel: exp.Select, key_sql: set[str]) -> bool:
    p: exp.Expr | None = node
    while p is not None and p is not sel:
        if p.sql().lower() in key_sql:
            return True
        p = p.parent
    return False


# ---- rule 3: type affinity in comparisons

_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


@lru_cache(maxsize=256)
def sqlite_text_of_real(value: float) -> str:
    """SQLite's text rendering of a REAL (what TEXT affinity makes of it).

    >>> sqlite_text_of_real(5.0), sqlite_text_of_real(2.5), sqlite_text_of_real(1e20)
    ('5.0', '2.5', '1.0e+20')
    """
    con = sqlite3.connect(":memory:")
    try:
        return con.execute("SELECT CAST(? AS TEXT)", (value,)).fetchone()[0]
    finally:
        con.close()


def _literal_value(e: exp.Expr) -> tuple[str, str] | None:
    """('text'|'number', text) of a literal or a negated number literal."""
    if isinstance(e, exp.Literal):
        return ("text" if e.is_string else "number", e.this)
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return ("number", "-" + e.this.this)
    return None


def _number_from_text(text: str) -> exp.Expr | None:
    if not _NUMBER.match(text):
        return None
    t = text.strip()
    if re.fullmatch(r"[+-]?\d+", t):
        v = int(t)
        if -(2**63) <= v < 2**63:
            return _num(str(v))
        return _num(repr(float(t)))
    f = float(t)
    if f.is_integer() and abs(f) < 2**63:
        return _num(str(int(f)))
    return _num(repr(f))


def _num(text: str) -> exp.Expr:
    if text.startswith("-"):
        return exp.Neg(this=exp.Literal.number(text[1:]))
    return exp.Literal.number(text)


def _text_of_number(text: str, cls: str) -> str:
    if cls == "int":
        return str(int(text))
    return sqlite_text_of_real(float(text))


def _affinity_rules(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for node in list(tree.find_all(*_COMPARISONS, exp.In, exp.Between)):
        if isinstance(node, exp.In):
            query = node.args.get("query")
            if query is not None:  # a IN (SELECT b): as a = b, b with its column's affinity
                sub = query.this if isinstance(query, exp.Subquery) else query
                if isinstance(sub, exp.Select) and len(sub.selects) == 1:
                    proj = sub.selects[0]
                    _compare(names, node, node.this,
                             proj.this if isinstance(proj, exp.Alias) else proj, out)
                continue
            for item in list(node.expressions):
                _compare(names, node, node.this, item, out, rhs_no_affinity=True)
        elif isinstance(node, exp.Between):
            for side in ("low", "high"):
                _compare(names, node, node.this, node.args[side], out)
        else:
            _compare(names, node, node.left, node.right, out)
    return out


def _compare(names: _Names, node: exp.Expr, a: exp.Expr, b: exp.Expr, out: list[Rewrite],
             rhs_no_affinity: bool = False) -> None:
    ia, ib = names.info(a), names.info(b)
    if rhs_no_affinity:
        ib = Info(ib.cls, None, ib.literal)
    if ia.cls is None or ib.cls is None:
        return
    for x, ix, y, iy in ((a, ia, b, ib), (b, ib, a, ia)):
        if ix.affinity == "numeric" and iy.affinity != "numeric":
            _apply_numeric(node, x, y, iy, out)
            return
    for x, ix, y, iy in ((a, ia, b, ib), (b, ib, a, ia)):
        if ix.affinity == "text" and iy.affinity is None:
            _apply_text(node, x, y, iy, out)
            return
    # no conversion: SQLite compares storage classes (numbers sort before text, never equal)
    if {ia.cls, ib.cls} & {"text"} and {ia.cls, ib.cls} & set(_NUMERIC):
        raise Refusal("affinity", f"{_frag(node)}: SQLite compares a number with text here "
                      "without converting either (numbers sort before all text, so it is "
                      "never equal); DuckDB would convert one side")


def _apply_numeric(node, x, y, iy: Info, out: list[Rewrite]) -> None:
    if iy.cls != "text":
        return
    lit = _literal_value(y)
    if lit is not None:
        number = _number_from_text(lit[1])
        if number is None:
            if _number_versus_text(node, x, lit[1], out):
                return
            raise Refusal("affinity", f"{_frag(node)}: SQLite compares the number {_frag(x)} "
                          f"with the text '{lit[1]}', which is not a number (numbers sort "
                          "before all text); DuckDB would fail to convert it")
        y.replace(number)
        out.append(Rewrite("affinity_numeric_literal",
                           f"{_frag(node)}: '{lit[1]}' compared with the numeric {_frag(x)} "
                           f"becomes the number {number.sql()} (SQLite's numeric affinity)"))
        return
    if isinstance(node, (exp.EQ, exp.In)) and _filter_context(node):
        # text that is not a number stays text in SQLite and never equals a number; in a
        # filter (WHERE/ON/HAVING, through AND/OR only) TRY_CAST's NULL filters the row out
        # exactly as SQLite's false does (a join on an integer key against a text column)
        _wrap(y, lambda n: exp.TryCast(this=n, to=exp.DataType.build("DOUBLE")))
        out.append(Rewrite("affinity_numeric_cast",
                           f"{_frag(node)}: the text {_frag(y)} compared with the numeric "
                           f"{_frag(x)} is read as a number when it is one (SQLite's numeric "
                           "affinity); other text never matches (TRY_CAST, in a filter)"))
        return
    _wrap(y, lambda n: exp.cast(n, exp.DType.DOUBLE, copy=False))
    out.append(Rewrite("affinity_numeric_cast",
                       f"{_frag(node)}: the text {_frag(y)} compared with the numeric {_frag(x)} "
                       "is read as a number (SQLite's numeric affinity; text that is not a "
                       "number fails in DuckDB)"))


def _filter_context(node: exp.Expr) -> bool:
    """True when ``node``'s truth value only filters rows: it sits in a WHERE, a join's ON or
    a HAVING through AND, OR and parentheses alone (there NULL and false act the same)."""
    child, parent = node, node.parent
    while isinstance(parent, (exp.And, exp.Or, exp.Paren)):
        child, parent = parent, parent.parent
    if isinstance(parent, (exp.Where, exp.Having)):
        return True
    return isinstance(parent, exp.Join) and parent.args.get("on") is child


#: comparison -> its truth when a number is compared with text (a number sorts before text)
_NUMBER_BEFORE_TEXT: dict[type, bool] = {exp.EQ: False, exp.NEQ: True, exp.LT: True,
                                         exp.LTE: True, exp.GT: False, exp.GTE: False}


def _number_versus_text(node, x, text: str, out: list[Rewrite]) -> bool:
    """``number <op> 'text that is not a number'``: SQLite converts neither side and every
    number sorts before every text, so the comparison is a constant (NULL when the number is
    NULL). Rewritten to that constant; False when ``node`` is not a plain comparison."""
    truth = _NUMBER_BEFORE_TEXT.get(type(node))
    if truth is None or x not in (node.left, node.right):
        return False
    if x is node.right:  # 'text' <op> number: the number is on the right
        truth = {exp.EQ: False, exp.NEQ: True, exp.LT: False, exp.LTE: False, exp.GT: True,
                 exp.GTE: True}[type(node)]
    probe = x.copy()
    # (x IS NOT NULL OR NULL) is TRUE, or NULL for a NULL x; (x IS NULL AND NULL) is FALSE or NULL
    const = (exp.paren(exp.or_(exp.Not(this=exp.Is(this=probe, expression=exp.Null())), exp.Null()))
             if truth else exp.paren(exp.and_(exp.Is(this=probe, expression=exp.Null()), exp.Null())))
    frag = _frag(node)
    node.replace(const)
    out.append(Rewrite("affinity_number_versus_text",
                       f"{frag}: SQLite compares the number {_frag(x)} with the text '{text}' "
                       f"without converting (every number sorts before every text): always "
                       f"{'true' if truth else 'false'} (NULL for a NULL value)"))
    return True


def _apply_text(node, x, y, iy: Info, out: list[Rewrite]) -> None:
    if iy.cls not in _NUMERIC:
        return
    lit = _literal_value(y)
    if lit is not None and lit[0] == "number":
        text = _text_of_number(lit[1], iy.cls)
        y.replace(exp.Literal.string(text))
        out.append(Rewrite("affinity_text_literal",
                           f"{_frag(node)}: {lit[1]} compared with the text column {_frag(x)} "
                           f"becomes '{text}' (SQLite's text affinity)"))
        return
    if iy.cls == "int":
        _wrap(y, lambda n: exp.cast(exp.paren(n, copy=False), exp.DType.VARCHAR, copy=False))
        out.append(Rewrite("affinity_text_cast",
                           f"{_frag(node)}: the integer {_frag(y)} compared with the text column "
                           f"{_frag(x)} is compared as text (SQLite's text affinity)"))
        return
    raise Refusal("affinity", f"{_frag(node)}: SQLite compares the real number {_frag(y)} as "
                  f"text with {_frag(x)}, in a rendering DuckDB does not reproduce")


# ---- rule 4: integer division


def _nonzero_literal(e: exp.Expr) -> bool:
    lit = _literal_value(e)
    if lit is None or lit[0] != "number":
        return False
    try:
        return float(lit[1]) != 0
    except ValueError:
        return False


def _division(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    # breadth-first lists parents before children: reversed, inner divisions come first
    for div in reversed(list(tree.find_all(exp.Div))):
        if not div.args.get("typed"):
            continue
        a, b = names.info(div.left).cls, names.info(div.right).cls
        if a == b == "int":
            text = _frag(div)
            left, right = div.left, div.right
            if div.args.get("safe") and not _nonzero_literal(right):
                right = exp.Nullif(this=right, expression=exp.Literal.number(0))
            div.replace(exp.IntDiv(this=left, expression=right))
            out.append(Rewrite("integer_division",
                               f"{text}: both operands are integers, so the quotient is "
                               "truncated toward zero as in the source dialect (DuckDB //)"))
        elif a not in ("real",) and b not in ("real",) and (a is None or b is None):
            out.append(Rewrite("division_types_unknown",
                               f"{_frag(div)}: an operand's type is unknown, kept as DuckDB's "
                               "float division (the source truncates when both are integers)"))
    return out


# ---- rule 5: LIKE


def _like(tree: exp.Expr, schema, dialect: str) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for like in list(tree.find_all(exp.Like)):
        subject = like.this
        cls = names.info(subject).cls
        text = _frag(like)
        if cls in ("int", "real", "temporal", "bool"):
            out.append(Rewrite("like_non_text_subject",
                               f"{text}: the {cls} {_frag(subject)} is matched as text, as "
                               f"{dialect} does"))
            subject = exp.cast(subject, exp.DType.VARCHAR, copy=False)
        new = exp.ILike(this=subject, expression=like.expression)
        if like.args.get("negate"):
            new.set("negate", True)
        like.replace(new)
        word = "NOT LIKE" if like.args.get("negate") else "LIKE"
        out.append(Rewrite("like_case_insensitive",
                           f"{text}: {dialect}'s {word} ignores ASCII case, so it becomes "
                           f"{word.replace('LIKE', 'ILIKE')} (DuckDB's LIKE is case-sensitive)"))
    return out


# ---- rule 6: NULL ordering


def _null_ordering(tree: exp.Expr, dialect: str) -> list[Rewrite]:
    keys = []
    for o in tree.find_all(exp.Ordered):
        if o.args.get("nulls_first"):  # DuckDB's default is NULLS LAST both ways
            keys.append(f"{_frag(o.this, 40)}{' DESC' if o.args.get('desc') else ''}")
    if not keys:
        return []
    return [Rewrite("null_ordering",
                    f"ORDER BY {', '.join(keys)}: NULLS FIRST made explicit, as {dialect} "
                    "sorts NULLs there (DuckDB puts them last)")]


# ---- rule 7: the rest


def _modulo(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for mod in reversed(list(tree.find_all(exp.Mod))):
        text = _frag(mod)
        reals = [o for o in (mod.left, mod.right) if names.info(o).cls == "real"]
        for operand in reals:
            _wrap(operand, lambda n: exp.cast(exp.func("TRUNC", n), exp.DType.BIGINT, copy=False))
        if reals:
            out.append(Rewrite("modulo_integer_operands",
                               f"{text}: SQLite's % truncates real operands to integers"))
        if not _nonzero_literal(mod.right):
            _wrap(mod.right, lambda n: exp.Nullif(this=n, expression=exp.Literal.number(0)))
            out.append(Rewrite("modulo_by_zero",
                               f"{text}: x % 0 is NULL in SQLite (DuckDB raises)"))
    return out


def _casts(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for cast in reversed(list(tree.find_all(exp.Cast))):
        if type(cast) is not exp.Cast or _cast_class(cast.to) != "int":
            continue
        cls = names.info(cast.this).cls
        if cls == "int" or cls == "bool":
            continue
        text = _frag(cast)
        inner = cast.this
        if cls != "real":
            inner = exp.cast(inner, exp.DType.DOUBLE, copy=False)
        cast.replace(exp.cast(exp.func("TRUNC", inner), exp.DType.BIGINT, copy=False))
        out.append(Rewrite("cast_integer_truncates",
                           f"{text}: SQLite truncates toward zero (DuckDB would round)"))
    return out


def _text_aggregates(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for agg in list(tree.find_all(exp.Avg, exp.Sum)):
        arg = agg.this
        if isinstance(arg, exp.Distinct) or names.info(arg).cls != "text":
            continue
        text = _frag(agg)
        _wrap(arg, _sqlite_number)
        out.append(Rewrite("aggregate_text_as_number",
                           f"{text}: SQLite reads each text value as the number it starts with "
                           "('12abc' is 12, 'null' or '' is 0; NULL stays NULL)"))
    return out


#: the longest numeric prefix of a text, as SQLite reads text in arithmetic and aggregates
_NUMERIC_PREFIX = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"


def _sqlite_number(n: exp.Expr) -> exp.Expr:
    """``n`` (text) read as SQLite reads text as a number: its longest numeric prefix, 0.0
    when it has none, NULL for NULL.

    >>> sql = _sqlite_number(exp.column("mpg")).sql("duckdb")
    >>> sql.startswith("CASE WHEN mpg IS NULL THEN NULL ELSE COALESCE(TRY_CAST(REGEXP_EXTRACT(")
    True
    """
    prefix = exp.func("REGEXP_EXTRACT", exp.cast(n.copy(), exp.DType.VARCHAR),
                      exp.Literal.string(_NUMERIC_PREFIX), exp.Literal.number(0))
    number = exp.func("COALESCE", exp.TryCast(this=prefix, to=exp.DataType.build("DOUBLE")),
                      exp.Literal.number("0.0"))
    return exp.Case(ifs=[exp.If(this=exp.Is(this=n, expression=exp.Null()), true=exp.Null())],
                    default=number)


def _round(tree: exp.Expr, schema) -> list[Rewrite]:
    names = _Names(tree, schema)
    out: list[Rewrite] = []
    for rnd in reversed(list(tree.find_all(exp.Round))):
        if names.info(rnd.this).cls == "int":
            continue
        text = _frag(rnd)
        _wrap(rnd.this, lambda n: exp.cast(n, exp.DataType.build("DECIMAL(38, 12)"), copy=False))
        _wrap(rnd, lambda n: exp.cast(n, exp.DType.DOUBLE, copy=False))
        out.append(Rewrite("round_decimal",
                           f"{text}: rounded on the decimal value, half away from zero, as SQLite "
                           "does (DuckDB rounds the binary double: round(1.65, 1) = 1.6)"))
    return out


def _booleans(tree: exp.Expr) -> list[Rewrite]:
    out: list[Rewrite] = []
    selects = [tree] if isinstance(tree, exp.Select) else []
    if isinstance(tree, exp.SetOperation):
        stack = [tree]
        while stack:
            n = stack.pop()
            if isinstance(n, exp.SetOperation):
                stack += [n.left, n.right]
            elif isinstance(n, exp.Subquery):
                stack.append(n.this)
            elif isinstance(n, exp.Select):
                selects.append(n)
    for sel in selects:
        for proj in list(sel.expressions):
            inner = proj.this if isinstance(proj, exp.Alias) else proj
            if isinstance(inner, exp.Predicate | exp.Connector | exp.Not) \
                    and not isinstance(inner, exp.Paren):
                cast = exp.cast(exp.paren(inner.copy(), copy=False), exp.DType.INT)
                if isinstance(proj, exp.Alias):
                    proj.set("this", cast)
                else:
                    proj.replace(cast)
                out.append(Rewrite("boolean_as_integer",
                                   f"{_frag(inner)}: a predicate's value is 1/0 in the source "
                                   "dialect, cast to INTEGER (DuckDB returns BOOLEAN)"))
    return out


__all__ = ["Info", "Refusal", "Rewrite", "Schema", "apply_rules", "sqlite_text_of_real",
           "type_class"]
