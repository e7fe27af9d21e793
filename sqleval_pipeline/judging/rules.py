"""The rules judge: a deterministic, offline diagnosis from SQL structure and the result diff.

It reads the reference and the candidate SQL once each (:mod:`.sql_facts`, cached on the
text) and compares what an analyst would: the tables read, the grouping, the measures, the
predicates, the ordering and the output columns. Every difference found is listed; the first
decides the category and the others follow as "also: …".

1. **Causes first** (:data:`CAUSES`, docs/judging.md). A failure with a cause outside the SQL's
   structure is diagnosed by that cause, and the explanation names it (``[cause: code]``):
   no answer (a provider error, ERROR) → ``harness_bug``; a declined answerable question by its
   reason (:mod:`.refusals`); a dialect-translation failure, a conversion a fidelity rewrite
   caused, a table or column the reference reads that the snapshot lacks, a guard that
   misreads SQL, stops the reference or could not check the query, a row cap below the
   reference, a tie at the LIMIT cut (``case.expected.tie``), ties reordered, an ANY_VALUE
   column of the reference → ``harness_bug``. The system's own errors get the category of what
   they name: a table that is not served → ``wrong_table``; a column its tables lack that
   another served table has → ``wrong_table`` ("column X is in table Y, not Z"), one no table
   has → by where the query uses it; a GROUP BY error → ``wrong_grain``; a syntax error, an
   unknown or excluded function, a type error → by the clause it is in
   (:data:`~.sql_facts.CLAUSE_CATEGORY`); a write or stacked statements → its SELECT's
   differences, else ``wrong_metric``. An answered should-refuse question → ``wrong_table``.
   A timeout or a guard refusal for size is judged by the differences below; when the query
   has the reference's structure the limit, not the query, is at fault → ``harness_bug``.
2. **Tables.** When the candidate reads other tables, it is ``wrong_table`` only if its tables
   cannot express the reference: a column the reference aggregates, groups by, outputs or
   filters on is not known in them (from the catalog when the judge input has it, else from
   the columns either query reads from them), or a ``count(*)`` counts rows of a table it
   does not read. A table the reference joins only to filter through it (a coded-value lookup)
   does not count: missing it is a filter mistake.
3. **Grain**: another GROUP BY (positions and aliases resolved to expressions), LIMIT or
   DISTINCT → ``wrong_grain``; one side reading pre-aggregated rows is compared by columns.
4. **Measures**: another aggregate expression, or another output column of a row-level query
   (a date for a date) → ``wrong_metric`` (``wrong_grain`` when the column identifies rows).
5. **Filters**: other predicates → ``wrong_filter``, or ``ambiguous_question`` when only the time
   window differs and the case records that its question admits two readings.
6. **Order** (with a LIMIT or when order matters) → ``wrong_grain``; **join keys** →
   ``wrong_table``.
7. Other tables that can express the reference, and nothing else differs: a lookup join left
   out, or a replaced table whose values are all larger (or all smaller) than expected — it
   counts other rows — → ``wrong_filter``; another replaced table or an extra join →
   ``wrong_table``.
8. Nothing differs: rows equal to the expected ones → ``harness_bug`` (the grader); the same
   query up to spelling → ``harness_bug`` (the reference or expected result); otherwise the
   row count or the values decide (``wrong_grain`` / ``wrong_metric``).

>>> from sqleval_pipeline.judging.rules import shape
>>> s = shape("SELECT sum(o.net_amount) FROM sales o WHERE o.state <> 'void'")
>>> sorted(s.tables), sorted(s.measures), s.filters
(['sales'], ['sum(net_amount)'], ("state <> 'void'",))
"""

from __future__ import annotations

import hashlib
import re

import duckdb
import sqlglot
from sqlglot import exp

from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS
from sqleval_pipeline.judging import refusals, sql_facts
from sqleval_pipeline.judging.base import CATEGORY_HELP, JudgeInput
from sqleval_pipeline.judging.sql_facts import (
    CLAUSE_CATEGORY,
    Facts,
    ParseFailure,
    clause_at,
    clause_of_name,
    facts,
)
from sqleval_pipeline.judging.causes import (
    CAUSES,
    CONVERTING_RULES,
    FUNCTION_REFUSALS,
    HARNESS_REFUSALS,
    MISMATCH_RULES,
    NOT_A_QUERY,
    ROLE_CATEGORY,
    SQLITE_FUNCTIONS,
    SQLITE_RULES,
    SQL_KEYWORDS,
    SYNTAX_REFUSALS,
    TABLE_REFUSALS,
    UNTRANSLATABLE_HELP,
    tag,
)
from sqleval_pipeline.judging.sql_errors import (
    duckdb_error_position, duckdb_functions, excluded_families, first_line, sqlite_syntax_error,
)
from sqleval_pipeline.judging.structure import (
    Diff,
    differences,
    equal_rows,
    fmt,
    result_rows,
    value_shift,
)
from sqleval_pipeline.judging.ties_evidence import nondeterministic, tie_cause
from sqleval_pipeline.records import Diagnosis

#: 3: causes first (the cause table, CAUSES); 2: structure and result diff
RULES_REVISION = 3


shape = facts  # the name this module exported before sql_facts existed


# --------------------------------------------------------------------------- result evidence


# --------------------------------------------------------------------------- the cause table


assert all(c.category is None or c.category in CATEGORY_HELP for c in CAUSES)

_CLAUSE_START = re.compile(r"(?:select|from|(?:left |right |full |inner |cross |natural )*(?:outer )?"
                           r"join|on|using|where|group\s+by|having|qualify|order\s+by|limit|offset|"
                           r"window)\b", re.IGNORECASE)


def _type_mismatch(item: JudgeInput) -> str | None:
    """The first affinity rewrite the dialect translation made on the system's text that the
    reference's own translation did not need (the reference's rewrites are in the case's
    notes), or None."""
    rewrites = [r for r in (getattr(item.execution, "rewrites", None) or [])
                if r.split(":", 1)[0].strip() in MISMATCH_RULES]
    if not rewrites:
        return None
    notes = item.case.notes or ""
    for r in rewrites:
        rule, _, detail = r.partition(":")
        if f": {rule.strip()}:" not in notes:
            return detail.strip().split(" (", 1)[0][:200]
    return None


def _dialect(item: JudgeInput) -> str | None:
    """The configuration's dialect: given, named by a transpile failure, or SQLite when a
    SQLite fidelity rule rewrote the text; ``"another"`` when a translation ran (executed_sql)
    but the judge cannot tell from which dialect."""
    if item.dialect and item.dialect.lower() != "duckdb":
        return item.dialect.lower()
    ex = item.execution
    if ex is None:
        return None
    m = re.match(r"cannot transpile from (\w+)", ex.error_message or "")
    if m:
        return m.group(1).lower()
    if any(r.startswith(SQLITE_RULES) for r in ex.rewrites):
        return "sqlite"
    return "another" if ex.executed_sql else None


def _candidate_sql(item: JudgeInput) -> str:
    ex = item.execution
    return (ex.executed_sql if ex is not None and ex.executed_sql else None) or item.attempt.sql or ""


def _got(item: JudgeInput) -> Facts | None:
    """The candidate's facts: of the DuckDB text that ran, else of the system's text (in its
    dialect when that is known), None when neither parses."""
    sql = _candidate_sql(item)
    try:
        return facts(sql)
    except ParseFailure:
        pass
    dialect = _dialect(item)
    if dialect and dialect != "another" and item.attempt.sql:
        try:
            return facts(sqlglot.transpile(item.attempt.sql, read=dialect, write="duckdb")[0])
        except (*ParseFailure, sqlglot.errors.SqlglotError, IndexError):
            return None
    return None


def _also(ref: Facts | None, got: Facts | None, item: JudgeInput) -> str:
    """The structural differences as a note ("" when there are none or it cannot tell)."""
    if ref is None or got is None:
        return ""
    diffs, note = differences(ref, got, item)
    texts = [d[1] for d in diffs] + ([note[1]] if note else [])
    return f"; also, compared with the reference: {'; '.join(texts[:3])}" if texts else ""


def _by_clause(clause: str | None, default: str = "wrong_metric") -> tuple[str, str]:
    if clause is None:
        return default, "an error the judge cannot place in a clause (counted against the SELECT list)"
    return CLAUSE_CATEGORY.get(clause, default), f"the error is in its {clause.upper()} clause"


def _column_homes(col: str, item: JudgeInput, ref: Facts | None) -> tuple[set[str], bool]:
    """The served tables known to have ``col`` and whether that is from the catalog (else from
    the reference and its alternatives)."""
    if item.catalog:
        return {t.lower() for t, cols in item.catalog.items() if col in {c.lower() for c in cols}}, True
    homes: set[str] = set()
    for sql in [item.case.reference_sql or "", *item.case.alternative_sqls]:
        try:
            f = facts(sql) if sql else None
        except ParseFailure:
            continue
        if f is not None:
            homes |= {t for t in f.tables if col in f.columns_of(t)}
    return homes, False


# --------------------------------------------------------------------------- result evidence (ties)


# --------------------------------------------------------------------------- the judge


def _explain(diffs: list[Diff], note: Diff | None, extra: str = "") -> tuple[str, str]:
    lead = diffs[0] if diffs else note
    assert lead is not None
    rest = [d[1] for d in diffs[1:]] + ([note[1]] if note and diffs else []) + ([extra] if extra else [])
    return lead[0], lead[1] + (f"; also: {'; '.join(rest)}" if rest else "")


def _version() -> str:
    text = (__doc__ or "") + (sql_facts.__doc__ or "") + (refusals.__doc__ or "") + \
        repr([(r.category, r.pattern) for r in (*refusals.REASONS, refusals.UNAVAILABLE)]) + \
        repr(CAUSES) + repr(sorted(CLAUSE_CATEGORY.items())) + repr(ROLE_CATEGORY)
    return f"rules-r{RULES_REVISION}-" + hashlib.sha256(text.encode()).hexdigest()[:8]


class RulesJudge:
    """Deterministic diagnoses; ``version`` changes with the rules."""

    name = "rules"
    version = _version()

    def diagnose(self, item: JudgeInput) -> Diagnosis:
        category, explanation = self._classify(item)
        a = item.attempt
        return Diagnosis(config_version=a.config_version, case_id=a.case_id, run_index=a.run_index,
                         category=category, explanation=explanation, judge=self.name,
                         judge_version=self.version)

    @staticmethod
    def _reference(item: JudgeInput) -> Facts | None:
        try:
            return facts(item.case.reference_sql) if item.case.reference_sql else None
        except ParseFailure:
            return None

    def _classify(self, item: JudgeInput) -> tuple[str, str]:
        case, attempt, execution, grade = item.case, item.attempt, item.execution, item.grade
        if attempt.kind == "error" or grade.outcome == "ERROR":
            what = (f"provider error {attempt.error_code}" if attempt.kind == "error" else grade.reason)
            detail = first_line(attempt.error_message, grade.mismatch)
            code = "provider_error" if attempt.kind == "error" else "harness_error"
            return "harness_bug", tag(code, (
                f"no answer was obtained ({what}{': ' + detail if detail else ''}); an ERROR leaves "
                "the denominator: not the system's failure, retry the attempt"))
        if grade.outcome == "DEFERRED_WRONGLY" or attempt.kind == "refusal" and case.answerable:
            category, text = refusals.classify_refusal(attempt.refusal_reason, self._reference(item))
            return category, tag("over_refusal", text)
        if not case.answerable:
            used = ""
            if attempt.sql:
                try:
                    used = f" from {fmt(sorted(facts(attempt.sql).tables))}"
                except ParseFailure:
                    used = ""
            return ("wrong_table", tag("answered_should_refuse",
                    f"answered a question the served data cannot or must not answer{used}; "
                    "it should have declined"))
        if execution is None:
            return "harness_bug", tag("harness_error", "an SQL attempt without an execution record")
        if execution.status == "error" and execution.error_source == "harness":
            return "harness_bug", tag("harness_error", "the harness failed: "
                                       f"{first_line(execution.error_message, execution.message) or execution.reason}")
        ref = self._reference(item)
        got = _got(item)
        if execution.status == "error":
            return self._sql_error(item, ref, got)
        if execution.status == "refused":
            return self._refused(item, ref, got)
        if execution.status == "ok" and equal_rows(item):
            return "harness_bug", tag("grader_equal_rows", (
                "the rows equal the expected result once values are compared to 6 significant "
                f"digits, yet it was graded {grade.reason}: check the grader"))
        if ref is None:
            return "harness_bug", tag("reference_broken", "the case has no reference SQL the judge can read")
        if execution.status == "ok" and (execution.truncated or grade.reason == "result_truncated"):
            return self._truncated(item, ref, got)
        if execution.status == "ok":
            found = tie_cause(item, ref, got) or nondeterministic(item, ref, got)
            if found:
                return found
        if got is None:
            return "harness_bug", ("could not parse the SQL to compare structures: "
                                   f"{first_line(_candidate_sql(item))[:120]}")
        diffs, note = differences(ref, got, item)
        if execution.status != "ok":
            return self._not_run(item, ref, got, diffs, note)
        mismatch = _type_mismatch(item)
        if mismatch:
            rest = _explain(diffs, note)[1] if (diffs or note) else ""
            return "wrong_table", tag("type_mismatch_compare", (
                f"it compares values of different types — {mismatch} — so the value it compares "
                "lives in another table (a key matched against a name, or a missing join)"
                + (f"; also: {rest}" if rest else "")))
        if not diffs and note and note[0] == "replaced":
            shift = value_shift(item)
            note = ("wrong_filter" if shift else "wrong_table",
                    note[1] + ("" if shift else ", yet its values differ"))
            return _explain(diffs, note, shift)
        if diffs or note:
            shift = value_shift(item) if (diffs or [note])[0][0] == "wrong_filter" else ""
            return _explain(diffs, note, shift)
        if got.text == ref.text or any(_same_text(got, alt) for alt in case.alternative_sqls):
            tie = " (its ORDER BY … LIMIT may cut a tie the case does not record)" if ref.limit else ""
            return "harness_bug", tag("reference_spelling", (
                "the query is the reference's own up to spelling, but its result differs "
                f"({grade.mismatch or grade.reason}){tie}; check the reference, the expected result "
                "and the snapshot"))
        if "order" in (grade.reason or ""):
            return "wrong_grain", f"the rows come in the wrong order ({grade.mismatch or grade.reason})"
        accepted, rows = result_rows(item)
        if accepted and len(accepted[0].rows) != len(rows.rows):
            return "wrong_grain", (f"returns {len(rows.rows)} row(s) where the reference returns "
                                   f"{len(accepted[0].rows)}; the queries differ outside the parts "
                                   "the rules compare")
        return "wrong_metric", ("the values differ and the queries differ outside the parts the "
                                "rules compare (tables, grouping, measures, filters): "
                                f"{grade.mismatch or grade.reason}")

    # ------------------------------------------------------------------ SQL errors

    def _sql_error(self, item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str]:
        ex = item.execution
        assert ex is not None
        code = ex.error_code or ex.reason or "sql_error"
        msg = first_line(ex.error_message, ex.message)
        sql = _candidate_sql(item)
        dialect = _dialect(item)
        if code == "transpile_failed":
            return self._transpile(item, ref, msg)
        also = _also(ref, got, item)
        said = f"DuckDB rejected it ({code}: {msg})" if msg else f"DuckDB rejected it ({code})"
        if code == "internal_error" or msg.upper().startswith("INTERNAL"):
            return "harness_bug", tag("engine_internal_error", f"{said}: an internal error of the "
                                       f"engine, not of the query{also}")
        m = re.search(r'Table with name "?([\w.$]+)"? does not exist', msg)
        if m:
            table = m.group(1).split(".")[-1].lower()
            if ref is not None and table in ref.tables:
                return "harness_bug", tag("reference_broken", (
                    f"{said}: the reference reads {table} too, so the snapshot lacks a table the "
                    "case needs (snapshot drift or a broken reference)"))
            return "wrong_table", tag("missing_table", f"it reads {table}, which is not a served "
                                                         f"table ({msg}){also}")
        m = re.search(r'Function with name "?(\w+)"? does not exist', msg)
        if m:
            fn = m.group(1).lower()
            if dialect == "sqlite" and fn in SQLITE_FUNCTIONS:
                return "harness_bug", tag("untranslated_function", (
                    f"{said}: {fn}() is a SQLite function the dialect translation left untranslated; "
                    f"the evaluation could not run the system's SQLite faithfully{also}"))
            category, where = _by_clause(clause_of_name(sql, fn))
            return category, tag("unknown_function", f"it calls {fn}(), a function DuckDB does not "
                                  f"have ({msg}); {where}{also}")
        col_m = re.search(r'Referenced column "([^"]+)" not found', msg)
        qual_m = re.search(r'Table "([^"]+)" does not have a column named "([^"]+)"', msg)
        if col_m or qual_m:
            col = (qual_m.group(2) if qual_m else col_m.group(1)).split(".")[-1].lower()
            return self._column(item, ref, got, col, qual_m.group(1).lower() if qual_m else None, said, also)
        if "must appear in the GROUP BY" in msg:
            return "wrong_grain", tag("grouping_error", f"{said}: a column neither grouped nor "
                                       f"aggregated, so its grain is wrong{also}")
        if "Ambiguous reference to column" in msg:
            if ref is not None and got is not None:
                diffs, note = differences(ref, got, item)
                if diffs or (note and note[0] != "replaced"):
                    category, text = _explain(diffs, note)
                    return category, tag("ambiguous_column", f"{said}, and {text}")
            return "wrong_table", tag("ambiguous_column", f"{said}: its join leaves a column "
                                       "unqualified between two tables that both have it")
        converting = code in ("conversion_error", "out_of_range_error", "invalid_input_error") or \
            "No function matches" in msg or "Overflow" in msg
        if converting and dialect is not None:
            rule = self._rewrite_involved(ex, msg)
            if rule or (dialect == "sqlite" and code == "out_of_range_error"):
                rule = rule or "integer width (SQLite's integers are 64-bit)"
                return "harness_bug", tag("translation_broke_query", (
                    f"{said}: the dialect translation's {rule} rewrite made a query the source "
                    "dialect answers fail (SQLite converts or compares such values without an "
                    f"error); the evaluation could not run it faithfully{also}"))
        if code == "parser_error" or msg.startswith("Parser Error"):
            return self._syntax(item, ref, got, said, also)
        if converting:
            lit = re.search(r"(?:string|value) '([^']*)'", msg) or re.search(r"'(\w+)\(", msg) or \
                re.search(r"source column (\w+)", msg)
            clause = clause_of_name(sql, lit.group(1)) if lit else None
            if clause is None and ref is not None and got is not None:
                diffs, note = differences(ref, got, item)
                if diffs:
                    category, text = _explain(diffs, note)
                    return category, tag("type_error", f"{said}, and {text}")
            category, where = _by_clause(clause, "wrong_filter")
            return category, tag("type_error", f"{said}: a value or argument of the wrong type; "
                                                 f"{where}{also}")
        if ref is not None and got is not None:
            diffs, note = differences(ref, got, item)
            if diffs or (note and note[0] != "replaced"):
                category, text = _explain(diffs, note)
                return category, tag("sql_error", f"{said}, and {text}")
        category, where = _by_clause(self._error_clause(sql, msg))
        return category, tag("sql_error", f"{said}; {where}")

    @staticmethod
    def _error_clause(sql: str, msg: str) -> str | None:
        m = re.search(r'"([^"]{1,80})"', msg) or re.search(r"'([^']{1,80})'", msg)
        return clause_of_name(sql, m.group(1)) if m else None

    @staticmethod
    def _rewrite_involved(ex, msg: str) -> str | None:
        """The converting fidelity rule whose rewrite the error comes from, if any."""
        rules = [(r.split(":", 1)[0].strip(), r) for r in ex.rewrites
                 if r.split(":", 1)[0].strip().startswith(CONVERTING_RULES)]
        if not rules:
            return None
        src = re.search(r"source column (\w+)", msg)
        if src and src.group(1).upper() != "SUBQUERY":
            name = src.group(1).lower()
            hit = [code for code, text in rules if re.search(rf"\b{re.escape(name)}\b", text, re.I)]
            return hit[0] if hit else None
        if src:  # a subquery's value
            hit = [code for code, text in rules if "(select" in text.lower()]
            return hit[0] if hit else None
        return rules[0][0]

    def _transpile(self, item: JudgeInput, ref: Facts | None, msg: str) -> tuple[str, str]:
        m = re.match(r"cannot transpile from (\w+) \((\w+)\)", msg)
        dialect, reason = (m.group(1), m.group(2)) if m else (_dialect(item) or "its dialect", "unknown")
        got = _got(item)
        also = _also(ref, got, item)
        if reason == "parse_error":
            sql = item.attempt.sql or ""
            if dialect.lower() == "sqlite":
                err = sqlite_syntax_error(sql)
                if err is None:
                    return "harness_bug", tag("transpile_valid_syntax", (
                        f"the dialect translation could not parse the system's SQLite ({msg}), yet "
                        "SQLite itself parses it: the evaluation's parser (sqlglot) lacks a "
                        f"construct{also}"))
                said = f"its SQLite does not parse (SQLite says: {err})"
            else:
                said = (f"its {dialect} text does not parse ({msg}; sqlglot is the only parser the "
                        "judge has for this dialect)")
            return self._syntax(item, ref, got, said, also, sql=sql)
        if reason == "statement_count":
            return self._not_a_query(item, ref, f"the dialect translation found several statements ({msg})")
        help_ = UNTRANSLATABLE_HELP.get(reason, "the translation refused the text")
        return "harness_bug", tag("transpile_untranslatable", (
            f"dialect translation failed: the evaluation could not translate the system's {dialect} "
            f"faithfully to DuckDB (rule {reason}: {help_}): {msg}{also}"))

    def _syntax(self, item: JudgeInput, ref: Facts | None, got: Facts | None, said: str, also: str,
                sql: str | None = None) -> tuple[str, str]:
        text = sql if sql is not None else _candidate_sql(item)
        pos = duckdb_error_position(text)
        clause = clause_at(text, pos) if pos is not None else None
        if clause is not None and pos and _CLAUSE_START.match(text, pos):
            # stopped at a clause's first word: the clause before it is unfinished
            clause = clause_at(text, pos - 1) or clause
        if clause is not None:
            near = text[pos:pos + 20].split("\n")[0]
            category, where = _by_clause(clause)
            return category, tag("syntax_error", f"a syntax error: {said}; {where} (at "
                                                   f"\"{near}\"){also}")
        if ref is not None and got is not None:
            diffs, note = differences(ref, got, item)
            if diffs or (note and note[0] != "replaced"):
                category, text2 = _explain(diffs, note)
                return category, tag("syntax_error", f"a syntax error: {said}; sqlglot still reads "
                                                       f"it, and {text2}")
        category, where = _by_clause(None)
        return category, tag("syntax_error", f"a syntax error: {said}; {where}")

    def _column(self, item: JudgeInput, ref: Facts | None, got: Facts | None, col: str,
                qualifier: str | None, said: str, also: str) -> tuple[str, str]:
        sources = (got.sources or {}) if got is not None else {}
        table = sources.get(qualifier, qualifier) if qualifier else None
        reads = {table} if table else (set(got.tables) if got is not None else set())
        homes, from_catalog = _column_homes(col, item, ref)
        where = f"{table}" if table else fmt(sorted(reads)) or "the tables it reads"
        if ref is not None and homes & reads and not from_catalog:
            return "harness_bug", tag("reference_broken", (
                f"{said}: the reference reads column {col} from {fmt(sorted(homes & reads))} too, "
                "so the snapshot lacks a column the case needs (snapshot drift or a broken reference)"))
        elsewhere = sorted(homes - reads)
        if elsewhere:
            return "wrong_table", tag("column_elsewhere", (
                f"column {col} is in table {fmt(elsewhere)}, not {where} ({said}){also}"))
        known = "no served table has it" if from_catalog else \
            "neither query's tables have it as far as the judge knows (no catalog: it knows the reference's columns only)"
        if got is not None:
            for role, category in ROLE_CATEGORY:
                if col in got.columns(role) or any(c == col for _t, c in got.roles.get(role, ())):
                    return category, tag("column_nowhere", (
                        f"column {col} is not in {where} and {known}; the query uses it as a "
                        f"{role} ({said}){also}"))
        category, where_clause = _by_clause(clause_of_name(_candidate_sql(item), col))
        return category, tag("column_nowhere", f"column {col} is not in {where} and {known}; "
                                                 f"{where_clause} ({said}){also}")

    # ------------------------------------------------------------------ guard refusals

    def _refused(self, item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str]:
        ex = item.execution
        assert ex is not None
        r, msg = ex.reason or "", first_line(ex.message)
        what = f"the guard's {ex.layer} layer refused it ({r}{': ' + msg if msg else ''})"
        also = _also(ref, got, item)
        if r in NOT_A_QUERY and "could not be checked" not in msg:
            return self._not_a_query(item, ref, what)
        if r in TABLE_REFUSALS:
            m = re.search(r"table (?:function )?'?\"?([\w.$]+)", msg, re.I)
            table = m.group(1).split(".")[-1].lower() if m else None
            if ref is not None and table and table in ref.tables:
                return "harness_bug", tag("guard_blocks_reference", (
                    f"{what}, but the reference reads {table} too: the guard's allowlist stops the "
                    "right answer"))
            return "wrong_table", tag("missing_table", f"{what}: it reads what is not served (an "
                                       f"unserved or sensitive table, a file, another schema){also}")
        if r in FUNCTION_REFUSALS:
            return self._function_refused(item, ref, got, what, msg, also)
        if r in HARNESS_REFUSALS or r in ("worker_crashed", "sandbox_unavailable") or \
                "could not be checked" in msg:
            return "harness_bug", tag("guard_harness", f"{what}: the guard could not check, rewrite "
                                       f"or run it, though it may be fine{also}")
        if r in SYNTAX_REFUSALS:
            return self._syntax(item, ref, got, what, also)
        if got is None or ref is None:
            category, where = _by_clause(self._error_clause(_candidate_sql(item), msg))
            return category, tag("sql_error", f"{what}; {where}")
        diffs, note = differences(ref, got, item)
        return self._not_run(item, ref, got, diffs, note)

    def _function_refused(self, item: JudgeInput, ref: Facts | None, got: Facts | None, what: str,
                          msg: str, also: str) -> tuple[str, str]:
        m = re.search(r"(?:function|binds to) (\w+)\(\)", msg, re.I) or re.search(r"\b(\w+)\(\)", msg)
        fn = m.group(1).lower() if m else None
        sql = _candidate_sql(item)
        if fn in SQL_KEYWORDS:
            return "harness_bug", tag("guard_misreads_sql", (
                f"{what}: {fn.upper()} is SQL syntax (a predicate or keyword), not a function; the "
                f"guard misreads it{also}"))
        if fn and item.case.reference_sql and re.search(rf"\b{re.escape(fn)}\s*\(", item.case.reference_sql, re.I):
            return "harness_bug", tag("guard_blocks_reference", (
                f"{what}, but the reference calls {fn}() too: the guard's policy stops the right "
                "answer"))
        family = excluded_families().get(fn or "")
        if family is None and fn and item.execution.reason != "denied_function":
            known = duckdb_functions()
            alias = known.get(fn)
            same = {n for n, a in known.items() if a == fn} | ({alias} if alias else set())
            allowed = sorted(same & ALLOWED_FUNCTIONS)
            if fn in known and allowed:
                return "harness_bug", tag("guard_missing_alias", (
                    f"{what}: {fn}() is the same DuckDB function as {allowed[0]}(), which the "
                    f"allowlist allows; the allowlist lacks the alias{also}"))
        category, where = _by_clause(clause_of_name(sql, fn) if fn else None)
        why = (f"the guard excludes {fn}() by design ({family[0]}: {family[1]})" if family else
               f"the policy denies {fn}()" if item.execution.reason == "denied_function" else
               f"{fn}() is not a function the guard allows")
        return category, tag("excluded_function", f"{what}: {why}; {where}{also}")

    def _not_a_query(self, item: JudgeInput, ref: Facts | None, what: str) -> tuple[str, str]:
        sql = item.attempt.sql or _candidate_sql(item)
        select = None
        try:
            for stmt in sqlglot.parse(sql, read=_parse_dialect(item)):
                if stmt is None:
                    continue
                node = stmt if isinstance(stmt, exp.Query) else next(stmt.find_all(exp.Select), None)
                if node is not None:
                    node = node.copy()
                    node.set("into", None)
                    select = node.sql("duckdb")
                    break
        except (*ParseFailure, sqlglot.errors.SqlglotError):
            select = None
        part = None
        if select is not None:
            try:
                part = facts(select)
            except ParseFailure:
                part = None
        if part is not None and ref is not None:
            diffs, note = differences(ref, part, item)
            if diffs or (note and note[0] != "replaced"):
                category, text = _explain(diffs, note)
                return category, tag("not_a_query", f"{what}: not one read query; the SELECT in it "
                                      f"{text}")
            return "wrong_metric", tag("not_a_query", (
                f"{what}: not one read query; its SELECT has the reference's structure, but the "
                "statement also writes or runs more than that SELECT, so it returns no answer: "
                "answer with the SELECT alone"))
        return "wrong_metric", tag("not_a_query", (
            f"{what}: not a read query at all (no SELECT in it), so it computes no answer; the "
            f"reference {refusals._needs(ref).get('wrong_metric', 'reads ' + fmt(sorted(ref.tables))) if ref else 'is a SELECT'}"))

    def _truncated(self, item: JudgeInput, ref: Facts, got: Facts | None) -> tuple[str, str]:
        ex = item.execution
        assert ex is not None and ex.result is not None
        cap = len(ex.result.rows)
        expected = len(item.case.expected.rows) if item.case.expected else 0
        if expected >= cap:
            return "harness_bug", tag("result_cap_below_reference", (
                f"the result was truncated at the row cap ({cap} rows) and the reference returns "
                f"{expected}: the cap cannot hold the answer; raise it for this case"))
        if got is not None:
            diffs, note = differences(ref, got, item)
            if diffs or (note and note[0] != "replaced"):
                category, text = _explain(diffs, note)
                return category, (f"its result passed the row cap ({cap} rows, the reference returns "
                                  f"{expected}), and {text}")
        return "wrong_grain", (f"returns more than the row cap ({cap} rows) where the reference "
                               f"returns {expected}: it lacks an aggregation, a filter or a LIMIT")

    @staticmethod
    def _not_run(item: JudgeInput, ref: Facts, got: Facts, diffs: list[Diff],
                 note: Diff | None) -> tuple[str, str]:
        """A timeout or a guard refusal for size: the query's differences decide."""
        ex = item.execution
        assert ex is not None
        what = (f"it ran out of time ({ex.reason})" if ex.status == "timeout" else
                f"the guard's {ex.layer} layer refused it ({ex.reason})")
        if diffs:
            category, text = _explain(diffs, note)
            return category, f"{what}, and {text}"
        if note:
            return ("wrong_table" if note[0] == "replaced" else note[0]), f"{what}, and {note[1]}"
        if ex.status == "timeout" and got.text != ref.text:
            return "wrong_grain", (f"{what}, with the reference's tables, grouping, measures and "
                                   "filters; usually a join at the wrong grain or a cross product")
        whose = "the harness could not check it" if ex.reason in HARNESS_REFUSALS else \
            "the guard stops a plausible query"
        return "harness_bug", tag("limit_on_plausible_query", (
            f"{what}, yet the query has the reference's structure: {whose} ({ex.message or ex.reason})"))


def _parse_dialect(item: JudgeInput) -> str:
    d = _dialect(item)
    return d if d and d != "another" and item.execution is not None and not item.execution.executed_sql \
        else "duckdb"


def _same_text(got: Facts, sql: str) -> bool:
    try:
        return facts(sql).text == got.text
    except ParseFailure:
        return False
