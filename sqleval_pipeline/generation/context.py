"""What a system under test sees: schema context, the glossary, retrieved examples, a prompt.

* **Schema context** covers the allowlisted tables of the serving snapshot only (the file holds
  nothing else): a ``CREATE TABLE`` per table with column types, and — when curation is on —
  the dbt descriptions of tables and columns. A few sample values are listed for low-cardinality
  text columns (never free text, so seller descriptions stay out of prompts).
* **Glossary** entries are offered only when curation is on.
* **Retrieval** ranks tables, glossary entries and *dev-split* example triples against the
  question with a light BM25; held-out cases are never candidates, and neither is the case
  being asked.
* **Prompt**: a versioned Jinja2 template under ``evals/prompts/`` rendered per attempt.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import jinja2
import numpy as np
import yaml

from sqleval_pipeline.configs import ContextSettings
from sqleval_pipeline.generation.base import Example, GenerationContext
from sqleval_pipeline.semantic.glossary import Glossary, Term
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.guard.lru import LRU
from sqleval_pipeline.snapshot import open_readonly

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of in on for to by and or is are was were what which how many much "
                  "do does did we our us me give show list with from at per each that this".split())


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens with a crude plural strip, stop words removed.

    >>> tokens("How many Orders were paid by UPI?")
    ['order', 'paid', 'upi']
    """
    out = []
    for t in _TOKEN.findall(text.lower().replace("_", " ")):
        if t in _STOP:
            continue
        if len(t) > 3 and t.endswith("s") and not t.endswith("ss"):
            t = t[:-1]
        out.append(t)
    return out


@dataclass
class Column:
    name: str
    type: str
    description: str = ""
    samples: list[str] = field(default_factory=list)


@dataclass
class TableInfo:
    name: str
    description: str
    columns: list[Column]


@dataclass
class SchemaCatalog:
    """The allowlisted tables of a serving snapshot, with dbt descriptions."""

    as_of: dt.date
    tables: list[TableInfo]

    def table(self, name: str) -> TableInfo | None:
        return next((t for t in self.tables if t.name == name), None)

    def render(self, *, curated: bool, only: list[str] | None = None) -> str:
        parts = []
        for t in self.tables:
            if only is not None and t.name not in only:
                continue
            lines = []
            if curated and t.description:
                lines.append(f"-- {t.name}: {t.description}")
            lines.append(f"CREATE TABLE {t.name} (")
            for i, c in enumerate(t.columns):
                note = []
                if curated and c.description:
                    note.append(c.description.rstrip("."))
                if c.samples:
                    note.append("values: " + ", ".join(repr(s) for s in c.samples))
                comma = "," if i < len(t.columns) - 1 else ""
                lines.append(f"  {c.name} {c.type}{comma}" + (f"  -- {'; '.join(note)}" if note else ""))
            lines.append(");")
            parts.append("\n".join(lines))
        return "\n\n".join(parts)


def dbt_descriptions(models_dir: Path | None) -> dict[str, tuple[str, dict[str, str]]]:
    """Model and column descriptions from the dbt project's property files (``models/**/*.yml``).

    Read straight from the YAML the analysts maintain, so no ``dbt parse`` is needed first.
    """
    out: dict[str, tuple[str, dict[str, str]]] = {}
    if models_dir is None:  # no dbt project to read descriptions from
        return {}
    for f in sorted(models_dir.rglob("*.yml")):
        doc = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        for model in doc.get("models") or []:
            cols = {c["name"]: " ".join((c.get("description") or "").split())
                    for c in model.get("columns") or [] if "name" in c}
            out[model["name"]] = (" ".join((model.get("description") or "").split()), cols)
    return out


def load_catalog(serving: Path, as_of: dt.date, *, sample_values: int = 3,
                 models_dir: Path | None = None, schema: str = "main") -> SchemaCatalog:
    """Read tables, columns and sample values from a serving snapshot (read-only), with the
    dbt descriptions of the served models (property files under ``models_dir``)."""
    descriptions = dbt_descriptions(models_dir)
    con = open_readonly(serving)
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = ? AND NOT internal "
            "ORDER BY table_name", [schema]).fetchall()]
        tables = []
        for name in names:
            tdesc, cdesc = descriptions.get(name, ("", {}))
            cols = []
            for cname, ctype in con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = ? "
                "AND table_name = ? ORDER BY column_index", [schema, name]).fetchall():
                samples: list[str] = []
                if sample_values and ctype == "VARCHAR":
                    (n_distinct,), = con.execute(
                        f'SELECT count(DISTINCT "{cname}") FROM "{schema}"."{name}"').fetchall()
                    if n_distinct <= 30:  # categorical: list every value
                        limit = n_distinct
                        samples = [r[0] for r in con.execute(
                            f'SELECT "{cname}" FROM "{schema}"."{name}" WHERE "{cname}" IS NOT NULL '
                            f'GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT {limit}').fetchall()]
                cols.append(Column(cname, ctype, cdesc.get(cname, ""), samples))
            tables.append(TableInfo(name, tdesc, cols))
    finally:
        con.close()
    return SchemaCatalog(as_of, tables)


# ---- retrieval --------------------------------------------------------------------------


@dataclass
class Doc:
    kind: str  # table | glossary | example
    key: str
    text: str


class BM25:
    """A small Okapi BM25 over pre-tokenized documents (k1=1.2, b=0.75), with an inverted
    index held as arrays: scoring a query adds each of its tokens' postings (documents and
    weights) into one score vector in C, and the top ``k`` are picked by partition — a few
    milliseconds for tens of thousands of examples, where a Python loop over the matches
    grew with the golden set. Scores are summed in query-token order, as the formula is."""

    def __init__(self, docs: list[Doc], k1: float = 1.2, b: float = 0.75):
        self.docs = docs
        toks = [tokens(d.text) for d in docs]
        self.k1, self.b = k1, b
        self.avgdl = sum(map(len, toks)) / max(1, len(toks))
        df = Counter(t for ts in toks for t in set(ts))
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        #: token → (documents, their weights for that token), the per-document factor folded in
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, ts in enumerate(toks):
            norm = k1 * (1 - b + b * len(ts) / self.avgdl) if self.avgdl else k1
            for t, f in Counter(ts).items():
                ids, ws = postings.setdefault(t, ([], []))
                ids.append(i)
                ws.append(self.idf[t] * f * (k1 + 1) / (f + norm))
        self.postings = {t: (np.asarray(ids, dtype=np.int64), np.asarray(ws, dtype=np.float64))
                         for t, (ids, ws) in postings.items()}
        self._kinds = {kind: np.fromiter((d.kind == kind for d in docs), bool, n)
                       for kind in {d.kind for d in docs}}

    def scores(self, query: str) -> np.ndarray:
        """The score of every document for ``query`` (0 where no token is shared; a query
        token counted as often as it occurs)."""
        out = np.zeros(len(self.docs))
        for t in tokens(query):
            found = self.postings.get(t)
            if found is not None:
                out[found[0]] += found[1]  # a document appears once per token: no collisions
        return out

    def top(self, query: str, k: int, kind: str | None = None,
            scores: np.ndarray | None = None) -> list[Doc]:
        """The ``k`` best-scoring documents (of one ``kind``; ties by position); pass
        ``scores`` to rank several kinds for one query without scoring it again."""
        scores = self.scores(query) if scores is None else scores
        if k <= 0:
            return []
        mask = scores > 0
        if kind is not None:
            mask &= self._kinds.get(kind, np.zeros(len(self.docs), bool))
        cand = np.flatnonzero(mask)
        if len(cand) > k:  # keep the k-th best score and everything tied with it
            kth = -np.partition(-scores[cand], k - 1)[k - 1]
            cand = cand[scores[cand] >= kth]
        best = cand[np.lexsort((cand, -scores[cand]))][:k]
        return [self.docs[i] for i in best]


def glossary_text(term: Term) -> str:
    parts = [f"- {term.term} ({term.kind})"]
    if term.aliases:
        parts.append(f"aka {', '.join(term.aliases)}")
    parts.append(f": {term.definition.strip()}")
    if term.sql:
        parts.append(f" SQL: {term.sql}")
    if term.filter:
        parts.append(f" WHERE {term.filter}")
    if term.tables:
        parts.append(f" [tables: {', '.join(term.tables)}]")
    return " ".join(parts)


class ContextBuilder:
    """Builds the per-attempt context for one configuration over one snapshot.

    ``examples`` must come from the golden set; only dev-split, verified, answerable cases
    with reference SQL are ever used, and never the case being asked.
    """

    def __init__(self, catalog: SchemaCatalog, settings: ContextSettings,
                 glossary: Glossary | None, example_cases: list[Case],
                 template_path: Path | None = None, dialect: str | None = None,
                 retrieval: bool = True):
        self.catalog = catalog
        self.settings = settings
        #: the SQL dialect the system is asked to answer in (the configuration's ``dialect``)
        self.dialect = dialect or "duckdb"
        self.glossary = glossary if settings.curation else None
        self.examples = [
            Example(case_id=c.id, question=c.question, sql=c.reference_sql)
            for c in example_cases
            if c.split == "dev" and c.status == "verified" and c.answerable and c.reference_sql
        ]
        docs = [Doc("table", t.name, f"{t.name} {t.description} "
                    + " ".join(f"{c.name} {c.description}" for c in t.columns))
                for t in catalog.tables]
        if self.glossary:
            docs += [Doc("glossary", t.term, f"{t.term} {' '.join(t.aliases)} {t.definition}")
                     for t in self.glossary.terms]
        docs += [Doc("example", e.case_id, e.question) for e in self.examples]
        self._terms = {t.term: t for t in self.glossary.terms} if self.glossary else {}
        self._examples = {e.case_id: e for e in self.examples}
        #: the contexts built last (least recently used dropped first)
        self._built: LRU[tuple[str, str], GenerationContext] = LRU(1024)
        self._building: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        #: False for a system that reads only the question (the embedded baseline): no
        #: retrieval, schema rendering or prompt per case
        self.retrieval = retrieval
        self.index = BM25(docs) if retrieval else None
        self.template = None
        if template_path is not None:
            env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False,
                                     keep_trailing_newline=True)
            self.template = env.from_string(template_path.read_text(encoding="utf-8"))

    def build(self, case_id: str, question: str, run_index: int) -> GenerationContext:
        """The context of one attempt. Every run of a case sees the same context, so it is
        built once per case and reused for the other runs. The runs of a case are made close
        together (the runner works case by case), so only the most recent contexts are kept:
        memory does not grow with the golden set."""
        key = (case_id, question)
        built = self._built.get(key)
        if built is None:
            with self._lock:  # one lock per case being built: its runs wait for one build
                lock = self._building.setdefault(key, threading.Lock())
            with lock:
                built = self._built.get(key)
                if built is None:
                    built = self._context(case_id, question)
                    self._built.put(key, built)
            with self._lock:
                self._building.pop(key, None)
        return built.model_copy(update={"run_index": run_index})

    def _context(self, case_id: str, question: str) -> GenerationContext:
        if self.index is None:
            return GenerationContext(case_id=case_id, run_index=0, question=question,
                                     as_of=self.catalog.as_of, schema_context="")
        k = self.settings.retrieval_k
        scores = self.index.scores(question)
        tables = [d.key for d in self.index.top(question, k, "table", scores)] if k else []
        schema = self.catalog.render(curated=self.settings.curation, only=tables or None)
        glossary = None
        if self.glossary:
            picked = [self._terms[d.key] for d in
                      self.index.top(question, k or len(self._terms), "glossary", scores)]
            # refusal guidance is always included when curated: it is the system's brake
            picked += [t for t in self.glossary.terms if t.kind == "refusal" and t not in picked]
            glossary = "\n".join(glossary_text(t) for t in picked)
        shots = [self._examples[d.key] for d in
                 self.index.top(question, self.settings.few_shot_examples + 1, "example", scores)
                 if d.key != case_id][: self.settings.few_shot_examples]
        ctx = GenerationContext(case_id=case_id, run_index=0, question=question,
                                as_of=self.catalog.as_of, schema_context=schema,
                                glossary_context=glossary, examples=shots)
        if self.template is not None:
            ctx.prompt = self.template.render(
                question=question, dialect=self.dialect, as_of=self.catalog.as_of.isoformat(),
                schema=schema, glossary=glossary, examples=shots, curation=self.settings.curation,
            )
        return ctx


@lru_cache(maxsize=8)
def cached_catalog(serving: str, as_of: dt.date, sample_values: int, models_dir: str | None = None,
                   schema: str = "main") -> SchemaCatalog:
    return load_catalog(Path(serving), as_of, sample_values=sample_values,
                        models_dir=Path(models_dir) if models_dir else None, schema=schema)
