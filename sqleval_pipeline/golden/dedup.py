"""What the golden set already holds, so nothing is proposed or reviewed twice.

* :func:`normalise_sql` — a query's canonical text (sqlglot): keywords, identifier case,
  whitespace, projection aliases, ``ORDER BY`` by alias or position, the order of ``AND``-ed
  conditions and a trailing ``;`` do not count.
* :func:`similar_questions` — two questions are near-duplicates when they name the same values
  (quoted strings, numbers, months, and any data value the caller lists) and share at least
  80% of their other words.
* :class:`Seen` — every case's SQL and question, plus the rejected proposals; answers "is this
  new?" with the id it duplicates.
* The **rejected ledger**: a case rejected in review is moved out of its golden file
  ``<dir>/<name>.jsonl`` into ``<dir>/rejected/<name>.jsonl`` (one JSON object per line:
  ``{"rejected": {"reason", "reviewer", "date"}, "case": {...}}``), outside the golden set
  (only ``*.jsonl`` directly in the golden folder are loaded) yet still known to the proposer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp

from sqleval_pipeline.generation.context import tokens
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.errors import InputError

#: questions sharing at least this share of their words (and the same values) are duplicates
QUESTION_SIMILARITY = 0.8
REJECTED_DIR = "rejected"
_MONTHS = frozenset("january february march april may june july august september october "
                    "november december".split())
_QUOTED = re.compile(r"(?<![A-Za-z])'([^']*)'(?![A-Za-z])|\"([^\"]*)\"")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


# --------------------------------------------------------------------------- SQL


def normalise_sql(sql: str | None) -> str | None:
    """The canonical text of a query; None when it does not parse as one DuckDB statement.

    >>> normalise_sql("select SUM(x) as total from T where b = 1 and a = 2 order by total desc;")
    'SELECT SUM(x) FROM t WHERE a = 2 AND b = 1 ORDER BY SUM(x) DESC'
    >>> normalise_sql("SELECT sum(x) AS s FROM t WHERE a = 2 AND b = 1 ORDER BY 1 DESC")
    'SELECT SUM(x) FROM t WHERE a = 2 AND b = 1 ORDER BY SUM(x) DESC'
    """
    if not sql or not sql.strip():
        return None
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if len(trees) != 1:
        return None
    tree = trees[0]
    for select in tree.find_all(exp.Select):
        _canonical_select(select)
    text = tree.sql(dialect="duckdb", normalize=True, pretty=False)
    return " ".join(text.split())


def _canonical_select(select: exp.Select) -> None:
    bodies: dict[str, exp.Expression] = {}
    plain: list[exp.Expression] = []
    for proj in list(select.expressions):
        body = proj.this if isinstance(proj, exp.Alias) else proj
        if isinstance(proj, exp.Alias):
            bodies[proj.alias.lower()] = body
            proj.replace(body.copy())
        plain.append(body)
    order = select.args.get("order")
    if order is not None:
        for ordered in order.expressions:
            node = ordered.this
            if isinstance(node, exp.Literal) and node.is_int and 0 < int(node.this) <= len(plain):
                node.replace(plain[int(node.this) - 1].copy())
            elif isinstance(node, exp.Column) and not node.table and node.name.lower() in bodies:
                node.replace(bodies[node.name.lower()].copy())
    where = select.args.get("where")
    if where is not None:
        parts = sorted((p.sql("duckdb", normalize=True) for p in where.this.flatten()
                        if isinstance(where.this, exp.And)), key=str)
        if parts:
            where.set("this", sqlglot.condition(" AND ".join(parts), dialect="duckdb"))


def _cell(v) -> str:
    if isinstance(v, bool) or v is None:
        return repr(v)
    try:
        return f"{float(v):.10g}" if not isinstance(v, str) else v
    except (TypeError, ValueError):
        return str(v)


def result_key(rs) -> str | None:
    """A result's rows as text, order, column names and types aside — for results too
    specific to match by chance (several rows, or a value that is not a small whole number);
    None otherwise. Two queries with the same such answer ask the same question.

    >>> from sqleval_pipeline.results import ResultSet
    >>> result_key(ResultSet(columns=["n"], types=["BIGINT"], rows=[[4]])) is None
    True
    >>> result_key(ResultSet(columns=["r"], types=["DOUBLE"], rows=[[76367427.97]]))
    '76367427.97'
    """
    rows = [[_cell(v) for v in r] for r in rs.rows]
    if not rows:
        return None
    if len(rows) == 1:
        specific = False
        for v in rs.rows[0]:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                specific = specific or float(v) != int(v) or abs(v) >= 1000
            elif v is not None and not isinstance(v, str):
                try:
                    specific = specific or float(v) != int(v) or abs(float(v)) >= 1000
                except (TypeError, ValueError, OverflowError):
                    specific = True
        if not specific:
            return None
    return "\n".join(sorted("|".join(r) for r in rows))


# --------------------------------------------------------------------------- questions


def question_key(question: str) -> str:
    """Case- and whitespace-insensitive text of a question (exact duplicates)."""
    return " ".join(question.lower().split())


def _values_in(question: str, values: frozenset[str]) -> frozenset[str]:
    found = {(a or b).strip().lower() for a, b in _QUOTED.findall(question)}
    found |= set(_NUMBER.findall(question))
    words = set(re.findall(r"[a-z0-9_]+", question.lower()))
    found |= words & _MONTHS
    found |= {v for v in values if v in words or (" " in v and v in question.lower())}
    return frozenset(found)


def question_similarity(a: str, b: str) -> float:
    """Share of words two questions have in common (Jaccard over :func:`tokens`)."""
    ta, tb = set(tokens(a)), set(tokens(b))
    if not ta or not tb:
        return 1.0 if question_key(a) == question_key(b) else 0.0
    return len(ta & tb) / len(ta | tb)


def similar_questions(a: str, b: str, values: frozenset[str] = frozenset()) -> bool:
    """True when ``a`` and ``b`` ask the same thing (see the module doc).

    >>> similar_questions("What is the total net revenue for orders with channel 'app'?",
    ...                   "What's the total net revenue for orders with channel 'app'?")
    True
    >>> similar_questions("What is the total net revenue for orders with channel 'app'?",
    ...                   "What is the total net revenue for orders with channel 'web'?")
    False
    """
    if question_key(a) == question_key(b):
        return True
    if _values_in(a, values) != _values_in(b, values):
        return False
    return question_similarity(a, b) >= QUESTION_SIMILARITY


@dataclass
class Seen:
    """SQL and questions already taken: cases, rejected proposals, accepted proposals."""

    values: frozenset[str] = frozenset()
    sqls: dict[str, str] = field(default_factory=dict)          # normalised SQL -> id
    questions: list[tuple[str, str]] = field(default_factory=list)  # (question, id)
    answers: dict[str, str] = field(default_factory=dict)       # result_key -> id

    def add(self, case_id: str, question: str, sqls: Iterable[str | None]) -> None:
        for sql in sqls:
            key = normalise_sql(sql)
            if key is not None:
                self.sqls.setdefault(key, case_id)
        self.questions.append((question, case_id))

    def add_answer(self, case_id: str, rs) -> None:
        key = result_key(rs)
        if key is not None:
            self.answers.setdefault(key, case_id)

    def same_answer(self, rs) -> str | None:
        key = result_key(rs)
        return self.answers.get(key) if key is not None else None

    def same_sql(self, sql: str) -> str | None:
        key = normalise_sql(sql)
        return self.sqls.get(key) if key is not None else None

    def similar_question(self, question: str) -> str | None:
        for other, case_id in self.questions:
            if similar_questions(question, other, self.values):
                return case_id
        return None


# --------------------------------------------------------------------------- rejected ledger


def rejected_path(golden_file: Path) -> Path:
    """Where the rejections of ``golden_file`` are kept."""
    return golden_file.parent / REJECTED_DIR / golden_file.name


def read_rejected(path: Path) -> list[dict]:
    """The ledger's records (``{"rejected": {...}, "case": {...}}``), oldest first."""
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("case"), dict):
            raise InputError(f"{path}:{n}: a rejection is {{\"rejected\": …, \"case\": …}}")
        out.append(rec)
    return out


def rejected_records(golden_dir: Path) -> list[dict]:
    """Every rejection kept beside the golden files of ``golden_dir`` (a folder or one file)."""
    folder = (golden_dir.parent if golden_dir.is_file() else golden_dir) / REJECTED_DIR
    return [r for p in sorted(folder.glob("*.jsonl")) for r in read_rejected(p)]


write_text_atomically = write_atomically  # the one atomic writer (textfiles)


def append_rejected(path: Path, record: dict) -> None:
    """Add one record to a ledger (atomically: the whole ledger is rewritten)."""
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    if before and not before.endswith("\n"):
        before += "\n"
    write_text_atomically(path, before + json.dumps(record, ensure_ascii=False) + "\n")


__all__ = ["QUESTION_SIMILARITY", "Seen", "append_rejected", "normalise_sql", "question_key",
           "result_key",
           "question_similarity", "read_rejected", "rejected_path", "rejected_records",
           "similar_questions", "write_text_atomically"]
