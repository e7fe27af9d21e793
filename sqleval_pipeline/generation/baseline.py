"""The embedded baseline: a deterministic, offline question → SQL compiler.

It exists so the pipeline runs end to end with no key and no network, and so a change of
semantic-layer curation has a measurable effect. It is a *baseline*: a few dozen lexical rules,
never tuned on held-out cases, and its accuracy is whatever it honestly gets.

How it reads a question:

1. **Refusal**: with curation on, the glossary's ``refusal`` entry lists what is not available
   (salaries, phone numbers, margins, …); a question naming one is declined. Without
   curation it declines only when it cannot map the question onto any table.
2. **Metric**: with curation on, glossary metrics by name or alias (``revenue`` → net revenue
   of non-cancelled orders, ``AOV``, ``return rate`` …). Without it, words are matched to
   numeric column names (``revenue`` → the first ``*revenue*`` column), ``how many X`` counts
   the table named like X.
3. **Filters**: glossary filters by alias (``UPI`` → ``payment_method = 'unified_payments'``,
   ``completed`` → ``status = 'delivered'``, ``premium`` → ``segment_cd = 'A'``); and, with or
   without curation, literal categorical values that appear in the data (``Bengaluru``, ``web``).
4. **Time**: relative windows measured from CURRENT_DATE (pinned to the snapshot's as-of date
   by the guard): last N days, last/this month, this/last year, named months and years.
5. **Grouping**: ``top N <dim> by …``, ``rank <dim> by``, ``per <dim>``, with ORDER BY and LIMIT.

>>> from sqleval_pipeline.generation.baseline import month_window
>>> month_window("november", 2025)
("DATE '2025-11-01'", "DATE '2025-12-01'")
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.generation.context import SchemaCatalog
from sqleval_pipeline.glossary import Glossary, Term
from sqleval_pipeline.records import Usage

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10}

# dimension words → (table, column); the order matters for "top N <word>"
DIMENSIONS: list[tuple[tuple[str, ...], str, str]] = [
    (("payment method", "payment methods", "payment type"), "fct_orders", "payment_method"),
    (("return reason", "return reasons", "reason", "reasons"), "fct_returns", "reason"),
    (("city", "cities"), "dim_customers", "city"),
    (("state", "states"), "dim_customers", "state_code"),
    (("region", "regions"), "dim_customers", "region"),
    (("segment", "segments"), "dim_segments", "segment_name"),
    (("category", "categories"), "dim_products", "category_name"),
    (("department", "departments"), "dim_products", "department"),
    (("brand", "brands"), "dim_products", "brand"),
    (("product", "products"), "dim_products", "product_name"),
    (("month", "months"), "fct_orders", "order_month"),
    (("day", "days", "date", "dates"), "fct_orders", "order_date"),
    (("channel", "channels"), "fct_orders", "channel"),
]
# "how many <noun>" → table counted
COUNT_NOUNS: list[tuple[tuple[str, ...], str]] = [
    (("order line", "order lines", "line item", "line items"), "fct_order_items"),
    (("return", "returns"), "fct_returns"),
    (("customer", "customers"), "dim_customers"),
    (("product", "products"), "dim_products"),
    (("order", "orders"), "fct_orders"),
]
JOIN_KEYS = {
    ("fct_orders", "dim_customers"): "customer_id",
    ("fct_order_items", "dim_products"): "product_id",
    ("fct_order_items", "dim_customers"): "customer_id",
    ("dim_customers", "dim_segments"): "segment_cd",
    ("fct_returns", "dim_customers"): "customer_id",
}
VERB_LIKE_VALUES = {"placed", "shipped"}  # status values that are usually English verbs


def _has(q: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z0-9_]){re.escape(phrase.lower())}(?![a-z0-9_])", q) is not None


def _variants(phrase: str) -> set[str]:
    p = phrase.lower()
    return {p, p + "s", p + "es", p[:-1] if p.endswith("s") else p}


NEGATIONS = ("excluding", "except", "non-", "not", "without", "other than")


def _matches(q: str, phrase: str, *, case_sensitive: bool = False) -> list[int]:
    """Start offsets of the phrase (or its singular/plural) in q."""
    text = q if case_sensitive else q.lower()
    starts = []
    for v in (_variants(phrase) if not case_sensitive else {phrase}):
        starts += [m.start() for m in re.finditer(
            rf"(?<![A-Za-z0-9_]){re.escape(v)}(?![A-Za-z0-9_])", text)]
    return sorted(set(starts))


def _is_negated(q: str, start: int) -> bool:
    before = q[max(0, start - 12): start].lower()
    return any(before.rstrip().endswith(n.rstrip("-")) or before.endswith(n) for n in NEGATIONS)


def _has_word(q: str, phrase: str) -> bool:
    """Phrase match tolerating a plural on either side ("refund" ~ "refunds")."""
    return bool(_matches(q, phrase))


def _has_positive(q: str, phrase: str, *, case_sensitive: bool = False) -> bool:
    """The phrase occurs at least once *not* right after a negation ("excluding cancelled")."""
    return any(not _is_negated(q, s) for s in _matches(q, phrase, case_sensitive=case_sensitive))


def month_window(month: str, year: int) -> tuple[str, str]:
    m = MONTHS.index(month) + 1
    end = f"DATE '{year + (m == 12)}-{(m % 12) + 1:02d}-01'"
    return f"DATE '{year}-{m:02d}-01'", end


@dataclass
class Metric:
    expr: str
    alias: str
    table: str
    filters: list[str] = field(default_factory=list)
    phrase: str | None = None  # the words that named the metric (not re-read as filters)


@dataclass
class Plan:
    base: str
    metric: Metric
    filters: list[str] = field(default_factory=list)
    tables: set[str] = field(default_factory=set)
    group: list[tuple[str, str]] = field(default_factory=list)  # (table, column)
    order: str | None = None
    limit: int | None = None


class Unmappable(Exception):
    pass


class BaselineGenerator:
    """Deterministic text-to-SQL over the catalog; ``glossary=None`` means curation off."""

    def __init__(self, catalog: SchemaCatalog, glossary: Glossary | None = None,
                 name: str | None = None):
        self.catalog = catalog
        self.glossary = glossary
        self.name = name or ("baseline-curated" if glossary else "baseline-raw")
        self.columns = {t.name: {c.name: c for c in t.columns} for t in catalog.tables}
        # categorical values present in the data: value → (table, column)
        self.values: list[tuple[str, str, str]] = []
        for t in catalog.tables:
            for c in t.columns:
                if c.samples and c.name not in ("segment_description", "description"):
                    for v in c.samples:
                        self.values.append((v, t.name, c.name))
        self.values.sort(key=lambda x: -len(x[0]))

    def close(self) -> None:
        pass

    # ---- public ------------------------------------------------------------------------

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        started = time.perf_counter()
        original = " ".join(ctx.question.replace("’", "'").split())
        q = original.lower()
        try:
            refusal = self._refusal(q)
            if refusal:
                out = GenerationOutput(kind="refusal", refusal_reason=refusal)
            else:
                out = GenerationOutput(kind="sql", sql=self.compile(q, original))
        except Unmappable as exc:
            out = GenerationOutput(kind="refusal", refusal_reason=f"cannot map the question: {exc}")
        out.usage = Usage(latency_ms=(time.perf_counter() - started) * 1000, cost_usd=0.0)
        out.model = self.name
        out.temperature = None
        out.temperature_settable = False
        return out

    # ---- refusal -------------------------------------------------------------------------

    def _refusal(self, q: str) -> str | None:
        if not self.glossary:
            return None
        for term in self.glossary.by_kind("refusal"):
            for alias in sorted(term.aliases, key=len, reverse=True):
                if _has_word(q, alias):
                    return (f"'{alias}' is not available in the served data "
                            "(per the glossary: sensitive or not collected)")
        return None

    # ---- compile -------------------------------------------------------------------------

    def compile(self, q: str, original: str | None = None) -> str:
        """SQL for a lower-cased question (``original`` keeps its capitalisation). Pure: no
        state is kept between calls, so concurrent attempts cannot interfere."""
        original = original if original is not None else q
        group = self._group(q)
        metric = self._metric(q, group)
        plan = Plan(base=metric.table, metric=metric, filters=list(metric.filters),
                    tables={metric.table})
        if group:
            plan.group = group[0]
            plan.limit = group[1]
            plan.order = group[2]
            for t, _c in plan.group:
                plan.tables.add(t)
        fq, forig = q, original
        if metric.phrase:
            for v in _variants(metric.phrase):
                fq = re.sub(rf"(?<![a-z0-9_]){re.escape(v)}(?![a-z0-9_])", " ", fq)
                forig = re.sub(rf"(?i)(?<![a-z0-9_]){re.escape(v)}(?![a-z0-9_])", " ", forig)
        self._filters(fq, plan, forig)
        self._time(q, plan)
        return self._render(plan)

    def _term_hits(self, q: str, kind: str) -> list[tuple[int, Term, str]]:
        hits = []
        if not self.glossary:
            return hits
        for term in self.glossary.by_kind(kind):
            for name in [term.term, *term.aliases]:
                if _has_positive(q, name):
                    hits.append((len(name), term, name))
        hits.sort(key=lambda h: -h[0])
        return hits

    def _metric(self, q: str, group) -> Metric:
        agg_avg = _has(q, "average") or _has(q, "avg") or _has(q, "mean")
        # glossary metrics first (curation on)
        for _n, term, name in self._term_hits(q, "metric"):
            if term.term == "order count":
                continue  # counting is resolved below, with the counted noun
            if name in ("units",) and not _has(q, "sold"):
                continue
            table = self._metric_table(term, group)
            if not table:
                continue
            filters = [term.filter] if term.filter else []
            return Metric(term.sql, self._alias(term.term), table, filters, phrase=name)
        # explicit "distinct customers"
        if _has(q, "distinct customers") or re.search(r"customers (?:who|that) (?:placed|ordered)", q):
            return Metric("count(DISTINCT customer_id)", "customers", "fct_orders")
        m = re.search(r"(?:how many|number of|count of)\s+(?:distinct\s+)?([a-z ]+)", q)
        if m:
            phrase = m.group(1)
            if _has(q, "distinct cities") or phrase.startswith("cities"):
                return Metric("count(DISTINCT city)", "cities", "dim_customers")
            for nouns, table in COUNT_NOUNS:
                if any(phrase.startswith(n) or _has(phrase, n) for n in nouns):
                    if table == "fct_orders" and phrase.startswith("unit"):
                        return Metric("sum(units)", "units", "fct_orders")
                    if phrase.startswith("unit"):
                        return Metric("sum(quantity)", "units", "fct_order_items")
                    return Metric("count(*)", self._count_alias(table), table)
            if phrase.startswith("unit"):
                return Metric("sum(quantity)", "units", "fct_order_items")
        if group and (_has(q, "number of") or _has(q, "most") or _has(q, "busiest")):
            for nouns, table in COUNT_NOUNS:
                if any(_has(q, n) for n in nouns):
                    return Metric("count(*)", self._count_alias(table), table)
        # numeric columns named in the question
        col = self._numeric_column(q)
        if col:
            table, name = col
            fn = "avg" if agg_avg else "sum"
            return Metric(f"{fn}({name})", f"{fn}_{name}" if agg_avg else name, table)
        if group:
            return Metric("count(*)", "count", group[0][0][0])
        raise Unmappable("no metric, count or column matched")

    @staticmethod
    def _count_alias(table: str) -> str:
        return {"fct_orders": "orders", "dim_customers": "customers", "dim_products": "products",
                "fct_returns": "returns", "fct_order_items": "order_lines"}.get(table, "count")

    @staticmethod
    def _alias(term: str) -> str:
        return re.sub(r"[^a-z0-9]+", "_", term.lower()).strip("_")

    def _metric_table(self, term: Term, group) -> str | None:
        """The table a glossary metric is computed on: a fact table, never a dashboard mart
        (facts keep filters composable), and order lines when grouping by a product attribute."""
        wanted = {t for (t, _c) in (group[0] if group else [])}
        facts = [t for t in term.tables if t in self.columns and not t.startswith("mart_")]
        if "dim_products" in wanted:
            facts = [t for t in facts if t != "fct_orders"]
        return facts[0] if facts else next((t for t in term.tables if t in self.columns), None)

    def _numeric_column(self, q: str) -> tuple[str, str] | None:
        toks = set(re.findall(r"[a-z]+", q))
        best = None
        for table in ("fct_orders", "fct_returns", "fct_order_items", "dim_products",
                      "dim_customers", "mart_revenue_monthly"):
            for name, c in self.columns.get(table, {}).items():
                if not any(x in c.type for x in ("DECIMAL", "INT", "DOUBLE")) or name.endswith("_id"):
                    continue
                parts = [p for p in name.split("_") if p not in ("inr",)]
                score = sum(1 for p in parts if p in toks or p + "s" in toks or p.rstrip("s") in toks
                            or (p == "refund" and "refunded" in toks))
                if score and (best is None or score > best[0]):
                    best = (score, table, name)
        return (best[1], best[2]) if best else None

    def _group(self, q: str):
        """(group columns, limit, order) for top-k / ranking / per-dimension questions."""
        limit = None
        m = re.search(r"\btop\s+(\d+|" + "|".join(NUMBERS) + r")\b", q) or \
            re.search(r"\b(?:which|what)\s+(?:are\s+the\s+|were\s+the\s+)?(\d+|" + "|".join(NUMBERS)
                      + r")\b", q) or re.search(r"\bthe\s+(\d+)\s+busiest\b", q)
        if m:
            limit = int(NUMBERS.get(m.group(1), m.group(1)) if not m.group(1).isdigit() else m.group(1))
        ranked = limit is not None or any(_has(q, w) for w in ("rank", "highest first", "largest first",
                                                               "most", "busiest", "by number of"))
        per = re.search(r"\b(?:per|by|for each(?: of)?|each of)\s+(?:the\s+)?(?:(?:last|past)\s+\w+\s+)?"
                        r"(?:complete\s+)?(?:calendar\s+)?([a-z ]+)", q)
        for words, table, column in DIMENSIONS:
            for w in words:
                hit = False
                if ranked and _has(q, w):
                    hit = True
                elif per and per.group(1).startswith(w):
                    hit = True
                if not hit:
                    continue
                if table not in self.columns:
                    continue
                order = "metric_desc"
                if _has(q, "chronological") or (column in ("order_month", "order_date") and not ranked):
                    order = "dim_asc"
                cols = [(table, column)]
                if column == "product_name":
                    cols = [("dim_products", "product_id"), ("dim_products", "product_name")]
                if column in ("order_month", "order_date") and _has(q, "busiest"):
                    order = "metric_desc"
                return cols, limit, order
        return None

    def _filters(self, q: str, plan: Plan, original: str = "") -> None:
        used: set[str] = set()
        for _n, term, name in self._term_hits(q, "filter"):
            if term.term in used or not term.sql:
                continue
            table = next((t for t in term.tables if t in plan.tables), None)
            if table is None:
                table = next((t for t in term.tables if t in self.columns and t != "mart_orders_daily"
                              and self._joinable(plan, t)), None)
            if table is None or table == "mart_orders_daily":
                continue
            used.add(term.term)
            if table == "dim_customers" and plan.base != "dim_customers":
                plan.tables.add("dim_customers")
            plan.filters.append(term.sql)
        covered = " ".join(plan.filters)
        # literal categorical values present in the data
        for value, table, column in self.values:
            v = value.lower().replace("_", " ")
            if len(v) < 3:
                continue
            if value[:1].isupper() and original:
                # "net value" is not the segment 'Value': capitalised data values match as written
                if not _has_positive(original, value, case_sensitive=True):
                    continue
            elif not (_has_positive(q, v) or _has_positive(q, value.lower())):
                continue
            if column in covered or column in [c for _t, c in plan.group]:
                continue
            if value.lower() in VERB_LIKE_VALUES and not re.search(rf"{value.lower()}\s+orders?", q):
                continue
            if column == "status" and re.search(rf"\bexcluding\s+{v}|\bnon-{v}", q):
                continue
            if column == "status" and value.lower() == "returned" and plan.base == "fct_returns":
                continue
            target = table
            if table in ("fct_orders", "fct_order_items", "fct_returns", "mart_orders_daily"):
                if plan.base in ("fct_orders", "fct_order_items", "fct_returns") and \
                        column in self.columns.get(plan.base, {}):
                    target = plan.base
                elif table != plan.base:
                    continue
            plan.tables.add(target)
            plan.filters.append(f"{column} = '{value}'")
            covered += f" {column}"
        # "excluding cancelled" / "non-cancelled"
        if re.search(r"excluding cancelled|non-cancelled|not cancelled", q) and \
                "status <> 'cancelled'" not in plan.filters:
            plan.filters.append("status <> 'cancelled'")
        # numeric thresholds on a named amount: "above ₹5,000", "at least 10 orders", "more than 3 units"
        m = re.search(r"(?:above|over|more than|greater than|at least)\s+(?:₹|rs\.?\s*)?([\d,]+)\s*([a-z]*)", q)
        if m:
            value = int(m.group(1).replace(",", ""))
            op = ">=" if "at least" in m.group(0) else ">"
            unit = m.group(2)
            if unit.startswith("unit") and "units" in self.columns.get(plan.base, {}):
                plan.filters.append(f"units {op} {value}")
            elif unit.startswith("unit") and "quantity" in self.columns.get(plan.base, {}):
                plan.filters.append(f"quantity {op} {value}")
            elif unit.startswith("order") and plan.base == "dim_customers":
                plan.filters.append(f"lifetime_orders {op} {value}")
            elif "net" in q and "net_revenue_inr" in self.columns.get(plan.base, {}):
                plan.filters.append(f"net_revenue_inr {op} {value}")
        if _has(q, "never placed an order") and plan.base == "dim_customers":
            plan.filters.append("lifetime_orders = 0")
        if re.search(r"coupon (?:was )?applied|had a coupon|with a coupon", q):
            plan.filters.append("coupon_code IS NOT NULL")
        if re.search(r"no discount|without (?:a )?discount", q):
            plan.filters.append("discount_inr = 0")

    def _joinable(self, plan: Plan, table: str) -> bool:
        if table in plan.tables:
            return True
        return any((t, table) in JOIN_KEYS or (table, t) in JOIN_KEYS for t in plan.tables)

    def _date_column(self, q: str, plan: Plan) -> str:
        if plan.base == "dim_customers":
            return "signup_date" if re.search(r"sign(?:ed)? ?up|joined|registered", q) else "first_order_date"
        if plan.base == "fct_returns" and re.search(r"returns? (?:were |was )?(?:received|recorded)|return date", q):
            return "return_date"
        if plan.base == "mart_revenue_monthly":
            return "order_month"
        return "order_date"

    def _time(self, q: str, plan: Plan) -> None:
        col = self._date_column(q, plan)
        today = "current_date"
        conds: list[str] = []
        m = re.search(r"(?:last|past|previous|trailing)\s+(\d+|" + "|".join(NUMBERS) + r")\s+days?", q)
        if m:
            n = int(NUMBERS.get(m.group(1), m.group(1)) if not m.group(1).isdigit() else m.group(1))
            conds = [f"{col} > {today} - INTERVAL {n} DAY", f"{col} <= {today}"]
        elif re.search(r"\b(?:last|past) week\b", q):
            conds = [f"{col} > {today} - INTERVAL 7 DAY", f"{col} <= {today}"]
        elif m := re.search(r"last (\d+|three|two|six|twelve) (?:complete )?(?:calendar )?months", q):
            n = int(NUMBERS.get(m.group(1), m.group(1)) if not m.group(1).isdigit() else m.group(1))
            conds = [f"{col} >= date_trunc('month', {today}) - INTERVAL {n} MONTH",
                     f"{col} < date_trunc('month', {today})"]
        elif re.search(r"\b(?:last|previous) month\b", q):
            conds = [f"{col} >= date_trunc('month', {today}) - INTERVAL 1 MONTH",
                     f"{col} < date_trunc('month', {today})"]
        elif re.search(r"this month|month to date|so far this month", q):
            conds = [f"{col} >= date_trunc('month', {today})", f"{col} <= {today}"]
        elif re.search(r"this year|year to date|\bytd\b", q):
            conds = [f"{col} >= date_trunc('year', {today})", f"{col} <= {today}"]
        elif re.search(r"\b(?:last|previous) year\b", q):
            conds = [f"{col} >= date_trunc('year', {today}) - INTERVAL 1 YEAR",
                     f"{col} < date_trunc('year', {today})"]
        else:
            months = [(mo, int(y)) for mo, y in re.findall(r"(" + "|".join(MONTHS) + r")\s+(\d{4})", q)]
            pair = re.search(r"(" + "|".join(MONTHS) + r")\s+and\s+(" + "|".join(MONTHS) + r")\s+(\d{4})", q)
            between = re.search(r"between\s+(\d{1,2})\s+(" + "|".join(MONTHS) + r")\s+and\s+(\d{1,2})\s+("
                                + "|".join(MONTHS) + r")\s+(\d{4})", q)
            if between:
                d1, m1, d2, m2, y = between.groups()
                conds = [f"{col} BETWEEN DATE '{y}-{MONTHS.index(m1) + 1:02d}-{int(d1):02d}' AND "
                         f"DATE '{y}-{MONTHS.index(m2) + 1:02d}-{int(d2):02d}'"]
            elif pair:
                m1, m2, y = pair.groups()
                start, _ = month_window(m1, int(y))
                _, end = month_window(m2, int(y))
                conds = [f"{col} >= {start}", f"{col} < {end}"]
            elif months:
                start, end = month_window(*months[0])
                conds = [f"{col} >= {start}", f"{col} < {end}"]
            elif y := re.search(r"\b(?:in|for|during|of)\s+(?:the\s+)?(20\d\d)\b", q):
                year = int(y.group(1))
                if self.glossary and any(t.term == "festive season" for _n, t, _a in
                                         self._term_hits(q, "time_window")):
                    conds = [f"{col} >= DATE '{year}-10-01'", f"{col} < DATE '{year}-12-01'"]
                else:
                    conds = [f"{col} >= DATE '{year}-01-01'", f"{col} < DATE '{year + 1}-01-01'"]
        plan.filters.extend(conds)

    # ---- render --------------------------------------------------------------------------

    def _render(self, plan: Plan) -> str:
        base = plan.base
        joins: list[str] = []
        joined = {base}
        needed = [t for t in sorted(plan.tables) if t != base]
        if "dim_segments" in needed and base != "dim_customers" and "dim_customers" not in needed:
            needed.insert(0, "dim_customers")
        for t in sorted(needed, key=lambda x: x == "dim_segments"):
            key = None
            for j in sorted(joined):
                key = JOIN_KEYS.get((j, t)) or JOIN_KEYS.get((t, j))
                if key:
                    break
            if key is None:
                if base.startswith("dim_") and t.startswith("fct_"):
                    continue
                raise Unmappable(f"no join path from {base} to {t}")
            joins.append(f"JOIN {t} USING ({key})")
            joined.add(t)
        select = []
        group_cols = []
        for _t, c in plan.group:
            select.append(c)
            group_cols.append(c)
        select.append(f"{plan.metric.expr} AS {plan.metric.alias}")
        sql = f"SELECT {', '.join(select)} FROM {base}"
        if joins:
            sql += " " + " ".join(joins)
        filters = list(dict.fromkeys(f for f in plan.filters if f))
        if filters:
            sql += " WHERE " + " AND ".join(f"({f})" if " or " in f.lower() else f for f in filters)
        if group_cols:
            sql += " GROUP BY " + ", ".join(group_cols)
            if plan.order == "dim_asc":
                sql += " ORDER BY " + ", ".join(group_cols)
            else:
                sql += f" ORDER BY {plan.metric.alias} DESC"
        if plan.limit:
            sql += f" LIMIT {plan.limit}"
        return sql
