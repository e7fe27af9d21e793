"""What a proposer can ask about a project: measures, dimensions, filters and time windows
per served table, read from the served catalog's column types and the project's semantic
definitions (glossary terms), never from table names.

* **measures**: every glossary ``metric`` term whose SQL reads only columns of the table (its
  ``filter`` kept); ``count(*)``; ``sum`` (``avg`` for prices, rates, ages, days …) of every
  measure column (:func:`~sqleval_pipeline.warehouse.roles.is_measure`: numeric, not a key,
  not a year or a zip code); ``count(DISTINCT x)`` of every other ``*_id`` column. A
  metric that spans tables (scalar subqueries) is a measure of no table
  (:attr:`Vocabulary.scalars`).
* **dimensions**: text columns with a few distinct values (the catalog lists their values,
  all of them present in the data), keys excepted; glossary ``dimension`` terms name them.
* **filters**: glossary ``filter`` terms over the table's columns.
* **time columns**: DATE and TIMESTAMP columns; glossary ``time_window`` terms over them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Tokenizer

from sqleval_pipeline.dialect.tables import table_names
from sqleval_pipeline.generation.context import SchemaCatalog, TableInfo
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.semantic.glossary import Glossary, Term
from sqleval_pipeline.warehouse.roles import is_id_reference, is_measure

_TIME = re.compile(r"^(DATE|TIMESTAMP.*)$")
_AVERAGED = re.compile(r"(price|rate|ratio|pct|percent|score|age|days|duration|avg|mean|term)")
_CLOCK = re.compile(r"\b(current_date|current_timestamp|now|today|localtimestamp|"
                    r"get_current_time|current_time)\b", re.IGNORECASE)
_PREFIXES = ("fct_", "fact_", "dim_", "mart_", "stg_", "int_", "agg_", "rpt_", "vw_", "v_")
MAX_DIMENSION_VALUE = 40


@dataclass(frozen=True)
class Measure:
    label: str            # "net revenue", "total claim amount", "number of orders"
    sql: str              # the aggregate expression
    alias: str            # its output column
    how: str              # metric | sum | avg | count | distinct
    filter: str | None = None
    time_column: str | None = None

    @property
    def clock(self) -> bool:
        return bool(_CLOCK.search(self.sql + " " + (self.filter or "")))


@dataclass(frozen=True)
class Dimension:
    column: str
    label: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Filter:
    label: str
    sql: str


@dataclass(frozen=True)
class TimeColumn:
    column: str
    label: str
    #: glossary time windows over this column: (term, predicate)
    windows: tuple[tuple[str, str], ...] = ()


@dataclass
class TableVocabulary:
    table: str
    entity: str           # "orders", "order items": the table's name without its prefix
    measures: list[Measure] = field(default_factory=list)
    dimensions: list[Dimension] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    times: list[TimeColumn] = field(default_factory=list)


@dataclass
class Vocabulary:
    tables: list[TableVocabulary]
    #: metrics over several tables, as self-contained scalar expressions: (table, measure)
    scalars: list[tuple[str, Measure]] = field(default_factory=list)

    def values(self) -> frozenset[str]:
        """Every dimension value, lower-cased (what tells two questions apart)."""
        return frozenset(v.lower() for t in self.tables for d in t.dimensions for v in d.values)


def words(name: str) -> str:
    """A column or term name as words: ``status_cd`` → ``status code``."""
    w = name.replace("_", " ").strip()
    return re.sub(r"\bcd\b", "code", w)


def plural(noun: str) -> str:
    """A noun's plural, by the usual English endings.

    >>> [plural(w) for w in ("city", "status", "region", "day", "line of business")]
    ['cities', 'statuses', 'regions', 'days', 'lines of business']
    """
    if " of " in noun:
        head, _, tail = noun.partition(" of ")
        return f"{plural(head)} of {tail}"
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    if re.search(r"(s|x|ch|sh)$", noun):
        return noun + "es"
    return noun + "s"


def entity_of(table: str) -> str:
    name = table.lower()
    for p in _PREFIXES:
        if name.startswith(p) and len(name) > len(p):
            name = name[len(p):]
            break
    return name.replace("_", " ")


def snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "value"


def ident(name: str) -> str:
    """A column name as SQL: quoted unless it is a plain lower-case identifier."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name.upper() not in Tokenizer.KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _columns_of(sql: str) -> tuple[set[str], bool] | None:
    """(columns read, has a subquery) of an expression or predicate; None if it does not parse."""
    try:
        tree = sqlglot.parse_one(f"SELECT 1 FROM _t WHERE {sql}" if _is_predicate(sql)
                                 else f"SELECT {sql} FROM _t", read="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    nested = any(s is not tree for s in tree.find_all(exp.Select))
    return {c.name.lower() for c in tree.find_all(exp.Column)}, nested


def _is_predicate(sql: str) -> bool:
    try:
        node = sqlglot.parse_one(sql, read="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return False
    return isinstance(node, (exp.Predicate, exp.Connector, exp.Not, exp.In, exp.Between, exp.Is))


def _fits(term_sql: str | None, columns: set[str]) -> bool:
    if not term_sql:
        return True
    found = _columns_of(term_sql)
    return found is not None and not found[1] and found[0] <= columns


def _metric_label(term: Term) -> str:
    return words(term.term).lower() if term.term.lower() == term.term else term.term


def vocabulary(catalog: SchemaCatalog, glossary: Glossary | None) -> Vocabulary:
    """The vocabulary of every served table (see the module doc)."""
    terms = glossary.terms if glossary is not None else []
    out = Vocabulary([_table(t, terms) for t in catalog.tables])
    served = {t.name for t in catalog.tables}
    for term in terms:
        if term.kind == "metric" and term.sql and len(term.tables) > 1 and not term.filter:
            found = _columns_of(term.sql)
            if found and found[1] and set(term.tables) <= served:
                out.scalars.append((term.tables[0], Measure(
                    _metric_label(term), term.sql, snake(term.term), "metric")))
    return out


def _table(t: TableInfo, terms: list[Term]) -> TableVocabulary:
    cols = {c.name.lower(): c for c in t.columns}
    names = set(cols)
    v = TableVocabulary(t.name, plural_entity(entity_of(t.name)))
    seen_sql: set[str] = set()
    for term in terms:
        if term.kind == "metric" and term.sql and t.name in term.tables and \
                _fits(term.sql, names) and _fits(term.filter, names):
            tc = term.time_column if term.time_column and term.time_column.lower() in names else None
            v.measures.append(Measure(_metric_label(term), term.sql, snake(term.term), "metric",
                                      term.filter, tc))
            seen_sql.add(term.sql.lower())
    v.measures.append(Measure(f"number of {v.entity}", "count(*)", snake(v.entity),
                              "count"))
    first = t.columns[0].name if t.columns else None
    for c in t.columns:
        name = c.name
        if is_measure(name, c.type):
            how = "avg" if _AVERAGED.search(name.lower()) else "sum"
            sql = f"{how}({ident(name)})"
            if sql.lower() not in seen_sql:
                base = words(name)
                lead = "average" if how == "avg" else "total"
                label = base if base.startswith(lead + " ") else f"{lead} {base}"
                v.measures.append(Measure(label, sql, f"{how}_{snake(name)}"[:60], how))
        elif is_id_reference(name) and name != first:
            ref = words(name[:-3])
            v.measures.append(Measure(f"number of distinct {plural(ref)}",
                                      f"count(DISTINCT {ident(name)})",
                                      f"distinct_{snake(plural(ref))}", "distinct"))
    dim_labels = {}
    for term in terms:
        if term.kind == "dimension" and term.sql and term.sql.lower() in names and (
                not term.tables or t.name in term.tables):
            dim_labels.setdefault(term.sql.lower(), words(term.term))
    for c in t.columns:
        low = c.name.lower()
        if c.type == "VARCHAR" and len(c.samples) >= 2 and not is_id_reference(low) and \
                all(len(s) <= MAX_DIMENSION_VALUE for s in c.samples):
            v.dimensions.append(Dimension(c.name, dim_labels.get(low, words(c.name)),
                                          tuple(c.samples)))
    for term in terms:
        if term.kind == "filter" and term.sql and (not term.tables or t.name in term.tables) \
                and _fits(term.sql, names):
            v.filters.append(Filter(term.term, term.sql))
    for c in t.columns:
        if _TIME.match(c.type):
            windows = []
            for term in terms:
                if term.kind == "time_window" and term.sql and (
                        not term.tables or t.name in term.tables):
                    found = _columns_of(term.sql)
                    if found and not found[1] and found[0] == {c.name.lower()}:
                        windows.append((term.term, term.sql))
            v.times.append(TimeColumn(c.name, dim_labels.get(c.name.lower(), words(c.name)),
                                      tuple(windows)))
    return v


def _tables_of(sql: str) -> set[str]:
    """The base tables a reference reads (CTEs resolved per scope: dialect/tables.py)."""
    try:
        return table_names(sqlglot.parse_one(sql, read="duckdb"))
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError):
        return set()


def table_clusters(cases: Sequence[Case]) -> dict[str, str]:
    """Each table's usual cluster: the most common one among cases that read only that table."""
    by_table: dict[str, Counter] = {}
    for c in cases:
        tables = _tables_of(c.reference_sql) if c.reference_sql else set()
        if len(tables) == 1:
            by_table.setdefault(tables.pop(), Counter())[c.cluster] += 1
    return {t: sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            for t, cnt in by_table.items()}


def plural_entity(entity: str) -> str:
    """An entity's plural (left alone when a word of it is plural already).

    >>> plural_entity("orders daily"), plural_entity("order item")
    ('orders daily', 'order items')
    """
    if any(w.endswith("s") and not w.endswith("ss") for w in entity.split()) or \
            entity.endswith("ly"):
        return entity
    head, _, last = entity.rpartition(" ")
    return (head + " " if head else "") + plural(last)


__all__ = ["Dimension", "Filter", "Measure", "TableVocabulary", "TimeColumn", "Vocabulary",
           "entity_of", "ident", "literal", "plural", "snake", "table_clusters", "vocabulary",
           "words"]
