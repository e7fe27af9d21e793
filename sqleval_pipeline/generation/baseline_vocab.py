"""The baseline's vocabulary, derived from the served schema (and the glossary when curated).

Nothing here names a table or column of any particular warehouse: every word the baseline
understands comes from the :class:`SchemaCatalog` it is given, plus generic English (plurals,
numbers, months, quantity words, verbs of creation). dbt descriptions are read only with
curation on, like the glossary, so the raw baseline sees names, types and values only.

* **Role** from dbt prefixes: ``fct_``/``fact_`` fact, ``dim_`` dimension, ``mart_``/``agg_``/
  ``rpt_`` aggregate. Otherwise (no prefix, ``stg_``, ``int_``): aggregate without any key
  column, fact when it references another table and has a date and a numeric measure, else
  dimension.
* **Entity** (the noun a table counts): its name without prefix and aggregate words
  (``daily``, ``summary`` …), last word singular: ``fct_order_items`` → "order item",
  ``policies`` → "policy". Curated: a description "One row per <phrase>" adds <phrase>.
  Aggregates count nothing; a noun shared by two tables belongs to the preferred one.
* **Keys**: :func:`~sqleval_pipeline.warehouse.roles.is_key` (``id``, ``*_id``, ``*_key``,
  ``*_sk``, ``*_pk``, ``*_fk``, ``*_cd``, ``*_code``). The primary
  key is the one named after the entity (``order_id`` for "order"), else a key first column.
  A key of T that is U's primary key is a foreign key: T joins U on it, many-to-one only, so
  a join never multiplies the rows counted; paths are shortest-first.
* **Preference** when several tables could serve: facts, dimensions, aggregates; then
  fewer references to tables of the same role (an order before its lines); then name.
* **Dimensions**: non-key, non-prose text columns (a text ``*_code`` that joins nothing is
  one), named by their words without a trailing ``name``/``code``/``cd``/``id``/``label``
  (``state_code`` → "state"), by their full name, and prefixed by the entity ("return
  reason"); an entity's own name column (``product_name``) brings its key when ids are asked.
  Time grains ("day", "week", "month", "year") use the base table's time column (``*month*``
  date column for months, else ``date_trunc``). Glossary ``dimension`` terms come first.
* **Time column**: a DATE (then TIMESTAMP, compared as its date) column named after the
  entity, else the first; a question using another date column's own words ("signed up" ~
  ``signup_date``) picks it; a glossary metric's ``time_column`` wins.
* **Measures**: :func:`~sqleval_pipeline.warehouse.roles.is_measure` (numeric, not a key, not a
  labelling number such as a year or a zip code). **Values**: samples of categorical text columns.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

from sqleval_pipeline.generation.context import Column, SchemaCatalog
from sqleval_pipeline.semantic.glossary import Glossary, Term
from sqleval_pipeline.warehouse import roles
from sqleval_pipeline.warehouse.roles import is_key, is_measure, key_stem

ROLE_PREFIXES = (("fct_", "fact"), ("fact_", "fact"), ("dim_", "dim"), ("mart_", "agg"),
                 ("agg_", "agg"), ("rpt_", "agg"), ("stg_", ""), ("int_", ""))
ROLE_RANK = {"fact": 0, "dim": 1, "agg": 2}
AGG_WORDS = {"daily", "weekly", "monthly", "quarterly", "yearly", "annual", "summary", "agg",
             "aggregate", "totals", "rollup", "by"}
LABEL_SUFFIXES = {"name", "code", "cd", "id", "label", "desc"}
PROSE_WORDS = {"description", "desc", "comment", "comments", "note", "notes", "text", "body"}
QUANTITY_WORDS = {"unit", "units", "quantity", "qty"}
TIME_GENERIC = {"date", "ts", "time", "timestamp", "at", "on", "dt", "day"}
# verbs that say a row was *created*: as a status value they only filter when attributive
EVENT_VERBS = {"placed", "created", "made", "recorded", "registered", "opened", "submitted",
               "booked", "issued", "sold", "filed", "logged", "raised"}
GRAINS = {"day": ("day", "days", "date", "dates", "daily"), "week": ("week", "weeks", "weekly"),
          "month": ("month", "months", "monthly"), "year": ("year", "years", "yearly")}


# ---- words ------------------------------------------------------------------------------

def singular(w: str) -> str:
    if len(w) > 3 and w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith(("sses", "xes", "ches", "shes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def plural(w: str) -> str:
    if w.endswith("y") and len(w) > 2 and w[-2] not in "aeiou":
        return w[:-1] + "ies"
    if w.endswith(("s", "x", "ch", "sh")):
        return w + "es"
    return w + "s"


def variants(phrase: str) -> set[str]:
    """The phrase with its last word singular or plural ("policy" ~ "policies")."""
    p = phrase.lower()
    head, _, last = p.rpartition(" ")
    pre = head + " " if head else ""
    return {p, p + "s", p + "es", p[:-1] if p.endswith("s") else p,
            pre + singular(last), pre + plural(singular(last))}


def words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\W]+", name.lower()) if w]


def is_numeric(c: Column) -> bool:
    return roles.is_numeric(c.type)


def is_time(c: Column) -> bool:  # DATE, TIMESTAMP, TIMESTAMP WITH TIME ZONE …
    return roles.is_time(c.type)


def is_text(c: Column) -> bool:
    return roles.is_text(c.type)


def is_prose(c: Column) -> bool:
    if PROSE_WORDS & set(words(c.name)):
        return True
    return bool(c.samples) and sum(len(str(s).split()) for s in c.samples) / len(c.samples) >= 4


# ---- cached patterns (compiled once per phrase, never per question) ------------------------

@lru_cache(maxsize=16384)
def rx(pattern: str, flags: int = 0) -> re.Pattern:
    return re.compile(pattern, flags)


@lru_cache(maxsize=16384)
def phrase_rx(phrase: str, case_sensitive: bool = False) -> re.Pattern:
    forms = {phrase} if case_sensitive else variants(phrase)
    alts = "|".join(re.escape(v) for v in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{alts})(?![A-Za-z0-9_])")


def spans(q: str, phrase: str, *, case_sensitive: bool = False) -> list[tuple[int, int]]:
    text = q if case_sensitive else q.lower()
    return [m.span() for m in phrase_rx(phrase if case_sensitive else phrase.lower(),
                                        case_sensitive).finditer(text)]


NEGATIONS = ("excluding", "except", "non-", "not", "without", "other than")


def is_negated(q: str, start: int) -> bool:
    before = q[max(0, start - 12): start].lower()
    return any(before.rstrip().endswith(n.rstrip("-")) or before.endswith(n) for n in NEGATIONS)


def has(q: str, phrase: str) -> bool:
    """Phrase match tolerating a plural on either side ("refund" ~ "refunds")."""
    return bool(spans(q, phrase))


def has_positive(q: str, phrase: str, *, case_sensitive: bool = False) -> bool:
    """The phrase occurs at least once *not* right after a negation ("excluding cancelled")."""
    return any(not is_negated(q, s) for s, _e in spans(q, phrase, case_sensitive=case_sensitive))


def has_negative(q: str, phrase: str) -> bool:
    found = spans(q, phrase)
    return bool(found) and all(is_negated(q, s) for s, _e in found)


@lru_cache(maxsize=4096)
def word_rx(word: str) -> re.Pattern:
    """A column word in a question, inflected or split: "signup" ~ "signed up", "sign-up"."""
    alts = [re.escape(word) + r"(?:s|es|ed|d|ing)?"]
    alts += [re.escape(word[:i]) + r"(?:s|ed|d|ing)?[\s-]?" + re.escape(word[i:])
             for i in range(2, len(word) - 1)]
    if word.endswith("e"):
        alts.append(re.escape(word[:-1]) + "ing")
    return re.compile(rf"(?<![a-z0-9_])(?:{'|'.join(alts)})(?![a-z0-9_])")


# ---- vocabulary ----------------------------------------------------------------------------

@dataclass
class TableVocab:
    name: str
    role: str
    entity: str
    columns: dict[str, Column]
    pk: str | None = None
    fks: dict[str, str] = field(default_factory=dict)  # column → referenced table
    time_cols: list[str] = field(default_factory=list)  # preferred first
    month_col: str | None = None
    numeric: list[str] = field(default_factory=list)
    nouns: list[str] = field(default_factory=list)

    @property
    def time_col(self) -> str | None:
        return self.time_cols[0] if self.time_cols else self.month_col


@dataclass
class Dimension:
    phrase: str
    candidates: list[tuple[str, str]]  # (table, column), preferred first
    grain: str | None = None  # day | week | month | year for time grains


class Vocabulary:
    """Everything the baseline knows about one catalog (and glossary): see the module doc."""

    def __init__(self, catalog: SchemaCatalog, glossary: Glossary | None = None):
        self.curated = glossary is not None
        self.glossary = glossary
        self.tables: dict[str, TableVocab] = {}
        for t in catalog.tables:
            self.tables[t.name] = self._table(t.name, t.columns)
        self._keys_and_roles()
        self.keys = {c for tv in self.tables.values() for c in tv.fks} | \
            {tv.pk for tv in self.tables.values() if tv.pk}
        self._paths: dict[tuple[str, str], list[tuple[str, str]] | None] = {}
        self.order = sorted(self.tables, key=self._rank)
        for name in self.order:
            tv = self.tables[name]
            tv.nouns = [] if tv.role == "agg" else [tv.entity]
            if self.curated:
                desc = catalog.table(name).description.lower()
                m = re.search(r"\bone row per ([a-z][a-z ]*?)(?=[,.;(]| with| x |$)", desc)
                if m and tv.role != "agg" and m.group(1).strip() not in tv.nouns:
                    tv.nouns.append(m.group(1).strip())
        # count nouns: (noun, table), longest first; the first table in preference order owns it
        owner: dict[str, str] = {}
        for name in self.order:
            for n in self.tables[name].nouns:
                owner.setdefault(singular(n), name)
        self.nouns = sorted(owner.items(), key=lambda x: (-len(x[0]), x[0]))
        self.dimensions = self._dimensions()
        self.values = sorted(
            ((v, name, c.name) for name in self.order for c in self.tables[name].columns.values()
             if c.samples and not is_prose(c) for v in c.samples),
            key=lambda x: -len(x[0]))
        self.column_names = {c for tv in self.tables.values() for c in tv.columns}

    # ---- tables, keys, roles ---------------------------------------------------------------

    def _table(self, name: str, columns: list[Column]) -> TableVocab:
        low, role = name.lower(), None
        for prefix, r in ROLE_PREFIXES:
            if low.startswith(prefix):
                low, role = low[len(prefix):], r
                break
        ws = [w for w in words(low) if w not in AGG_WORDS] or words(low) or [low]
        ws[-1] = singular(ws[-1])
        entity = " ".join(ws)
        cols = {c.name: c for c in columns}
        tv = TableVocab(name, role or "", entity, cols)
        stem = "_".join(ws)
        keys = [c for c in cols if is_key(c)]
        tv.pk = next((c for c in keys if c.lower() == "id" or key_stem(c) == stem), None)
        if tv.pk is None and columns and is_key(columns[0].name):
            tv.pk = columns[0].name
        ent = set(ws)
        dates = [c for c in columns if is_time(c) and "month" not in words(c.name)]
        dates.sort(key=lambda c: (not (ent & set(words(c.name))),
                                  c.type.upper().startswith("TIMESTAMP")))
        tv.time_cols = [c.name for c in dates]
        tv.month_col = next((c.name for c in columns if is_time(c) and "month" in words(c.name)),
                            None)
        tv.numeric = [c.name for c in columns if is_measure(c.name, c.type)]
        return tv

    def _keys_and_roles(self) -> None:
        pks: dict[str, list[str]] = {}
        for tv in self.tables.values():
            if tv.pk:
                pks.setdefault(tv.pk, []).append(tv.name)
        for tv in self.tables.values():
            for c in tv.columns:
                if c != tv.pk and is_key(c) and c in pks:
                    targets = [u for u in pks[c] if u != tv.name]
                    if targets:
                        tv.fks[c] = sorted(targets, key=lambda u: (
                            ROLE_RANK.get(self.tables[u].role, 1), u))[0]
        for tv in self.tables.values():
            if tv.role:
                continue
            if tv.pk is None and not tv.fks:
                tv.role = "agg"
            elif tv.fks and tv.time_cols and tv.numeric:
                tv.role = "fact"
            else:
                tv.role = "dim"

    def _rank(self, name: str):
        tv = self.tables[name]
        same = sum(1 for u in tv.fks.values() if self.tables[u].role == tv.role)
        return (ROLE_RANK[tv.role], same, name)

    # ---- joins -------------------------------------------------------------------------------

    def path(self, src: str, dst: str) -> list[tuple[str, str]] | None:
        """Many-to-one hops from ``src`` to ``dst`` as (table, key), shortest first; None when
        ``dst`` cannot be reached without multiplying ``src``'s rows (memoised)."""
        if (src, dst) not in self._paths:
            self._paths[(src, dst)] = self._bfs(src, dst)
        return self._paths[(src, dst)]

    def _bfs(self, src: str, dst: str) -> list[tuple[str, str]] | None:
        if src == dst:
            return []
        seen, queue = {src}, deque([(src, [])])
        while queue:
            t, hops = queue.popleft()
            for col, u in sorted(self.tables[t].fks.items(), key=lambda x: self._rank(x[1])):
                if u in seen:
                    continue
                if u == dst:
                    return hops + [(u, col)]
                seen.add(u)
                queue.append((u, hops + [(u, col)]))
        return None

    def reachable(self, src: str, dst: str) -> bool:
        return self.path(src, dst) is not None

    # ---- dimensions --------------------------------------------------------------------------

    def _dimensions(self) -> list[Dimension]:
        dims: dict[str, Dimension] = {}

        def add(phrase: str, table: str, col: str, grain: str | None = None):
            d = dims.setdefault(phrase, Dimension(phrase, [], grain))
            if (table, col) not in d.candidates:
                d.candidates.append((table, col))

        if self.glossary:  # first, so a curated reading comes before the derived ones
            for term in self.glossary.by_kind("dimension"):
                col = (term.sql or "").strip()
                for t in self.term_tables(term):
                    if col in self.tables[t].columns:
                        c = self.tables[t].columns[col]
                        grain = "month" if is_time(c) and "month" in words(col) else None
                        for p in [term.term, *term.aliases]:
                            add(p.lower(), t, col, grain)
        keys = self.keys
        for name in self.order:
            tv = self.tables[name]
            for c in tv.columns.values():
                if c.name in keys or (is_key(c.name) and not is_text(c)):
                    continue
                if is_text(c) and not is_prose(c):
                    core = self._core(name, c.name)
                    for p in dict.fromkeys([core, " ".join(words(c.name)), core if core.startswith(
                            tv.entity) else f"{tv.entity} {core}"]):
                        add(p, name, c.name)
                elif is_time(c):
                    add(" ".join(words(c.name)), name, c.name)
        if any(tv.time_col for tv in self.tables.values()):
            for grain, forms in GRAINS.items():
                for f in forms:
                    if f not in dims:
                        dims[f] = Dimension(f, [], grain)
                    elif dims[f].grain is None:
                        dims[f].grain = grain
        return list(dims.values())

    def _core(self, table: str, col: str) -> str:
        """A text column's words without a label suffix; a bare ``name`` names the entity."""
        ws = words(col)
        core = ws[:-1] if len(ws) > 1 and ws[-1] in LABEL_SUFFIXES else ws
        return self.tables[table].entity if core == ["name"] else " ".join(core)

    def entity_name_col(self, table: str, col: str) -> bool:
        """``col`` is the display name of the table's own entity (``product_name`` of products)."""
        return bool(self.tables[table].pk) and self._core(table, col) == self.tables[table].entity

    # ---- glossary helpers --------------------------------------------------------------------

    def term_tables(self, term: Term) -> list[str]:
        """The tables a glossary term applies to: those it lists that are served, else every
        served table holding all the columns its SQL names."""
        listed = [t for t in term.tables if t in self.tables]
        if listed or term.tables:
            return listed
        text = re.sub(r"'[^']*'", " ", f"{term.sql or ''} {term.filter or ''}".lower())
        idents = set(re.findall(r"[a-z_][a-z0-9_]*", text))
        return [t for t in self.order
                if (cols := {c.lower() for c in self.tables[t].columns}) and idents & cols
                and not (idents - cols - SQL_WORDS)]

    # ---- lookups -----------------------------------------------------------------------------

    def noun_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Count nouns in the text as (start, end, table), longest match first at a place."""
        found: list[tuple[int, int, str]] = []
        for noun, table in self.nouns:
            for s, e in spans(text, noun):
                if not any(s < fe and fs < e for fs, fe, _t in found):
                    found.append((s, e, table))
        return sorted(found)

    def head_noun(self, text: str) -> str | None:
        """The table of the phrase's head noun: a noun right before another one is a modifier
        ("segment customers" counts customers)."""
        found = self.noun_spans(text)
        for i, (_s, e, table) in enumerate(found):
            if i + 1 < len(found) and not text[e:found[i + 1][0]].strip(" -"):
                continue
            return table
        return found[-1][2] if found else None

    def names_entity(self, word: str, entity: str) -> bool:
        """The word is the entity's noun or a verb made of it ("returned" ~ "return")."""
        w = word.lower()
        return entity in {singular(w), w[:-2] if w.endswith("ed") else w, w[:-1] if w.endswith("d") else w}

    def dim_at(self, text: str, pos: int) -> Dimension | None:
        """The longest dimension phrase starting at ``pos``."""
        hits = [(e - s, d) for d in self.dimensions for s, e in spans(text, d.phrase) if s == pos]
        return max(hits, key=lambda h: h[0])[1] if hits else None

    def serves(self, table: str, dim: Dimension) -> bool:
        """The table holds the dimension or reaches it (a time grain: has a time column)."""
        if dim.grain and self.tables[table].time_col:
            return True
        return any(t == table or self.reachable(table, t) for t, _c in dim.candidates)

    def column_named(self, table: str, word: str, numeric: bool | None = None) -> str | None:
        """A non-key column of the table named by a question word ("discount" → ``discount_inr``),
        one starting with the word first."""
        w, keys = singular(word), self.keys
        hits = [c.name for c in self.tables[table].columns.values()
                if (numeric is None or is_numeric(c) == numeric) and c.name not in keys
                and w in {singular(p) for p in words(c.name)}]
        hits.sort(key=lambda c: singular(words(c)[0]) != w)
        return hits[0] if hits else None

    def quantity_column(self, table: str, word: str) -> str | None:
        """An integer column counting units: named like the word ("units"), else a quantity."""
        tv = self.tables[table]
        cols = [c for c in tv.numeric if "INT" in tv.columns[c].type.upper()]
        exact = [c for c in cols if c.lower() in (word, plural(singular(word)))]
        quant = [c for c in cols if QUANTITY_WORDS & set(words(c))
                 and not set(words(c)) - QUANTITY_WORDS - {"count", "num", "total"}]
        return (exact or quant or [None])[0]

    # ---- time columns ------------------------------------------------------------------------

    def date_column(self, table: str, q: str) -> str | None:
        """The table's time column, or another of its date columns whose own words the question
        uses ("signed up" → ``signup_date``)."""
        tv = self.tables[table]
        ent = set(tv.entity.split())
        for col in tv.time_cols:
            own = [w for w in words(col) if w not in TIME_GENERIC and w not in ent]
            if own and col != tv.time_col and all(word_rx(w).search(q) for w in own):
                return col
        return tv.time_col


SQL_WORDS = {"sum", "count", "avg", "min", "max", "distinct", "filter", "where", "and", "or",
             "not", "in", "is", "null", "as", "case", "when", "then", "else", "end", "interval",
             "day", "month", "year", "current_date", "date_trunc", "cast", "coalesce", "nullif",
             "between", "like", "true", "false", "date", "week"}


# ---- generic English: numbers, months, time windows ------------------------------------

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "twelve": 12}
NUM = r"(\d+|" + "|".join(NUMBERS) + r")"
MON = "|".join(MONTHS)

DAYS_RX = re.compile(rf"(?:last|past|previous|trailing)\s+{NUM}\s+days?")
WEEK_RX = re.compile(r"\b(?:last|past) week\b")
MONTHS_N_RX = re.compile(rf"last {NUM} (?:complete )?(?:calendar )?months")
LAST_MONTH_RX = re.compile(r"\b(?:last|previous) month\b")
THIS_MONTH_RX = re.compile(r"this month|month to date|so far this month")
THIS_YEAR_RX = re.compile(r"this year|year to date|\bytd\b")
LAST_YEAR_RX = re.compile(r"\b(?:last|previous) year\b")
MONTH_YEAR_RX = re.compile(rf"({MON})\s+(\d{{4}})")
PAIR_RX = re.compile(rf"({MON})\s+and\s+({MON})\s+(\d{{4}})")
BETWEEN_RX = re.compile(rf"between\s+(\d{{1,2}})\s+({MON})\s+and\s+(\d{{1,2}})\s+({MON})\s+(\d{{4}})")
YEAR_RX = re.compile(r"\b(?:in|for|during|of)\s+(?:the\s+)?(20\d\d)\b")
# every phrase _time reads: hidden when looking for dimensions and date-column words
TIME_MASK = re.compile("|".join(p.pattern for p in (
    DAYS_RX, WEEK_RX, MONTHS_N_RX, LAST_MONTH_RX, THIS_MONTH_RX, THIS_YEAR_RX, LAST_YEAR_RX,
    BETWEEN_RX, PAIR_RX, MONTH_YEAR_RX, YEAR_RX)))
IDENT_RX = re.compile(r"'[^']*'|(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)(?![\w.])(?!\s*\()")


def number(s: str) -> int:
    return NUMBERS[s] if s in NUMBERS else int(s.replace(",", ""))


def month_window(month: str, year: int) -> tuple[str, str]:
    m = MONTHS.index(month) + 1
    end = f"DATE '{year + (m == 12)}-{(m % 12) + 1:02d}-01'"
    return f"DATE '{year}-{m:02d}-01'", end


def time_window(q: str) -> tuple[list[str], bool]:
    """Conditions on the placeholder ``{col}`` for the time window a question names, and
    whether it names only a calendar year (a curated window may then narrow it)."""
    col, today = "{col}", "current_date"
    if m := DAYS_RX.search(q):
        return [f"{col} > {today} - INTERVAL {number(m.group(1))} DAY", f"{col} <= {today}"], False
    if WEEK_RX.search(q):
        return [f"{col} > {today} - INTERVAL 7 DAY", f"{col} <= {today}"], False
    if m := MONTHS_N_RX.search(q):
        return [f"{col} >= date_trunc('month', {today}) - INTERVAL {number(m.group(1))} MONTH",
                f"{col} < date_trunc('month', {today})"], False
    if LAST_MONTH_RX.search(q):
        return [f"{col} >= date_trunc('month', {today}) - INTERVAL 1 MONTH",
                f"{col} < date_trunc('month', {today})"], False
    if THIS_MONTH_RX.search(q):
        return [f"{col} >= date_trunc('month', {today})", f"{col} <= {today}"], False
    if THIS_YEAR_RX.search(q):
        return [f"{col} >= date_trunc('year', {today})", f"{col} <= {today}"], False
    if LAST_YEAR_RX.search(q):
        return [f"{col} >= date_trunc('year', {today}) - INTERVAL 1 YEAR",
                f"{col} < date_trunc('year', {today})"], False
    if between := BETWEEN_RX.search(q):
        d1, m1, d2, m2, y = between.groups()
        return [f"{col} BETWEEN DATE '{y}-{MONTHS.index(m1) + 1:02d}-{int(d1):02d}' AND "
                f"DATE '{y}-{MONTHS.index(m2) + 1:02d}-{int(d2):02d}'"], False
    if pair := PAIR_RX.search(q):
        m1, m2, y = pair.groups()
        return [f"{col} >= {month_window(m1, int(y))[0]}", f"{col} < {month_window(m2, int(y))[1]}"], False
    if months := MONTH_YEAR_RX.findall(q):
        start, end = month_window(months[0][0], int(months[0][1]))
        return [f"{col} >= {start}", f"{col} < {end}"], False
    if y := YEAR_RX.search(q):
        year = int(y.group(1))
        return [f"{col} >= DATE '{year}-01-01'", f"{col} < DATE '{year + 1}-01-01'"], True
    return [], False
