"""How a candidate differs from its reference: in structure (tables, grain, measures, filters,
order — each difference with the category it decides) and in its result rows. Pure; used by
:mod:`sqleval_pipeline.judging.rules`.
"""

from __future__ import annotations

import re
from decimal import Decimal

from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.judging.sql_facts import Facts, is_time


ID_LIKE = re.compile(r"(?:^|_)(?:id|key|code|cd|no|number)$")


Diff = tuple[str, str]  # (category, what differs)


def fmt(items) -> str:
    return ", ".join(items) or "none"


def grouping_text(f: Facts) -> str:
    return f"groups by {fmt(f.grain)}" if f.grain else "computes one total"


def known_columns(got: Facts, ref: Facts, catalog: dict[str, list[str]] | None) -> set[str]:
    known = set(got.known_columns())
    for t in got.tables:
        known |= ref.columns_of(t)
        if catalog:
            known |= {c.lower() for c in catalog.get(t, catalog.get(t.lower(), ()))}
    return known


def lookup_tables(ref: Facts, got: Facts) -> set[str]:
    """Tables the reference joins only to filter through (linked to a table the candidate reads)."""
    out = set()
    for t in ref.tables - got.tables:
        roles = {role for role, refs in ref.roles.items() if any(rt == t for rt, _c in refs)}
        if roles <= {"filter", "join"} and any(t in link and link - {t} <= got.tables
                                               for link in ref.links):
            out.add(t)
    return out


def expressible(ref: Facts, got: Facts, catalog) -> tuple[list[str], set[str]]:
    """What the candidate's tables lack to express the reference, and the lookup tables."""
    known, lookups = known_columns(got, ref, catalog), lookup_tables(ref, got)
    needed = ref.columns("measure") | ref.columns("grain") | ref.columns("output")
    lacking = [f"column {c}" for c in sorted(needed - known)]
    lacking += [f"filter column {c}" for c in sorted({c for t, c in ref.roles.get("filter", ())
                                                      if t not in lookups} - known - needed)]
    lacking += [f"the rows of {t} (counted)" for t in sorted(ref.count_bases - got.tables)]
    return lacking, lookups


def table_diff(ref: Facts, got: Facts, catalog) -> tuple[Diff | None, Diff | None]:
    """(deciding wrong_table difference, or a note with the category it decides if alone)."""
    if ref.tables == got.tables:
        if ref.join_keys and got.join_keys and ref.join_keys != got.join_keys:
            keys = lambda f: fmt(sorted("=".join(sorted(k)) for k in f.join_keys))  # noqa: E731
            return ("wrong_table", f"joins on {keys(got)} where the reference joins on {keys(ref)}"), None
        return None, None
    missing, extra = sorted(ref.tables - got.tables), sorted(got.tables - ref.tables)
    where = f"reads {fmt(sorted(got.tables))} where the reference reads {fmt(sorted(ref.tables))}"
    detail = "; ".join(p for p in (f"missing {fmt(missing)}" if missing else "",
                                   f"extra {fmt(extra)}" if extra else "") if p)
    lacking, lookups = expressible(ref, got, catalog)
    if lacking:
        return ("wrong_table", f"{where} ({detail}), and its tables lack {fmt(lacking[:4])}"), None
    if missing and set(missing) <= lookups:
        return None, ("wrong_filter", f"does not join {fmt(missing)}, which the reference joins only "
                                      "to filter through")
    if missing:  # decided by the values: other rows counted (a filter), else the table
        return None, ("replaced", f"{where}; {fmt(sorted(got.tables))} can express the "
                                  "reference's measure, grain and filters")
    return None, ("wrong_table", f"{where} (an extra join to {fmt(extra)}, which can repeat or "
                                 "drop rows)")


def row_count(item: JudgeInput, of_reference: bool) -> int | None:
    if of_reference:
        return len(item.case.expected.rows) if item.case.expected else None
    ex = item.execution
    return len(ex.result.rows) if ex is not None and ex.result is not None else None


def grain_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    out: list[Diff] = []
    if ref.aggregates == got.aggregates:
        if ref.aggregates and set(ref.grain) != set(got.grain):
            out.append(("wrong_grain", f"{grouping_text(got)} where the reference {grouping_text(ref)}"))
    else:  # one side reads rows as stored (a summary table, or no aggregation at all)
        agg, rows = (got, ref) if got.aggregates else (ref, got)
        one_total = not agg.grain and row_count(item, rows is ref) != 1
        if one_total or not set(agg.grain) <= set(rows.outputs):
            a, r = ("it", "the reference") if agg is got else ("the reference", "it")
            out.append(("wrong_grain", f"{a} {grouping_text(agg)} where {r} reads rows of "
                                       f"{fmt(rows.outputs)}"))
    if ref.limit != got.limit:
        lim = lambda n: f"at most {n} rows" if n is not None else "every row"  # noqa: E731
        out.append(("wrong_grain", f"returns {lim(got.limit)} where the reference returns {lim(ref.limit)}"))
    if ref.distinct != got.distinct:
        out.append(("wrong_grain", f"{'' if got.distinct else 'no '}DISTINCT where the reference has "
                                   f"{'' if ref.distinct else 'no '}DISTINCT".strip()))
    return out


def type_note(item: JudgeInput, ref: Facts, got: Facts, r: str, g: str) -> str:
    try:
        et = item.case.expected.types[ref.outputs.index(r)] if item.case.expected else None
        gt = item.execution.result.types[got.outputs.index(g)]  # type: ignore[union-attr]
    except (ValueError, IndexError, AttributeError):
        return ""
    return f" (both {et})" if et == gt else f" ({gt} for {et})"


def measure_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    if ref.aggregates and got.aggregates:
        if ref.measures != got.measures:
            return [("wrong_metric", f"computes {fmt(sorted(got.measures))} where the reference "
                                     f"computes {fmt(sorted(ref.measures))}")]
        return []
    if ref.aggregates != got.aggregates:
        agg, rows = (got, ref) if got.aggregates else (ref, got)
        if not agg.columns("measure") <= set(rows.outputs):
            return [("wrong_metric", f"computes {fmt(sorted(got.measures or got.outputs))} where "
                                     f"the reference computes {fmt(sorted(ref.measures or ref.outputs))}")]
        return []
    missing = [o for o in ref.outputs if o not in got.outputs]
    extra = [o for o in got.outputs if o not in ref.outputs]
    if not (missing or extra):
        return []
    text = f"outputs {fmt(extra)} where the reference outputs {fmt(missing)}"
    if len(missing) == 1 and len(extra) == 1:
        text += type_note(item, ref, got, missing[0], extra[0])
    ids = any(ID_LIKE.search(o) for o in missing + extra)
    return [("wrong_grain" if ids else "wrong_metric", text)]


def filter_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
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


def order_diffs(ref: Facts, got: Facts, item: JudgeInput) -> list[Diff]:
    if ref.limit is None and not item.case.order_matters:
        return []
    same = ref.order == got.order if ref.aggregates == got.aggregates else \
        ref.order_keys == got.order_keys
    if same:
        return []
    return [("wrong_grain", f"orders by {fmt(got.order)} where the reference orders by {fmt(ref.order)}")]


def differences(ref: Facts, got: Facts, item: JudgeInput) -> tuple[list[Diff], Diff | None]:
    """Every deciding difference in order, and the table note that decides when alone."""
    deciding, note = table_diff(ref, got, item.catalog)
    out = [deciding] if deciding else []
    out += grain_diffs(ref, got, item) + measure_diffs(ref, got, item) + filter_diffs(ref, got, item)
    out += order_diffs(ref, got, item)
    return out, note


def is_number(v) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def norm_row(row) -> tuple:
    return tuple(("n", float(f"{float(v):.6g}")) if is_number(v) else ("v", str(v)) for v in row)


def result_rows(item: JudgeInput):
    ex = item.execution
    accepted = item.case.accepted_results()
    if ex is None or ex.result is None or ex.truncated or not accepted:
        return None, None
    return accepted, ex.result


def equal_rows(item: JudgeInput) -> bool:
    accepted, got = result_rows(item)
    if not accepted:
        return False
    g = [norm_row(r) for r in got.rows]
    for exp_rs in accepted:
        e = [norm_row(r) for r in exp_rs.rows]
        if (e == g) if item.case.order_matters else (sorted(e) == sorted(g)):
            return True
    return False


def value_shift(item: JudgeInput) -> str:
    """Whether every value of the rows both results key alike is larger (or smaller) than
    expected: the query counts rows the reference excludes (or drops rows it keeps)."""
    accepted, got = result_rows(item)
    if not accepted or not got.rows:
        return ""
    def keyed(rows):
        return {tuple(str(v) for v in r if not is_number(v)): [float(v) for v in r if is_number(v)] for r in rows}

    e, g = keyed(accepted[0].rows), keyed(got.rows)
    pairs = [(a, b) for k in e.keys() & g.keys() for a, b in zip(e[k], g[k], strict=False)]
    where = "every value" if e.keys() == {()} else "every value of the rows both key alike"
    if pairs and all(b >= a for a, b in pairs) and any(b > a for a, b in pairs):
        return f"{where} is larger than expected: it counts rows the reference excludes"
    if pairs and all(b <= a for a, b in pairs) and any(b < a for a, b in pairs):
        return f"{where} is smaller than expected: it drops rows the reference keeps"
    return ""
