"""Rendering of dbt semantic-layer filter templates into plain SQL predicates.

``{{ Dimension('claim__status_cd') }} = 'O'`` becomes ``status_cd = 'O'`` through a lookup of
each reference (dimension, time dimension, entity) to a column expression; a template that
cannot be rendered into a plain WHERE predicate raises :class:`UnsupportedFilter`. Used by
:mod:`sqleval_pipeline.semantic`, which builds the glossary from the dbt manifest.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union
from sqleval_pipeline.errors import SqlevalError

_GRAINS = ("nanosecond", "microsecond", "millisecond", "second", "minute", "hour", "day",
           "week", "month", "quarter", "year")


class UnsupportedFilter(SqlevalError, ValueError):
    """A dbt filter template that cannot be rendered into a plain WHERE predicate."""


# ----------------------------------------------------------------------------------------
# filter rendering
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnRef:
    """What a filter reference resolves to: a SQL expression, the semantic model that owns it
    and (time dimensions) its own granularity."""

    expr: str
    model: str | None = None
    granularity: str | None = None


#: (reference kind: Dimension | TimeDimension | Entity, full name such as 'claim__status_cd')
Lookup = Callable[[str, str], Union[str, ColumnRef]]

_JINJA = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def _literal(node: ast.expr, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UnsupportedFilter(f"{what}: arguments must be literals") from None


def _parse_reference(src: str) -> tuple[str, str, str | None, str | None]:
    """``Dimension('a__b').grain('month')`` → (kind, name, grain, date_part)."""
    try:
        node = ast.parse(src.strip(), mode="eval").body
    except SyntaxError:
        raise UnsupportedFilter(f"cannot read the filter reference {{{{{src}}}}}") from None
    methods: list[tuple[str, list[Any]]] = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        methods.append((node.func.attr, [_literal(a, node.func.attr) for a in node.args]))
        node = node.func.value
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise UnsupportedFilter(f"unsupported filter expression {{{{{src.strip()}}}}}")
    kind = node.func.id
    if kind == "Metric":
        raise UnsupportedFilter("a Metric(...) filter (a metric used as a filter) needs a "
                                "subquery per group, not a WHERE predicate")
    if kind not in ("Dimension", "TimeDimension", "Entity"):
        raise UnsupportedFilter(f"unsupported filter reference {kind}(...)")
    args = [_literal(a, kind) for a in node.args]
    kwargs = {k.arg: _literal(k.value, kind) for k in node.keywords if k.arg}
    if not args or not isinstance(args[0], str):
        raise UnsupportedFilter(f"{kind}(...) needs a name")
    name = args[0]
    path = kwargs.get("entity_path") or []
    if path:
        name = "__".join([*path, name])
    grain = kwargs.get("time_granularity_name") or kwargs.get("grain")
    date_part = kwargs.get("date_part_name")
    if kind == "TimeDimension" and len(args) > 1:
        grain = args[1]
    for meth, margs in reversed(methods):
        if meth == "grain" and margs:
            grain = margs[0]
        elif meth == "date_part" and margs:
            date_part = margs[0]
        elif meth == "descending":
            continue
        else:
            raise UnsupportedFilter(f"unsupported filter method .{meth}(...)")
    if grain is not None and str(grain).lower() not in _GRAINS:
        raise UnsupportedFilter(f"unknown time granularity {grain!r}")
    return kind, name, (str(grain).lower() if grain else None), (
        str(date_part).lower() if date_part else None)


def render_filter(template: str, lookup: Lookup | Mapping[str, str] | None = None) -> str:
    """Render a dbt semantic-layer filter template into a SQL predicate.

    ``lookup(kind, name)`` resolves a reference (``kind`` is Dimension, TimeDimension or
    Entity; ``name`` the full ``entity__dimension`` name) to its SQL expression (a string or a
    :class:`ColumnRef`); a mapping is looked up by full name, then by the last ``__`` part;
    without one, the reference's last ``__`` part is the column.

    >>> render_filter("{{ Dimension('claim__status_cd') }} = 'S'")
    "status_cd = 'S'"
    >>> render_filter("{{ TimeDimension('claim__loss_date', 'year') }} = '2024-01-01'")
    "date_trunc('year', loss_date) = '2024-01-01'"
    >>> render_filter("{{ Dimension('claim__loss_date').date_part('month') }} = 6")
    "date_part('month', loss_date) = 6"
    """
    if "{%" in template or "{#" in template:
        raise UnsupportedFilter("Jinja statements in a filter are not supported")

    def resolve(kind: str, name: str) -> ColumnRef:
        if lookup is None:
            return ColumnRef(name.split("__")[-1])
        if isinstance(lookup, Mapping):
            got = lookup.get(name, lookup.get(name.split("__")[-1], name.split("__")[-1]))
        else:
            got = lookup(kind, name)
        return got if isinstance(got, ColumnRef) else ColumnRef(str(got))

    def sub(m: re.Match[str]) -> str:
        kind, name, grain, date_part = _parse_reference(m.group(1))
        ref = resolve(kind, name)
        expr = ref.expr
        if date_part:
            return f"date_part('{date_part}', {expr})"
        if grain and grain != (ref.granularity or "day"):
            return f"date_trunc('{grain}', {expr})"
        return expr

    out = _JINJA.sub(sub, template)
    if "{{" in out or "}}" in out:
        raise UnsupportedFilter(f"unbalanced Jinja in filter {template!r}")
    return " ".join(out.split())
