"""The rules judge's cause table (docs/judging.md): every cause a failure can have besides the
structure of its SQL, the category it decides and why, and the refusal and rule families the
judge reads them from. Data only; :mod:`sqleval_pipeline.judging.rules` applies it.
"""

from __future__ import annotations

from dataclasses import dataclass


#: guard refusals over which tables a query reads (the query's fault)
TABLE_REFUSALS = frozenset({"table_not_allowed", "qualifier_not_allowed", "file_reference",
                            "table_function", "unresolved_table", "duckdb_table_not_allowed"})


#: a query the guard could not check or rewrite, though it may be fine (a fault of the harness)
HARNESS_REFUSALS = frozenset({"rewrite_failed", "unpinned_clock", "views_disagree"})


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
    Cause("accidental_match", None, "right on the pinned snapshot, wrong on a neighbour "
          "database of the case's test suite (docs/test-suite.md)", "the SQL differs from the "
          "reference where today's data cannot show it; the structural difference names the category"),
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


CAUSE_BY_CODE = {c.code: c for c in CAUSES}


UNTRANSLATABLE_HELP = {
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
CONVERTING_RULES = ("affinity_", "aggregate_text_as_number", "cast_integer_truncates",
                     "round_decimal", "like_non_text_subject", "modulo_integer_operands")


SQLITE_RULES = ("sqlite_", "bare_column_", "affinity_", "modulo_", "cast_integer_truncates",
                 "round_decimal", "aggregate_text_as_number", "boolean_as_integer")


ROLE_CATEGORY = (("measure", "wrong_metric"), ("grain", "wrong_grain"), ("filter", "wrong_filter"),
                  ("output", "wrong_metric"), ("join", "wrong_table"))


#: translation rewrites that mean the system compared a number with text
MISMATCH_RULES = ("affinity_number_versus_text", "affinity_numeric_cast")


def tag(code: str, text: str) -> str:
    assert code in CAUSE_BY_CODE, code
    return f"{text} [cause: {code}]"
