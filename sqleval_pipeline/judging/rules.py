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
import json
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

import duckdb
import sqlglot
import yaml
from sqlglot import exp

from sqleval_pipeline.guard.policy import ALLOWED_FUNCTIONS, FUNCTIONS_PATH
from sqleval_pipeline.judging import refusals, sql_facts
from sqleval_pipeline.judging.base import CATEGORY_HELP, JudgeInput
from sqleval_pipeline.judging.sql_facts import (
    CLAUSE_CATEGORY, Facts, ParseFailure, clause_at, clause_of_name, facts, is_time,
)
from sqleval_pipeline.records import Diagnosis
from sqleval_pipeline.results import ResultSet

#: 3: causes first (the cause table, CAUSES); 2: structure and result diff
RULES_REVISION = 3

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


# --------------------------------------------------------------------------- the cause table


@dataclass(frozen=True)
class Cause:
    """One row of the cause table (docs/judging.md): a failure the judge recognises by its
    cause, the category it gets (None: decided as ``decides`` says) and why."""

    code: str
    category: str | None
    when: str
    decides: str


CAUSES: tuple[Cause, ...] = (
    Cause("type_mismatch_compare", "wrong_table", "the system's own SQL compares a number with "
          "text (the dialect translation recorded an affinity rewrite on its text that the "
          "reference does not need: an integer id compared with a name, a join on an id against "
          "a name column)", "the compared value lives in another table: a key was matched "
          "against the wrong column or a join is missing"),
    # -- no answer, or the evaluation at fault
    Cause("provider_error", "harness_bug", "no answer was obtained (attempt kind error: outage, "
          "rate limit, malformed response); graded ERROR, outside the denominator, so never "
          "judged in a run", "not the system's answer: the provider or the adapter failed"),
    Cause("harness_error", "harness_bug", "the harness failed to execute the SQL (error_source "
          "harness, or no execution record)", "the evaluation failed, not the query"),
    Cause("transpile_untranslatable", "harness_bug", "dialect translation refused the system's "
          "text (transpile_failed: affinity, unsupported, scope, bare_column_star, too_deep, "
          "unknown_dialect)", "the evaluation could not translate valid source-dialect SQL "
          "faithfully; the rule that failed is named"),
    Cause("transpile_valid_syntax", "harness_bug", "transpile_failed (parse_error) on text that "
          "SQLite itself parses", "sqlglot cannot parse valid SQLite: the evaluation's parser"),
    Cause("translation_broke_query", "harness_bug", "a conversion or range error raised on an "
          "expression a dialect fidelity rule rewrote (an affinity CAST that meets 'chevrolet', "
          "an avg over text holding 'null', an integer overflow SQLite does not have)",
          "the source dialect answers this query; the translation made it fail"),
    Cause("untranslated_function", "harness_bug", "a translated query calls a function of the "
          "source dialect DuckDB does not have (SQLite's julianday)",
          "the translation left a source-dialect function as it was"),
    Cause("reference_broken", "harness_bug", "the error names a table or column the reference "
          "reads the same way (a table the snapshot lost, a column renamed)",
          "the reference fails too: snapshot drift or a broken case"),
    Cause("engine_internal_error", "harness_bug", "DuckDB raised an INTERNAL error",
          "a fault of the engine, not of the query"),
    Cause("guard_blocks_reference", "harness_bug", "the guard refused a table or function the "
          "reference itself uses", "the guard's policy stops the right answer"),
    Cause("guard_misreads_sql", "harness_bug", "the guard refused a SQL predicate or keyword as "
          "if it were a function (EXISTS, IN, CAST)", "a guard bug"),
    Cause("guard_missing_alias", "harness_bug", "the guard refused a function whose other name "
          "is on the allowlist (len for length)", "the allowlist lacks an alias of an allowed "
          "function"),
    Cause("guard_harness", "harness_bug", "the guard could not check, rewrite or run the query "
          "(rewrite_failed, unpinned_clock, views_disagree, worker_crashed, "
          "sandbox_unavailable, a plan it could not read)", "the harness, not the query"),
    Cause("limit_on_plausible_query", "harness_bug", "a timeout or a size limit (memory, result, "
          "cell, series, text size, nesting) on a query with the reference's structure",
          "the limit, not the query (with structural differences, those decide)"),
    Cause("result_cap_below_reference", "harness_bug", "the result was truncated at the row cap "
          "and the reference returns at least as many rows", "the cap cannot hold the answer"),
    Cause("grader_equal_rows", "harness_bug", "the rows equal an accepted result to 6 "
          "significant digits", "the grader"),
    Cause("tie_at_cut", "harness_bug", "the rows are the frozen ones with other rows of the tie "
          "group at the LIMIT cut (case.expected.tie)", "any selection from the tie group is "
          "right: the grader or the recorded tie is at fault"),
    Cause("tie_not_recorded", "harness_bug", "the rows differ from the expected ones only in rows "
          "tied with the last row on the ORDER BY keys, and the tie was not recorded (or only in "
          "part)", "the reference's LIMIT cuts a tie: re-freeze the case"),
    Cause("order_within_ties", "harness_bug", "only the order differs, and only among rows tied "
          "on the ORDER BY keys", "a tie is not an error: the grader should accept it"),
    Cause("nondeterministic_reference", "harness_bug", "the rows differ only in columns the "
          "reference (or the candidate's translation) takes with ANY_VALUE (SQLite's bare "
          "columns)", "the expected value is one arbitrary row's"),
    Cause("reference_spelling", "harness_bug", "the query is the reference (or an accepted "
          "alternative) up to spelling, yet the result differs", "the reference, the expected "
          "result or the snapshot"),
    # -- the system's fault, with the category its cause deserves
    Cause("missing_table", "wrong_table", "DuckDB says a table does not exist, or the guard "
          "refused an unserved or sensitive table, a file, a table function or another schema",
          "it read something that is not served"),
    Cause("column_elsewhere", "wrong_table", "a binder error names a column its tables lack that "
          "another served table has", "column X is in table Y, not Z"),
    Cause("column_nowhere", None, "a binder error names a column no served table has",
          "where the query uses it: a measure or an output -> wrong_metric, a filter -> "
          "wrong_filter, a grouping or ordering -> wrong_grain, a join key -> wrong_table"),
    Cause("grouping_error", "wrong_grain", "DuckDB says a column must appear in the GROUP BY",
          "the grain of its query is wrong"),
    Cause("ambiguous_column", None, "DuckDB says a column reference is ambiguous over a join",
          "the structural differences, if any; else wrong_table (its join leaves the column "
          "unqualified)"),
    Cause("unknown_function", None, "a function that does not exist (nor in the source dialect)",
          "the clause it is called in (docs/judging.md, clause table)"),
    Cause("type_error", None, "a conversion, range or argument-type error of the system's own "
          "text", "the clause of the value or function the error names; else the structure"),
    Cause("syntax_error", None, "a parser error (DuckDB's, the guard's, or a transpile "
          "parse_error SQLite confirms)", "the clause DuckDB's parser stops in; when it cannot "
          "be placed, the structural differences (sqlglot may still parse it), else "
          "wrong_metric"),
    Cause("not_a_query", None, "the guard refused a write, DDL, a command, stacked statements "
          "or SELECT INTO", "the differences of the SELECT it contains; none (or no SELECT) -> "
          "wrong_metric: it computes no answer. Never harness_bug: refusing writes is by design"),
    Cause("excluded_function", None, "the guard refused a function it excludes by design (clock, "
          "settings, files, catalog) or the policy denies", "the clause it is called in"),
    Cause("sql_error", None, "any other error of the system's SQL", "the structural "
          "differences; else the clause the error names; else wrong_metric"),
    Cause("over_refusal", None, "the system declined an answerable question",
          "its reason (judging/refusals.py table): a provider failure -> harness_bug, "
          "ambiguity or a request to clarify -> ambiguous_question, ..."),
    Cause("answered_should_refuse", "wrong_table", "it answered a question the served data "
          "cannot or must not answer", "it should have declined"),
)
_CAUSES = {c.code: c for c in CAUSES}
assert all(c.category is None or c.category in CATEGORY_HELP for c in CAUSES)

_UNTRANSLATABLE_HELP = {
    "affinity": "SQLite answers a comparison by its type-affinity rules in a way no simple DuckDB "
                "text reproduces",
    "unsupported": "sqlglot cannot express a construct in DuckDB",
    "scope": "the query's scopes could not be resolved",
    "bare_column_star": "SELECT * in an aggregate query (SQLite takes some row's values)",
    "too_deep": "the text is nested too deeply to translate",
    "unknown_dialect": "the configuration's dialect is not one sqlglot knows",
    "not_text": "the SQL is not text",
}
#: the guard's refusals of a statement that is not one read query
NOT_A_QUERY = frozenset({"write_statement", "ddl_statement", "command_statement", "root_not_allowed",
                         "nested_write", "nested_command", "select_into", "multiple_statements",
                         "duckdb_not_single_select"})
FUNCTION_REFUSALS = frozenset({"function_not_allowed", "duckdb_function_not_allowed", "denied_function"})
#: guard refusals of text it could not parse (the system's syntax)
SYNTAX_REFUSALS = frozenset({"parse_error", "control_character", "suspicious_character", "parameter"})
#: SQL predicates and keywords a checker may mistake for functions
SQL_KEYWORDS = frozenset({"exists", "in", "any", "all", "some", "not", "case", "cast", "try_cast",
                          "between", "like", "ilike", "is", "interval", "extract", "row", "array"})
#: SQLite's built-in functions (core, date and math; sqlite.org/lang_corefunc.html and friends)
SQLITE_FUNCTIONS = frozenset("""
abs changes char coalesce concat concat_ws format glob hex ifnull iif instr last_insert_rowid
length like likelihood likely load_extension lower ltrim max min nullif octet_length printf
quote random randomblob replace round rtrim sign soundex sqlite_version substr substring
total_changes trim typeof unhex unicode unlikely upper zeroblob date time datetime julianday
unixepoch strftime timediff avg count group_concat string_agg sum total acos acosh asin asinh
atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2 mod pi pow power
radians sin sinh sqrt tan tanh trunc""".split())
#: rewrites whose CASTs or conversions can fail where the source dialect does not
_CONVERTING_RULES = ("affinity_", "aggregate_text_as_number", "cast_integer_truncates",
                     "round_decimal", "like_non_text_subject", "modulo_integer_operands")
_SQLITE_RULES = ("sqlite_", "bare_column_", "affinity_", "modulo_", "cast_integer_truncates",
                 "round_decimal", "aggregate_text_as_number", "boolean_as_integer")
_CLAUSE_START = re.compile(r"(?:select|from|(?:left |right |full |inner |cross |natural )*(?:outer )?"
                           r"join|on|using|where|group\s+by|having|qualify|order\s+by|limit|offset|"
                           r"window)\b", re.IGNORECASE)
_ROLE_CATEGORY = (("measure", "wrong_metric"), ("grain", "wrong_grain"), ("filter", "wrong_filter"),
                  ("output", "wrong_metric"), ("join", "wrong_table"))


#: translation rewrites that mean the system compared a number with text
_MISMATCH_RULES = ("affinity_number_versus_text", "affinity_numeric_cast")


def _type_mismatch(item: JudgeInput) -> str | None:
    """The first affinity rewrite the dialect translation made on the system's text that the
    reference's own translation did not need (the reference's rewrites are in the case's
    notes), or None."""
    rewrites = [r for r in (getattr(item.execution, "rewrites", None) or [])
                if r.split(":", 1)[0].strip() in _MISMATCH_RULES]
    if not rewrites:
        return None
    notes = item.case.notes or ""
    for r in rewrites:
        rule, _, detail = r.partition(":")
        if f": {rule.strip()}:" not in notes:
            return detail.strip().split(" (", 1)[0][:200]
    return None


def _tag(code: str, text: str) -> str:
    assert code in _CAUSES, code
    return f"{text} [cause: {code}]"


def _first_line(*texts: str | None) -> str:
    for t in texts:
        if t and t.strip():
            return t.strip().splitlines()[0][:300]
    return ""


@lru_cache(maxsize=1)
def _duckdb_functions() -> dict[str, str | None]:
    """DuckDB's function names -> the name they are an alias of (None: not an alias)."""
    con = duckdb.connect(":memory:")
    try:
        rows = con.execute("SELECT DISTINCT lower(function_name), lower(alias_of) FROM duckdb_functions()").fetchall()
    finally:
        con.close()
    out: dict[str, str | None] = {}
    for name, alias in rows:
        out[name] = out.get(name) or alias
    return out


@lru_cache(maxsize=1)
def _excluded_families() -> dict[str, tuple[str, str]]:
    """Function name -> (family, reason) of the guard's excluded functions (guard/functions.yaml)."""
    try:
        doc = yaml.safe_load(FUNCTIONS_PATH.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out = {}
    for family, spec in (doc.get("excluded") or {}).items():
        for n in (spec or {}).get("names") or ():
            out[str(n).lower()] = (str(family), str(spec.get("reason") or family))
    return out


def _duckdb_error_position(sql: str) -> int | None:
    """Where DuckDB's parser stops on ``sql`` (a character offset), None when it parses."""
    if len(sql) > 200_000:
        return None
    con = duckdb.connect(":memory:")
    try:
        raw = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0]
    except duckdb.Error:
        return None
    finally:
        con.close()
    try:
        doc = json.loads(raw)
        return int(doc["position"]) if doc.get("error") and doc.get("position") is not None else None
    except (ValueError, TypeError, KeyError):
        return None


def _sqlite_syntax_error(sql: str) -> str | None:
    """SQLite's own syntax error for ``sql`` (compiled with EXPLAIN in an empty in-memory
    database under an authorizer that denies everything but reads; nothing runs), or None
    when SQLite parses it (a missing table or a denied action is not a syntax error)."""
    if len(sql) > 200_000:
        return None
    con = sqlite3.connect(":memory:")
    allowed = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
               getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
    con.set_authorizer(lambda action, *_a: sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY)
    try:
        con.execute("EXPLAIN " + sql)
    except sqlite3.Warning:
        return None  # several statements: parsed, not a syntax error
    except sqlite3.Error as exc:
        msg = str(exc)
        return msg if re.search(r"syntax error|incomplete input|unrecognized token", msg) else None
    finally:
        con.close()
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
    if any(r.startswith(_SQLITE_RULES) for r in ex.rewrites):
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


def _key_index(columns: list[str], keys) -> list[int] | None:
    cols = [c.lower() for c in columns]
    idx = [cols.index(k.lower()) for k in keys if k.lower() in cols]
    return idx if idx and len(idx) == len(list(keys)) else None


def _multiset(rows) -> Counter:
    return Counter(_norm_row(r) for r in rows)


def _same_shape(ref: Facts | None, got: Facts | None, item: JudgeInput) -> bool:
    """The candidate has the reference's structure, but perhaps another ORDER BY tie-breaker."""
    if ref is None or got is None:
        return False
    diffs, note = differences(ref, got, item)
    return note is None and all(text.startswith("orders by") for _c, text in diffs)


def _tie_cause(item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str] | None:
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
            pool = _multiset(tie.decoded_rows(expected.types)) if hasattr(tie, "decoded_rows") else \
                _multiset(ResultSet.from_json({"columns": expected.columns, "types": expected.types,
                                               "rows": tie.rows}).rows)
        except (ValueError, TypeError):
            pool = Counter()
        fixed = _multiset(e_rows[:tie.before] + e_rows[tie.before + tie.take:])
        rest = _multiset(g_rows) - fixed
        if sum(rest.values()) == tie.take and not (rest - pool) and not (fixed - _multiset(g_rows)):
            span = f"row {tie.before + 1}" if tie.take == 1 else f"rows {tie.before + 1}-{tie.before + tie.take}"
            return "harness_bug", _tag("tie_at_cut", (
                f"a tie at the LIMIT cut: {span} may be any {tie.take} of the {len(tie.rows)} rows "
                f"tied on {_fmt(tie.keys)}, and its rows are such a selection, yet it was graded "
                f"{item.grade.reason}: check the grader's use of the recorded tie"))
        if getattr(tie, "truncated", False) and _same_shape(ref, got, item):
            kidx = _key_index(expected.columns, tie.keys)
            boundary = {tuple(_norm_row(r)[i] for i in kidx) for r in tie.rows} if kidx else set()
            if kidx and rest and all(tuple(k[i] for i in kidx) in boundary for k in rest.elements()):
                return "harness_bug", _tag("tie_not_recorded", (
                    f"a tie at the LIMIT cut larger than freezing recorded: it keeps rows tied on "
                    f"{_fmt(tie.keys)} with the recorded ones that the case does not list; add a "
                    "tie-breaker to the reference's ORDER BY, or re-freeze"))
    keys = list(item.case.order_keys) or (list(tie.keys) if tie is not None else [])
    kidx = _key_index(expected.columns, keys) if keys else None
    if tie is None and kidx and ref is not None and ref.limit is not None and e_rows and \
            len(g_rows) == len(e_rows) and _same_shape(ref, got, item):
        last = tuple(_norm_row(e_rows[-1])[i] for i in kidx)
        missing, extra = _multiset(e_rows) - _multiset(g_rows), _multiset(g_rows) - _multiset(e_rows)
        rows = list(missing.elements()) + list(extra.elements())
        if missing and all(tuple(r[i] for i in kidx) == last for r in rows):
            return "harness_bug", _tag("tie_not_recorded", (
                f"the rows differ only in rows tied with the last expected row on {_fmt(keys)}: the "
                f"reference's LIMIT {ref.limit} cuts a tie the case does not record; re-freeze it"))
    if item.case.order_matters and _multiset(g_rows) == _multiset(e_rows) and g_rows:
        groups = getattr(exp_enc, "order_groups", None)
        if groups is None and kidx:
            seen: dict[tuple, int] = {}
            groups = [seen.setdefault(tuple(_norm_row(r)[i] for i in kidx), len(seen)) for r in e_rows]
        if groups is not None and len(groups) == len(e_rows):
            start, ok = 0, True
            for end in range(1, len(e_rows) + 1):
                if end == len(e_rows) or groups[end] != groups[start]:
                    ok &= _multiset(g_rows[start:end]) == _multiset(e_rows[start:end])
                    start = end
            if ok:
                return "harness_bug", _tag("order_within_ties", (
                    "only the order differs, and only among rows tied on the ORDER BY keys "
                    f"({_fmt(keys) if keys else 'rank groups'}): a tie is not an error, the "
                    "grader should accept any order within it"))
    return None


def _nondeterministic(item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str] | None:
    """The rows differ only in ANY_VALUE columns of the reference or of the candidate."""
    accepted, rows = _rows(item)
    if not accepted or ref is None:
        return None
    expected = accepted[0]
    cols = set(ref.arbitrary) | (set(got.arbitrary) if got is not None else set())
    if not cols or len(rows.columns) != len(expected.columns) or len(rows.rows) != len(expected.rows):
        return None
    keep = [i for i in range(len(expected.columns)) if i not in cols]
    project = lambda rs: Counter(tuple(_norm_row(r)[i] for i in keep) for r in rs)  # noqa: E731
    if project(expected.rows) != project(rows.rows):
        return None
    names = _fmt(expected.columns[i] for i in sorted(cols) if i < len(expected.columns))
    whose = "the reference" if ref.arbitrary else "its translation"
    return "harness_bug", _tag("nondeterministic_reference", (
        f"the rows differ only in {names}, which {whose} takes with ANY_VALUE (a SQLite bare "
        "column: some row's value of its group), so the expected value is one arbitrary choice; "
        "make the reference pick a value (min, max, or group by it)"))


# --------------------------------------------------------------------------- the judge


def _explain(diffs: list[Diff], note: Diff | None, extra: str = "") -> tuple[str, str]:
    lead = diffs[0] if diffs else note
    assert lead is not None
    rest = [d[1] for d in diffs[1:]] + ([note[1]] if note and diffs else []) + ([extra] if extra else [])
    return lead[0], lead[1] + (f"; also: {'; '.join(rest)}" if rest else "")


def _version() -> str:
    text = (__doc__ or "") + (sql_facts.__doc__ or "") + (refusals.__doc__ or "") + \
        repr([(r.category, r.pattern) for r in (*refusals.REASONS, refusals.UNAVAILABLE)]) + \
        repr(CAUSES) + repr(sorted(CLAUSE_CATEGORY.items())) + repr(_ROLE_CATEGORY)
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
            detail = _first_line(attempt.error_message, grade.mismatch)
            code = "provider_error" if attempt.kind == "error" else "harness_error"
            return "harness_bug", _tag(code, (
                f"no answer was obtained ({what}{': ' + detail if detail else ''}); an ERROR leaves "
                "the denominator: not the system's failure, retry the attempt"))
        if grade.outcome == "DEFERRED_WRONGLY" or attempt.kind == "refusal" and case.answerable:
            category, text = refusals.classify_refusal(attempt.refusal_reason, self._reference(item))
            return category, _tag("over_refusal", text)
        if not case.answerable:
            used = ""
            if attempt.sql:
                try:
                    used = f" from {_fmt(sorted(facts(attempt.sql).tables))}"
                except ParseFailure:
                    used = ""
            return ("wrong_table", _tag("answered_should_refuse",
                    f"answered a question the served data cannot or must not answer{used}; "
                    "it should have declined"))
        if execution is None:
            return "harness_bug", _tag("harness_error", "an SQL attempt without an execution record")
        if execution.status == "error" and execution.error_source == "harness":
            return "harness_bug", _tag("harness_error", "the harness failed: "
                                       f"{_first_line(execution.error_message, execution.message) or execution.reason}")
        ref = self._reference(item)
        got = _got(item)
        if execution.status == "error":
            return self._sql_error(item, ref, got)
        if execution.status == "refused":
            return self._refused(item, ref, got)
        if execution.status == "ok" and _equal_rows(item):
            return "harness_bug", _tag("grader_equal_rows", (
                "the rows equal the expected result once values are compared to 6 significant "
                f"digits, yet it was graded {grade.reason}: check the grader"))
        if ref is None:
            return "harness_bug", _tag("reference_broken", "the case has no reference SQL the judge can read")
        if execution.status == "ok" and (execution.truncated or grade.reason == "result_truncated"):
            return self._truncated(item, ref, got)
        if execution.status == "ok":
            found = _tie_cause(item, ref, got) or _nondeterministic(item, ref, got)
            if found:
                return found
        if got is None:
            return "harness_bug", ("could not parse the SQL to compare structures: "
                                   f"{_first_line(_candidate_sql(item))[:120]}")
        diffs, note = differences(ref, got, item)
        if execution.status != "ok":
            return self._not_run(item, ref, got, diffs, note)
        mismatch = _type_mismatch(item)
        if mismatch:
            rest = _explain(diffs, note)[1] if (diffs or note) else ""
            return "wrong_table", _tag("type_mismatch_compare", (
                f"it compares values of different types — {mismatch} — so the value it compares "
                "lives in another table (a key matched against a name, or a missing join)"
                + (f"; also: {rest}" if rest else "")))
        if not diffs and note and note[0] == "replaced":
            shift = _value_shift(item)
            note = ("wrong_filter" if shift else "wrong_table",
                    note[1] + ("" if shift else ", yet its values differ"))
            return _explain(diffs, note, shift)
        if diffs or note:
            shift = _value_shift(item) if (diffs or [note])[0][0] == "wrong_filter" else ""
            return _explain(diffs, note, shift)
        if got.text == ref.text or any(_same_text(got, alt) for alt in case.alternative_sqls):
            tie = " (its ORDER BY … LIMIT may cut a tie the case does not record)" if ref.limit else ""
            return "harness_bug", _tag("reference_spelling", (
                "the query is the reference's own up to spelling, but its result differs "
                f"({grade.mismatch or grade.reason}){tie}; check the reference, the expected result "
                "and the snapshot"))
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

    # ------------------------------------------------------------------ SQL errors

    def _sql_error(self, item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str]:
        ex = item.execution
        assert ex is not None
        code = ex.error_code or ex.reason or "sql_error"
        msg = _first_line(ex.error_message, ex.message)
        sql = _candidate_sql(item)
        dialect = _dialect(item)
        if code == "transpile_failed":
            return self._transpile(item, ref, msg)
        also = _also(ref, got, item)
        said = f"DuckDB rejected it ({code}: {msg})" if msg else f"DuckDB rejected it ({code})"
        if code == "internal_error" or msg.upper().startswith("INTERNAL"):
            return "harness_bug", _tag("engine_internal_error", f"{said}: an internal error of the "
                                       f"engine, not of the query{also}")
        m = re.search(r'Table with name "?([\w.$]+)"? does not exist', msg)
        if m:
            table = m.group(1).split(".")[-1].lower()
            if ref is not None and table in ref.tables:
                return "harness_bug", _tag("reference_broken", (
                    f"{said}: the reference reads {table} too, so the snapshot lacks a table the "
                    "case needs (snapshot drift or a broken reference)"))
            return "wrong_table", _tag("missing_table", f"it reads {table}, which is not a served "
                                                         f"table ({msg}){also}")
        m = re.search(r'Function with name "?(\w+)"? does not exist', msg)
        if m:
            fn = m.group(1).lower()
            if dialect == "sqlite" and fn in SQLITE_FUNCTIONS:
                return "harness_bug", _tag("untranslated_function", (
                    f"{said}: {fn}() is a SQLite function the dialect translation left untranslated; "
                    f"the evaluation could not run the system's SQLite faithfully{also}"))
            category, where = _by_clause(clause_of_name(sql, fn))
            return category, _tag("unknown_function", f"it calls {fn}(), a function DuckDB does not "
                                  f"have ({msg}); {where}{also}")
        col_m = re.search(r'Referenced column "([^"]+)" not found', msg)
        qual_m = re.search(r'Table "([^"]+)" does not have a column named "([^"]+)"', msg)
        if col_m or qual_m:
            col = (qual_m.group(2) if qual_m else col_m.group(1)).split(".")[-1].lower()
            return self._column(item, ref, got, col, qual_m.group(1).lower() if qual_m else None, said, also)
        if "must appear in the GROUP BY" in msg:
            return "wrong_grain", _tag("grouping_error", f"{said}: a column neither grouped nor "
                                       f"aggregated, so its grain is wrong{also}")
        if "Ambiguous reference to column" in msg:
            if ref is not None and got is not None:
                diffs, note = differences(ref, got, item)
                if diffs or (note and note[0] != "replaced"):
                    category, text = _explain(diffs, note)
                    return category, _tag("ambiguous_column", f"{said}, and {text}")
            return "wrong_table", _tag("ambiguous_column", f"{said}: its join leaves a column "
                                       "unqualified between two tables that both have it")
        converting = code in ("conversion_error", "out_of_range_error", "invalid_input_error") or \
            "No function matches" in msg or "Overflow" in msg
        if converting and dialect is not None:
            rule = self._rewrite_involved(ex, msg)
            if rule or (dialect == "sqlite" and code == "out_of_range_error"):
                rule = rule or "integer width (SQLite's integers are 64-bit)"
                return "harness_bug", _tag("translation_broke_query", (
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
                    return category, _tag("type_error", f"{said}, and {text}")
            category, where = _by_clause(clause, "wrong_filter")
            return category, _tag("type_error", f"{said}: a value or argument of the wrong type; "
                                                 f"{where}{also}")
        if ref is not None and got is not None:
            diffs, note = differences(ref, got, item)
            if diffs or (note and note[0] != "replaced"):
                category, text = _explain(diffs, note)
                return category, _tag("sql_error", f"{said}, and {text}")
        category, where = _by_clause(self._error_clause(sql, msg))
        return category, _tag("sql_error", f"{said}; {where}")

    @staticmethod
    def _error_clause(sql: str, msg: str) -> str | None:
        m = re.search(r'"([^"]{1,80})"', msg) or re.search(r"'([^']{1,80})'", msg)
        return clause_of_name(sql, m.group(1)) if m else None

    @staticmethod
    def _rewrite_involved(ex, msg: str) -> str | None:
        """The converting fidelity rule whose rewrite the error comes from, if any."""
        rules = [(r.split(":", 1)[0].strip(), r) for r in ex.rewrites
                 if r.split(":", 1)[0].strip().startswith(_CONVERTING_RULES)]
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
                err = _sqlite_syntax_error(sql)
                if err is None:
                    return "harness_bug", _tag("transpile_valid_syntax", (
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
        help_ = _UNTRANSLATABLE_HELP.get(reason, "the translation refused the text")
        return "harness_bug", _tag("transpile_untranslatable", (
            f"dialect translation failed: the evaluation could not translate the system's {dialect} "
            f"faithfully to DuckDB (rule {reason}: {help_}): {msg}{also}"))

    def _syntax(self, item: JudgeInput, ref: Facts | None, got: Facts | None, said: str, also: str,
                sql: str | None = None) -> tuple[str, str]:
        text = sql if sql is not None else _candidate_sql(item)
        pos = _duckdb_error_position(text)
        clause = clause_at(text, pos) if pos is not None else None
        if clause is not None and pos and _CLAUSE_START.match(text, pos):
            # stopped at a clause's first word: the clause before it is unfinished
            clause = clause_at(text, pos - 1) or clause
        if clause is not None:
            near = text[pos:pos + 20].split("\n")[0]
            category, where = _by_clause(clause)
            return category, _tag("syntax_error", f"a syntax error: {said}; {where} (at "
                                                   f"\"{near}\"){also}")
        if ref is not None and got is not None:
            diffs, note = differences(ref, got, item)
            if diffs or (note and note[0] != "replaced"):
                category, text2 = _explain(diffs, note)
                return category, _tag("syntax_error", f"a syntax error: {said}; sqlglot still reads "
                                                       f"it, and {text2}")
        category, where = _by_clause(None)
        return category, _tag("syntax_error", f"a syntax error: {said}; {where}")

    def _column(self, item: JudgeInput, ref: Facts | None, got: Facts | None, col: str,
                qualifier: str | None, said: str, also: str) -> tuple[str, str]:
        sources = (got.sources or {}) if got is not None else {}
        table = sources.get(qualifier, qualifier) if qualifier else None
        reads = {table} if table else (set(got.tables) if got is not None else set())
        homes, from_catalog = _column_homes(col, item, ref)
        where = f"{table}" if table else _fmt(sorted(reads)) or "the tables it reads"
        if ref is not None and homes & reads and not from_catalog:
            return "harness_bug", _tag("reference_broken", (
                f"{said}: the reference reads column {col} from {_fmt(sorted(homes & reads))} too, "
                "so the snapshot lacks a column the case needs (snapshot drift or a broken reference)"))
        elsewhere = sorted(homes - reads)
        if elsewhere:
            return "wrong_table", _tag("column_elsewhere", (
                f"column {col} is in table {_fmt(elsewhere)}, not {where} ({said}){also}"))
        known = "no served table has it" if from_catalog else \
            "neither query's tables have it as far as the judge knows (no catalog: it knows the reference's columns only)"
        if got is not None:
            for role, category in _ROLE_CATEGORY:
                if col in got.columns(role) or any(c == col for _t, c in got.roles.get(role, ())):
                    return category, _tag("column_nowhere", (
                        f"column {col} is not in {where} and {known}; the query uses it as a "
                        f"{role} ({said}){also}"))
        category, where_clause = _by_clause(clause_of_name(_candidate_sql(item), col))
        return category, _tag("column_nowhere", f"column {col} is not in {where} and {known}; "
                                                 f"{where_clause} ({said}){also}")

    # ------------------------------------------------------------------ guard refusals

    def _refused(self, item: JudgeInput, ref: Facts | None, got: Facts | None) -> tuple[str, str]:
        ex = item.execution
        assert ex is not None
        r, msg = ex.reason or "", _first_line(ex.message)
        what = f"the guard's {ex.layer} layer refused it ({r}{': ' + msg if msg else ''})"
        also = _also(ref, got, item)
        if r in NOT_A_QUERY and "could not be checked" not in msg:
            return self._not_a_query(item, ref, what)
        if r in TABLE_REFUSALS:
            m = re.search(r"table (?:function )?'?\"?([\w.$]+)", msg, re.I)
            table = m.group(1).split(".")[-1].lower() if m else None
            if ref is not None and table and table in ref.tables:
                return "harness_bug", _tag("guard_blocks_reference", (
                    f"{what}, but the reference reads {table} too: the guard's allowlist stops the "
                    "right answer"))
            return "wrong_table", _tag("missing_table", f"{what}: it reads what is not served (an "
                                       f"unserved or sensitive table, a file, another schema){also}")
        if r in FUNCTION_REFUSALS:
            return self._function_refused(item, ref, got, what, msg, also)
        if r in HARNESS_REFUSALS or r in ("worker_crashed", "sandbox_unavailable") or \
                "could not be checked" in msg:
            return "harness_bug", _tag("guard_harness", f"{what}: the guard could not check, rewrite "
                                       f"or run it, though it may be fine{also}")
        if r in SYNTAX_REFUSALS:
            return self._syntax(item, ref, got, what, also)
        if got is None or ref is None:
            category, where = _by_clause(self._error_clause(_candidate_sql(item), msg))
            return category, _tag("sql_error", f"{what}; {where}")
        diffs, note = differences(ref, got, item)
        return self._not_run(item, ref, got, diffs, note)

    def _function_refused(self, item: JudgeInput, ref: Facts | None, got: Facts | None, what: str,
                          msg: str, also: str) -> tuple[str, str]:
        m = re.search(r"(?:function|binds to) (\w+)\(\)", msg, re.I) or re.search(r"\b(\w+)\(\)", msg)
        fn = m.group(1).lower() if m else None
        sql = _candidate_sql(item)
        if fn in SQL_KEYWORDS:
            return "harness_bug", _tag("guard_misreads_sql", (
                f"{what}: {fn.upper()} is SQL syntax (a predicate or keyword), not a function; the "
                f"guard misreads it{also}"))
        if fn and item.case.reference_sql and re.search(rf"\b{re.escape(fn)}\s*\(", item.case.reference_sql, re.I):
            return "harness_bug", _tag("guard_blocks_reference", (
                f"{what}, but the reference calls {fn}() too: the guard's policy stops the right "
                "answer"))
        family = _excluded_families().get(fn or "")
        if family is None and fn and item.execution.reason != "denied_function":
            known = _duckdb_functions()
            alias = known.get(fn)
            same = {n for n, a in known.items() if a == fn} | ({alias} if alias else set())
            allowed = sorted(same & ALLOWED_FUNCTIONS)
            if fn in known and allowed:
                return "harness_bug", _tag("guard_missing_alias", (
                    f"{what}: {fn}() is the same DuckDB function as {allowed[0]}(), which the "
                    f"allowlist allows; the allowlist lacks the alias{also}"))
        category, where = _by_clause(clause_of_name(sql, fn) if fn else None)
        why = (f"the guard excludes {fn}() by design ({family[0]}: {family[1]})" if family else
               f"the policy denies {fn}()" if item.execution.reason == "denied_function" else
               f"{fn}() is not a function the guard allows")
        return category, _tag("excluded_function", f"{what}: {why}; {where}{also}")

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
                return category, _tag("not_a_query", f"{what}: not one read query; the SELECT in it "
                                      f"{text}")
            return "wrong_metric", _tag("not_a_query", (
                f"{what}: not one read query; its SELECT has the reference's structure, but the "
                "statement also writes or runs more than that SELECT, so it returns no answer: "
                "answer with the SELECT alone"))
        return "wrong_metric", _tag("not_a_query", (
            f"{what}: not a read query at all (no SELECT in it), so it computes no answer; the "
            f"reference {refusals._needs(ref).get('wrong_metric', 'reads ' + _fmt(sorted(ref.tables))) if ref else 'is a SELECT'}"))

    def _truncated(self, item: JudgeInput, ref: Facts, got: Facts | None) -> tuple[str, str]:
        ex = item.execution
        assert ex is not None and ex.result is not None
        cap = len(ex.result.rows)
        expected = len(item.case.expected.rows) if item.case.expected else 0
        if expected >= cap:
            return "harness_bug", _tag("result_cap_below_reference", (
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
        return "harness_bug", _tag("limit_on_plausible_query", (
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
