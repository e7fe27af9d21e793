"""Why a statement did not run: the causes of SQL errors, failed translations and guard
refusals, for the rules judge (:class:`sqleval_pipeline.judging.rules.RulesJudge` inherits
:class:`FailedRunCauses`). Also the helpers both halves of the judge read: the candidate's SQL
and facts, its dialect, the clause an error names, where a column lives."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS
from sqleval_pipeline.judging import refusals
from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.causes import (
    CONVERTING_RULES,
    FUNCTION_REFUSALS,
    HARNESS_REFUSALS,
    MISMATCH_RULES,
    NOT_A_QUERY,
    ROLE_CATEGORY,
    SQL_KEYWORDS,
    SQLITE_FUNCTIONS,
    SQLITE_RULES,
    SYNTAX_REFUSALS,
    TABLE_REFUSALS,
    UNTRANSLATABLE_HELP,
    tag,
)
from sqleval_pipeline.judging.sql_errors import (
    duckdb_error_position, duckdb_functions, excluded_families, first_line, sqlite_syntax_error,
)
from sqleval_pipeline.judging.sql_facts import (
    CLAUSE_CATEGORY,
    Facts,
    ParseFailure,
    clause_at,
    clause_of_name,
    facts,
)
from sqleval_pipeline.judging.structure import Diff, differences, fmt


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


def _explain(diffs: list[Diff], note: Diff | None, extra: str = "") -> tuple[str, str]:
    lead = diffs[0] if diffs else note
    assert lead is not None
    rest = [d[1] for d in diffs[1:]] + ([note[1]] if note and diffs else []) + ([extra] if extra else [])
    return lead[0], lead[1] + (f"; also: {'; '.join(rest)}" if rest else "")


def _parse_dialect(item: JudgeInput) -> str:
    d = _dialect(item)
    return d if d and d != "another" and item.execution is not None and not item.execution.executed_sql \
        else "duckdb"


class FailedRunCauses:
    """The rules judge's causes for executions that did not run (SQL errors, refusals)."""

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
