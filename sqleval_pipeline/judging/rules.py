"""The rules judge: a deterministic, offline diagnosis from SQL structure and the result diff.

It parses the reference and the candidate SQL with sqlglot and compares what matters to an
analyst — the tables read, the aggregates computed, the predicates applied, the grouping and
the row limit — then picks the *first* difference in this order:

1. the attempt never produced rows: a declined answerable question → ``ambiguous_question``;
   an answered should-refuse question, a guard refusal over tables, or a missing table or
   column → ``wrong_table``; a timeout → ``wrong_grain``; a harness fault → ``harness_bug``;
2. different tables (or a missing join) → ``wrong_table``;
3. different grouping, row count or LIMIT → ``wrong_grain``;
4. different aggregates or measure columns → ``wrong_metric``;
5. different predicates → ``wrong_filter``, or ``ambiguous_question`` when only the time
   window differs and the case records that its question admits two readings;
6. the same structure but a different result → ``harness_bug`` (look at the reference).

>>> from sqleval_pipeline.judging.rules import shape
>>> s = shape("SELECT sum(o.net_revenue_inr) FROM fct_orders o WHERE o.status <> 'cancelled'")
>>> sorted(s.tables), sorted(s.aggregates), sorted(s.predicates)
(['fct_orders'], ['SUM(net_revenue_inr)'], ["status <> 'cancelled'"])
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.records import Diagnosis

RULES_REVISION = 1
_DATE_WORDS = ("date", "month", "_ts", "current_date", "interval", "date_trunc")


@dataclass
class Shape:
    tables: set[str] = field(default_factory=set)
    aggregates: set[str] = field(default_factory=set)
    predicates: set[str] = field(default_factory=set)
    group_by: set[str] = field(default_factory=set)
    limit: int | None = None
    measure_columns: set[str] = field(default_factory=set)


def _strip_qualifiers(node: exp.Expression) -> exp.Expression:
    node = node.copy()
    for col in node.find_all(exp.Column):
        col.set("table", None)
        col.set("db", None)
        col.set("catalog", None)
    return node


def _conjuncts(cond: exp.Expression | None) -> list[exp.Expression]:
    if cond is None:
        return []
    if isinstance(cond, exp.And):
        return _conjuncts(cond.left) + _conjuncts(cond.right)
    if isinstance(cond, exp.Paren):
        return _conjuncts(cond.this)
    return [cond]


def shape(sql: str) -> Shape:
    """The structure of one query (all scopes merged; CTE names are not tables)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    s = Shape()
    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for scope in traverse_scope(tree):
        for source in scope.sources.values():
            if isinstance(source, exp.Table) and source.name.lower() not in cte_names:
                s.tables.add(source.name.lower())
    for agg in tree.find_all(exp.AggFunc):
        s.aggregates.add(_strip_qualifiers(agg).sql("duckdb"))
        for col in agg.find_all(exp.Column):
            s.measure_columns.add(col.name.lower())
    for where in [*tree.find_all(exp.Where), *tree.find_all(exp.Having)]:
        for c in _conjuncts(where.this):
            s.predicates.add(_strip_qualifiers(c).sql("duckdb"))
    for join in tree.find_all(exp.Join):
        on = join.args.get("on")
        if on is not None:
            pass  # join keys are structure of tables, not filters
    for group in tree.find_all(exp.Group):
        for g in group.expressions:
            s.group_by.add(_strip_qualifiers(g).sql("duckdb").lower())
    limit = tree.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal):
        try:
            s.limit = int(limit.expression.this)
        except ValueError:
            s.limit = None
    return s


def _fmt(items: set[str]) -> str:
    return ", ".join(sorted(items)) or "none"


def _is_time(pred: str) -> bool:
    p = pred.lower()
    return any(w in p for w in _DATE_WORDS)


class RulesJudge:
    """Deterministic diagnoses; ``version`` changes with the rules."""

    name = "rules"
    version = f"rules-r{RULES_REVISION}-" + hashlib.sha256(__doc__.encode()).hexdigest()[:8]

    def diagnose(self, item: JudgeInput) -> Diagnosis:
        category, explanation = self._classify(item)
        a = item.attempt
        return Diagnosis(config_version=a.config_version, case_id=a.case_id, run_index=a.run_index,
                         category=category, explanation=explanation, judge=self.name,
                         judge_version=self.version)

    def _classify(self, item: JudgeInput) -> tuple[str, str]:
        case, attempt, execution, grade = item.case, item.attempt, item.execution, item.grade
        if grade.outcome == "DEFERRED_WRONGLY":
            return ("ambiguous_question",
                    f"declined an answerable question ({attempt.refusal_reason or 'no reason given'})")
        if not case.answerable:
            used = ""
            if attempt.sql:
                try:
                    used = f" from {_fmt(shape(attempt.sql).tables)}"
                except (sqlglot.errors.ParseError, RecursionError):
                    used = ""
            return ("wrong_table",
                    f"answered a question the served data cannot or must not answer{used}; "
                    "it should have declined")
        if execution is None:
            return "harness_bug", "an SQL attempt without an execution record"
        if execution.status == "error":
            if execution.error_source == "harness":
                return "harness_bug", f"the harness failed: {execution.error_message or execution.reason}"
            msg = (execution.error_message or execution.message or "").splitlines()[0][:200]
            return "wrong_table", f"the SQL does not run on the served schema ({execution.reason}): {msg}"
        if execution.status == "timeout":
            return "wrong_grain", (f"the query ran out of time ({execution.reason}); usually a join "
                                   "at the wrong grain or a cross product")
        if execution.status == "refused":
            if execution.reason in ("table_not_allowed", "qualifier_not_allowed", "file_reference",
                                    "table_function", "unresolved_table"):
                return "wrong_table", f"the guard refused the tables it reads ({execution.reason})"
            return "wrong_table", (f"the guard's {execution.layer} layer refused the query "
                                   f"({execution.reason}): {execution.message or ''}".strip())
        if not case.reference_sql:
            return "harness_bug", "the case has no reference SQL to compare with"
        try:
            ref, got = shape(case.reference_sql), shape(attempt.sql or "")
        except (sqlglot.errors.ParseError, RecursionError) as exc:
            return "harness_bug", f"could not parse the SQL to compare structures: {exc}"
        if ref.tables != got.tables:
            missing, extra = ref.tables - got.tables, got.tables - ref.tables
            parts = []
            if missing:
                parts.append(f"missing {_fmt(missing)}")
            if extra:
                parts.append(f"extra {_fmt(extra)}")
            return "wrong_table", f"reads {_fmt(got.tables)} where the reference reads " \
                                  f"{_fmt(ref.tables)} ({'; '.join(parts)})"
        row_count_differs = "row count" in (grade.mismatch or "").lower() or \
            "row_count" in (grade.reason or "")
        if ref.group_by != got.group_by or ref.limit != got.limit or row_count_differs:
            return "wrong_grain", (f"groups by {_fmt(got.group_by)} (limit {got.limit}) where the "
                                   f"reference groups by {_fmt(ref.group_by)} (limit {ref.limit})"
                                   + ("; the row counts differ" if row_count_differs else ""))
        if ref.aggregates != got.aggregates:
            return "wrong_metric", (f"computes {_fmt(got.aggregates)} where the reference computes "
                                    f"{_fmt(ref.aggregates)}")
        if ref.predicates != got.predicates:
            missing, extra = ref.predicates - got.predicates, got.predicates - ref.predicates
            only_time = all(_is_time(p) for p in missing | extra)
            readings = bool(case.alternative_sqls) or any("calendar" in t or "ambig" in t
                                                          for t in case.traps)
            detail = f"missing {_fmt(missing)}; extra {_fmt(extra)}"
            if only_time and readings:
                return "ambiguous_question", ("only the time window differs and the question "
                                              f"admits more than one reading ({detail})")
            return "wrong_filter", f"filters differ from the reference: {detail}"
        if "order" in (grade.reason or ""):
            return "wrong_grain", f"the rows come in the wrong order ({grade.mismatch or grade.reason})"
        return "harness_bug", ("the query has the reference's structure but a different result "
                               f"({grade.mismatch or grade.reason}); check the reference and the "
                               "expected result")
