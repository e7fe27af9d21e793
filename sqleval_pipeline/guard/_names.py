"""Function names as DuckDB sees them, for sqlglot function nodes (shared by filter and clock).

sqlglot turns many calls into typed nodes whose class name differs from the DuckDB function
(``version()`` becomes ``CurrentVersion``). :func:`function_names` returns every name a node
may stand for: the raw name of an anonymous call, the class's SQL names and key, and the
name sqlglot prints for it in the DuckDB dialect.

>>> import sqlglot
>>> sorted(function_names(sqlglot.parse_one("SELECT version()", read="duckdb").expressions[0]))
['current_version', 'currentversion', 'version']
"""

from __future__ import annotations

import re
from functools import lru_cache

from sqlglot import exp

_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(")


@lru_cache(maxsize=None)
def _class_names(cls: type[exp.Func]) -> frozenset[str]:
    names = {n.lower() for n in cls.sql_names()} | {cls.key.lower()}
    builders = (
        lambda: cls(),
        lambda: cls(**{k: exp.Literal.number(1) for k, req in cls.arg_types.items() if req}),
        lambda: cls(**{k: exp.Literal.number(1) for k in cls.arg_types}),
    )
    for build in builders:  # sqlglot's warnings about missing arguments are filtered (guard/__init__)
        try:
            text = build().sql(dialect="duckdb")
        except Exception:  # noqa: BLE001 - this construction needs other arguments
            continue
        m = _HEAD.match(text)
        if m:
            names.add(m.group(1).lower())
        break
    return frozenset(names)


def function_names(node: exp.Func) -> frozenset[str]:
    """Every lower-cased name under which DuckDB may resolve the call ``node``."""
    if isinstance(node, exp.Anonymous):
        return frozenset({node.name.lower()})  # node.name unwraps a quoted "name"(...)
    return _class_names(type(node))
