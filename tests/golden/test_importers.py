"""Parsing question files (sqleval CSV/JSONL, defog, Spider, BIRD) and translating their SQL.

The translated SQL is checked by running it on a small in-memory DuckDB table whose answers
were worked out by hand, not by comparing with sqlglot's output text.
"""

from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from sqleval_pipeline.dialect import KNOWN_DIALECTS, TranspileError, resolve_dialect, to_duckdb
from sqleval_pipeline.golden.importers import (
    MAX_DEFOG_READINGS,
    ImportFormatError,
    expand_defog_braces,
    read_questions,
    split_alternatives,
    split_defog_query,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "imports"


@pytest.fixture(scope="module")
def con():
    """claims: 1 open 100.00 north 2024-11-03 | 2 closed 250.50 south 2025-02-10 |
    3 open 75.25 south 2025-03-01 | 4 denied 0.00 north 2025-03-15."""
    c = duckdb.connect()
    c.execute("CREATE TABLE claims(claim_id INTEGER, status VARCHAR, amount DECIMAL(10,2), "
              "region VARCHAR, opened DATE, note VARCHAR)")
    c.execute("INSERT INTO claims VALUES (1, 'open', 100.00, 'north', DATE '2024-11-03', "
              "'hail; wind damage'), (2, 'closed', 250.50, 'south', DATE '2025-02-10', 'flood'), "
              "(3, 'open', 75.25, 'south', DATE '2025-03-01', NULL), "
              "(4, 'denied', 0.00, 'north', DATE '2025-03-15', 'duplicate')")
    yield c
    c.close()


def run(con, sql):
    return [tuple(r) for r in con.execute(sql).fetchall()]


def by_line(batch):
    return {r.line: r for r in batch.rows}


def rejections(batch):
    return {r.line: r.reason for r in batch.rejected}


# --------------------------------------------------------------------------- dialect


def test_to_duckdb_translates_dialect_functions_so_duckdb_computes_the_same_answer(con):
    # Snowflake IFF / COUNT_IF, BigQuery backticks, SQLite IIF, T-SQL TOP
    assert run(con, to_duckdb("SELECT COUNT_IF(amount > 100) FROM claims", "snowflake")) == [(1,)]
    assert run(con, to_duckdb("SELECT IFF(amount > 100, 'big', 'small') AS s FROM claims "
                              "WHERE claim_id = 2", "snowflake")) == [("big",)]
    assert run(con, to_duckdb("SELECT `region` FROM `claims` WHERE claim_id = 3",
                              "bigquery")) == [("south",)]
    assert run(con, to_duckdb("SELECT SUM(IIF(status = 'open', 1, 0)) FROM claims",
                              "sqlite")) == [(2,)]
    assert run(con, to_duckdb("SELECT TOP 1 claim_id FROM claims ORDER BY amount DESC",
                              "tsql")) == [(2,)]


def test_to_duckdb_leaves_duckdb_and_no_dialect_untouched():
    weird = "select  1 ;  -- kept as written"
    assert to_duckdb(weird, None) == weird
    assert to_duckdb(weird, "duckdb") == weird
    assert to_duckdb(weird, "DuckDB") == weird


def test_dialect_names_and_aliases():
    assert {"snowflake", "bigquery", "postgres", "sqlite", "mysql", "tsql", "spark"} <= set(KNOWN_DIALECTS)
    assert "" not in KNOWN_DIALECTS
    assert resolve_dialect("PostgreSQL") == "postgres"
    assert resolve_dialect("mssql") == "tsql"


@pytest.mark.parametrize("sql, dialect, expected", [
    ("SELECT 1", "snowflak", "unknown SQL dialect 'snowflak' (did you mean 'snowflake'?)"),
    ("SELECT 1", "cobol", "known dialects include"),
    ("SELECT 1; SELECT 2", "postgres", "expected one SQL statement, found 2"),
    ("SELECT FROM WHERE (", "postgres", "does not parse as postgres SQL"),
    ("SELECT a FROM t FOR UPDATE", "postgres", "without changing its meaning"),
    ("SELECT APPROX_TOP_K(a, 2) FROM t", "snowflake", "APPROX_TOP_K"),
    ("", "sqlite", "no SQL statement"),
])
def test_to_duckdb_refuses_what_it_cannot_translate_faithfully(sql, dialect, expected):
    with pytest.raises(TranspileError) as info:
        to_duckdb(sql, dialect)
    assert expected in str(info.value)
    assert isinstance(info.value, ValueError)


def test_a_trailing_semicolon_is_one_statement(con):
    assert run(con, to_duckdb("SELECT count(*) FROM claims;", "postgres")) == [(4,)]


# --------------------------------------------------------------------------- sqleval CSV


def test_own_csv_with_every_optional_column():
    batch = read_questions(FIXTURES / "questions.csv")
    assert batch.format == "csv" and batch.dialect is None
    assert batch.rejected == [] and batch.warnings == []
    rows = by_line(batch)
    # the multi-line record starts on line 4 and ends on line 9; a blank line 10 is skipped
    assert sorted(rows) == [2, 3, 4, 11]

    r = rows[2]
    assert (r.id, r.question, r.answerable, r.band) == ("clm-101", "How many claims are open?", True,
                                                        "answerable")
    assert r.sql == "SELECT count(*) AS open_claims FROM claims WHERE status = 'open'"
    assert (r.difficulty, r.split, r.order_matters, r.cluster) == ("filtered_aggregate", "heldout",
                                                                   False, "claims")
    assert r.tags == ["status", "counts"] and r.traps == [] and r.notes == "asked weekly"
    assert r.alternatives == [] and r.original_sql is None and r.original_dialect is None
    assert r.source == "import:questions.csv:2"

    refuse = rows[3]
    assert refuse.answerable is False and refuse.band == "should_refuse" and refuse.sql is None
    assert refuse.traps == ["pii_request"] and refuse.tags == ["pii"]

    multi = rows[4]
    assert multi.id is None and multi.order_matters is True and multi.difficulty == "top_k"
    assert multi.sql == "SELECT region, sum(amount) AS total\nFROM claims\nGROUP BY region\nORDER BY total DESC"
    assert multi.alternatives == [
        "SELECT region, sum(amount) AS total FROM claims GROUP BY ALL ORDER BY 2 DESC",
        "SELECT region, CAST(sum(amount) AS DECIMAL(18,2)) AS total FROM claims GROUP BY region "
        "ORDER BY total DESC",
    ]
    assert multi.tags == ["regions", "money"] and multi.split is None and multi.cluster is None

    definition = rows[11]
    assert definition.band == "needs_definition" and definition.answerable is True
    assert definition.sql is None and definition.notes == "no agreed threshold yet"


def test_alternatives_split_only_on_lines_holding_just_two_semicolons():
    assert split_alternatives("SELECT 'a;;b'\n  ;;  \nSELECT 2") == ["SELECT 'a;;b'", "SELECT 2"]
    assert split_alternatives("SELECT 1;; SELECT 2") == ["SELECT 1;; SELECT 2"]  # not on its own line
    assert split_alternatives(" ") == []


def test_unknown_csv_column_rejects_the_whole_file_naming_it():
    with pytest.raises(ImportFormatError) as info:
        read_questions(FIXTURES / "unknown_column.csv")
    msg = str(info.value)
    assert "unknown column(s) 'answerble'" in msg and "did you mean 'answerable'" in msg


def test_missing_required_csv_column_is_named():
    with pytest.raises(ImportFormatError, match="missing required column.*'sql'"):
        read_questions(FIXTURES / "missing_column.csv")


def test_csv_header_is_case_insensitive(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("ID,Question,SQL\nx-001,How many claims?,SELECT 1\n")
    batch = read_questions(p)
    assert [(r.id, r.sql) for r in batch.rows] == [("x-001", "SELECT 1")]


def test_csv_row_problems_are_rejections_with_their_line(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text(
        "id,question,sql,answerable,band,alternatives\n"
        "a-001,Fine question?,SELECT 1,,,\n"                      # 2 ok
        "a-002,Refused but answered?,SELECT 1,false,,\n"          # 3 should_refuse with SQL
        "a-003,Bad boolean?,SELECT 1,maybe,,\n"                   # 4
        "a-004,  ,SELECT 1,,,\n"                                  # 5 empty question
        "a-005,Alternatives alone?,,,,SELECT 2\n"                 # 6 alternatives without sql
        "a-006,Contradiction?,,true,should_refuse,\n"             # 7
        "a-007,Unknown band?,SELECT 1,,maybe_later,\n"            # 8
        "a-008,Too many cells?,SELECT 1,,,,extra\n"               # 9
    )
    batch = read_questions(p)
    assert [r.line for r in batch.rows] == [2]
    rej = rejections(batch)
    assert sorted(rej) == [3, 4, 5, 6, 7, 8, 9]
    assert "leave sql and alternatives empty" in rej[3]
    assert "answerable must be true or false" in rej[4] and "'maybe'" in rej[4]
    assert "question is empty" in rej[5]
    assert "alternatives are given without sql" in rej[6]
    assert "contradicts answerable=true" in rej[7]
    assert "band must be one of" in rej[8]
    assert "7 cells but the header has 6 columns" in rej[9]
    assert {r.id for r in batch.rejected if r.line == 3} == {"a-002"}


def test_a_row_whose_sql_does_not_translate_is_rejected_with_its_line_and_error(con):
    batch = read_questions(FIXTURES / "snowflake_questions.csv", dialect="snowflake")
    assert batch.format == "csv" and batch.dialect == "snowflake"
    rows = by_line(batch)
    assert sorted(rows) == [2, 3]
    assert run(con, rows[2].sql) == [(1,)]  # COUNT_IF(amount > 100): only 250.50
    assert sorted(run(con, rows[3].sql)) == [(1, "small"), (2, "big"), (3, "small"), (4, "small")]
    assert rows[3].original_sql == ("SELECT claim_id, IFF(amount > 100, 'big', 'small') AS size "
                                    "FROM claims")
    assert rows[3].original_dialect == "snowflake"
    rej = rejections(batch)
    assert sorted(rej) == [4, 5, 6]
    assert rej[4].startswith("sql (snowflake to DuckDB): does not parse as snowflake SQL")
    assert "APPROX_TOP_K" in rej[5] and "without changing its meaning" in rej[5]
    assert "expected one SQL statement, found 2" in rej[6]


def test_the_same_file_without_a_dialect_keeps_the_sql_as_written():
    batch = read_questions(FIXTURES / "snowflake_questions.csv")
    assert [r.line for r in batch.rows] == [2, 3, 4, 5, 6]  # checking happens when importing
    assert by_line(batch)[3].sql == "SELECT claim_id, IFF(amount > 100, 'big', 'small') AS size FROM claims"


def test_alternatives_are_translated_too(tmp_path, con):
    p = tmp_path / "q.csv"
    p.write_text('question,sql,alternatives\nBig claims?,"SELECT IFF(amount > 100, 1, 0) AS b FROM '
                 'claims WHERE claim_id = 2","SELECT IFF(amount > 1000, 1, 0) AS b FROM claims '
                 'WHERE claim_id = 2\n;;\nSELECT FROM WHERE"\n')
    batch = read_questions(p, dialect="snowflake")
    assert batch.rows == []
    assert rejections(batch)[2].startswith("alternatives[1] (snowflake to DuckDB)")
    p.write_text('question,sql,alternatives\nBig claims?,"SELECT IFF(amount > 100, 1, 0) AS b FROM '
                 'claims WHERE claim_id = 2","SELECT IFF(amount > 1000, 1, 0) AS b FROM claims '
                 'WHERE claim_id = 2"\n')
    row = read_questions(p, dialect="snowflake").rows[0]
    assert [run(con, s) for s in [row.sql, *row.alternatives]] == [[(1,)], [(0,)]]
    assert row.original_alternatives == ["SELECT IFF(amount > 1000, 1, 0) AS b FROM claims WHERE claim_id = 2"]


def test_unknown_dialect_or_format_rejects_the_file():
    with pytest.raises(ImportFormatError, match="unknown SQL dialect 'snowflak'"):
        read_questions(FIXTURES / "questions.csv", dialect="snowflak")
    with pytest.raises(ImportFormatError, match="unknown import format 'xml'"):
        read_questions(FIXTURES / "questions.csv", fmt="xml")
    with pytest.raises(ImportFormatError, match="no such file"):
        read_questions(FIXTURES / "nope.csv")


# --------------------------------------------------------------------------- sqleval JSONL


def test_own_jsonl():
    batch = read_questions(FIXTURES / "questions.jsonl")
    assert batch.format == "jsonl"
    rows = by_line(batch)
    assert sorted(rows) == [1, 3, 4]  # line 2 is blank
    assert rows[1].id == "clm-201" and rows[1].tags == ["counts"]
    assert rows[1].alternatives == ["SELECT count(claim_id) AS claims FROM claims"]
    assert rows[3].id is None and rows[3].answerable is False and rows[3].band == "should_refuse"
    assert (rows[4].split, rows[4].order_matters, rows[4].cluster) == ("heldout", False, "claims")
    rej = rejections(batch)
    assert sorted(rej) == [5, 6, 7]
    assert "not valid JSON" in rej[5]
    assert "tags must be a list of strings" in rej[6]
    assert "'question' missing" in rej[7]


def test_unknown_jsonl_key_rejects_the_file_naming_key_and_line(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"question": "How many?", "sql": "SELECT 1"}\n'
                 '{"question": "How many more?", "sql": "SELECT 2", "dificulty": "top_k"}\n')
    with pytest.raises(ImportFormatError) as info:
        read_questions(p)
    assert "q.jsonl:2" in str(info.value) and "'dificulty'" in str(info.value)
    assert "did you mean 'difficulty'" in str(info.value)


# --------------------------------------------------------------------------- defog


def test_defog_csv_is_detected_and_mapped(con):
    batch = read_questions(FIXTURES / "defog_questions.csv")
    assert batch.format == "defog" and batch.dialect == "postgres"
    rows = by_line(batch)
    assert sorted(rows) == [2, 3, 4, 5]

    first = rows[2]
    assert run(con, first.sql) == [(2,)] and first.alternatives == []
    assert (first.cluster, first.tags, first.notes) == ("where", ["where"], "db_name: claims_db")
    assert first.original_dialect == "postgres"

    # {claims.region, claims.region_code} = any non-empty subset; GROUP BY {} follows the choice;
    # then the second ';'-separated gold query
    grouped = rows[3]
    readings = [grouped.original_sql, *grouped.original_alternatives]
    assert readings == [
        "SELECT claims.region, sum(claims.amount) AS total FROM claims GROUP BY claims.region "
        "ORDER BY total DESC NULLS LAST",
        "SELECT claims.region_code, sum(claims.amount) AS total FROM claims GROUP BY "
        "claims.region_code ORDER BY total DESC NULLS LAST",
        "SELECT claims.region, claims.region_code, sum(claims.amount) AS total FROM claims "
        "GROUP BY claims.region, claims.region_code ORDER BY total DESC NULLS LAST",
        "SELECT claims.region, SUM(claims.amount) AS total FROM claims GROUP BY claims.region",
    ]
    assert len(grouped.alternatives) == 3
    assert run(con, grouped.sql) == [("south", Decimal("325.75")), ("north", Decimal("100.00"))]
    assert grouped.notes == "instructions: Order by the total in descending order.\ndb_name: claims_db"
    assert grouped.cluster == "group_by"

    # a ';' inside a string literal does not split the query
    quoted = rows[4]
    assert quoted.alternatives == [] and run(con, quoted.sql) == [(1,)]

    # {a, b, c} x {d, e}: 7 x 3 = 21 readings, capped
    capped = rows[5]
    assert 1 + len(capped.alternatives) == MAX_DEFOG_READINGS
    assert "21 accepted readings" in capped.notes and f"kept the first {MAX_DEFOG_READINGS}" in capped.notes

    assert sorted(rejections(batch)) == [6]
    assert "does not parse as postgres SQL" in rejections(batch)[6]


def test_defog_braces_and_semicolons():
    readings, n = expand_defog_braces("SELECT {x.a, x.b, x.c} FROM x")
    assert n == 7 and readings == [
        "SELECT x.a FROM x", "SELECT x.b FROM x", "SELECT x.c FROM x", "SELECT x.a, x.b FROM x",
        "SELECT x.a, x.c FROM x", "SELECT x.b, x.c FROM x", "SELECT x.a, x.b, x.c FROM x"]
    assert expand_defog_braces("SELECT '{a, b}' FROM x") == (["SELECT '{a, b}' FROM x"], 1)
    assert expand_defog_braces("SELECT {round(a, 2), b} FROM x")[0][:2] == [
        "SELECT round(a, 2) FROM x", "SELECT b FROM x"]
    assert split_defog_query("SELECT 1;SELECT ';';\n/* a;b */ SELECT 3;") == [
        "SELECT 1", "SELECT ';'", "/* a;b */ SELECT 3"]


def test_defog_uses_db_type_unless_a_dialect_is_given(tmp_path):
    p = tmp_path / "questions_gen_sqlite.csv"
    p.write_text("db_name,db_type,query_category,query,question,instructions,k_shot_prompt\n"
                 "claims_db,sqlite,where,SELECT `region` FROM claims LIMIT 1,Any region?,,ignored\n")
    batch = read_questions(p)
    assert batch.format == "defog" and batch.warnings == []
    assert batch.rows[0].original_dialect == "sqlite" and "`" not in batch.rows[0].sql
    # postgres cannot read backticks: the explicit dialect wins over db_type
    forced = read_questions(p, dialect="postgres")
    assert forced.rows == [] and "postgres" in forced.rejected[0].reason


def test_defog_extra_columns_are_ignored_with_a_warning(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("question,query,db_name,query_category,difficulty_level\nHow many?,SELECT 1,db,x,3\n")
    batch = read_questions(p, fmt="defog")
    assert len(batch.rows) == 1 and "difficulty_level" in batch.warnings[0]


# --------------------------------------------------------------------------- spider / bird


def test_spider_json(con):
    batch = read_questions(FIXTURES / "spider_dev.json")
    assert batch.format == "spider" and batch.dialect == "sqlite"
    assert batch.warnings == []  # the token and parse fields are known and skipped
    rows = by_line(batch)
    assert sorted(rows) == [1, 2, 4]
    assert run(con, rows[1].sql) == [(4,)] and rows[1].notes == "db_id: claims_1"
    assert run(con, rows[2].sql) == [("south",)]  # 250.50 + 75.25 > 200; north has 100
    assert rows[1].original_sql == "SELECT count(*) FROM claims"
    assert rejections(batch) == {3: "query is missing or empty"}


def test_bird_json(con):
    batch = read_questions(FIXTURES / "bird_dev.json")
    assert batch.format == "bird" and batch.dialect == "sqlite"
    rows = by_line(batch)
    assert sorted(rows) == [1, 2, 3] and batch.rejected == []
    share = rows[1]
    assert run(con, share.sql) == [(0.25,)]  # 1 denied of 4
    assert share.notes == ("evidence: share of denied = SUM(status = 'denied') / COUNT(claim_id)\n"
                           "db_id: claims_bird\nbird question_id: 17")
    assert share.facets == {"database": "claims_bird", "bird_difficulty": "moderate"}
    assert share.tags == [] and share.source_difficulty == "moderate" and share.derived_cluster == "claims_bird"
    assert share.difficulty is None  # BIRD's scale is not our taxonomy
    assert run(con, rows[2].sql) == [("2024",)]
    assert "evidence" not in rows[2].notes  # empty evidence
    assert "evidence" not in rows[3].notes  # BIRD's early "False" placeholder
    assert run(con, rows[3].sql) == [(2,)]
    assert batch.warnings == ["bird_dev.json: field(s) curator_comment are not used by the bird "
                              "import and were ignored"]


def test_json_detection_errors(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('[{"question": "q", "answer": "a"}]')
    with pytest.raises(ImportFormatError, match="cannot tell the JSON format"):
        read_questions(p)
    p.write_text('{"not": "an array"}')
    with pytest.raises(ImportFormatError, match="array"):
        read_questions(p, fmt="spider")
    p.write_text("[1, 2")
    with pytest.raises(ImportFormatError, match="not valid JSON"):
        read_questions(p)
