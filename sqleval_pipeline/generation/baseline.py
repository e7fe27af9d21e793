"""The embedded baseline: a deterministic, offline question → SQL compiler.

It exists so the pipeline runs end to end with no key and no network, and so a change of
semantic-layer curation has a measurable effect. It is a *baseline*: a few dozen generic
lexical rules, none written for a particular case, and its accuracy is whatever it gets.

**Its vocabulary is derived, never written here**: :class:`.baseline_vocab.Vocabulary` reads
it off the served schema (exact rules and tie-breaks in that module): the nouns a table counts
from its name (``fct_orders`` → "orders", ``policies`` → "policies"; the prefix gives its role),
many-to-one joins from key columns that are another table's primary key, dimensions from text
column names (``state_code`` → "state", "return reason"), time columns from DATE/TIMESTAMP
columns, measures from numeric columns, literal values from categorical sample values. With
curation on it adds the glossary (metrics, filters, dimension words, time windows, refusals)
and the dbt descriptions' "One row per …" grain. The only fixed words are generic English.

How it reads a question:

1. **Refusal**: with curation on, a question naming a glossary ``refusal`` alias is declined;
   otherwise it declines only when it cannot map the question onto the schema.
2. **Metric**: a glossary metric by name or alias, on the first table the term lists that
   reaches the grouped dimension (a table the question names first, facts before
   aggregates); else ``how many <noun>`` counts the head noun's table ("Value-segment
   customers" → customers), ``distinct <entity>`` counts its key in another table named,
   ``how many <dimension>`` counts distinct values, ``<noun> per <dim>`` counts the noun;
   else question words pick a numeric column (``refund`` → ``refund_inr``).
3. **Filters**: glossary filters by alias; data values (``Bengaluru``; ``excluding
   cancelled`` → ``<>``); thresholds on a named measure ("more than 3 units"); "no <measure>",
   "never <verb> a <noun>", "with a <text column>".
4. **Time**: relative windows from CURRENT_DATE (pinned to the snapshot's as-of date by the
   guard), named months and years, curated time windows; on the base table's time column.
5. **Grouping**: ``top N <dim> by …``, ``rank <dim> by``, ``per <dim>``, ORDER BY and LIMIT.

>>> from sqleval_pipeline.generation.baseline import month_window
>>> month_window("november", 2025)
("DATE '2025-11-01'", "DATE '2025-12-01'")
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.generation.baseline_vocab import (  # noqa: F401  (month_window: doctest)
    EVENT_VERBS, IDENT_RX, NUM, NUMBERS, QUANTITY_WORDS, TIME_MASK, Dimension, Vocabulary, has,
    has_negative, has_positive, is_negated, is_numeric, is_text, month_window, number, phrase_rx,
    plural, rx, singular, spans, time_window, variants, words,
)
from sqleval_pipeline.generation.context import SchemaCatalog
from sqleval_pipeline.semantic.glossary import Glossary, Term
from sqleval_pipeline.guard.lru import LRU
from sqleval_pipeline.pipeline.records import Usage
from sqleval_pipeline.errors import SqlevalError

TOP_RX = re.compile(rf"\btop\s+{NUM}\b")
WHICH_RX = re.compile(rf"\b(?:which|what)\s+(?:are\s+the\s+|were\s+the\s+)?{NUM}\b")
BUSIEST_RX = re.compile(r"\bthe\s+(\d+)\s+busiest\b")
PER_RX = re.compile(r"\b(?:per|by|for each(?: of)?|each of)\s+(?:the\s+)?(?:(?:last|past)\s+\w+\s+)?"
                    r"(?:complete\s+)?(?:calendar\s+)?([a-z ]+)")
HOW_MANY_RX = re.compile(r"(?:how many|number of|count of)\s+(distinct\s+)?([a-z][a-z -]*)")
DISTINCT_RX = re.compile(r"\bdistinct\s+([a-z][a-z -]*)")
WHO_RX = re.compile(r"^\s*(?:who|that)\s+(?:have\s+|has\s+|had\s+)?[a-z]+")
THRESHOLD_RX = re.compile(rf"((?:[a-z]+\s+){{0,3}})(above|over|more than|greater than|at least)\s+"
                          rf"(?:[₹$€£¥]|rs\.?\s*)?([\d,]+|{'|'.join(NUMBERS)})\b\s*([a-z]*)")
NEVER_RX = re.compile(r"\bnever\s+[a-z]+\s+(?:a|an|any)\s+([a-z]+)")
PRESENT_RX = re.compile(r"\b(?:with|had|has|have|having)\s+(?:a|an)\s+([a-z]+)"
                        r"|\b([a-z]+)\s+(?:was\s+|were\s+)?applied\b")
ABSENT_RX = re.compile(r"\b(?:no|without(?:\s+an?)?)\s+([a-z]+)")


@dataclass
class Metric:
    expr: str
    alias: str
    table: str
    filters: list[str] = field(default_factory=list)
    phrase: str | None = None  # the words that named the metric (not re-read as filters)
    time_column: str | None = None
    joins: set[str] = field(default_factory=set)  # tables the expression also needs


@dataclass
class Group:
    dim: Dimension
    limit: int | None
    order: str  # metric_desc | dim_asc
    after: int | None = None  # where "per"/"by" introduces the dimension, if it does


@dataclass
class Plan:
    base: str
    metric: Metric
    filters: list[tuple[str, str]] = field(default_factory=list)  # (table, condition)
    tables: set[str] = field(default_factory=set)
    group: list[tuple[str, str, str]] = field(default_factory=list)  # (table, expr, alias)
    order: str | None = None
    limit: int | None = None


class Unmappable(SqlevalError):
    pass


class BaselineGenerator:
    """Deterministic text-to-SQL over the catalog; ``glossary=None`` means curation off."""

    #: it reads the question only (its catalog and glossary are its own): no retrieval
    reads_context = False
    #: it answers in this process without waiting on I/O: the runner calls it inline
    in_process = True
    #: no model provider is called: its answers are not counted as provider calls
    calls_provider = False

    def __init__(self, catalog: SchemaCatalog, glossary: Glossary | None = None,
                 name: str | None = None):
        self.catalog = catalog
        self.glossary = glossary
        self.name = name or ("baseline-curated" if glossary else "baseline-raw")
        self.vocab = Vocabulary(catalog, glossary)
        self.tables = self.vocab.tables
        self._answers: LRU[str, tuple[str, str]] = LRU(65536)
        self._terms = {kind: [(name, term) for term in glossary.by_kind(kind)
                              for name in [term.term, *term.aliases]]
                       for kind in ("metric", "filter", "time_window")} if glossary else {}
        self._refusals = sorted({a for t in glossary.by_kind("refusal") for a in t.aliases},
                                key=lambda a: (-len(a), a)) if glossary else []
        # compile the vocabulary's patterns now (cached per phrase): generate() only reuses them
        for p in [n for n, _t in self.vocab.nouns] + [d.phrase for d in self.vocab.dimensions] + \
                 [n for v in self._terms.values() for n, _t in v] + self._refusals:
            phrase_rx(p.lower())
        for v, _t, _c in self.vocab.values:
            phrase_rx(v.lower()), phrase_rx(v.lower().replace("_", " ")), phrase_rx(v, True)

    def close(self) -> None:
        pass

    # ---- public ------------------------------------------------------------------------

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        started = time.perf_counter()
        original = " ".join(ctx.question.replace("’", "'").split())
        kind, text = self._answer(original)
        if kind == "sql":
            out = GenerationOutput(kind="sql", sql=text)
        else:
            out = GenerationOutput(kind="refusal", refusal_reason=text)
        out.usage = Usage(latency_ms=(time.perf_counter() - started) * 1000, cost_usd=0.0)
        out.model = self.name
        out.temperature = None
        out.temperature_settable = False
        return out

    def _answer(self, original: str) -> tuple[str, str]:
        """("sql", text) or ("refusal", reason) for a normalised question. The answer is a pure
        function of the question (no state, no clock, no randomness), so it is remembered per
        question: a second run of a case costs a dictionary look-up."""
        found = self._answers.get(original)
        if found is None:
            q = original.lower()
            try:
                refusal = self._refusal(q)
                found = ("refusal", refusal) if refusal else ("sql", self.compile(q, original))
            except Unmappable as exc:
                found = ("refusal", f"cannot map the question: {exc}")
            self._answers.put(original, found)
        return found

    def _refusal(self, q: str) -> str | None:
        for alias in self._refusals:
            if has(q, alias):
                return (f"'{alias}' is not available in the served data "
                        "(per the glossary: sensitive or not collected)")
        return None

    # ---- compile -------------------------------------------------------------------------

    def compile(self, q: str, original: str | None = None) -> str:
        """SQL for a lower-cased question (``original`` keeps its capitalisation). Pure: no
        state is kept between calls, so concurrent attempts cannot interfere."""
        original = original if original is not None else q
        masked = TIME_MASK.sub(lambda m: " " * len(m.group(0)), q)
        group = self._group(q, masked)
        metric = self._metric(q, group)
        plan = Plan(base=metric.table, metric=metric, tables={metric.table} | metric.joins,
                    filters=[(metric.table, f) for f in metric.filters])
        if group:
            plan.group = self._resolve(group.dim, plan.base, q)
            plan.limit, plan.order = group.limit, group.order
            plan.tables |= {t for t, _e, _a in plan.group}
        fq, forig = q, original
        if metric.phrase:
            for v in variants(metric.phrase):
                fq = rx(rf"(?<![a-z0-9_]){re.escape(v)}(?![a-z0-9_])").sub(" ", fq)
                forig = rx(rf"(?i)(?<![a-z0-9_]){re.escape(v)}(?![a-z0-9_])").sub(" ", forig)
        self._filters(fq, plan, forig)
        self._time(q, masked, plan)
        return self._render(plan)

    def _term_hits(self, q: str, kind: str) -> list[tuple[int, Term, str]]:
        hits = [(len(name), term, name) for name, term in self._terms.get(kind, [])
                if has_positive(q, name)]
        hits.sort(key=lambda h: -h[0])
        return hits

    def _count(self, table: str) -> Metric:
        alias = re.sub(r"[^a-z0-9]+", "_", plural(self.tables[table].entity)).strip("_")
        return Metric("count(*)", alias or "count", table)

    # ---- metric ----------------------------------------------------------------------------

    def _metric(self, q: str, group: Group | None) -> Metric:
        agg_avg = has(q, "average") or has(q, "avg") or has(q, "mean")
        for _n, term, name in self._term_hits(q, "metric"):
            if not term.sql or (term.sql.replace(" ", "").lower() == "count(*)"
                                and not term.filter and not term.time_column):
                continue  # a plain row count is resolved below, with the counted noun
            if name.lower() in self.vocab.column_names and \
                    not all(has(q, w) for w in term.term.lower().split()):
                continue  # an alias that is just a column name needs the term's own words
            table = self._metric_table(term, group, q)
            if table:
                filters = [term.filter] if term.filter else []
                return Metric(term.sql, self._alias(term.term), table, filters, phrase=name,
                              time_column=term.time_column)
        if m := DISTINCT_RX.search(q):
            if found := self._distinct(m.group(1), q, m.start(1)):
                return found
        if m := HOW_MANY_RX.search(q):
            phrase = m.group(2)
            first = phrase.split()[0] if phrase.split() else ""
            if singular(first) in QUANTITY_WORDS or first in QUANTITY_WORDS:
                if found := self._quantity(first, q[m.start(2):]):
                    return found
            dim = self.vocab.dim_at(phrase, 0)
            if dim and dim.candidates and not any(s == 0 for s, _e, _t in self.vocab.noun_spans(phrase)):
                t, c = dim.candidates[0]
                return Metric(f"count(DISTINCT {c})", re.sub(r"\W+", "_", plural(dim.phrase)), t)
            table = self.vocab.head_noun(phrase)
            if table:
                start, end = next((s, e) for s, e, t in self.vocab.noun_spans(phrase) if t == table)
                if WHO_RX.search(phrase[end:]) and (
                        found := self._distinct(phrase[start:], q, m.start(2) + start)):
                    return found
                return self._count(table)
        if group and (has(q, "number of") or has(q, "most") or has(q, "busiest")):
            cue = rx(r"\b(?:number of|most|busiest)\b").search(q)
            table = self.vocab.head_noun(q[cue.end():]) or self.vocab.head_noun(q)
            if table:
                return self._count(table)
        lead = q[:group.after].rstrip() if group and group.after is not None else ""
        if lead and (before := self.vocab.noun_spans(lead)) and before[-1][1] == len(lead):
            return self._count(before[-1][2])  # "orders per day", "claims by status"
        col = self._numeric_column(q, group)
        if col:
            table, name = col
            fn = "avg" if agg_avg else "sum"
            return Metric(f"{fn}({name})", f"{fn}_{name}" if agg_avg else name, table)
        if group and group.dim.candidates:
            return Metric("count(*)", "count", group.dim.candidates[0][0])
        if group:
            return self._count(self.vocab.order[0])
        raise Unmappable("no metric, count or column matched")

    @staticmethod
    def _alias(term: str) -> str:
        return re.sub(r"[^a-z0-9]+", "_", term.lower()).strip("_")

    def _metric_table(self, term: Term, group: Group | None, q: str) -> str | None:
        """A glossary metric is computed on the first table it lists that can reach the grouped
        dimension, a table the question names first, never an aggregate when a fact will do
        (facts keep filters composable)."""
        tables = self.vocab.term_tables(term)
        primary = [t for t in tables if self.tables[t].role != "agg"] or tables
        if group:
            primary = [t for t in primary if self.vocab.serves(t, group.dim)] or primary
        named = {t for _s, _e, t in self.vocab.noun_spans(q)}
        return min(primary, key=lambda t: (t not in named, primary.index(t)), default=None)

    def _distinct(self, phrase: str, q: str, offset: int) -> Metric | None:
        """``distinct <entity>``: its key counted in another table the question names (a noun
        or a verb made of one: "ordered"), joined on the way if the key is further out
        (claims → policies.customer_id); ``distinct <dimension>``: its values."""
        found = self.vocab.noun_spans(phrase)
        if found and found[0][0] == 0:
            ent = found[0][2]
            key = self.tables[ent].pk
            if key is None:
                return None
            skip = (offset, offset + found[0][1])
            others = [t for s, _e, t in self.vocab.noun_spans(q) if not skip[0] <= s < skip[1]]
            others += [t for w in re.findall(r"\b([a-z]+?)e?d\b", q)
                       for n, t in self.vocab.nouns if n == w]
            alias = re.sub(r"\W+", "_", plural(self.tables[ent].entity))
            for t in others:
                if t != ent and key in self.tables[t].columns:
                    return Metric(f"count(DISTINCT {key})", alias, t)
                hops = self.vocab.path(t, ent) if t != ent else None
                if hops:  # the key sits on the last table before the entity's own
                    return Metric(f"count(DISTINCT {key})", alias, t, joins={u for u, _k in hops[:-1]})
            return Metric(f"count(DISTINCT {key})", alias, ent)
        dim = self.vocab.dim_at(phrase, 0)
        if dim and dim.candidates:
            t, c = dim.candidates[0]
            return Metric(f"count(DISTINCT {c})", re.sub(r"\W+", "_", plural(dim.phrase)), t)
        return None

    def _quantity(self, word: str, phrase: str) -> Metric | None:
        """``how many units``: the sum of a quantity column, on the table the phrase names."""
        head = self.vocab.head_noun(phrase)
        order = ([head] if head else []) + self.vocab.order
        for table in order:
            if col := self.vocab.quantity_column(table, word):
                return Metric(f"sum({col})", plural(singular(word)), table)
        return None

    def _numeric_column(self, q: str, group: Group | None) -> tuple[str, str] | None:
        toks = set(re.findall(r"[a-z]+", q))
        best = None
        for rank, table in enumerate(self.vocab.order):
            for name in self.tables[table].numeric:
                score = sum(1 for p in words(name) if p in toks or p + "s" in toks or p.rstrip("s") in toks
                            or p + "ed" in toks or p + "d" in toks)
                if not score:
                    continue
                key = (-score, not (group and self.vocab.serves(table, group.dim)), rank)
                if best is None or key < best[0]:
                    best = (key, table, name)
        return (best[1], best[2]) if best else None

    # ---- grouping ----------------------------------------------------------------------------

    def _group(self, q: str, masked: str) -> Group | None:
        """(dimension, limit, order) for top-k / ranking / per-dimension questions: the
        dimension right after "per"/"by", else (ranked) the first one the question names."""
        m = TOP_RX.search(q) or WHICH_RX.search(q) or BUSIEST_RX.search(q)
        limit = number(m.group(1)) if m else None
        ranked = limit is not None or any(has(q, w) for w in ("rank", "highest first", "largest first",
                                                              "most", "busiest", "by number of"))
        per = PER_RX.search(q)
        dim = self.vocab.dim_at(q, per.start(1)) if per else None
        after = per.start() if dim else None
        if dim is None and ranked:
            hits = [(s, -(e - s), i) for i, d in enumerate(self.vocab.dimensions)
                    for s, e in spans(masked, d.phrase)]
            if hits:
                dim = self.vocab.dimensions[min(hits)[2]]
        if dim is None:
            return None
        is_date = dim.grain is not None or all(
            not is_text(self.tables[t].columns[c]) for t, c in dim.candidates)
        order = "metric_desc"
        if has(q, "chronological") or (is_date and not ranked):
            order = "dim_asc"
        if is_date and has(q, "busiest"):
            order = "metric_desc"
        return Group(dim, limit, order, after)

    def _resolve(self, dim: Dimension, base: str, q: str) -> list[tuple[str, str, str]]:
        """The grouped column(s) of a dimension for a base table: on the base, else its time
        column at the dimension's grain, else the nearest table the base joins to. An entity's
        display name comes with its key when the question asks for ids."""
        picked = next(((t, c) for t, c in dim.candidates if t == base), None)
        tv = self.tables[base]
        if picked is None and dim.grain:
            if dim.grain == "month" and tv.month_col:
                picked = (base, tv.month_col)
            elif dim.grain == "day" and tv.time_cols:
                c = tv.time_cols[0]
                if tv.columns[c].type.upper().startswith("TIMESTAMP"):
                    return [(base, f"CAST({c} AS DATE)", "day")]
                picked = (base, c)
            elif tv.time_col:
                return [(base, f"date_trunc('{dim.grain}', {tv.time_col})", dim.grain)]
        if picked is None:
            reach = [(len(p), i, t, c) for i, (t, c) in enumerate(dim.candidates)
                     if (p := self.vocab.path(base, t)) is not None]
            if not reach:
                raise Unmappable(f"no join path from {base} to '{dim.phrase}'")
            picked = min(reach)[2:]
        t, c = picked
        if self.vocab.entity_name_col(t, c) and (has(q, "id") or has(q, "ids")):
            return [(t, self.tables[t].pk, self.tables[t].pk), (t, c, c)]
        return [(t, c, c)]

    # ---- filters -----------------------------------------------------------------------------

    def _target(self, plan: Plan, table: str, column: str) -> str | None:
        """Where a condition on ``table.column`` goes: the base when it has the column, else the
        table itself when the base reaches it (joined), else nowhere."""
        if column in self.tables[plan.base].columns:
            return plan.base
        if table in plan.tables or self.vocab.reachable(plan.base, table):
            return table
        return None

    def _filters(self, q: str, plan: Plan, original: str = "") -> None:
        used: set[str] = set()
        base_ent = self.tables[plan.base].entity
        for _n, term, name in self._term_hits(q, "filter"):
            if term.term in used or not term.sql or self.vocab.names_entity(name.lower(), base_ent):
                continue  # "returns" on a table of returns: every row is one
            tables = self.vocab.term_tables(term)
            table = next((t for t in tables if t == plan.base), None) or next(
                (t for t in tables if t in plan.tables), None) or next(
                (t for t in tables if self.tables[t].role != "agg"
                 and self.vocab.reachable(plan.base, t)), None)
            if table is None:
                continue
            used.add(term.term)
            plan.tables.add(table)
            plan.filters.append((table, term.sql))
        grouped = {e for _t, e, _a in plan.group}

        def covered(column: str) -> bool:
            return column in grouped or any(rx(rf"(?<![\w.]){re.escape(column)}(?!\w)").search(f)
                                            for _t, f in plan.filters)

        for value, table, column in self.vocab.values:
            v = value.lower().replace("_", " ")
            if len(v) < 3 or covered(column):
                continue
            negative = False
            if value[:1].isupper() and original:
                # "net value" is not the segment 'Value': capitalised data values match as written
                if not has_positive(original, value, case_sensitive=True):
                    continue
            elif not (has_positive(q, v) or has_positive(q, value.lower())):
                if not (has_negative(q, v) or has_negative(q, value.lower())):
                    continue
                negative = True  # "excluding cancelled", "non-cancelled"
            if self.vocab.names_entity(v, base_ent):
                continue  # 'returned' on a table of returns: every row is one
            if value.lower() in EVENT_VERBS and not any(
                    rx(rf"\b{re.escape(value.lower())}\s+" + phrase_rx(n).pattern).search(q)
                    for n, _t in self.vocab.nouns):
                continue  # "orders placed in 2025" is not status 'placed'
            target = self._target(plan, table, column)
            if target is None:
                continue
            plan.tables.add(target)
            literal = value.replace("'", "''")
            plan.filters.append((target, f"{column} {'<>' if negative else '='} '{literal}'"))
        self._measure_filters(q, plan)

    def _measure_filters(self, q: str, plan: Plan) -> None:
        tv = self.tables[plan.base]
        if m := THRESHOLD_RX.search(q):
            before, cmp, value, unit = m.groups()
            op = ">=" if cmp == "at least" else ">"
            col = None
            if singular(unit) in QUANTITY_WORDS or unit in QUANTITY_WORDS:
                col = self.vocab.quantity_column(plan.base, unit)
            elif unit:
                col = self.vocab.column_named(plan.base, unit, numeric=True)
            if col is None:
                for w in reversed(before.split()):
                    if col := self.vocab.column_named(plan.base, w, numeric=True):
                        break
            if col:
                plan.filters.append((plan.base, f"{col} {op} {number(value)}"))
        for m in [NEVER_RX.search(q), *ABSENT_RX.finditer(q)]:
            if m and (cond := self._none_of(plan, m.group(1))):
                plan.filters.append((plan.base, cond))
        for m in PRESENT_RX.finditer(q):
            col = self.vocab.column_named(plan.base, m.group(1) or m.group(2), numeric=False)
            if col and is_text(tv.columns[col]) and not is_negated(q, m.start()):
                plan.filters.append((plan.base, f"{col} IS NOT NULL"))

    def _none_of(self, plan: Plan, word: str) -> str | None:
        """The condition for "never placed an order", "no discount", "without a coupon": a
        per-entity count or amount column of the base is 0, a text column NULL, else the base's
        key has no row in the table the word names."""
        tv = self.tables[plan.base]
        col = next((c for c in tv.numeric if plural(singular(word)) in words(c)), None) or \
            self.vocab.column_named(plan.base, word)
        if col:
            return f"{col} {'= 0' if is_numeric(tv.columns[col]) else 'IS NULL'}"
        other = self.vocab.head_noun(word)
        if other and other != plan.base and tv.pk and tv.pk in self.tables[other].columns:
            return f"{tv.pk} NOT IN (SELECT {tv.pk} FROM {other} WHERE {tv.pk} IS NOT NULL)"
        return None

    # ---- time --------------------------------------------------------------------------------

    def _time(self, q: str, masked: str, plan: Plan) -> None:
        conds, year_only = time_window(q)
        if self.glossary and (not conds or year_only):
            for _n, term, _a in self._term_hits(q, "time_window"):
                if term.sql and not any(term.sql in c for c in conds):
                    conds.append("(" + term.sql + ")")
                    break
        if not conds:
            return
        tv = self.tables[plan.base]
        col = plan.metric.time_column if plan.metric.time_column in tv.columns else \
            self.vocab.date_column(plan.base, masked)
        if col is None:
            raise Unmappable(f"{plan.base} has no date column for the time window")
        if tv.columns[col].type.upper().startswith("TIMESTAMP"):
            col = f"CAST({col} AS DATE)"  # a window of days: the as-of day counts whole
        time_cols = {c for t in self.tables.values() for c in t.time_cols + [t.month_col] if c}
        for c in conds:
            c = IDENT_RX.sub(lambda m: col if m.group(1) in time_cols else m.group(0), c)
            plan.filters.append((plan.base, c.replace("{col}", col)))

    # ---- render --------------------------------------------------------------------------

    def _render(self, plan: Plan) -> str:
        base = plan.base
        joins: list[str] = []
        joined = [base]
        using: dict[str, int] = {}
        for t in sorted(plan.tables - {base}, key=self.vocab._rank):
            hops = self.vocab.path(base, t)
            if hops is None:
                raise Unmappable(f"no join path from {base} to {t}")
            prev = base
            for u, key in hops:
                if u not in joined:
                    if sum(key in self.tables[j].columns for j in joined) == 1:
                        joins.append(f"JOIN {u} USING ({key})")
                        using[key] = 2
                    else:
                        joins.append(f"JOIN {u} ON {prev}.{key} = {u}.{key}")
                    joined.append(u)
                prev = u
        counts: dict[str, int] = {}
        for j in joined:
            for c in self.tables[j].columns:
                counts[c] = counts.get(c, 0) + 1
        ambiguous = {c for c, n in counts.items() if n > 1 and using.get(c) != n}

        def qual(table: str, expr: str) -> str:
            cols = self.tables[table].columns
            return IDENT_RX.sub(lambda m: f"{table}.{m.group(1)}" if m.group(1) in ambiguous
                                and m.group(1) in cols else m.group(0), expr)

        select, group_cols = [], []
        for t, expr, alias in plan.group:
            e = qual(t, expr)
            select.append(e if e.split(".")[-1] == alias else f"{e} AS {alias}")
            group_cols.append(e)
        metric = plan.metric
        select.append(f"{qual(metric.table, metric.expr)} AS {metric.alias}")
        sql = f"SELECT {', '.join(select)} FROM {base}"
        if joins:
            sql += " " + " ".join(joins)
        filters = list(dict.fromkeys(qual(t, f) for t, f in plan.filters if f))
        if filters:
            sql += " WHERE " + " AND ".join(f"({f})" if " or " in f.lower() and not f.startswith("(")
                                            else f for f in filters)
        if group_cols:
            sql += " GROUP BY " + ", ".join(group_cols)
            if plan.order == "dim_asc":
                sql += " ORDER BY " + ", ".join(group_cols)
            else:
                sql += f" ORDER BY {metric.alias} DESC"
        if plan.limit:
            sql += f" LIMIT {plan.limit}"
        return sql
