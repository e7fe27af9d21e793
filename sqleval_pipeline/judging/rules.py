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

from sqleval_pipeline.judging import refusals, sql_facts
from sqleval_pipeline.judging.base import CATEGORY_HELP, JudgeInput
from sqleval_pipeline.judging.causes import CAUSES, HARNESS_REFUSALS, ROLE_CATEGORY, tag
from sqleval_pipeline.judging.failed_runs import (
    FailedRunCauses,
    _candidate_sql,
    _explain,
    _got,
    _type_mismatch,
)
from sqleval_pipeline.judging.sql_errors import first_line
from sqleval_pipeline.judging.sql_facts import CLAUSE_CATEGORY, Facts, ParseFailure, facts
from sqleval_pipeline.judging.structure import (
    Diff,
    differences,
    equal_rows,
    fmt,
    result_rows,
    value_shift,
)
from sqleval_pipeline.judging.ties_evidence import nondeterministic, tie_cause
from sqleval_pipeline.pipeline.records import Diagnosis

#: 3: causes first (the cause table, CAUSES); 2: structure and result diff
RULES_REVISION = 3


shape = facts  # the name this module exported before sql_facts existed


assert all(c.category is None or c.category in CATEGORY_HELP for c in CAUSES)


# --------------------------------------------------------------------------- the judge


def _version() -> str:
    text = (__doc__ or "") + (sql_facts.__doc__ or "") + (refusals.__doc__ or "") + \
        repr([(r.category, r.pattern) for r in (*refusals.REASONS, refusals.UNAVAILABLE)]) + \
        repr(CAUSES) + repr(sorted(CLAUSE_CATEGORY.items())) + repr(ROLE_CATEGORY)
    return f"rules-r{RULES_REVISION}-" + hashlib.sha256(text.encode()).hexdigest()[:8]


class RulesJudge(FailedRunCauses):
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
        if grade.reason == "accidental_match":  # right on the snapshot, wrong on a neighbour
            return self._accidental(item, ref, got)
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

    @staticmethod
    def _accidental(item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str]:
        """An answer right on the snapshot only (the test suite's accidental_match): what its
        SQL does differently from the reference says why; the snapshot's rows cannot."""
        where = (item.grade.suite_detail or {}).get("neighbour")
        if ref is not None and got is not None:
            diffs, note = differences(ref, got, item)
            if diffs or note:
                category, text = _explain(diffs, note)
                return category, tag("accidental_match", f"right on the snapshot by coincidence, wrong on "
                                                          f"neighbour {where}: {text}")
        return "wrong_metric", tag("accidental_match", (
            f"right on the snapshot by coincidence, wrong on neighbour {where}; the queries differ outside "
            f"the parts the rules compare: {item.grade.mismatch or item.grade.reason}"))

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


def _same_text(got: Facts, sql: str) -> bool:
    try:
        return facts(sql).text == got.text
    except ParseFailure:
        return False
