"""Importing rows into a golden file: ids, guard, freezing, and never losing existing cases.

The serving file is a tiny DuckDB built here; every expected value below was worked out by
hand from the four claims inserted in ``serving``.
"""

import datetime as dt
import json
import os
from pathlib import Path

import duckdb
import pytest

from sqleval_pipeline.golden import importing
from sqleval_pipeline.golden.importers import read_questions
from sqleval_pipeline.golden.importing import ImportAborted, import_rows
from sqleval_pipeline.golden.loader import GoldenError, load_golden
from sqleval_pipeline.guard.policy import GuardPolicy

SNAP = "snap-000000000001"
AS_OF = dt.date(2025, 12, 15)
DIFFICULTIES = ("simple_aggregate", "filtered_aggregate", "top_k", "trap")
FIXTURES = Path(__file__).parent.parent / "fixtures" / "imports"


@pytest.fixture()
def serving(tmp_path):
    """claims: 1 open 100.00 north | 2 closed 250.50 south | 3 open 75.25 south |
    4 denied 0.00 north. ``adjusters`` exists in the file but is not served (not allowlisted)."""
    path = tmp_path / "serving.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE main.claims(claim_id INTEGER, status VARCHAR, amount DECIMAL(10,2), "
                "region VARCHAR, opened DATE)")
    con.execute("INSERT INTO main.claims VALUES (1, 'open', 100.00, 'north', DATE '2024-11-03'), "
                "(2, 'closed', 250.50, 'south', DATE '2025-02-10'), "
                "(3, 'open', 75.25, 'south', DATE '2025-03-01'), "
                "(4, 'denied', 0.00, 'north', DATE '2025-03-15')")
    con.execute("CREATE TABLE main.adjusters(adjuster_id INTEGER, name VARCHAR)")
    con.execute("INSERT INTO main.adjusters VALUES (1, 'Ana')")
    con.close()
    return path


POLICY = GuardPolicy(tables={"claims"})

#: two existing cases, written compactly (not the way Case.to_json_line writes them) so that
#: re-serialising them would change the bytes
EXISTING = [
    {"id": "clm-001", "question": "How many claims are there in total?",
     "reference_sql": "SELECT count(*) AS n FROM claims", "alternative_sqls": [],
     "expected": {"columns": ["n"], "types": ["BIGINT"], "rows": [[4]], "alternatives": []},
     "snapshot_id": SNAP, "difficulty": "simple_aggregate", "band": "answerable", "traps": [],
     "order_matters": False, "order_keys": [], "cluster": "claims", "split": "dev",
     "status": "verified", "provenance": {"source": "hand", "author": "me", "reviewer": "you",
                                          "date": "2025-01-01"}, "notes": "ünïcode kept"},
    {"id": "clm-002", "question": "What is the adjuster's salary?", "reference_sql": None,
     "difficulty": "trap", "band": "should_refuse", "cluster": "privacy", "split": "heldout",
     "status": "verified", "provenance": {"source": "hand", "author": "me"}},
]


@pytest.fixture()
def golden(tmp_path):
    path = tmp_path / "golden" / "claims.jsonl"
    path.parent.mkdir()
    path.write_bytes("".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n"
                             for c in EXISTING).encode("utf-8"))
    return path


IMPORT_CSV = """\
id,question,sql,answerable,difficulty,order_matters,alternatives
clm-003,How many claims are open?,SELECT count(*) AS open_claims FROM claims WHERE status = 'open',,filtered_aggregate,,
clm-004,How many adjusters are there?,SELECT count(*) AS n FROM adjusters,,,,
clm-005,What was paid in total?,SELECT sum(amount_paid) AS paid FROM claims,,,,
clm-003,How many claims are closed?,SELECT count(*) FROM claims WHERE status = 'closed',,,,
clm-001,How many denied claims?,SELECT count(*) FROM claims WHERE status = 'denied',,,,
clm-006,What is the home address of claimant 7?,,false,trap,,
,Total claimed amount per region?,"SELECT region, sum(amount) AS total FROM claims GROUP BY region ORDER BY total DESC",,top_k,true,"SELECT region, sum(amount) AS total FROM claims GROUP BY ALL ORDER BY 2 DESC"
,Which claims are in the west region?,SELECT claim_id FROM claims WHERE region = 'west',,,,
,How many claims are there  in TOTAL?,SELECT count(*) FROM claims,,,,
clm-010,Which claims are gigantic?,SELECT claim_id FROM claims WHERE amount > 1000,,gigantic,,
"""


def do_import(batch, golden_file, serving, **kw):
    args = dict(golden_file=golden_file, serving=serving, snapshot_id=SNAP, as_of=AS_OF,
                policy=POLICY, difficulties=DIFFICULTIES, default_difficulty="simple_aggregate",
                default_cluster="claims")
    args.update(kw)
    return import_rows(batch, **args)


@pytest.fixture()
def batch(tmp_path):
    p = tmp_path / "questions.csv"
    p.write_text(IMPORT_CSV)
    return read_questions(p)


def test_import_accepts_good_rows_rejects_the_rest_and_keeps_the_existing_bytes(batch, golden, serving):
    before = golden.read_bytes()
    report = do_import(batch, golden, serving)

    # generated ids continue after the highest explicit id of the file (clm-010)
    assert [c.id for c in report.accepted] == ["clm-003", "clm-006", "clm-011", "clm-012"]
    rej = {r.line: r.reason for r in report.rejected}
    assert sorted(rej) == [3, 4, 5, 6, 10, 11]
    assert rej[3].startswith("sql: table 'adjusters' is not served by the snapshot")
    assert "served tables (claims)" in rej[3]
    assert "does not run on the snapshot" in rej[4] and "amount_paid" in rej[4]
    assert rej[5] == "duplicate id 'clm-003': already used on line 2 of this file"
    assert rej[6].startswith("duplicate id 'clm-001': the golden file claims.jsonl already has it")
    assert rej[10].startswith("the question is already in the golden set as clm-001")
    assert rej[11].startswith("difficulty 'gigantic' is not in the project's taxonomy")

    # the existing file is a byte-identical prefix; the new cases follow, one per line
    after = golden.read_bytes()
    assert after.startswith(before)
    new_lines = after[len(before):].decode("utf-8").splitlines()
    assert [json.loads(x)["id"] for x in new_lines] == ["clm-003", "clm-006", "clm-011", "clm-012"]
    assert report.written and report.existing == 2

    cases = load_golden(golden).by_id()
    assert len(cases) == 6
    open_claims = cases["clm-003"]
    assert open_claims.expected.columns == ["open_claims"]
    assert open_claims.expected.types == ["BIGINT"] and open_claims.expected.rows == [[2]]
    assert open_claims.snapshot_id == SNAP and open_claims.difficulty == "filtered_aggregate"
    assert open_claims.status == "unverified"  # no reviewer
    assert open_claims.provenance.source == "import:questions.csv:2"
    assert open_claims.provenance.author == "import"
    assert open_claims.provenance.date == dt.date.today()
    assert (open_claims.cluster, open_claims.split, open_claims.band) == ("claims", "dev", "answerable")

    refuse = cases["clm-006"]
    assert refuse.band == "should_refuse" and refuse.reference_sql is None and refuse.expected is None
    assert refuse.difficulty == "trap"

    regions = cases["clm-011"]
    # south 250.50 + 75.25 = 325.75, north 100.00 + 0.00 = 100.00, largest first
    assert regions.expected.rows == [["south", "325.75"], ["north", "100.00"]]
    assert regions.expected.types == ["VARCHAR", "DECIMAL(38,2)"]
    assert regions.expected.alternatives[0].rows == [["south", "325.75"], ["north", "100.00"]]
    assert regions.order_matters and regions.order_keys == ["total"]
    assert regions.difficulty == "top_k"

    west = cases["clm-012"]
    # no difficulty given: inferred from the reference (one WHERE predicate), and marked so
    assert west.expected.rows == [] and west.difficulty == "filtered_aggregate"
    assert "difficulty" in west.inferred and "difficulty" not in open_claims.inferred
    assert any(w.startswith("line 9 (clm-012): the reference SQL returns no rows") for w in report.warnings)

    summary = report.summary()
    assert "4 case(s) imported from questions.csv" in summary and "6 row(s) rejected" in summary
    # no reviewer: every accepted case is execution-only, and the report says how to verify them
    assert report.execution_only_note().startswith("4 of 4 imported case(s) are unverified")
    assert "sqleval golden review --reviewer NAME" in summary
    assert any(line.startswith("inferred: difficulty inferred for") for line in summary.splitlines())
    assert "rejected line 3 (clm-004): sql: table 'adjusters' is not served" in summary


def test_with_a_reviewer_cases_are_verified(batch, golden, serving):
    report = do_import(batch, golden, serving, reviewer="lead", author="analyst")
    assert report.execution_only_note() is None
    by_id = {c.id: c for c in report.accepted}
    assert by_id["clm-003"].status == "verified" and by_id["clm-006"].status == "verified"
    assert by_id["clm-003"].provenance.reviewer == "lead"
    assert by_id["clm-003"].provenance.author == "analyst"


def test_id_prefix_and_new_golden_file(tmp_path, serving):
    p = tmp_path / "q.csv"
    p.write_text("question,sql\nHow many open claims?,SELECT count(*) FROM claims WHERE status = 'open'\n"
                 "How many closed claims?,SELECT count(*) FROM claims WHERE status = 'closed'\n")
    target = tmp_path / "new" / "fresh.jsonl"
    report = do_import(read_questions(p), target, serving, id_prefix="imp", default_split="heldout")
    assert [c.id for c in report.accepted] == ["imp-001", "imp-002"]
    assert [c.expected.rows for c in report.accepted] == [[[2]], [[1]]]
    assert target.exists() and [c.id for c in load_golden(target).cases] == ["imp-001", "imp-002"]
    assert {c.split for c in report.accepted} == {"heldout"}
    assert not [f for f in target.parent.iterdir() if f.name != "fresh.jsonl"]  # no temp left


def test_when_every_row_is_rejected_nothing_is_written(tmp_path, golden, serving):
    p = tmp_path / "q.csv"
    p.write_text("id,question,sql\nclm-001,Duplicate id?,SELECT 1\n,Unserved?,SELECT * FROM adjusters\n")
    before = golden.read_bytes()
    stat = golden.stat()
    report = do_import(read_questions(p), golden, serving)
    assert report.accepted == [] and [r.line for r in report.rejected] == [2, 3]
    assert not report.written and "was not changed" in report.summary()
    assert golden.read_bytes() == before and golden.stat().st_mtime_ns == stat.st_mtime_ns


def test_an_exception_midway_leaves_the_golden_file_untouched(batch, golden, serving, monkeypatch):
    before = golden.read_bytes()
    real = importing.freeze_case
    calls = []

    def failing(case, con, snapshot_id, as_of, **kw):
        calls.append(case.id)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(case, con, snapshot_id, as_of, **kw)

    monkeypatch.setattr(importing, "freeze_case", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        do_import(batch, golden, serving)
    assert golden.read_bytes() == before
    assert sorted(f.name for f in golden.parent.iterdir()) == ["claims.jsonl"]


def test_a_failed_rename_leaves_the_file_and_no_temporary(batch, golden, serving, monkeypatch):
    before = golden.read_bytes()

    def no_replace(src, dst):
        raise OSError("read-only file system")

    from sqleval_pipeline import textfiles  # the one atomic writer the import goes through

    monkeypatch.setattr(textfiles.os, "replace", no_replace)
    with pytest.raises(OSError, match="read-only"):
        do_import(batch, golden, serving)
    assert golden.read_bytes() == before
    assert sorted(f.name for f in golden.parent.iterdir()) == ["claims.jsonl"]


def test_a_golden_file_changed_during_the_import_is_not_overwritten(batch, golden, serving, monkeypatch):
    real = importing.freeze_case
    other_writer = '{"written": "by someone else meanwhile"}\n'

    def meanwhile(case, con, snapshot_id, as_of, **kw):
        if not golden.read_text().endswith(other_writer):
            with golden.open("a") as fh:
                fh.write(other_writer)
        return real(case, con, snapshot_id, as_of, **kw)

    monkeypatch.setattr(importing, "freeze_case", meanwhile)
    with pytest.raises(ImportAborted, match="changed on disk"):
        do_import(batch, golden, serving)
    assert golden.read_text().endswith(other_writer)  # their change survives


def test_a_broken_golden_file_stops_the_import_before_anything(tmp_path, batch, serving):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x"}\n')
    with pytest.raises(GoldenError):
        do_import(batch, broken, serving)
    assert broken.read_text() == '{"id": "x"}\n'


def test_existing_file_without_final_newline(tmp_path, golden, serving):
    golden.write_bytes(golden.read_bytes().rstrip(b"\n"))
    p = tmp_path / "q.csv"
    p.write_text("question,sql\nHow many open claims?,SELECT count(*) FROM claims WHERE status = 'open'\n")
    do_import(read_questions(p), golden, serving)
    assert [c.id for c in load_golden(golden).cases] == ["clm-001", "clm-002", "clm-003"]


def test_reimporting_the_same_file_adds_nothing(batch, golden, serving):
    do_import(batch, golden, serving)
    after_first = golden.read_bytes()
    again = do_import(batch, golden, serving)
    assert again.accepted == [] and golden.read_bytes() == after_first
    rej = {r.line: r.reason for r in again.rejected}
    assert rej[2].startswith("duplicate id 'clm-003'")  # rows with ids: by id
    assert rej[8].startswith("the question is already in the golden set as clm-011")  # without: by question


def test_translated_sql_is_frozen_and_the_original_kept_in_notes(tmp_path, golden, serving):
    p = tmp_path / "sf.csv"
    p.write_text('id,question,sql\nsf-001,Which claims are big?,"SELECT claim_id, IFF(amount > 100, '
                 "'big', 'small') AS size FROM claims ORDER BY claim_id\"\n")
    report = do_import(read_questions(p, dialect="snowflake"), golden, serving)
    (case,) = report.accepted
    assert case.expected.rows == [[1, "small"], [2, "big"], [3, "small"], [4, "small"]]
    assert "IFF" not in case.reference_sql
    assert ("transpiled from snowflake: SELECT claim_id, IFF(amount > 100, 'big', 'small') AS size "
            "FROM claims ORDER BY claim_id") in case.notes


def test_guard_refusals_are_explained(tmp_path, golden, serving):
    p = tmp_path / "q.csv"
    p.write_text('question,sql,alternatives\n'
                 'Delete them?,DELETE FROM claims,\n'
                 'Other schema?,SELECT * FROM other.claims,\n'
                 'Stacked?,SELECT 1; SELECT 2,\n'
                 'Bad alternative?,SELECT count(*) FROM claims,SELECT * FROM read_csv(\'x.csv\')\n'
                 'Postgres cast?,SELECT amount::numeric FROM claims WHERE amount ~ \'1\',\n')
    report = do_import(read_questions(p), golden, serving)
    rej = {r.line: r.reason for r in report.rejected}
    assert report.accepted == []
    assert "single read-only query" in rej[2] and "[guard: write_statement]" in rej[2]
    assert "if this table is served, drop the qualifier" in rej[3] and "serve.select" in rej[3]
    assert "put one query in sql" in rej[4]
    assert rej[5].startswith("alternative 1:")
    assert "x.csv" not in golden.read_text()


def test_spider_double_quoted_strings_get_a_hint(golden, serving):
    batch = read_questions(FIXTURES / "spider_dev.json")
    report = do_import(batch, golden, serving)
    accepted = {c.provenance.source: c for c in report.accepted}
    assert accepted["import:spider_dev.json:2"].expected.rows == [["south"]]
    rej = {r.line: r.reason for r in report.rejected}
    assert rej[3] == "query is missing or empty"
    assert "write string values in single quotes" in rej[4]
    # "How many claims do we have?" is new; spider's db_id goes to the notes
    assert accepted["import:spider_dev.json:1"].notes.startswith("db_id: claims_1")
    assert accepted["import:spider_dev.json:1"].expected.rows == [[4]]


def test_bird_difficulty_is_used_only_when_the_taxonomy_has_it(golden, serving, tmp_path):
    batch = read_questions(FIXTURES / "bird_dev.json")
    report = do_import(batch, golden, serving)
    assert report.rejected == []
    # the taxonomy has no BIRD label: inferred from the SQL (an aggregate; two ORDER BY … LIMIT 1)
    assert [c.difficulty for c in report.accepted] == ["simple_aggregate", "top_k", "top_k"]
    assert all("difficulty" in c.inferred for c in report.accepted)
    assert [c.facets for c in report.accepted] == [
        {"database": "claims_bird", "bird_difficulty": d} for d in ("moderate", "simple", "challenging")]
    assert {c.cluster for c in report.accepted} == {"claims_bird"}
    assert all("cluster" in c.inferred for c in report.accepted)
    other = tmp_path / "bird.jsonl"
    report = do_import(batch, other, serving, difficulties=("simple", "moderate", "challenging"),
                       default_difficulty="simple")
    assert [c.difficulty for c in report.accepted] == ["moderate", "simple", "challenging"]
    assert [c.expected.rows for c in report.accepted] == [[[0.25]], [["2024"]], [[2]]]


def test_bad_arguments_are_refused_before_anything(batch, golden, serving):
    with pytest.raises(ValueError, match="not in the taxonomy"):
        do_import(batch, golden, serving, default_difficulty="hard")
    with pytest.raises(ValueError, match="id prefix"):
        do_import(batch, golden, serving, id_prefix="Bad Prefix")
    with pytest.raises(ValueError, match="split"):
        do_import(batch, golden, serving, default_split="test")


def test_file_mode_is_kept(batch, golden, serving):
    os.chmod(golden, 0o640)
    do_import(batch, golden, serving)
    assert golden.stat().st_mode & 0o777 == 0o640


def test_a_refusal_on_an_unserved_relation_says_why_and_what_to_do(tmp_path, golden, serving):
    from sqleval_pipeline.golden.importing import unservable_reasons

    p = tmp_path / "q.csv"
    p.write_text('question,sql\n'
                 'Adjuster pay?,SELECT avg(salary) FROM restricted.adjuster_pay\n'
                 'Adjuster pay bare?,SELECT avg(salary) FROM adjuster_pay\n'
                 'Staging claims?,SELECT count(*) FROM stg_claims\n'
                 'Unknown?,SELECT count(*) FROM nowhere\n'
                 '"CTE named like it?","WITH adjuster_pay AS (SELECT 1 AS x) '
                 'SELECT * FROM adjuster_pay, stg_claims"\n')
    unservable = unservable_reasons([("restricted", "adjuster_pay", "unselected"),
                                     ("staging", "stg_claims", "unselected")], ["restricted"])
    report = do_import(read_questions(p), golden, serving, unservable=unservable)
    rej = {r.line: r.reason for r in report.rejected}
    assert sorted(rej) == [2, 3, 4, 5, 6]
    # the CTE is not the sensitive model: the refusal names the relation really read
    assert "stg_claims" in rej[6] and "adjuster_pay" not in rej[6], rej[6]
    for line in (2, 3):   # a sensitive schema: never "add it to serve.select"
        assert "sensitive schema 'restricted'" in rej[line] and "should_refuse" in rej[line], rej[line]
        assert "serve.select" not in rej[line]
    assert "outside the served selection (staging.stg_claims)" in rej[4] and "serve.select" in rej[4]
    assert "is not served by the snapshot" in rej[5] and "served tables (claims)" in rej[5]
