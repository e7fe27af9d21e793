"""Result comparison and outcomes (docs/grading.md).

Two readings, both always computed:

- **exact**: same number of columns compared by position (names ignored), same rows as a
  multiset; row order matters only when the case says ``order_matters``.
- **got-the-facts**: every expected column is matched by a *distinct* candidate column such
  that the candidate rows, projected on the matched columns, equal the expected rows; extra
  candidate columns, column order and (unless ``order_matters``) row order are tolerated.

>>> from sqleval_pipeline.results import ResultSet
>>> exp = ResultSet(columns=["region", "revenue"], types=["VARCHAR", "DOUBLE"],
...                 rows=[["north", 10.5], ["south", 7.25]])
>>> got = ResultSet(columns=["n", "revenue", "region"], types=["BIGINT", "DOUBLE", "VARCHAR"],
...                 rows=[[3, 7.25, "south"], [4, 10.5, "north"]])
>>> c = compare(exp, got, order_matters=False)
>>> (c.exact, c.facts, c.column_map)
(False, True, (2, 1))

Value rules (both readings, revision 3): an integer-typed value (a Python ``int`` from an
INTEGER/BIGINT/HUGEINT... column) equals another number only when they are exactly equal
(``5 == 5.0 == Decimal('5.00')`` but ``5 != 5.0000001``: a count is right or wrong, on either
side), and so do two whole numbers of any type (``1000000.00 != 1000009.0``). Otherwise the
tolerance follows the storage type: DOUBLE vs DOUBLE/DECIMAL within 1e-9 relative or 1e-12
absolute (summation-order noise: ``Decimal('58920.00')`` equals ``58920.000000000004``, but a
rounding such as ``1351.33`` is never within tolerance of ``1351.3333``); 1e-6 relative when
either column is REAL (float32); DECIMAL vs DECIMAL by exact value. A bool is not a number;
NULL, 0, '' and false all differ; ``'4' != 4``; a date equals the timestamp at its midnight
but not its ISO string; strings compare exactly after removing trailing whitespace.
Got-the-facts additionally accepts, for a non-integral expected value, that value rounded to
2 or more decimals: half-up or half-even of the printed value, or half-up of the stored double
(DuckDB's ``round()``), compared under the candidate's storage tolerance. DOUBLE/DECIMAL
values are compared at double precision; numbers nested inside LIST/STRUCT values compare
exactly (no tolerance). ``ABS_TOL``/``REL_TOL`` are only the reach the fast paths prune with.

How multiset matching stays correct and fast with a tolerance (which is not transitive)
---------------------------------------------------------------------------------------
First pass (exact rule): every row is hashed (the leading column first; only rows whose
leading value repeats are hashed in full), the hashes sorted and the rows paired by that order
verified with Python equality (sufficient: Python equality of plain DuckDB scalars implies
compatibility; a hash collision can only leave rows unpaired). On a large result the unpaired
rows (the residue) are closed over rigid int/str/date columns (every row sharing a residue
value there is kept), which keeps every row that could be compatible with them; the rows left
out are identical pairs, so the exact verdict on the kept rows is the verdict on the whole
result, and got-the-facts first looks for an expected column without any candidate column
(refuted on sampled values, confirmed by the signature test; the
candidate column at the same position is summarised from the expected column and the residue,
since its other values are Python-equal to expected ones, instead of being re-read). Otherwise every column is coded by canonical key (numeric columns by
sorting, others by dictionary); equal bags of row codes prove equality. Otherwise compatible
rows must agree exactly on the *rigid* columns (where compatibility is key equality: no
DOUBLE/DECIMAL on one side) and on the order tie group, so the compatibility graph splits
into groups by those codes. Groups whose exact codes balance are matched; a group with one row
per side is a forced pair checked value by value (vectorised); only larger unbalanced groups
go through the tolerant machinery below, restricted to their rows.

Each value gets a canonical *key* (exact equality modulo representation). Expected values of
a column are coded by their distinct keys. Every candidate value is then *snapped* to the set
of expected codes it is compatible with: by key for exact values, and by a sorted range search
plus the precise rule for numbers near a non-integral expected value. If every candidate value
is compatible with at most one distinct expected value, two rows are compatible iff their code
vectors are equal, so multiset equality is an exact comparison of sorted integer row codes
(numpy). Only when some candidate value is compatible with two or more distinct expected
values (values closer than the tolerance or the rounding step) are the rows grouped by their
unambiguous columns and matched within each group by augmenting paths (bipartite matching).

Got-the-facts column matching never tries every permutation: per-column signatures (null
count, multiset of non-numeric keys, numeric count, sorted numeric values within the widest
possible tolerance) prune candidate columns; a backtracking search assigns expected columns
(most constrained first) to distinct compatible candidates, checks after every assignment that
the partial projections are equal multisets of rows (so independently re-sorted columns fail
at the second column), and skips candidate columns identical to one already tried.

Layout (imports go one way, each module uses only those above it)
------------------------------------------------------------------
- :mod:`~sqleval_pipeline.grading.values`: rule parameters, ``GRADER_VERSION``, canonical keys,
  number equality and roundings;
- :mod:`~sqleval_pipeline.grading.columns`: column summaries (``_Col``) and snapping;
- :mod:`~sqleval_pipeline.grading.bags`: multisets of rows, order tie groups, ``_match_rows``;
- :mod:`~sqleval_pipeline.grading.explain`: mismatch descriptions;
- :mod:`~sqleval_pipeline.grading.matching`: the exact reading and got-the-facts column matching;
- :mod:`~sqleval_pipeline.grading.fast`: the raw-row pass and the residue path;
- :mod:`~sqleval_pipeline.grading.ties`: ties at a LIMIT cut (the tied rows that best match a
  candidate, for the comparison to decide) and rank groups;
- :mod:`~sqleval_pipeline.grading.outcomes`: ``Comparison``, ``compare``, ``compare_any``,
  ``grade_attempt``.

Every name is re-exported here. A name is looked up in the module that defines or imports
it: to monkeypatch one (tests), set it on that module (``grading.fast._hashes``), not here.
"""

from __future__ import annotations

# every name the former single-file module defined, public and private (tests use private ones)
from sqleval_pipeline.grading.values import (
    ABS_TOL, REL_TOL, MIN_ROUND_DECIMALS, ROUNDING_MODES, RULE_REVISION, RULES, GRADER_VERSION,
    canonical_key, values_equal, _grader_version, _Null, _NULL, _NAN, _NoneType, _TRAILING_WS,
    _decimal_key, _is_num, _is_int, _is_tolerant_key, _numbers_equal, _as_decimal, _rounding_matches,
    _num_match,
)
from sqleval_pipeline.grading.columns import (
    _NUMERIC_KINDS, _Col, _rigid, _columns, _Snap, _reach, _snap, _numeric_codes, _int_array,
    _decimal_keys, _nearest,
)
from sqleval_pipeline.grading.bags import (
    _LIMIT, _refactor, _Rows, _bag_equal_ambiguous, _approx_rows, _card, _bags, _segments, _Match,
    _pair_ok, _match_rows, _surplus_mask, _unmatched,
)
from sqleval_pipeline.grading.explain import (
    _fmt, _fmt_row, _row_diff_examples, _surplus_rows, _column_hints, _HINT_ROWS, _mismatch_text,
    _first_out_of_order,
)
from sqleval_pipeline.grading.matching import (
    _compare_exact, _num_compatible, _sorted_compatible, _compatible, _SINGLE_TOLERANT_MAX_ROWS,
    _compare_facts, _SearchBudget,
)
from sqleval_pipeline.grading.fast import (
    _DUCK_SCALAR, _hashes, _duplicated, _row_hashes, _VERIFY_BLOCK, _Fast, _scalar_types, _fast_exact,
    _RESIDUE_FILTER_COLUMNS, _FACTS_SAMPLES, _INT_DUCK, _filter_keys_ok, _close_residue, _subset,
    _refuted, _facts_missing_column, _shifted_compatible,
)
from sqleval_pipeline.grading.ties import Cut, Shape, case_shapes, merged_groups, selections, shape_of
from sqleval_pipeline.grading.outcomes import (
    Comparison, compare, compare_any, grade_against, grade_attempt, _RESIDUE_MIN_ROWS,
    _RESIDUE_MAX_FRACTION, _compare_residue, _comparison, _compare,
)

__all__ = [
    "ABS_TOL", "GRADER_VERSION", "MIN_ROUND_DECIMALS", "REL_TOL", "ROUNDING_MODES", "RULES",
    "RULE_REVISION", "Comparison", "Cut", "Shape", "canonical_key", "case_shapes", "compare", "compare_any",
    "grade_against", "grade_attempt", "values_equal",
]
