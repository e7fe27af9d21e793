"""Evidence in the rows that a failure is a tie or a nondeterministic reference rather than the
system's mistake: a candidate that kept other rows of a tie group (at a LIMIT cut or inside
the order), or a reference whose frozen result depends on which row the database picked.
"""

from __future__ import annotations

from collections import Counter

from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.causes import tag
from sqleval_pipeline.judging.sql_facts import Facts
from sqleval_pipeline.judging.structure import differences, fmt, norm_row, result_rows
from sqleval_pipeline.results import ResultSet


def key_index(columns: list[str], keys) -> list[int] | None:
    cols = [c.lower() for c in columns]
    idx = [cols.index(k.lower()) for k in keys if k.lower() in cols]
    return idx if idx and len(idx) == len(list(keys)) else None


def multiset(rows) -> Counter:
    return Counter(norm_row(r) for r in rows)


def same_shape(ref: Facts | None, got: Facts | None, item: JudgeInput) -> bool:
    """The candidate has the reference's structure, but perhaps another ORDER BY tie-breaker."""
    if ref is None or got is None:
        return False
    diffs, note = differences(ref, got, item)
    return note is None and all(text.startswith("orders by") for _c, text in diffs)


def tie_cause(item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str] | None:
    """A tie at the LIMIT cut, or ties reordered: the evaluation's fault (None: not one). Rows
    that are a selection of the recorded tie group, or the expected rows reordered within ties,
    are right whatever the SQL; a tie the case does not record (or records in part) is trusted
    only when the query has the reference's structure."""
    exp_enc = item.case.expected
    ex = item.execution
    if exp_enc is None or ex is None or ex.result is None:
        return None
    expected = exp_enc.decode()
    result = ex.result
    if len(result.columns) != len(expected.columns):
        return None
    g_rows, e_rows = list(result.rows), list(expected.rows)
    tie = getattr(exp_enc, "tie", None)
    if tie is not None and len(g_rows) == len(e_rows):
        try:
            pool = multiset(tie.decoded_rows(expected.types)) if hasattr(tie, "decoded_rows") else \
                multiset(ResultSet.from_json({"columns": expected.columns, "types": expected.types,
                                               "rows": tie.rows}).rows)
        except (ValueError, TypeError):
            pool = Counter()
        fixed = multiset(e_rows[:tie.before] + e_rows[tie.before + tie.take:])
        rest = multiset(g_rows) - fixed
        if sum(rest.values()) == tie.take and not (rest - pool) and not (fixed - multiset(g_rows)):
            span = f"row {tie.before + 1}" if tie.take == 1 else f"rows {tie.before + 1}-{tie.before + tie.take}"
            return "harness_bug", tag("tie_at_cut", (
                f"a tie at the LIMIT cut: {span} may be any {tie.take} of the {len(tie.rows)} rows "
                f"tied on {fmt(tie.keys)}, and its rows are such a selection, yet it was graded "
                f"{item.grade.reason}: check the grader's use of the recorded tie"))
        if getattr(tie, "truncated", False) and same_shape(ref, got, item):
            kidx = key_index(expected.columns, tie.keys)
            boundary = {tuple(norm_row(r)[i] for i in kidx) for r in tie.rows} if kidx else set()
            if kidx and rest and all(tuple(k[i] for i in kidx) in boundary for k in rest.elements()):
                return "harness_bug", tag("tie_not_recorded", (
                    f"a tie at the LIMIT cut larger than freezing recorded: it keeps rows tied on "
                    f"{fmt(tie.keys)} with the recorded ones that the case does not list; add a "
                    "tie-breaker to the reference's ORDER BY, or re-freeze"))
    keys = list(item.case.order_keys) or (list(tie.keys) if tie is not None else [])
    kidx = key_index(expected.columns, keys) if keys else None
    if tie is None and kidx and ref is not None and ref.limit is not None and e_rows and \
            len(g_rows) == len(e_rows) and same_shape(ref, got, item):
        last = tuple(norm_row(e_rows[-1])[i] for i in kidx)
        missing, extra = multiset(e_rows) - multiset(g_rows), multiset(g_rows) - multiset(e_rows)
        rows = list(missing.elements()) + list(extra.elements())
        if missing and all(tuple(r[i] for i in kidx) == last for r in rows):
            return "harness_bug", tag("tie_not_recorded", (
                f"the rows differ only in rows tied with the last expected row on {fmt(keys)}: the "
                f"reference's LIMIT {ref.limit} cuts a tie the case does not record; re-freeze it"))
    if item.case.order_matters and multiset(g_rows) == multiset(e_rows) and g_rows:
        groups = getattr(exp_enc, "order_groups", None)
        if groups is None and kidx:
            seen: dict[tuple, int] = {}
            groups = [seen.setdefault(tuple(norm_row(r)[i] for i in kidx), len(seen)) for r in e_rows]
        if groups is not None and len(groups) == len(e_rows):
            start, ok = 0, True
            for end in range(1, len(e_rows) + 1):
                if end == len(e_rows) or groups[end] != groups[start]:
                    ok &= multiset(g_rows[start:end]) == multiset(e_rows[start:end])
                    start = end
            if ok:
                return "harness_bug", tag("order_within_ties", (
                    "only the order differs, and only among rows tied on the ORDER BY keys "
                    f"({fmt(keys) if keys else 'rank groups'}): a tie is not an error, the "
                    "grader should accept any order within it"))
    return None


def nondeterministic(item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str] | None:
    """The rows differ only in ANY_VALUE columns of the reference or of the candidate."""
    accepted, rows = result_rows(item)
    if not accepted or ref is None:
        return None
    expected = accepted[0]
    cols = set(ref.arbitrary) | (set(got.arbitrary) if got is not None else set())
    if not cols or len(rows.columns) != len(expected.columns) or len(rows.rows) != len(expected.rows):
        return None
    keep = [i for i in range(len(expected.columns)) if i not in cols]
    project = lambda rs: Counter(tuple(norm_row(r)[i] for i in keep) for r in rs)  # noqa: E731
    if project(expected.rows) != project(rows.rows):
        return None
    names = fmt(expected.columns[i] for i in sorted(cols) if i < len(expected.columns))
    whose = "the reference" if ref.arbitrary else "its translation"
    return "harness_bug", tag("nondeterministic_reference", (
        f"the rows differ only in {names}, which {whose} takes with ANY_VALUE (a SQLite bare "
        "column: some row's value of its group), so the expected value is one arbitrary choice; "
        "make the reference pick a value (min, max, or group by it)"))
