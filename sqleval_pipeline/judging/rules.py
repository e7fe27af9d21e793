"""The rules judge: a deterministic, offline diagnosis from SQL structure and the result diff.

It reads the reference and the candidate SQL once each (:mod:`.sql_facts`, cached on the
text) and compares what an analyst would: the tables read, the grouping, the measures, the
predicates, the ordering and the output columns. Every difference found is listed; the first
decides the category and the others follow as "also: …".

1. **No rows.** A declined answerable question is judged by its reason and by what the
   reference needs (:mod:`.refusals`: a missing join path → ``wrong_table``, no metric →
   ``wrong_metric``, no dimension → ``wrong_grain``, an unmapped value → ``wrong_filter``;
   only ambiguous wording → ``ambiguous_question``). An answered should-refuse question, a
   guard refusal over tables, or SQL that does not run on the served schema →
   ``wrong_table``. A timeout or a guard refusal for size is judged by the differences below
   (a cross product or a missing aggregation shows there); when the query has the reference's
   structure the limit, not the query, is at fault → ``harness_bug``. A harness fault →
   ``harness_bug``.
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
from decimal import Decimal

from sqleval_pipeline.judging import refusals, sql_facts
from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.sql_facts import Facts, ParseFailure, facts, is_time
from sqleval_pipeline.records import Diagnosis

RULES_REVISION = 2

#: guard refusals over which tables a query reads (the query's fault)
TABLE_REFUSALS = frozenset({"table_not_allowed", "qualifier_not_allowed", "file_reference",
                            "table_function", "unresolved_table", "duckdb_table_not_allowed"})
#: a query the guard could not check or rewrite, though it may be fine (a fault of the harness)
HARNESS_REFUSALS = frozenset({"rewrite_failed", "unpinned_clock", "views_disagree"})
_ID_LIKE = re.compile(r"(?:^|_)(?:id|key|code|cd|no|number)$")

shape = facts  # the name this module exported before sql_facts existed

Diff = tuple[str, str]  # (category, what differs)


def _fmt(items) -> str:
    return ", ".join(items) or "none"


def _grouping(f: Facts) -> str:
    return f"groups by {_fmt(f.grain)}" if f.grain else "computes one total"


def _known(got: Facts, ref: Facts, catalog: dict[str, list[str]] | None) -> set[str]:
    known = set(got.known_columns())
    for t in got.tables:
        known |= ref.columns_of(t)
        if catalog:
            known |= {c.lower() for c in catalog.get(t, catalog.get(t.lower(), ()))}
    return known


def _lookups(ref: Facts, got: Facts) -> set[str]:
    """Tables the reference joins only to filter through (linked to a table the candidate reads)."""
    out = set()
    for t in ref.tables - got.tables:
        roles = {role for role, refs in ref.roles.items() if any(rt == t for rt, _c in refs)}
        if roles <= {"filter", "join"} and any(t in link and link - {t} <= got.tables
                                               for link in ref.links):
            out.add(t)
    return out


def _expressible(ref: Facts, got: Facts, catalog) -> tuple[list[str], set[str]]:
    """What the candidate's tables lack to express the reference, and the lookup tables."""
    known, lookups = _known(got, ref, catalog), _lookups(ref, got)
    needed = ref.columns("measure") | ref.columns("grain") | ref.columns("output")
    lacking = [f"column {c}" for c in sorted(needed - known)]
    lacking += [f"filter column {c}" for c in sorted({c for t, c in ref.roles.get("filter", ())
                                                      if t not in lookups} - known - needed)]
    lacking += [f"the rows of {t} (counted)" for t in sorted(ref.count_bases - got.tables)]
    return lacking, lookups


def _table_diff(ref: Facts, got: Facts, catalog) -> tuple[Diff | None, Diff | None]:
    """(deciding wrong_table difference, or a note with the category it decides if alone)."""
    if ref.tables == got.tables:
        if ref.join_keys and got.join_keys and ref.join_keys != got.join_keys:
            keys = lambda f: _fmt(sorted("=".join(sorted(k)) for k in f.join_keys))  # noqa: E731
            return ("wrong_table", f"joins on {keys(got)} where the reference joins on {keys(ref)}"), None
        return None, None
    missing, extra = sorted(ref.tables - got.tables), sorted(got.tables - ref.tables)
    where = f"reads {_fmt(sorted(got.tables))} where the reference reads {_fmt(sorted(ref.tables))}"
    detail = "; ".join(p for p in (f"missing {_fmt(missing)}" if missing else "",
                                   f"extra {_fmt(extra)}" if extra else "") if p)
    lacking, lookups = _expressible(ref, got, catalog)
    if lacking:
        return ("wrong_table", f"{where} ({detail}), and its tables lack {_fmt(lacking[:4])}"), None
    if missing and set(missing) <= lookups:
        return None, ("wrong_filter", f"does not join {_fmt(missing)}, which the reference joins only "
                                      "to filter through")
    if missing:  # decided by the values: other rows counted (a filter), else the table
        return None, ("replaced", f"{where}; {_fmt(sorted(got.tables))} can express the "
                                  "reference's measure, grain and filters")
    return None, ("wrong_table", f"{where} (an extra join to {_fmt(extra)}, which can repeat or "
                                 "drop rows)")


def _row_count(item: JudgeInput, of_reference: bool) -> int | None:
    if of_reference:
        return len(item.case.expected.rows) if item.case.expected else None
    ex = item.execution
    return len(ex.result.rows) if ex is not None and ex.result is not None else None


def _grain_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    out: list[Diff] = []
    if ref.aggregates == got.aggregates:
        if ref.aggregates and set(ref.grain) != set(got.grain):
            out.append(("wrong_grain", f"{_grouping(got)} where the reference {_grouping(ref)}"))
    else:  # one side reads rows as stored (a summary table, or no aggregation at all)
        agg, rows = (got, ref) if got.aggregates else (ref, got)
        one_total = not agg.grain and _row_count(item, rows is ref) != 1
        if one_total or not set(agg.grain) <= set(rows.outputs):
            a, r = ("it", "the reference") if agg is got else ("the reference", "it")
            out.append(("wrong_grain", f"{a} {_grouping(agg)} where {r} reads rows of "
                                       f"{_fmt(rows.outputs)}"))
    if ref.limit != got.limit:
        lim = lambda n: f"at most {n} rows" if n is not None else "every row"  # noqa: E731
        out.append(("wrong_grain", f"returns {lim(got.limit)} where the reference returns {lim(ref.limit)}"))
    if ref.distinct != got.distinct:
        out.append(("wrong_grain", f"{'' if got.distinct else 'no '}DISTINCT where the reference has "
                                   f"{'' if ref.distinct else 'no '}DISTINCT".strip()))
    return out


def _types(item: JudgeInput, ref: Facts, got: Facts, r: str, g: str) -> str:
    try:
        et = item.case.expected.types[ref.outputs.index(r)] if item.case.expected else None
        gt = item.execution.result.types[got.outputs.index(g)]  # type: ignore[union-attr]
    except (ValueError, IndexError, AttributeError):
        return ""
    return f" (both {et})" if et == gt else f" ({gt} for {et})"


def _measure_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    if ref.aggregates and got.aggregates:
        if ref.measures != got.measures:
            return [("wrong_metric", f"computes {_fmt(sorted(got.measures))} where the reference "
                                     f"computes {_fmt(sorted(ref.measures))}")]
        return []
    if ref.aggregates != got.aggregates:
        agg, rows = (got, ref) if got.aggregates else (ref, got)
        if not agg.columns("measure") <= set(rows.outputs):
            return [("wrong_metric", f"computes {_fmt(sorted(got.measures or got.outputs))} where "
                                     f"the reference computes {_fmt(sorted(ref.measures or ref.outputs))}")]
        return []
    missing = [o for o in ref.outputs if o not in got.outputs]
    extra = [o for o in got.outputs if o not in ref.outputs]
    if not (missing or extra):
        return []
    text = f"outputs {_fmt(extra)} where the reference outputs {_fmt(missing)}"
    if len(missing) == 1 and len(extra) == 1:
        text += _types(item, ref, got, missing[0], extra[0])
    ids = any(_ID_LIKE.search(o) for o in missing + extra)
    return [("wrong_grain" if ids else "wrong_metric", text)]


def _filter_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    missing = [p for p in ref.filters if p not in got.filters]
    extra = [p for p in got.filters if p not in ref.filters]
    if not (missing or extra):
        return []
    parts = [f"missing {' AND '.join(missing)}" if missing else "",
             f"extra {' AND '.join(extra)}" if extra else ""]
    detail = "; ".join(p for p in parts if p)
    case = item.case
    readings = bool(case.alternative_sqls) or any("calendar" in t or "ambig" in t for t in case.traps)
    if readings and all(is_time(p) for p in missing + extra):
        return [("ambiguous_question", "only the time window differs and the question admits more "
                                       f"than one reading ({detail})")]
    return [("wrong_filter", f"filters differ from the reference: {detail}")]


def _order_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    if ref.limit is None and not item.case.order_matters:
        return []
    same = ref.order == got.order if ref.aggregates == got.aggregates else \
        ref.order_keys == got.order_keys
    if same:
        return []
    return [("wrong_grain", f"orders by {_fmt(got.order)} where the reference orders by {_fmt(ref.order)}")]


def differences(ref: Facts, got: Facts, item: JudgeInput) -> tuple[list[Diff], Diff | None]:
    """Every deciding difference in order, and the table note that decides when alone."""
    deciding, note = _table_diff(ref, got, item.catalog)
    out = [deciding] if deciding else []
    out += _grain_diffs(ref, got, item) + _measure_diffs(ref, got, item) + _filter_diffs(ref, got, item)
    out += _order_diffs(ref, got, item)
    return out, note


# --------------------------------------------------------------------------- result evidence


def _num(v) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def _norm_row(row) -> tuple:
    return tuple(("n", float(f"{float(v):.6g}")) if _num(v) else ("v", str(v)) for v in row)


def _rows(item: JudgeInput):
    ex = item.execution
    accepted = item.case.accepted_results()
    if ex is None or ex.result is None or ex.truncated or not accepted:
        return None, None
    return accepted, ex.result


def _equal_rows(item: JudgeInput) -> bool:
    accepted, got = _rows(item)
    if not accepted:
        return False
    g = [_norm_row(r) for r in got.rows]
    for exp_rs in accepted:
        e = [_norm_row(r) for r in exp_rs.rows]
        if (e == g) if item.case.order_matters else (sorted(e) == sorted(g)):
            return True
    return False


def _value_shift(item: JudgeInput) -> str:
    """Whether every value of the rows both results key alike is larger (or smaller) than
    expected: the query counts rows the reference excludes (or drops rows it keeps)."""
    accepted, got = _rows(item)
    if not accepted or not got.rows:
        return ""
    def keyed(rows):
        return {tuple(str(v) for v in r if not _num(v)): [float(v) for v in r if _num(v)] for r in rows}

    e, g = keyed(accepted[0].rows), keyed(got.rows)
    pairs = [(a, b) for k in e.keys() & g.keys() for a, b in zip(e[k], g[k], strict=False)]
    where = "every value" if e.keys() == {()} else "every value of the rows both key alike"
    if pairs and all(b >= a for a, b in pairs) and any(b > a for a, b in pairs):
        return f"{where} is larger than expected: it counts rows the reference excludes"
    if pairs and all(b <= a for a, b in pairs) and any(b < a for a, b in pairs):
        return f"{where} is smaller than expected: it drops rows the reference keeps"
    return ""


# --------------------------------------------------------------------------- the judge


def _explain(diffs: list[Diff], note: Diff | None, extra: str = "") -> tuple[str, str]:
    lead = diffs[0] if diffs else note
    assert lead is not None
    rest = [d[1] for d in diffs[1:]] + ([note[1]] if note and diffs else []) + ([extra] if extra else [])
    return lead[0], lead[1] + (f"; also: {'; '.join(rest)}" if rest else "")


def _version() -> str:
    text = (__doc__ or "") + (sql_facts.__doc__ or "") + (refusals.__doc__ or "") + \
        repr([(r.category, r.pattern) for r in (*refusals.REASONS, refusals.UNAVAILABLE)])
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
        if grade.outcome == "DEFERRED_WRONGLY":
            return refusals.classify_refusal(attempt.refusal_reason, self._reference(item))
        if not case.answerable:
            used = ""
            if attempt.sql:
                try:
                    used = f" from {_fmt(sorted(facts(attempt.sql).tables))}"
                except ParseFailure:
                    used = ""
            return ("wrong_table",
                    f"answered a question the served data cannot or must not answer{used}; "
                    "it should have declined")
        if execution is None:
            return "harness_bug", "an SQL attempt without an execution record"
        if execution.status == "error":
            if execution.error_source == "harness":
                return "harness_bug", f"the harness failed: {execution.error_message or execution.reason}"
            msg = (execution.error_message or execution.message or "").splitlines()[0][:200] \
                if (execution.error_message or execution.message) else ""
            return "wrong_table", f"the SQL does not run on the served schema ({execution.reason}): {msg}"
        if execution.status == "refused" and execution.reason in TABLE_REFUSALS:
            return "wrong_table", f"the guard refused the tables it reads ({execution.reason})"
        if execution.status == "ok" and _equal_rows(item):
            return "harness_bug", ("the rows equal the expected result once values are compared "
                                   f"to 6 significant digits, yet it was graded {grade.reason}: "
                                   "check the grader")
        ref = self._reference(item)
        if ref is None:
            return "harness_bug", "the case has no reference SQL the judge can read"
        try:
            got = facts(attempt.sql or "")
        except ParseFailure as exc:
            if execution.status == "refused":
                return "wrong_table", (f"the guard's {execution.layer} layer refused the query "
                                       f"({execution.reason}): {execution.message or ''}".strip())
            return "harness_bug", f"could not parse the SQL to compare structures: {exc}"
        diffs, note = differences(ref, got, item)
        if execution.status != "ok":
            return self._not_run(item, ref, got, diffs, note)
        if not diffs and note and note[0] == "replaced":
            shift = _value_shift(item)
            note = ("wrong_filter" if shift else "wrong_table",
                    note[1] + ("" if shift else ", yet its values differ"))
            return _explain(diffs, note, shift)
        if diffs or note:
            shift = _value_shift(item) if (diffs or [note])[0][0] == "wrong_filter" else ""
            return _explain(diffs, note, shift)
        if got.text == ref.text or any(_same_text(got, alt) for alt in case.alternative_sqls):
            return "harness_bug", ("the query is the reference's own up to spelling, but its result "
                                   f"differs ({grade.mismatch or grade.reason}); check the reference, "
                                   "the expected result and the snapshot")
        if "order" in (grade.reason or ""):
            return "wrong_grain", f"the rows come in the wrong order ({grade.mismatch or grade.reason})"
        accepted, rows = _rows(item)
        if accepted and len(accepted[0].rows) != len(rows.rows):
            return "wrong_grain", (f"returns {len(rows.rows)} row(s) where the reference returns "
                                   f"{len(accepted[0].rows)}; the queries differ outside the parts "
                                   "the rules compare")
        return "wrong_metric", ("the values differ and the queries differ outside the parts the "
                                "rules compare (tables, grouping, measures, filters): "
                                f"{grade.mismatch or grade.reason}")

    @staticmethod
    def _not_run(item: JudgeInput, ref: Facts, got: Facts, diffs: list[Diff],
                 note: Diff | None) -> tuple[str, str]:
        """A timeout or a guard refusal (not over tables): the query's differences decide."""
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
        return "harness_bug", (f"{what}, yet the query has the reference's structure: {whose} "
                               f"({ex.message or ex.reason})")


def _same_text(got: Facts, sql: str) -> bool:
    try:
        return facts(sql).text == got.text
    except ParseFailure:
        return False
