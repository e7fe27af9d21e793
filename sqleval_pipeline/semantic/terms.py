"""Naming and measures of the dbt semantic layer: a measure's SQL aggregate, term keys,
aliases and definitions (used by :mod:`sqleval_pipeline.semantic`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from sqleval_pipeline.errors import SqlevalError


class _Unsupported(SqlevalError, ValueError):
    """An item that cannot become a term; the message is the recorded reason."""


def measure_sql(measure: Mapping[str, Any]) -> str:
    """The DuckDB aggregate of a dbt measure (raises ValueError with the reason if none).

    >>> measure_sql({"name": "paid", "agg": "sum", "expr": "paid_amount"})
    'sum(paid_amount)'
    >>> measure_sql({"name": "n", "agg": "count_distinct", "expr": "policy_id"})
    'count(DISTINCT policy_id)'
    """
    name = measure["name"]
    expr = measure.get("expr")
    expr = name if expr is None or expr == "" else str(expr)
    if expr.lower() == "true":  # `expr: true` in YAML
        expr = "1"
    agg = str(measure.get("agg") or "").lower()
    if measure.get("non_additive_dimension"):
        raise _Unsupported("semi-additive measure (non_additive_dimension): it is aggregated "
                           "at one point of a time dimension, not with one aggregate")
    simple = {"sum": "sum", "min": "min", "max": "max", "average": "avg", "avg": "avg",
              "count": "count", "median": "median"}
    if agg in simple:
        return f"{simple[agg]}({expr})"
    if agg == "count_distinct":
        return f"count(DISTINCT {expr})"
    if agg == "sum_boolean":
        return f"sum(CASE WHEN {expr} THEN 1 ELSE 0 END)"
    if agg == "percentile":
        params = measure.get("agg_params") or {}
        p = params.get("percentile")
        if p is None:
            raise _Unsupported("percentile measure without agg_params.percentile")
        if params.get("use_approximate_percentile"):
            return f"approx_quantile({expr}, {p})"
        fn = "quantile_disc" if params.get("use_discrete_percentile") else "quantile_cont"
        return f"{fn}({expr}, {p})"
    raise _Unsupported(f"aggregation {agg!r} has no DuckDB translation here")


def _filters_of(obj: Any) -> tuple[str, ...]:
    """The where_sql_templates of a manifest filter (dict, list or string)."""
    if not obj:
        return ()
    if isinstance(obj, str):
        return (obj,)
    if isinstance(obj, list):
        return tuple(t for x in obj for t in _filters_of(x))
    if isinstance(obj, dict):
        if "where_filters" in obj:
            return _filters_of(obj["where_filters"])
        if "where_sql_template" in obj:
            return (str(obj["where_sql_template"]),)
    raise _Unsupported(f"unreadable filter {obj!r}")


def _spaced(name: str) -> str:
    return " ".join(name.replace("_", " ").split())


def term_key(name: str) -> str:
    """The name two glossaries are matched by: case-folded, '_'/'-' as spaces.

    >>> term_key("Loss_Ratio") == term_key("loss ratio")
    True
    """
    return " ".join(re.sub(r"[_\-]+", " ", name).casefold().split())


def _aliases(name: str, label: str | None, term: str) -> list[str]:
    """The label and the spaced name, without repeats of the term or of each other."""
    seen = {term.casefold()}
    out = []
    for a in (label, _spaced(name)):
        if a and a.strip() and a.strip().casefold() not in seen:
            seen.add(a.strip().casefold())
            out.append(a.strip())
    return out


def _definition(node: Mapping[str, Any], fallback: str) -> str:
    text = " ".join(str(node.get("description") or "").split())
    return text or str(node.get("label") or "").strip() or fallback
