"""Turn imported question rows into frozen golden cases and add them to a golden file.

:func:`import_rows` takes an :class:`~sqleval_pipeline.golden.importers.ImportBatch` and, row
by row: gives the case an id (the row's, or the next free ``<prefix>-NNN``), checks it is new
(id and question), validates its metadata against the project's taxonomy, checks every SQL
with the guard's statement filter (one read-only query over served tables), and freezes its
expected result(s) on the pinned serving snapshot. A row that fails any step is a
:class:`~sqleval_pipeline.golden.importers.Rejection` naming its line and what to do.

The golden file is then rewritten once, atomically (a temporary file in the same folder,
flushed to disk, then renamed over it): its existing text first, byte for byte unchanged,
then one line per accepted case. Nothing is written when no row is accepted, when the file
changed on disk meanwhile, or when anything raises before the rename — the golden set never
loses or changes a case it had.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import sqlglot
from pydantic import ValidationError

from sqleval_pipeline.dialect.tables import table_refs
from sqleval_pipeline.golden.freeze import FreezeError, FreezeNote, freeze_case
from sqleval_pipeline.golden.growth import next_id
from sqleval_pipeline.golden.importers import ImportBatch, ImportRow, Rejection
from sqleval_pipeline.golden.infer import infer
from sqleval_pipeline.golden.loader import GoldenChanged, append_cases, load_golden
from sqleval_pipeline.golden.model import BANDS, SPLITS, Case, Provenance
from sqleval_pipeline.guard.policy import GuardPolicy
from sqleval_pipeline.guard.statement_filter import FilterVerdict, StatementFilter
from sqleval_pipeline.snapshot import open_readonly
from sqleval_pipeline.errors import InputError, SqlevalError

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,63}$")
_PREFIX_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,40}$")


class ImportAborted(SqlevalError, RuntimeError):
    """The golden file could not be updated safely; it was left as it was."""


@dataclass
class ImportReport:
    accepted: list[Case]
    rejected: list[Rejection]
    warnings: list[str]
    golden_file: Path
    #: whether the golden file was rewritten (False when nothing was accepted)
    written: bool = False
    existing: int = 0
    source: str | None = field(default=None)

    def inferred_summary(self) -> list[str]:
        """One line per inferred field: how many accepted cases got it inferred, and the values
        (docs/inferred-metadata.md)."""
        out: list[str] = []
        for name in ("difficulty", "order_matters", "cluster", "facets.hardness"):
            got = [c for c in self.accepted if name in c.inferred]
            if not got:
                continue
            if name.startswith("facets."):
                values = Counter(c.facets.get(name.split(".", 1)[1], "?") for c in got)
            else:
                values = Counter(str(getattr(c, name)) for c in got)
            shown = ", ".join(f"{v} {n}" for v, n in sorted(values.items(), key=lambda x: (-x[1], x[0]))[:8])
            more = f", … ({len(values) - 8} more values)" if len(values) > 8 else ""
            out.append(f"{name} inferred for {len(got)} case(s): {shown}{more}")
        return out

    def execution_only(self) -> list[Case]:
        """Accepted cases that stay execution-only (no outcome, in no accuracy) until reviewed."""
        return [c for c in self.accepted if c.status != "verified"]

    def execution_only_note(self) -> str | None:
        pending = self.execution_only()
        if not pending:
            return None
        return (f"{len(pending)} of {len(self.accepted)} imported case(s) are unverified: they run "
                "with an execution-only score and count in no accuracy until a person reviews "
                "them — `sqleval golden review --reviewer NAME` (accept, edit or reject each); "
                "for a file whose references were already reviewed, import it with `--reviewer "
                "NAME` (a second import skips questions already in the set: remove these first)")

    def to_dict(self) -> dict:
        """The report as JSON-able data (``sqleval golden import --json``)."""
        return {
            "source": self.source, "golden_file": str(self.golden_file), "written": self.written,
            "existing": self.existing,
            "accepted": [{"line": _line_of(c), "id": c.id, "status": c.status,
                          "rows": len(c.expected.rows) if c.expected else None,
                          "inferred": list(c.inferred), "facets": dict(c.facets),
                          "cluster": c.cluster, "difficulty": c.difficulty,
                          "order_matters": c.order_matters,
                          "tie_at_cut": c.expected is not None and c.expected.tie is not None}
                         for c in self.accepted],
            "rejected": [{"line": r.line, "id": r.id, "reason": r.reason} for r in self.rejected],
            "warnings": list(self.warnings), "inferred": self.inferred_summary(),
            "execution_only": len(self.execution_only()),
        }

    def summary(self) -> str:
        """A short human report: counts, then every rejection and warning."""
        src = f" from {self.source}" if self.source else ""
        head = (f"{len(self.accepted)} case(s) imported{src} into {self.golden_file} "
                f"({self.existing} existing case(s) kept unchanged), "
                f"{len(self.rejected)} row(s) rejected, {len(self.warnings)} warning(s)")
        lines = [head]
        if self.accepted:
            lines.append("accepted: " + ", ".join(c.id for c in self.accepted))
        lines += [f"inferred: {line}" for line in self.inferred_summary()]
        note = self.execution_only_note()
        if note:
            lines.append(note)
        lines += [f"rejected {r}" for r in self.rejected]
        lines += [f"warning: {w}" for w in self.warnings]
        if not self.written:
            lines.append(f"{self.golden_file} was not changed")
        return "\n".join(lines)


def import_rows(
    batch: ImportBatch, *, golden_file: Path, serving: Path, snapshot_id: str, as_of: dt.date,
    policy: GuardPolicy, difficulties: Sequence[str], default_difficulty: str,
    default_cluster: str, default_split: str = "dev", id_prefix: str | None = None,
    reviewer: str | None = None, author: str = "import",
    unservable: Mapping[str, str] | None = None,
) -> ImportReport:
    """Check, freeze and add ``batch``'s rows to ``golden_file`` (created if missing).

    Raises ValueError for bad arguments (a default outside the taxonomy, a malformed id
    prefix), :class:`~sqleval_pipeline.golden.loader.GoldenError` when the existing golden
    file does not load, and :class:`ImportAborted` when it changed on disk during the
    import; in every case the golden file is left untouched. ``unservable`` maps relations
    of the dbt project that the snapshot does not serve (lower-case ``name`` and
    ``schema.name``) to why (:func:`unservable_reasons`): a refusal naming one says why and what
    to do instead of a generic hint.
    """
    golden_file = Path(golden_file)
    difficulties = tuple(difficulties)
    if default_difficulty not in difficulties:
        raise InputError(f"default difficulty {default_difficulty!r} is not in the taxonomy "
                         f"{list(difficulties)}")
    if default_split not in SPLITS:
        raise InputError(f"default split {default_split!r} is not one of {list(SPLITS)}")
    if not default_cluster or not default_cluster.strip():
        raise InputError("default cluster is empty")
    if id_prefix is not None and not _PREFIX_RE.match(id_prefix):
        raise InputError(f"id prefix {id_prefix!r}: use lower-case letters, digits, '_', '.', '-'")

    before = golden_file.read_bytes() if golden_file.exists() else None
    existing = load_golden(golden_file).cases if before is not None else []
    existing_ids = {c.id: c for c in existing}
    existing_questions = {_norm(c.question): c.id for c in existing}
    prefix = id_prefix or _prefix_of(existing, golden_file)

    rejected: list[Rejection] = list(batch.rejected)
    warnings: list[str] = list(batch.warnings)
    statement_filter = StatementFilter(policy, database_names={snapshot_id})

    # ids: explicit ones are claimed first so generated ids never collide with a later row
    taken = set(existing_ids) | {r.id for r in batch.rows if r.id}
    seen_ids: dict[str, int] = {}
    seen_questions: dict[str, int] = {}
    candidates: list[tuple[ImportRow, Case]] = []
    for row in batch.rows:
        try:
            case_id = _claim_id(row, existing_ids, seen_ids, golden_file)
            _check_new_question(row, existing_questions, seen_questions)
            if case_id is None:
                case_id = next_id(sorted(taken), prefix)
                taken.add(case_id)
            case = _build_case(row, case_id, difficulties=difficulties,
                               default_difficulty=default_difficulty,
                               default_cluster=default_cluster, default_split=default_split,
                               reviewer=reviewer, author=author, fmt=batch.format)
            _guard(row, statement_filter, policy, unservable or {})
        except _Reject as exc:
            rejected.append(Rejection(row.line, str(exc), row.id))
            continue
        seen_ids[case_id] = row.line
        seen_questions[_norm(row.question)] = row.line
        candidates.append((row, case))

    accepted: list[Case] = []
    if candidates:
        con = open_readonly(serving)
        try:
            for row, case in candidates:
                notes: list[FreezeNote] = []
                try:
                    frozen = freeze_case(case, con, snapshot_id, as_of, notes=notes)
                except (FreezeError, duckdb.Error) as exc:
                    rejected.append(Rejection(row.line, _freeze_reason(exc, case, row), case.id))
                    continue
                accepted.append(frozen)
                warnings.extend(_result_warnings(row, frozen, snapshot_id))
                # ties at a LIMIT cut (recorded: any tied selection is accepted), a LIMIT
                # without ORDER BY (its rows are not a reference), shapes not analysed
                warnings.extend(f"line {row.line} ({case.id}) {n.reading}: {n.detail}" for n in notes)
        finally:
            con.close()

    rejected.sort(key=lambda r: r.line)
    report = ImportReport(accepted=accepted, rejected=rejected, warnings=warnings,
                          golden_file=golden_file, existing=len(existing),
                          source=batch.path.name if batch.path else None)
    if accepted:
        try:
            append_cases(golden_file, accepted, before=before)
        except GoldenChanged as exc:
            raise ImportAborted(f"{golden_file} changed on disk during the import; nothing was written — "
                                "run the import again") from exc
        report.written = True
    return report


def _line_of(case: Case) -> int | None:
    tail = case.provenance.source.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


# --------------------------------------------------------------------------- row checks


class _Reject(SqlevalError):
    pass


def _norm(question: str) -> str:
    return " ".join(question.lower().split())


def _prefix_of(existing: list[Case], golden_file: Path) -> str:
    for c in existing:
        m = re.fullmatch(r"(.+)-\d+", c.id)
        if m and _PREFIX_RE.match(m.group(1)):
            return m.group(1)
    stem = re.sub(r"[^a-z0-9_.-]+", "-", golden_file.stem.lower()).strip("-._")[:3]
    return stem if stem and _PREFIX_RE.match(stem) else "q"


def _claim_id(row: ImportRow, existing: dict[str, Case], seen: dict[str, int],
              golden_file: Path) -> str | None:
    if row.id is None:
        return None
    if not _ID_RE.match(row.id):
        raise _Reject(f"id {row.id!r} is not a valid case id: use 2-64 lower-case letters, digits, "
                      "'_', '.', '-' starting with a letter or digit (or leave id empty for the "
                      "next free one)")
    if row.id in existing:
        raise _Reject(f"duplicate id {row.id!r}: the golden file {golden_file.name} already has "
                      "it — choose another id or leave it empty for the next free one")
    if row.id in seen:
        raise _Reject(f"duplicate id {row.id!r}: already used on line {seen[row.id]} of this file")
    return row.id


def _check_new_question(row: ImportRow, existing: dict[str, str], seen: dict[str, int]) -> None:
    key = _norm(row.question)
    if key in existing:
        raise _Reject(f"the question is already in the golden set as {existing[key]} "
                      "(re-importing a file does not duplicate cases)")
    if key in seen:
        raise _Reject(f"the same question is already on line {seen[key]} of this file")


def _build_case(row: ImportRow, case_id: str, *, difficulties: tuple[str, ...],
                default_difficulty: str, default_cluster: str, default_split: str,
                reviewer: str | None, author: str, fmt: str = "csv") -> Case:
    """The case of one row. Metadata the row does not give is inferred from its reference
    (docs/inferred-metadata.md) and listed in ``Case.inferred``: difficulty (never ``trap``),
    ``order_matters`` (a top-level ORDER BY), cluster (a benchmark's database, else the
    reference's main table, else the import's default) and Spider's hardness."""
    band = row.band or ("answerable" if row.answerable else "should_refuse")
    inferred: list[str] = []
    source_sql = row.original_sql if row.original_sql is not None else row.sql
    inference = infer(source_sql if band != "should_refuse" else None, difficulties,
                      row.original_dialect if row.original_sql is not None else None)
    if band not in BANDS:
        raise _Reject(f"band {band!r} is not one of {', '.join(BANDS)}")
    if band == "should_refuse" and (row.sql or row.alternatives):
        raise _Reject("a should_refuse question has no SQL: leave sql empty")
    if row.difficulty is not None:
        if row.difficulty not in difficulties:
            raise _Reject(f"difficulty {row.difficulty!r} is not in the project's taxonomy "
                          f"({', '.join(difficulties)}) — use one of them or leave it empty")
        difficulty = row.difficulty
    elif row.source_difficulty in difficulties:
        difficulty = row.source_difficulty
    else:
        difficulty = inference.difficulty or default_difficulty
        inferred.append("difficulty")
    order_matters = row.order_matters
    if order_matters is None:
        order_matters = inference.order_matters
        inferred.append("order_matters")
    cluster = row.cluster
    if not cluster:
        cluster = row.derived_cluster or inference.main_table or default_cluster
        inferred.append("cluster")
    facets = dict(row.facets)
    if fmt == "spider" and inference.spider_hardness and "hardness" not in facets:
        facets["hardness"] = inference.spider_hardness
        inferred.append("facets.hardness")
    split = row.split or default_split
    if split not in SPLITS:
        raise _Reject(f"split {split!r} is not one of {', '.join(SPLITS)}")
    sql = row.sql if band != "should_refuse" else None
    status = "verified" if reviewer and (sql or band == "should_refuse") else "unverified"
    try:
        return Case(
            id=case_id, question=row.question, reference_sql=sql,
            alternative_sqls=list(row.alternatives), difficulty=difficulty, band=band,
            traps=list(row.traps), order_matters=bool(order_matters),
            cluster=cluster, split=split, status=status,
            provenance=Provenance(source=row.source or "import", author=author,
                                  reviewer=reviewer, date=dt.date.today()),
            notes=_notes(row), tags=_unique(row.tags), facets=facets, inferred=inferred,
        )
    except ValidationError as exc:
        problems = "; ".join(
            (".".join(str(x) for x in e["loc"]) + ": " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise _Reject(f"not a valid case: {problems}") from None


def _unique(labels: list[str]) -> list[str]:
    return list(dict.fromkeys(labels))


def _notes(row: ImportRow) -> str | None:
    parts = [row.notes] if row.notes else []
    if row.original_dialect and row.original_sql is not None:
        parts.append(f"transpiled from {row.original_dialect}: {row.original_sql}")
        for i, alt in enumerate(row.original_alternatives):
            parts.append(f"alternative {i + 1} transpiled from {row.original_dialect}: {alt}")
    parts += [f"rewrite {r}" for r in row.rewrites]
    return "\n".join(parts) or None


def unservable_reasons(unserved: Iterable[tuple[str, str, str]], sensitive_schemas: Iterable[str]
                       ) -> dict[str, str]:
    """Why each relation the snapshot does not serve is absent, keyed by lower-case ``name``
    and ``schema.name``; ``unserved`` holds ``(schema, name, why)`` with ``why`` one of
    ``"sensitive"``, ``"ephemeral"``, ``"unselected"``.

    >>> r = unservable_reasons([("hr", "salaries", "sensitive"), ("staging", "stg_x", "unselected")], ["hr"])
    >>> r["hr.salaries"].split(":")[0], r["stg_x"].split(" (")[0]
    ("in the sensitive schema 'hr' (sensitive_schemas in sqleval.yaml), which is never served", 'a model outside the served selection')
    """
    declared = {s.lower() for s in sensitive_schemas}
    out: dict[str, str] = {}
    for schema, name, why in unserved:
        if why == "sensitive" or schema.lower() in declared:
            text = (f"in the sensitive schema '{schema}' (sensitive_schemas in sqleval.yaml), which is never "
                    "served: a question about it is a should_refuse case (leave its SQL empty), or rewrite "
                    "the query over the served tables")
        elif why == "ephemeral":
            text = "an ephemeral dbt model, which has no relation to serve: rewrite the query over the served tables"
        else:
            text = (f"a model outside the served selection ({schema}.{name}): add it to serve.select (or drop "
                    "it from serve.exclude) in sqleval.yaml and rebuild with `sqleval build`, or rewrite the "
                    "query over the served tables")
        out.setdefault(f"{schema}.{name}".lower(), text)
        out.setdefault(name.lower(), text)
    return out


def _guard(row: ImportRow, statement_filter: StatementFilter, policy: GuardPolicy,
           unservable: Mapping[str, str]) -> None:
    texts = ([row.sql] if row.sql else []) + list(row.alternatives)
    for i, text in enumerate(texts):
        verdict = statement_filter.check(text)
        if not verdict.allowed:
            which = "sql" if i == 0 else f"alternative {i}"
            raise _Reject(f"{which}: {_explain(verdict, policy, row, unservable, text)}")


def _named_unservable(sql: str, unservable: Mapping[str, str]) -> tuple[str, str] | None:
    """(relation, why) of the first relation ``sql`` names that the project does not serve."""
    if not unservable:
        return None
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    for t in table_refs(tree):  # base tables only: a CTE named like an unserved model is not it
        for key in (f"{t.db}.{t.name}".lower() if t.db else None, t.name.lower()):
            if key and key in unservable:
                return (f"{t.db}.{t.name}" if t.db else t.name), unservable[key]
    return None


def _explain(v: FilterVerdict, policy: GuardPolicy, row: ImportRow,
             unservable: Mapping[str, str] | None = None, sql: str | None = None) -> str:
    """The filter's refusal, phrased as what the importer should do about it."""
    code = f" [guard: {v.reason}]"
    if v.reason in ("table_not_allowed", "qualifier_not_allowed"):
        known = _named_unservable(sql if sql is not None else (row.sql or ""), unservable or {})
        if known is not None:
            return f"table {known[0]!r} is not served{code}: it is {known[1]}"
    if v.reason == "table_not_allowed":
        m = re.search(r"The table '(.+?)'", v.message or "")
        name = m.group(1) if m else "?"
        served = sorted(policy.tables)
        shown = ", ".join(served[:12]) + (", …" if len(served) > 12 else "")
        return (f"table {name!r} is not served by the snapshot{code} — rewrite the query over the "
                f"served tables ({shown}), or add the table to the project's served selection "
                "and rebuild the snapshot")
    if v.reason == "qualifier_not_allowed":
        return (f"{v.message}{code} — the snapshot serves its tables in one schema: if this table "
                "is served, drop the qualifier; if it lives in a schema that is not served, it "
                "cannot be read (add it to the project's serve.select and rebuild)")
    if v.reason == "parse_error":
        hint = ("pass the file's --dialect so it is translated first" if not row.original_dialect
                else f"the translation from {row.original_dialect} did not produce valid DuckDB")
        return f"{v.message}{code} — {hint}"
    if v.reason in ("write_statement", "ddl_statement", "command_statement", "nested_write",
                    "select_into", "root_not_allowed"):
        return f"{v.message}{code} — a reference must be a single read-only query"
    if v.reason == "multiple_statements":
        return (f"{v.message}{code} — put one query in sql and further accepted queries in "
                "alternatives")
    if v.reason in ("denied_function", "function_not_allowed", "table_function", "file_reference"):
        return f"{v.message}{code} — the guard never runs this; query the served tables directly"
    return f"{v.message}{code}"


def _freeze_reason(exc: Exception, case: Case, row: ImportRow) -> str:
    text = " ".join(str(exc).split())
    text = text.removeprefix(f"case {case.id}: ")
    hint = "fix the SQL (the snapshot is DuckDB)"
    originals = " ".join([row.original_sql or "", *row.original_alternatives])
    if row.original_dialect == "sqlite" and '"' in originals and "not found" in text:
        hint = ("SQLite reads a double-quoted word that is not a column as a string, DuckDB "
                "does not: write string values in single quotes ('open', not \"open\")")
    return f"does not run on the snapshot: {text} — {hint}"


def _result_warnings(row: ImportRow, case: Case, snapshot_id: str) -> list[str]:
    out: list[str] = []
    where = f"line {row.line} ({case.id})"
    if case.expected is not None:
        if not case.expected.rows:
            out.append(f"{where}: the reference SQL returns no rows on {snapshot_id} — accepted, "
                       "but check its filter values (wrong references often return nothing)")
        for i, alt in enumerate(case.expected.alternatives):
            if not alt.rows:
                out.append(f"{where}: alternative {i + 1} returns no rows on {snapshot_id}")
    elif case.answerable and not case.reference_sql:
        out.append(f"{where}: no reference SQL — imported as unverified; it gets an "
                   "execution-only score until someone writes one")
    return out


__all__ = ["ImportAborted", "ImportReport", "import_rows"]
