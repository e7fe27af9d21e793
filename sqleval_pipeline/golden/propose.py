"""SQL-first proposals for the golden set (``sqleval golden propose``).

A proposal starts as SQL, never as a question. :func:`drafts` writes queries from a project's
:mod:`~sqleval_pipeline.golden.vocabulary` (measures × dimensions × filters × time windows per
served table) in one template per kind of question:

==================  ===============================================================
kind                template
==================  ===============================================================
simple_aggregate    a measure over the whole table; a measure for each dimension value
filtered_aggregate  a measure where a dimension has one value present in the data, or
                    under a filter term of the glossary
multi_condition     two such conditions, or one and a time window
time_window         a measure over a window before the as-of date: the last calendar
                    month, the last calendar year, the 90 days up to it, the glossary's
                    time windows
top_k               the top 3 or 5 values of a dimension by a measure, highest first
==================  ===============================================================

:func:`propose` then picks drafts round-robin over the kinds (each kind round-robin over the
tables; the order within is shuffled by the seed) and keeps one when it is new (its
normalised SQL is no case's and no rejected proposal's, its question is not a near-duplicate,
its result is no existing case's frozen answer, see :mod:`~sqleval_pipeline.golden.dedup`) and
its result, run **through the guard**, is small
and informative: not an error or refusal, not empty (no row, only NULLs, a lone zero), at most
``max_rows`` rows, not the same value for every group, no tie at a top-k cut. The question is
the template's, or a model's description of the SQL (:mod:`~sqleval_pipeline.golden.describe`).

Proposals are cases with ``status: generated`` and no frozen result: they run with an
execution-only score and count in no accuracy until a person accepts them in
``sqleval golden review``, which freezes them.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from sqleval_pipeline.golden.dedup import Seen, normalise_sql
from sqleval_pipeline.golden.growth import next_id
from sqleval_pipeline.golden.loader import append_cases
from sqleval_pipeline.golden.model import Case, Provenance
from sqleval_pipeline.golden.vocabulary import (
    Dimension, Measure, TableVocabulary, Vocabulary, ident, literal, plural, snake, table_clusters,
)
from sqleval_pipeline.results import ResultSet

KINDS = ("simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k")
MAX_ROWS = 50
DEFAULT_PREFIX = "gen"
_VALUES_PER_DIMENSION = 8
_RELATIVE = ("last ", "this ", "past ", "previous ", "next ")


@dataclass(frozen=True)
class Draft:
    kind: str
    table: str
    sql: str
    question: str
    recipe: str
    order_matters: bool = False
    grouped: bool = False
    #: top-k: the ranking one row further (a tie at the cut makes the answer ambiguous)
    probe_sql: str | None = None
    top: int | None = None
    #: the measure counts rows or values (a lone 1 is a lookup, not a question)
    counting: bool = False


@dataclass
class Proposal:
    case: Case
    preview: ResultSet
    draft: Draft


@dataclass
class ProposeReport:
    proposals: list[Proposal] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    tried: int = 0
    seconds: float = 0.0


# --------------------------------------------------------------------------- drafts


@dataclass(frozen=True)
class _Cond:
    sql: str
    phrase: str
    what: str  # dim | filter | window


def _windows(as_of: dt.date) -> list[tuple[str, dt.date, dt.date]]:
    first = as_of.replace(day=1)
    prev = (first - dt.timedelta(days=1)).replace(day=1)
    return [(f"in {prev:%B %Y}", prev, first),
            (f"in {as_of.year - 1}", dt.date(as_of.year - 1, 1, 1), dt.date(as_of.year, 1, 1)),
            (f"in the 90 days up to and including {as_of.isoformat()}",
             as_of - dt.timedelta(days=89), as_of + dt.timedelta(days=1))]


def _time_conds(v: TableVocabulary, m: Measure, as_of: dt.date) -> list[_Cond]:
    if m.clock:
        return []
    out = []
    for t in v.times:
        if m.time_column and t.column.lower() != m.time_column.lower():
            continue
        col = ident(t.column)
        for label, lo, hi in _windows(as_of):
            out.append(_Cond(f"{col} >= DATE '{lo}' AND {col} < DATE '{hi}'",
                             f"with {t.label} {label}", "window"))
        for term, sql in t.windows:
            phrase = term if term.lower().startswith(_RELATIVE) else f"in the {term}"
            out.append(_Cond(sql, f"with {t.label} {phrase}", "window"))
    return out


def _dim_conds(d: Dimension, limit: int = _VALUES_PER_DIMENSION) -> list[_Cond]:
    return [_Cond(f"{ident(d.column)} = {literal(val)}", f"whose {d.label} is '{val}'", "dim")
            for val in d.values[:limit]]


def _subject(v: TableVocabulary, conds: Sequence[_Cond]) -> str:
    base = v.entity
    for c in conds:
        if c.what == "filter":
            overlap = set(c.phrase.lower().split()) & set(v.entity.lower().split())
            base = c.phrase if overlap else f"{c.phrase} {v.entity}"
    dims = [c.phrase for c in conds if c.what == "dim"]
    wins = [c.phrase for c in conds if c.what == "window"]
    return " ".join([base, " and ".join(dims), *wins]).replace("  ", " ").strip()


def _pred(sql: str) -> str:
    return f"({sql})" if re.search(r"\bor\b", sql, re.IGNORECASE) else sql


def _select(table: str | None, cols: list[str], where: list[str], group: str | None = None,
            order: str | None = None, limit: int | None = None) -> str:
    sql = "SELECT " + ", ".join(cols)
    if table:
        sql += f" FROM {ident(table)}"
    if where:
        sql += " WHERE " + " AND ".join(_pred(w) for w in where)
    if group:
        sql += f" GROUP BY {group}"
    if order:
        sql += f" ORDER BY {order} DESC NULLS LAST"
    if limit:
        sql += f" LIMIT {limit}"
    return sql


def _aggregate(v: TableVocabulary, m: Measure, conds: Sequence[_Cond], kind: str) -> Draft:
    where = [x for x in [m.filter, *(c.sql for c in conds)] if x]
    sql = _select(v.table, [f"{m.sql} AS {ident(m.alias)}"], where)
    subject = _subject(v, conds)
    counting = _counting(m)
    if m.how == "count":
        q = f"How many {subject} are there?"
    elif counting and not re.search(r"\b(count|number)\b", m.label):
        q = f"How many {m.label} are there" + (f" for {subject}?" if conds else "?")
    elif not conds:
        q = f"What is the {m.label}?" if m.how == "metric" else \
            f"What is the {m.label} across all {v.entity}?"
    else:
        q = f"What is the {m.label} for {subject}?"
    recipe = f"{kind}: {m.label} on {v.table}" + "".join(f"; {c.sql}" for c in conds)
    return Draft(kind, v.table, sql, q, recipe, counting=counting)


def _counting(m: Measure) -> bool:
    return m.how in ("count", "distinct") or bool(re.match(r"\s*count\s*\(", m.sql, re.I))


def _grouped(v: TableVocabulary, m: Measure, d: Dimension, top: int | None) -> Draft:
    col, alias = ident(d.column), ident(m.alias if m.alias != d.column else m.alias + "_value")
    where = [x for x in [m.filter] if x]
    if top:
        where.append(f"{col} IS NOT NULL")
    cols = [col, f"{m.sql} AS {alias}"]
    counting = _counting(m)
    if top is None:
        if m.how == "count":
            q = f"How many {v.entity} are there for each {d.label}?"
        elif counting and not re.search(r"\b(count|number)\b", m.label):
            q = f"How many {m.label} are there for each {d.label}?"
        else:
            q = f"What is the {m.label} for each {d.label}?"
        return Draft("simple_aggregate", v.table, _select(v.table, cols, where, col), q,
                     f"simple_aggregate: {m.label} by {d.column} on {v.table}", grouped=True)
    q = (f"Which {top} {plural(d.label)} have the most {v.entity}? List them with their "
         "counts, highest first." if m.how == "count" else
         f"Which {top} {plural(d.label)} have the highest {m.label}? List them highest first.")
    return Draft("top_k", v.table, _select(v.table, cols, where, col, alias, top), q,
                 f"top_k: top {top} {d.column} by {m.label} on {v.table}", order_matters=True,
                 grouped=True, probe_sql=_select(v.table, cols, where, col, alias, top + 1),
                 top=top)


def drafts(vocab: Vocabulary, as_of: dt.date) -> dict[str, dict[str, list[Draft]]]:
    """Every draft, by kind then table, in a fixed order (see the module doc)."""
    out: dict[str, dict[str, list[Draft]]] = {k: {} for k in KINDS}

    def put(d: Draft) -> None:
        out[d.kind].setdefault(d.table, []).append(d)

    for v in vocab.tables:
        filters = [_Cond(f.sql, f.label, "filter") for f in v.filters]
        for m in v.measures:
            put(_aggregate(v, m, [], "simple_aggregate"))
            for d in v.dimensions:
                put(_grouped(v, m, d, None))
                if len(d.values) >= 4:
                    put(_grouped(v, m, d, 5 if len(d.values) > 5 else 3))
                for c in _dim_conds(d):
                    put(_aggregate(v, m, [c], "filtered_aggregate"))
            for f in filters:
                put(_aggregate(v, m, [f], "filtered_aggregate"))
            windows = _time_conds(v, m, as_of)
            for w in windows:
                put(_aggregate(v, m, [w], "time_window"))
            for i, d1 in enumerate(v.dimensions):
                for d2 in v.dimensions[i + 1:]:
                    for c1 in _dim_conds(d1, 3):
                        for c2 in _dim_conds(d2, 3):
                            put(_aggregate(v, m, [c1, c2], "multi_condition"))
                for c1 in _dim_conds(d1, 3):
                    for f in filters:
                        if d1.column.lower() not in f.sql.lower():
                            put(_aggregate(v, m, [f, c1], "multi_condition"))
                    for w in windows[:1]:
                        put(_aggregate(v, m, [c1, w], "multi_condition"))
    for table, m in vocab.scalars:
        put(Draft("simple_aggregate", table, _select(None, [f"{m.sql} AS {ident(m.alias)}"], []),
                  f"What is the {m.label}?", f"simple_aggregate: {m.label} (across tables)"))
    return out


# --------------------------------------------------------------------------- checks


def _zero(v) -> bool:
    return v is None or (isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) and v == 0)


def why_not(d: Draft, rs: ResultSet, max_rows: int) -> str | None:
    """Why a draft's result makes a poor golden answer (None: it is fine)."""
    if not rs.rows:
        return "empty result"
    if len(rs.rows) > max_rows:
        return f"more than {max_rows} rows"
    last = [r[-1] for r in rs.rows]
    if all(v is None for v in last) or (len(rs.rows) == 1 and all(_zero(v) for v in rs.rows[0])):
        return "empty result"
    if d.grouped and len(rs.rows) == 1:
        return "a single group"
    if d.grouped and len({repr(v) for v in last}) == 1:
        return "every group has the same value"
    if d.counting and len(rs.rows) == 1 and last[0] == 1:
        return "a lookup of one row"
    if d.top and len(rs.rows) < d.top:
        return "fewer groups than the top-k asks for"
    return None


# --------------------------------------------------------------------------- proposing


Execute = Callable[[str], object]  # sql -> GuardResult (ok, result, truncated, describe())


def propose(
    n: int, *, vocab: Vocabulary, execute: Execute, as_of: dt.date, seed: int,
    existing: Sequence[Case], rejected: Sequence[dict] = (), difficulties: Sequence[str],
    clusters: Sequence[str] | None = None, default_cluster: str = "general",
    proposer: str = "template", writer=None, schema_of: Callable[[str], str] | None = None,
    max_rows: int = MAX_ROWS, id_prefix: str = DEFAULT_PREFIX, snapshot_id: str | None = None,
    today: dt.date | None = None, max_tries: int | None = None,
) -> ProposeReport:
    """Up to ``n`` new, checked proposals (see the module doc); nothing is written."""
    started = time.perf_counter()
    report = ProposeReport()
    seen = Seen(values=vocab.values())
    taken_ids = [c.id for c in existing]
    for c in existing:
        seen.add(c.id, c.question, [c.reference_sql, *c.alternative_sqls])
        for rs in c.accepted_results():
            seen.add_answer(c.id, rs)
    for rec in rejected:
        case = rec.get("case") or {}
        rid = str(case.get("id") or "rejected")
        taken_ids.append(rid)
        seen.add(f"{rid} (rejected)", str(case.get("question") or ""),
                 [case.get("reference_sql"), *(case.get("alternative_sqls") or [])])
    rng = random.Random(seed)
    pools = drafts(vocab, as_of)
    order: dict[str, list[str]] = {}
    for kind, by_table in pools.items():
        for lst in by_table.values():
            rng.shuffle(lst)
        order[kind] = sorted(by_table)
        rng.shuffle(order[kind])
    kinds = [k for k in KINDS if pools[k]]
    cursor = Counter()
    fallback = difficulties[1] if len(difficulties) > 1 else difficulties[0]
    table_cluster = table_clusters(existing)
    tried_sql: set[str] = set()
    budget = max_tries if max_tries is not None else 25 * n + 50
    day = today or dt.date.today()
    source = f"propose:{proposer}:seed={seed}"

    def cluster_for(table: str, entity: str) -> str:
        choice = table_cluster.get(table.lower()) or snake(entity)
        return choice if clusters is None or choice in clusters else default_cluster

    entities = {v.table: v.entity for v in vocab.tables}
    while len(report.proposals) < n and report.tried < budget:
        progressed = False
        for kind in kinds:
            if len(report.proposals) >= n or report.tried >= budget:
                break
            tables = [t for t in order[kind] if pools[kind][t]]
            if not tables:
                continue
            progressed = True
            table = tables[cursor[kind] % len(tables)]
            cursor[kind] += 1
            d = pools[kind][table].pop()
            key = normalise_sql(d.sql) or d.sql
            if key in tried_sql:
                continue
            tried_sql.add(key)
            if seen.same_sql(d.sql) is not None:
                report.dropped["same SQL as an existing case"] += 1
                continue
            if seen.similar_question(d.question) is not None:
                report.dropped["near-duplicate question"] += 1
                continue
            report.tried += 1
            res = execute(d.sql)
            if not res.ok or res.result is None:
                report.dropped["refused or failed in the guard"] += 1
                continue
            if res.truncated:
                report.dropped[f"more than {max_rows} rows"] += 1
                continue
            if (why := why_not(d, res.result, max_rows)) is not None:
                report.dropped[why] += 1
                continue
            if seen.same_answer(res.result) is not None:
                report.dropped["same answer as an existing case"] += 1
                continue
            if d.probe_sql:
                probe = execute(d.probe_sql)
                rows = probe.result.rows if probe.ok and probe.result is not None else None
                if rows is None or (len(rows) > d.top and rows[d.top - 1][-1] == rows[d.top][-1]):
                    report.dropped["tie at the top-k cut"] += 1
                    continue
            question = d.question
            if writer is not None:
                question = writer.write(sql=d.sql, draft=d.question, preview=res.result,
                                        schema=schema_of(d.table) if schema_of else "",
                                        as_of=as_of)
                if seen.similar_question(question) is not None:
                    report.dropped["near-duplicate question"] += 1
                    continue
            case_id = next_id(taken_ids, id_prefix)
            taken_ids.append(case_id)
            difficulty = kind if kind in difficulties else fallback
            notes = f"proposed from {d.recipe}" + (f"; on {snapshot_id}" if snapshot_id else "")
            case = Case(
                id=case_id, question=question, reference_sql=d.sql, difficulty=difficulty,
                band="answerable", order_matters=d.order_matters,
                cluster=cluster_for(d.table, entities.get(d.table, d.table)), split="dev",
                status="generated", provenance=Provenance(source=source, author=proposer,
                                                          date=day), notes=notes)
            seen.add(case_id, question, [d.sql])
            seen.add_answer(case_id, res.result)
            report.proposals.append(Proposal(case, res.result, d))
        if not progressed:
            break
    report.seconds = time.perf_counter() - started
    return report


def append_proposals(path: Path, before: bytes | None, cases: Sequence[Case]) -> None:
    """Add ``cases`` at the end of ``path`` in one atomic rewrite; its text before is kept
    byte for byte, and nothing is written when it changed since ``before`` was read
    (:class:`~sqleval_pipeline.golden.loader.GoldenChanged`)."""
    if cases:
        append_cases(path, cases, before=before)


__all__ = ["KINDS", "MAX_ROWS", "Draft", "Proposal", "ProposeReport", "append_proposals",
           "drafts", "propose", "why_not"]
