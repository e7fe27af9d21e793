import datetime as dt

import duckdb
import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import freeze, load_golden
from sqleval_pipeline.golden.freeze import FreezeError, freeze_cases, limit_without_order, order_keys_of
from sqleval_pipeline.golden.verify import verify_cases
from sqleval_pipeline.golden.model import Case


@pytest.fixture(scope="module")
def golden():
    return load_golden(location.GOLDEN_DIR)


def test_every_committed_case_reproduces_on_a_fresh_snapshot(golden, serving_snapshot):
    drifts = verify_cases(golden.cases, serving_snapshot.path, serving_snapshot.snapshot_id,
                          serving_snapshot.manifest.as_of)
    assert drifts == []


def test_verify_catches_a_changed_expected_result(golden, serving_snapshot):
    case = golden.by_id()["com-010"]
    tampered = case.model_copy(deep=True)
    tampered.expected.rows[0][0] += 1
    drifts = verify_cases([tampered], serving_snapshot.path, serving_snapshot.snapshot_id,
                          serving_snapshot.manifest.as_of)
    assert len(drifts) == 1 and drifts[0].case_id == "com-010"
    assert "first difference" in drifts[0].detail


def test_verify_catches_a_case_frozen_on_another_snapshot(golden, serving_snapshot):
    case = golden.by_id()["com-001"].model_copy(update={"snapshot_id": "snap-000000000000"})
    drifts = verify_cases([case], serving_snapshot.path, serving_snapshot.snapshot_id,
                          serving_snapshot.manifest.as_of)
    assert drifts and "frozen against snap-000000000000" in drifts[0].detail


def test_freeze_records_types_alternatives_and_order_keys(golden, serving_snapshot):
    ids = ["com-028", "com-037", "com-006", "com-055"]
    todo = [golden.by_id()[i].model_copy(update={"expected": None, "order_keys": []}) for i in ids]
    frozen = {c.id: c for c in freeze_cases(todo, serving_snapshot.path, serving_snapshot.snapshot_id,
                                            serving_snapshot.manifest.as_of)}
    for i in ids:
        assert frozen[i].expected == golden.by_id()[i].expected
        assert frozen[i].order_keys == golden.by_id()[i].order_keys
    assert len(frozen["com-028"].expected.alternatives) == 1
    assert frozen["com-037"].order_keys == ["customers"]
    assert frozen["com-006"].expected.types == ["DOUBLE"]
    assert frozen["com-055"].expected is None


def test_time_windows_follow_the_as_of_date_not_the_clock(golden, serving_snapshot):
    case = golden.by_id()["com-027"]  # last 7 days
    later = freeze_cases([case], serving_snapshot.path, serving_snapshot.snapshot_id,
                         dt.date(2025, 12, 1))[0]
    assert later.expected.rows != case.expected.rows  # moves with the as-of date only


@pytest.mark.parametrize("sql,keys", [
    ("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC", ["n"]),
    ("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY 2 DESC, 1", ["n", "a"]),
    ("SELECT a, sum(b) FROM t GROUP BY a ORDER BY sum(b) DESC", ["SUM(b)"]),
    ("SELECT a FROM t UNION ALL SELECT a FROM u ORDER BY a", ["a"]),
])
def test_order_keys_are_output_columns(sql, keys):
    assert order_keys_of(sql) == keys


def test_unaliased_expressions_take_the_database_column_name():
    assert order_keys_of("SELECT a, sum(b) FROM t GROUP BY a ORDER BY sum(b) DESC",
                         ["a", "sum(b)"]) == ["sum(b)"]


def test_order_by_a_hidden_expression_is_refused():
    with pytest.raises(FreezeError, match="not an output column"):
        order_keys_of("SELECT a FROM t ORDER BY b")


def test_a_failing_reference_names_the_case(serving_snapshot):
    bad = Case(id="t-bad", question="?!?", reference_sql="SELECT nope FROM fct_orders",
               difficulty="simple_aggregate", band="answerable", cluster="x", split="dev",
               status="verified", provenance={"source": "t", "author": "t"})
    with pytest.raises(FreezeError, match="case t-bad: reference_sql failed"):
        freeze_cases([bad], serving_snapshot.path, serving_snapshot.snapshot_id,
                     serving_snapshot.manifest.as_of)


# --- ties at a LIMIT cut and ORDER BY keys that are not output columns -----------------------
# (a small DuckDB file per test, opened read-only the way freezing opens the snapshot)

AS_OF = dt.date(2025, 6, 30)
#: (name, age, country): Ann and Bob tie at 40; Dee, Eve and Fay tie at 30
SINGERS = [("Ann", 40, "FR"), ("Bob", 40, "FR"), ("Cy", 35, "US"), ("Dee", 30, "US"),
           ("Eve", 30, "UK"), ("Fay", 30, "DE")]


@pytest.fixture
def singers(tmp_path):
    path = tmp_path / "singers.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE singer (name VARCHAR, age INTEGER, country VARCHAR)")
    con.executemany("INSERT INTO singer VALUES (?, ?, ?)", SINGERS)
    con.execute("CREATE TABLE flags (id INTEGER, k INTEGER)")
    con.executemany("INSERT INTO flags VALUES (?, ?)", [(i, 0) for i in range(1, 11)])
    con.close()
    return path


def _case(sql, order_matters=False, alternatives=()):
    return Case(id="t-tie", question="Who is the oldest singer?", reference_sql=sql,
                alternative_sqls=list(alternatives), difficulty="top_k", band="answerable",
                cluster="singer", split="dev", status="verified", order_matters=order_matters,
                provenance={"source": "t", "author": "t"})


def _freeze(path, sql, order_matters=False, notes=None, alternatives=()):
    return freeze_cases([_case(sql, order_matters, alternatives)], path, "snap-t", AS_OF, notes=notes)[0]


def _bag(rows):
    return sorted(map(tuple, rows))


def test_tie_on_an_output_column_is_recorded(singers):
    c = _freeze(singers, "SELECT name, age FROM singer ORDER BY age DESC LIMIT 1", order_matters=True)
    tie = c.expected.tie
    assert (tie.keys, tie.before, tie.take, tie.truncated) == (["age"], 0, 1, False)
    assert _bag(tie.rows) == [("Ann", 40), ("Bob", 40)]
    assert tuple(c.expected.rows[0]) in _bag(tie.rows)
    assert c.order_keys == ["age"] and c.expected.order_groups is None


def test_tie_on_an_expression_that_is_not_an_output_column(singers):
    notes = []
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 1", order_matters=True, notes=notes)
    assert _bag(c.expected.tie.rows) == [("Ann",), ("Bob",)]
    assert c.expected.tie.keys == ["age"]
    assert c.order_keys == []  # no output column to name: the rank groups stand in (one row here)
    assert [n.code for n in notes] == ["tie_at_cut"]
    assert "2 rows tied on age" in notes[0].detail and notes[0].reading == "reference_sql"


def test_tie_on_count_star_with_group_by(singers):
    # FR and US have two singers each, UK and DE one
    c = _freeze(singers, "SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1")
    assert c.expected.rows in ([["FR"]], [["US"]])
    assert _bag(c.expected.tie.rows) == [("FR",), ("US",)]
    assert c.expected.tie.keys == ["COUNT(*)"]  # the key's SQL: it is not an output column


def test_rows_ranked_above_the_tie_group_are_fixed(singers):
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 4")
    tie = c.expected.tie
    assert (tie.before, tie.take) == (3, 1)
    assert _bag(tie.rows) == [("Dee",), ("Eve",), ("Fay",)]
    assert _bag(c.expected.rows[:3]) == [("Ann",), ("Bob",), ("Cy",)]


def test_offset_before_the_limit_cut(singers):
    # DESC: Ann Bob | Cy | Dee Eve Fay; OFFSET 3 LIMIT 2 keeps two of the three 30s
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 2 OFFSET 3")
    assert (c.expected.tie.before, c.expected.tie.take) == (0, 2)
    assert _bag(c.expected.tie.rows) == [("Dee",), ("Eve",), ("Fay",)]
    assert c.expected.tie_at_offset is None


def test_offset_cutting_through_the_first_group(singers):
    # DESC: Ann Bob | Cy | ...; OFFSET 1 skips one of Ann/Bob, keeps the other and Cy
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 2 OFFSET 1", order_matters=True)
    off = c.expected.tie_at_offset
    assert (off.before, off.take) == (0, 1) and _bag(off.rows) == [("Ann",), ("Bob",)]
    assert c.expected.tie is None  # Cy (35) is not tied with the next row (30)
    assert c.expected.rows[1] == ["Cy"]
    assert c.expected.order_groups == [0, 1]


def test_offset_and_limit_inside_one_tie_group(singers):
    # ASC: Dee Eve Fay | Cy | Ann Bob; OFFSET 1 LIMIT 1 keeps one of the three 30s
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age LIMIT 1 OFFSET 1")
    assert (c.expected.tie.before, c.expected.tie.take) == (0, 1)
    assert _bag(c.expected.tie.rows) == [("Dee",), ("Eve",), ("Fay",)]
    assert c.expected.tie_at_offset is None


@pytest.mark.parametrize("sql", [
    "SELECT name FROM singer ORDER BY age DESC, name LIMIT 1",  # Ann and Bob tie on age only
    "SELECT name FROM singer ORDER BY age, country LIMIT 1",  # the 30s differ on country
    "SELECT name FROM singer ORDER BY age DESC LIMIT 2",  # Cy (35) follows the two 40s
    "SELECT name FROM singer ORDER BY age LIMIT 10",  # the LIMIT keeps every row
    "SELECT upper(name) AS age FROM singer ORDER BY age LIMIT 1",  # a bare name binds the alias
    "SELECT name, age FROM singer ORDER BY ALL LIMIT 1",
])
def test_no_tie_no_record(singers, sql):
    c = _freeze(singers, sql)
    assert c.expected.tie is None and c.expected.tie_at_offset is None
    line = c.to_json_line()
    assert '"tie"' not in line and "order_groups" not in line and "limit_without_order" not in line


def test_set_operation_with_order_and_limit(singers):
    c = _freeze(singers, "SELECT name, age FROM singer WHERE country = 'FR' UNION ALL "
                         "SELECT country, age FROM singer WHERE country = 'US' ORDER BY age DESC LIMIT 1")
    assert _bag(c.expected.tie.rows) == [("Ann", 40), ("Bob", 40)]


def test_set_operation_ordered_by_an_expression(singers):
    # lengths: Cy and every country code have 2 letters
    c = _freeze(singers, "SELECT name AS x FROM singer UNION ALL SELECT country FROM singer "
                         "ORDER BY length(x) LIMIT 1")
    assert _bag(c.expected.tie.rows) == sorted([("Cy",), ("FR",), ("FR",), ("US",), ("US",), ("UK",), ("DE",)])
    assert c.expected.tie.keys == ["LENGTH(x)"]


def test_truncated_tie_group(singers, monkeypatch):
    monkeypatch.setattr(freeze, "MAX_TIE_EXTRA_ROWS", 3)
    notes = []
    c = _freeze(singers, "SELECT id FROM flags ORDER BY k LIMIT 1", notes=notes)
    tie = c.expected.tie
    assert tie.truncated
    # 1 + 3 extra + 1 fetched (and the kept row, whether or not among them); all 10 are tied
    assert 5 <= len(tie.rows) <= 6 and len(set(map(tuple, tie.rows))) == len(tie.rows)
    assert {r[0] for r in tie.rows} <= set(range(1, 11)) and c.expected.rows[0] in tie.rows
    assert {n.code for n in notes} == {"tie_at_cut", "tie_truncated"}
    assert "graded WRONG" in next(n.detail for n in notes if n.code == "tie_truncated")


def test_limit_without_order_is_flagged(singers):
    notes = []
    c = _freeze(singers, "SELECT name FROM singer LIMIT 2", notes=notes)
    assert c.expected.limit_without_order
    assert [n.code for n in notes] == ["limit_without_order"]
    assert '"limit_without_order": true' in c.to_json_line()
    assert not _freeze(singers, "SELECT max(age) FROM singer LIMIT 1").expected.limit_without_order


@pytest.mark.parametrize("sql,flagged", [
    ("SELECT a FROM t LIMIT 5", True),
    ("SELECT a FROM t OFFSET 5", True),
    ("SELECT a FROM t ORDER BY a LIMIT 5", False),
    ("SELECT a FROM t UNION SELECT b FROM u LIMIT 5", True),
    ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1 LIMIT 5", False),
    ("SELECT count(*) FROM t LIMIT 1", False),  # one row whatever the LIMIT
    ("SELECT a FROM (SELECT a FROM t LIMIT 2) s ORDER BY a", False),  # not top-level
    ("(SELECT a FROM t LIMIT 3)", True),
])
def test_limit_without_order_helper(sql, flagged):
    assert limit_without_order(sql) is flagged


def test_order_matters_with_keys_that_are_not_output_columns(singers):
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC", order_matters=True)
    assert c.order_keys == []
    assert c.expected.order_groups == [0, 0, 1, 2, 2, 2]
    assert _bag(c.expected.rows[:2]) == [("Ann",), ("Bob",)] and c.expected.rows[2] == ["Cy"]
    # and the rank groups of an alternative reading are its own
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC", order_matters=True,
                alternatives=["SELECT name FROM singer ORDER BY country, age"])
    assert c.expected.alternatives[0].order_groups == [0, 1, 1, 2, 3, 4]


def test_rank_groups_with_a_cut(singers):
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 4", order_matters=True)
    assert c.expected.order_groups == [0, 0, 1, 2]
    assert (c.expected.tie.before, c.expected.tie.take) == (3, 1)


def test_verify_accepts_another_row_of_the_tie_group(singers):
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 4", order_matters=True)
    assert verify_cases([c], singers, "snap-t", AS_OF) == []
    kept = c.expected.rows[3][0]
    other = next(r for r in c.expected.tie.rows if r[0] != kept)
    swapped = c.model_copy(deep=True)
    swapped.expected.rows[3] = list(other)  # as if a run had kept another 30-year-old
    swapped.expected.rows[:2] = swapped.expected.rows[:2][::-1]  # and listed Ann/Bob the other way
    assert verify_cases([swapped], singers, "snap-t", AS_OF) == []


def test_verify_reports_a_changed_tie_group_or_fixed_row(singers):
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 4", order_matters=True)
    fewer = c.model_copy(deep=True)
    fewer.expected.tie.rows = [r for r in fewer.expected.tie.rows if r != ["Fay"]]
    if fewer.expected.rows[3] == ["Fay"]:
        fewer.expected.rows[3] = list(fewer.expected.tie.rows[0])
    drifts = verify_cases([fewer], singers, "snap-t", AS_OF)
    assert [d.detail for d in drifts] == ["tie at the LIMIT cut: 2 tied rows → 3"]
    fixed = c.model_copy(deep=True)
    fixed.expected.rows[2] = ["Zed"]  # Cy's place
    drifts = verify_cases([fixed], singers, "snap-t", AS_OF)
    assert len(drifts) == 1 and "first difference" in drifts[0].detail


def test_verify_hints_at_a_tie_the_frozen_result_does_not_record(singers):
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 1")
    legacy = c.model_copy(deep=True)
    legacy.expected.tie = None  # frozen before ties were recorded, keeping the other 40-year-old
    legacy.expected.rows = [["Bob"] if c.expected.rows[0] == ["Ann"] else ["Ann"]]
    drifts = verify_cases([legacy], singers, "snap-t", AS_OF)
    assert len(drifts) == 1 and "re-freeze the case to record the tie" in drifts[0].detail


def test_a_nondeterministic_reference_with_a_cut_is_refused(singers):
    with pytest.raises(FreezeError, match="case t-tie: reference_sql: .*deterministic"):
        _freeze(singers, "SELECT id FROM flags ORDER BY random() LIMIT 5")  # 1 in 30,240 to agree


def test_a_failing_second_run_is_a_note_unless_the_rank_groups_are_needed(singers, monkeypatch):
    monkeypatch.setattr(freeze, "_probe_sql", lambda plan, fetch: "SELECT no_such_column FROM singer")
    notes = []
    c = _freeze(singers, "SELECT name FROM singer ORDER BY age DESC LIMIT 1", notes=notes)
    assert c.expected.tie is None and c.expected.rows in ([["Ann"]], [["Bob"]])
    assert [n.code for n in notes] == ["ties_not_checked"]
    with pytest.raises(FreezeError, match="case t-tie: reference_sql: running it again"):
        _freeze(singers, "SELECT name FROM singer ORDER BY age DESC", order_matters=True)
