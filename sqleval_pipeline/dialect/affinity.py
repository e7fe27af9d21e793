"""Rule 3 of the dialect rules (docs/dialects.md): SQLite's type affinity in comparisons. A
comparison between values of different type classes is made explicit the way SQLite decides
it (a literal converted, a side cast, or the constant SQLite computes), or refused.
"""

from __future__ import annotations

import re
import sqlite3
from functools import lru_cache

from sqlglot import exp

from sqleval_pipeline.dialect.scope import (
    Info,
    NUMERIC_CLASSES,
    Refusal,
    Rewrite,
    ScopeNames,
    fragment,
    wrap_node,
)


NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")


COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


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


def literal_value(e: exp.Expr) -> tuple[str, str] | None:
    """('text'|'number', text) of a literal or a negated number literal."""
    if isinstance(e, exp.Literal):
        return ("text" if e.is_string else "number", e.this)
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return ("number", "-" + e.this.this)
    return None


def number_from_text(text: str) -> exp.Expr | None:
    if not NUMBER.match(text):
        return None
    t = text.strip()
    if re.fullmatch(r"[+-]?\d+", t):
        v = int(t)
        if -(2**63) <= v < 2**63:
            return num(str(v))
        return num(repr(float(t)))
    f = float(t)
    if f.is_integer() and abs(f) < 2**63:
        return num(str(int(f)))
    return num(repr(f))


def num(text: str) -> exp.Expr:
    if text.startswith("-"):
        return exp.Neg(this=exp.Literal.number(text[1:]))
    return exp.Literal.number(text)


def text_of_number(text: str, cls: str) -> str:
    if cls == "int":
        return str(int(text))
    return sqlite_text_of_real(float(text))


def affinity_rules(tree: exp.Expr, schema) -> list[Rewrite]:
    names = ScopeNames(tree, schema)
    out: list[Rewrite] = []
    for node in list(tree.find_all(*COMPARISONS, exp.In, exp.Between)):
        if isinstance(node, exp.In):
            query = node.args.get("query")
            if query is not None:  # a IN (SELECT b): as a = b, b with its column's affinity
                sub = query.this if isinstance(query, exp.Subquery) else query
                if isinstance(sub, exp.Select) and len(sub.selects) == 1:
                    proj = sub.selects[0]
                    compare(names, node, node.this,
                             proj.this if isinstance(proj, exp.Alias) else proj, out)
                continue
            for item in list(node.expressions):
                compare(names, node, node.this, item, out, rhs_no_affinity=True)
        elif isinstance(node, exp.Between):
            for side in ("low", "high"):
                compare(names, node, node.this, node.args[side], out)
        else:
            compare(names, node, node.left, node.right, out)
    return out


def compare(names: ScopeNames, node: exp.Expr, a: exp.Expr, b: exp.Expr, out: list[Rewrite],
             rhs_no_affinity: bool = False) -> None:
    ia, ib = names.info(a), names.info(b)
    if rhs_no_affinity:
        ib = Info(ib.cls, None, ib.literal)
    if ia.cls is None or ib.cls is None:
        return
    for x, ix, y, iy in ((a, ia, b, ib), (b, ib, a, ia)):
        if ix.affinity == "numeric" and iy.affinity != "numeric":
            apply_numeric(node, x, y, iy, out)
            return
    for x, ix, y, iy in ((a, ia, b, ib), (b, ib, a, ia)):
        if ix.affinity == "text" and iy.affinity is None:
            apply_text(node, x, y, iy, out)
            return
    # no conversion: SQLite compares storage classes (numbers sort before text, never equal)
    if {ia.cls, ib.cls} & {"text"} and {ia.cls, ib.cls} & set(NUMERIC_CLASSES):
        raise Refusal("affinity", f"{fragment(node)}: SQLite compares a number with text here "
                      "without converting either (numbers sort before all text, so it is "
                      "never equal); DuckDB would convert one side")


def apply_numeric(node, x, y, iy: Info, out: list[Rewrite]) -> None:
    if iy.cls != "text":
        return
    lit = literal_value(y)
    if lit is not None:
        number = number_from_text(lit[1])
        if number is None:
            if number_versus_text(node, x, lit[1], out):
                return
            raise Refusal("affinity", f"{fragment(node)}: SQLite compares the number {fragment(x)} "
                          f"with the text '{lit[1]}', which is not a number (numbers sort "
                          "before all text); DuckDB would fail to convert it")
        y.replace(number)
        out.append(Rewrite("affinity_numeric_literal",
                           f"{fragment(node)}: '{lit[1]}' compared with the numeric {fragment(x)} "
                           f"becomes the number {number.sql()} (SQLite's numeric affinity)"))
        return
    if isinstance(node, (exp.EQ, exp.In)) and filter_context(node):
        # text that is not a number stays text in SQLite and never equals a number; in a
        # filter (WHERE/ON/HAVING, through AND/OR only) TRY_CAST's NULL filters the row out
        # exactly as SQLite's false does (a join on an integer key against a text column)
        wrap_node(y, lambda n: exp.TryCast(this=n, to=exp.DataType.build("DOUBLE")))
        out.append(Rewrite("affinity_numeric_cast",
                           f"{fragment(node)}: the text {fragment(y)} compared with the numeric "
                           f"{fragment(x)} is read as a number when it is one (SQLite's numeric "
                           "affinity); other text never matches (TRY_CAST, in a filter)"))
        return
    wrap_node(y, lambda n: exp.cast(n, exp.DType.DOUBLE, copy=False))
    out.append(Rewrite("affinity_numeric_cast",
                       f"{fragment(node)}: the text {fragment(y)} compared with the numeric {fragment(x)} "
                       "is read as a number (SQLite's numeric affinity; text that is not a "
                       "number fails in DuckDB)"))


def filter_context(node: exp.Expr) -> bool:
    """True when ``node``'s truth value only filters rows: it sits in a WHERE, a join's ON or
    a HAVING through AND, OR and parentheses alone (there NULL and false act the same)."""
    child, parent = node, node.parent
    while isinstance(parent, (exp.And, exp.Or, exp.Paren)):
        child, parent = parent, parent.parent
    if isinstance(parent, (exp.Where, exp.Having)):
        return True
    return isinstance(parent, exp.Join) and parent.args.get("on") is child


#: comparison -> its truth when a number is compared with text (a number sorts before text)
NUMBER_BEFORE_TEXT: dict[type, bool] = {exp.EQ: False, exp.NEQ: True, exp.LT: True,
                                         exp.LTE: True, exp.GT: False, exp.GTE: False}


def number_versus_text(node, x, text: str, out: list[Rewrite]) -> bool:
    """``number <op> 'text that is not a number'``: SQLite converts neither side and every
    number sorts before every text, so the comparison is a constant (NULL when the number is
    NULL). Rewritten to that constant; False when ``node`` is not a plain comparison."""
    truth = NUMBER_BEFORE_TEXT.get(type(node))
    if truth is None or x not in (node.left, node.right):
        return False
    if x is node.right:  # 'text' <op> number: the number is on the right
        truth = {exp.EQ: False, exp.NEQ: True, exp.LT: False, exp.LTE: False, exp.GT: True,
                 exp.GTE: True}[type(node)]
    probe = x.copy()
    # (x IS NOT NULL OR NULL) is TRUE, or NULL for a NULL x; (x IS NULL AND NULL) is FALSE or NULL
    const = (exp.paren(exp.or_(exp.Not(this=exp.Is(this=probe, expression=exp.Null())), exp.Null()))
             if truth else exp.paren(exp.and_(exp.Is(this=probe, expression=exp.Null()), exp.Null())))
    frag = fragment(node)
    node.replace(const)
    out.append(Rewrite("affinity_number_versus_text",
                       f"{frag}: SQLite compares the number {fragment(x)} with the text '{text}' "
                       f"without converting (every number sorts before every text): always "
                       f"{'true' if truth else 'false'} (NULL for a NULL value)"))
    return True


def apply_text(node, x, y, iy: Info, out: list[Rewrite]) -> None:
    if iy.cls not in NUMERIC_CLASSES:
        return
    lit = literal_value(y)
    if lit is not None and lit[0] == "number":
        text = text_of_number(lit[1], iy.cls)
        y.replace(exp.Literal.string(text))
        out.append(Rewrite("affinity_text_literal",
                           f"{fragment(node)}: {lit[1]} compared with the text column {fragment(x)} "
                           f"becomes '{text}' (SQLite's text affinity)"))
        return
    if iy.cls == "int":
        wrap_node(y, lambda n: exp.cast(exp.paren(n, copy=False), exp.DType.VARCHAR, copy=False))
        out.append(Rewrite("affinity_text_cast",
                           f"{fragment(node)}: the integer {fragment(y)} compared with the text column "
                           f"{fragment(x)} is compared as text (SQLite's text affinity)"))
        return
    raise Refusal("affinity", f"{fragment(node)}: SQLite compares the real number {fragment(y)} as "
                  f"text with {fragment(x)}, in a rendering DuckDB does not reproduce")
