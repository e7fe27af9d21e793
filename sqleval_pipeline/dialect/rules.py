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

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from sqleval_pipeline.dialect.affinity import affinity_rules, compare, literal_value, sqlite_text_of_real
from sqleval_pipeline.dialect.scope import (
    Info,
    Refusal,
    Rewrite,
    Schema,
    ScopeNames,
    class_of_cast,
    fragment,
    normalize_schema,
    type_class,
    wrap_node,
)


#: dialects whose double-quoted tokens fall back to string literals (MySQL's reader already
#: reads "x" as a string, so it needs no rule)
_DQ_STRING_DIALECTS = {"sqlite"}
#: dialects whose LIKE ignores ASCII case
_LIKE_CI_DIALECTS = {"sqlite", "mysql"}
#: dialects that return 1/0 for predicates
_INT_BOOL_DIALECTS = {"sqlite", "mysql"}


# ---------------------------------------------------------------------------------------
# types: a coarse class per expression ("int", "real", "text", "temporal", "bool", "other")


# ---------------------------------------------------------------------------------------
# scopes and name resolution


# ---------------------------------------------------------------------------------------
# the rules


def apply_rules(tree: exp.Expr, dialect: str, sql: str,
                schema: Schema | None) -> list[Rewrite]:
    """Rewrite ``tree`` (parsed as ``dialect``) in place; the rewrites made, in order."""
    norm = normalize_schema(schema)
    rewrites: list[Rewrite] = []
    if dialect in _DQ_STRING_DIALECTS:
        rewrites += _double_quoted(tree, sql, norm)
    if dialect == "sqlite":
        rewrites += _bare_columns(tree, norm)
        rewrites += affinity_rules(tree, norm)
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


# ---- rule 1: double-quoted tokens


def _double_quoted(tree: exp.Expr, sql: str, schema) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
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
    names = ScopeNames(tree, schema)
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
            why = (f"takes the value of the row holding {fragment(agg)} (SQLite's rule for one "
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
            out.append(Rewrite(rule, f"bare column {fragment(col)} {why}"))
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


def _col_key(names: ScopeNames, col: exp.Column) -> tuple:
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


# ---- rule 4: integer division


def _nonzero_literal(e: exp.Expr) -> bool:
    lit = literal_value(e)
    if lit is None or lit[0] != "number":
        return False
    try:
        return float(lit[1]) != 0
    except ValueError:
        return False


def _division(tree: exp.Expr, schema) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    # breadth-first lists parents before children: reversed, inner divisions come first
    for div in reversed(list(tree.find_all(exp.Div))):
        if not div.args.get("typed"):
            continue
        a, b = names.info(div.left).cls, names.info(div.right).cls
        if a == b == "int":
            text = fragment(div)
            left, right = div.left, div.right
            if div.args.get("safe") and not _nonzero_literal(right):
                right = exp.Nullif(this=right, expression=exp.Literal.number(0))
            div.replace(exp.IntDiv(this=left, expression=right))
            out.append(Rewrite("integer_division",
                               f"{text}: both operands are integers, so the quotient is "
                               "truncated toward zero as in the source dialect (DuckDB //)"))
        elif a not in ("real",) and b not in ("real",) and (a is None or b is None):
            out.append(Rewrite("division_types_unknown",
                               f"{fragment(div)}: an operand's type is unknown, kept as DuckDB's "
                               "float division (the source truncates when both are integers)"))
    return out


# ---- rule 5: LIKE


def _like(tree: exp.Expr, schema, dialect: str) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    for like in list(tree.find_all(exp.Like)):
        subject = like.this
        cls = names.info(subject).cls
        text = fragment(like)
        if cls in ("int", "real", "temporal", "bool"):
            out.append(Rewrite("like_non_text_subject",
                               f"{text}: the {cls} {fragment(subject)} is matched as text, as "
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
            keys.append(f"{fragment(o.this, 40)}{' DESC' if o.args.get('desc') else ''}")
    if not keys:
        return []
    return [Rewrite("null_ordering",
                    f"ORDER BY {', '.join(keys)}: NULLS FIRST made explicit, as {dialect} "
                    "sorts NULLs there (DuckDB puts them last)")]


# ---- rule 7: the rest


def _modulo(tree: exp.Expr, schema) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    for mod in reversed(list(tree.find_all(exp.Mod))):
        text = fragment(mod)
        reals = [o for o in (mod.left, mod.right) if names.info(o).cls == "real"]
        for operand in reals:
            wrap_node(operand, lambda n: exp.cast(exp.func("TRUNC", n), exp.DType.BIGINT, copy=False))
        if reals:
            out.append(Rewrite("modulo_integer_operands",
                               f"{text}: SQLite's % truncates real operands to integers"))
        if not _nonzero_literal(mod.right):
            wrap_node(mod.right, lambda n: exp.Nullif(this=n, expression=exp.Literal.number(0)))
            out.append(Rewrite("modulo_by_zero",
                               f"{text}: x % 0 is NULL in SQLite (DuckDB raises)"))
    return out


def _casts(tree: exp.Expr, schema) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    for cast in reversed(list(tree.find_all(exp.Cast))):
        if type(cast) is not exp.Cast or class_of_cast(cast.to) != "int":
            continue
        cls = names.info(cast.this).cls
        if cls == "int" or cls == "bool":
            continue
        text = fragment(cast)
        inner = cast.this
        if cls != "real":
            inner = exp.cast(inner, exp.DType.DOUBLE, copy=False)
        cast.replace(exp.cast(exp.func("TRUNC", inner), exp.DType.BIGINT, copy=False))
        out.append(Rewrite("cast_integer_truncates",
                           f"{text}: SQLite truncates toward zero (DuckDB would round)"))
    return out


def _text_aggregates(tree: exp.Expr, schema) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    for agg in list(tree.find_all(exp.Avg, exp.Sum)):
        arg = agg.this
        if isinstance(arg, exp.Distinct) or names.info(arg).cls != "text":
            continue
        text = fragment(agg)
        wrap_node(arg, _sqlite_number)
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
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    for rnd in reversed(list(tree.find_all(exp.Round))):
        if names.info(rnd.this).cls == "int":
            continue
        text = fragment(rnd)
        wrap_node(rnd.this, lambda n: exp.cast(n, exp.DataType.build("DECIMAL(38, 12)"), copy=False))
        wrap_node(rnd, lambda n: exp.cast(n, exp.DType.DOUBLE, copy=False))
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
                                   f"{fragment(inner)}: a predicate's value is 1/0 in the source "
                                   "dialect, cast to INTEGER (DuckDB returns BOOLEAN)"))
    return out


__all__ = ["Info", "Refusal", "Rewrite", "Schema", "apply_rules", "sqlite_text_of_real",
           "type_class"]
