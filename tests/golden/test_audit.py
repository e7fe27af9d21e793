"""``sqleval golden audit``: each reference answered through the guard and graded against its
own case, three runs, plus the weak-reference checks.

The serving file is a tiny DuckDB built here (8 orders, listed in ``ORDERS``); every expected
finding below was worked out by hand from those rows, the as-of date 2025-12-15, the clock
shifts of ±400 days and a guard row cap of 10 (so "near the cap" is 8 rows or more).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import duckdb
import pytest
import yaml

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.golden.audit import (
    CODES, AuditReport, _explained_by_tie, audit_cases, relative_time_phrase, unordered_cuts, weak_result,
)
from sqleval_pipeline.golden.freeze import freeze_cases
from sqleval_pipeline.golden.loader import write_cases
from sqleval_pipeline.golden.model import Case, Expected, TieAtCut
from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.guard.policy import load_policy
from sqleval_pipeline.results import ResultSet
from tests.golden.conftest import sqleval

AS_OF = dt.date(2025, 12, 15)
ORDERS = [  # order_id, city, amount, order_date, status
    (1, "Pune", "100.00", "2025-12-10", "delivered"),
    (2, "Pune", "50.00", "2025-12-01", "delivered"),
    (3, "Delhi", "75.00", "2025-11-20", "cancelled"),
    (4, "Delhi", "20.00", "2025-06-01", "delivered"),
    (5, "Mumbai", "20.00", "2025-01-05", "delivered"),
    (6, "Mumbai", "30.00", "2024-12-31", "returned"),
    (7, "Chennai", "30.00", "2024-05-05", "delivered"),
    (8, "Kochi", "40.00", "2024-03-03", "delivered"),
]
REF, ALT0 = "reference_sql", "alternative_sqls[0]"


def make_snapshot(root: Path):
    """(serving path, manifest, manifest dir, build dir): ``orders`` served, ``secrets`` in the
    file but not served (the guard refuses it; freezing, which trusts references, reads it)."""
    build = root / "build.duckdb"
    con = duckdb.connect(str(build))
    con.execute("CREATE TABLE main.orders(order_id INTEGER, city VARCHAR, amount DECIMAL(10,2), "
                "order_date DATE, status VARCHAR)")
    con.executemany("INSERT INTO main.orders VALUES (?, ?, ?, ?, ?)", ORDERS)
    con.execute("CREATE TABLE main.secrets(k INTEGER)")
    con.execute("INSERT INTO main.secrets VALUES (1), (2)")
    tables = {"orders": snap.table_fingerprint(con, "main.orders")}
    con.close()
    sid = snap.compute_snapshot_id(AS_OF, tables)
    home = root / "build"
    (home / "snapshots").mkdir(parents=True)
    path = snap.serving_path(home / "snapshots", sid)
    build.rename(path)
    manifest = snap.SnapshotManifest(snapshot_id=sid, as_of=AS_OF, source_schemas=["marts"],
                                     tables=tables)
    manifest_dir = root / "snapshots"
    manifest_dir.mkdir()
    manifest.to_file(snap.manifest_path(manifest_dir, sid))
    snap.write_pinned(manifest_dir, sid)
    return path, manifest, manifest_dir, home


def case(cid: str, question: str, sql: str | None, *, alts=(), order_matters=False,
         status="verified", band="answerable") -> Case:
    return Case.model_validate({
        "id": cid, "question": question, "reference_sql": sql, "alternative_sqls": list(alts),
        "difficulty": "simple_aggregate", "band": band, "order_matters": order_matters,
        "cluster": "orders", "split": "dev", "status": status,
        "provenance": {"source": "test", "author": "me", "reviewer": "you"}})


def golden_cases(serving: Path, sid: str) -> list[Case]:
    """Every case of the audit, frozen the way `golden freeze` does, then the hand-made ones."""
    frozen = freeze_cases([
        case("clean", "How many orders were delivered?",
             "SELECT count(*) AS n FROM orders WHERE status = 'delivered'",
             alts=["SELECT count(order_id) AS n FROM orders WHERE status = 'delivered'"]),
        case("alt-refused", "How many orders came from Pune?",
             "SELECT count(*) AS n FROM orders WHERE city = 'Pune'",
             alts=["SELECT count(*) AS n FROM secrets"]),
        case("empty", "Which orders came from Goa?", "SELECT order_id FROM orders WHERE city = 'Goa'"),
        case("single-null", "What is the largest amount of an order from Goa?",
             "SELECT max(amount) AS m FROM orders WHERE city = 'Goa'"),
        case("all-zero", "How many orders were shipped to Goa?",
             "SELECT count(*) AS n FROM orders WHERE city = 'Goa'"),
        case("near-cap", "List every order id.", "SELECT order_id FROM orders"),
        case("truncated", "List every pair of orders.",
             "SELECT a.order_id AS a, b.order_id AS b FROM orders a, orders b"),
        case("tampered", "How many orders were returned?",
             "SELECT count(*) AS n FROM orders WHERE status = 'returned'"),
        case("clock-no-words", "How many orders have been placed?",
             "SELECT count(*) AS n FROM orders WHERE order_date <= current_date"),
        case("words-no-clock", "How many orders were placed last month?",
             "SELECT count(*) AS n FROM orders WHERE order_date >= DATE '2025-11-01' "
             "AND order_date < DATE '2025-12-01'"),
        case("last-30", "How many orders were placed in the last 30 days?",
             "SELECT count(*) AS n FROM orders WHERE order_date > current_date - INTERVAL 30 DAY "
             "AND order_date <= current_date"),
        case("limit-no-order", "Name one city with a delivered order.",
             "SELECT city FROM orders WHERE status = 'delivered' LIMIT 1"),
        case("random", "Pick a random number for order 1.",
             "SELECT order_id, random() AS r FROM orders WHERE order_id = 1"),
        case("tie", "Which 2 cities have the most delivered orders?",
             "SELECT city, count(*) AS n FROM orders WHERE status = 'delivered' GROUP BY city "
             "ORDER BY n DESC LIMIT 2", order_matters=True),
        case("rank", "Rank cities by delivered orders, most first.",
             "SELECT city, count(*) AS n FROM orders WHERE status = 'delivered' GROUP BY city "
             "ORDER BY n DESC", order_matters=True),
        case("other-snapshot", "How many orders were cancelled?",
             "SELECT count(*) AS n FROM orders WHERE status = 'cancelled'"),
    ], serving, sid, AS_OF)
    by_id = {c.id: c for c in frozen}
    # one delivered row too many: the reference no longer matches what was "frozen"
    by_id["tampered"] = by_id["tampered"].model_copy(update={"expected": Expected(
        columns=["n"], types=["BIGINT"], rows=[[2]])})
    by_id["other-snapshot"] = by_id["other-snapshot"].model_copy(update={"snapshot_id": "snap-000000000000"})
    # Pune (2) is kept; Chennai, Delhi, Kochi and Mumbai (1 each) tie at the cut: any one may be kept
    tie = TieAtCut(keys=["n"], before=1, take=1,
                   rows=[["Chennai", 1], ["Delhi", 1], ["Kochi", 1], ["Mumbai", 1]])
    assert by_id["tie"].expected.tie.model_dump(exclude={"rows"}) == tie.model_dump(exclude={"rows"})
    assert sorted(by_id["tie"].expected.tie.rows) == tie.rows
    hand = [
        case("sql-error", "What is the city number of each order?",
             "SELECT CAST(city AS INTEGER) AS n FROM orders").model_copy(update={
                 "expected": Expected(columns=["n"], types=["INTEGER"], rows=[[1]]), "snapshot_id": sid}),
        case("not-frozen", "How many orders are there?", "SELECT count(*) AS n FROM orders"),
        case("unreviewed", "How many orders from Kochi?", "SELECT count(*) AS n FROM orders "
             "WHERE city = 'Kochi'", status="unverified"),
        case("refuse", "What is the card number of order 1?", None, band="should_refuse"),
    ]
    return [*by_id.values(), *hand]


#: case -> {(code, reading)}, worked out by hand (see each case's comment in golden_cases)
EXPECTED = {
    "clean": set(),
    "alt-refused": {("refused_by_guard", ALT0)},
    "empty": {("empty_result", REF)},
    "single-null": {("single_null", REF)},
    "all-zero": {("all_zero", REF)},
    "near-cap": {("near_row_cap", REF)},                       # 8 rows >= 0.8 x 10
    "truncated": {("truncated_by_cap", REF), ("near_row_cap", REF)},   # 64 rows, cap 10
    "tampered": {("not_self_consistent", REF), ("not_reproduced", REF)},
    # 8 orders on or before 2025-12-15, 2 on or before 2024-11-10 (400 days earlier)
    "clock-no-words": {("clock_dependent_without_relative_time", REF)},
    "words-no-clock": {("relative_time_ignores_clock", REF)},
    "last-30": set(),                                          # 3 orders; 0 at +400 days
    "limit-no-order": {("limit_without_order", REF)},
    "random": {("not_self_consistent", REF), ("nondeterministic_values", REF), ("not_reproduced", REF)},
    "tie": {("tie_at_cut", REF)},
    "rank": set(),
    "other-snapshot": {("other_snapshot", None)},
    "sql-error": {("sql_error", REF), ("not_reproduced", REF)},
    "not-frozen": {("not_frozen", None)},
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit")
    serving, manifest, manifest_dir, home = make_snapshot(root)
    cases = golden_cases(serving, manifest.snapshot_id)
    policy = load_policy(overrides={"limits": {"row_cap": 10}}, served=list(manifest.tables))
    with GuardedExecutor(serving, as_of=AS_OF, policy=policy) as guard:
        report = audit_cases(cases, serving=serving, snapshot_id=manifest.snapshot_id, as_of=AS_OF,
                             guard=guard)
        yield {"root": root, "serving": serving, "manifest": manifest, "manifest_dir": manifest_dir,
               "home": home, "cases": cases, "guard": guard, "report": report}


def found(report: AuditReport) -> dict[str, set]:
    return {c.case_id: {(f.code, f.reading) for f in c.findings} for c in report.cases}


def test_every_flag_is_raised_where_worked_out_and_nowhere_else(world):
    assert found(world["report"]) == EXPECTED


def test_unreviewed_and_should_refuse_cases_are_skipped_with_the_reason(world):
    skipped = {s.case_id: s for s in world["report"].skipped}
    assert sorted(skipped) == ["refuse", "unreviewed"]
    assert skipped["unreviewed"].code == "unreviewed" and "status unverified" in skipped["unreviewed"].detail
    assert skipped["refuse"].code == "should_refuse"
    assert "unreviewed" not in {c.case_id for c in world["report"].cases}


def test_findings_carry_check_severity_and_a_readable_detail(world):
    by = {(c.case_id, f.code): f for c in world["report"].cases for f in c.findings}
    for f in by.values():
        assert (f.check, f.severity) == CODES[f.code][:2] and f.detail
    assert "all 3 runs" in by["alt-refused", "refused_by_guard"].detail
    assert "secrets" in by["alt-refused", "refused_by_guard"].detail
    assert "truncated by the result cap at 10 rows" in by["truncated", "truncated_by_cap"].detail
    assert "64 rows" in by["truncated", "near_row_cap"].detail
    assert "guard's row cap (10)" in by["near-cap", "near_row_cap"].detail
    clock = by["clock-no-words", "clock_dependent_without_relative_time"].detail
    assert "2024-11-10" in clock and "[8] → [2]" in clock
    assert "'last month'" in by["words-no-clock", "relative_time_ignores_clock"].detail
    assert "4 rows tied on n" in by["tie", "tie_at_cut"].detail
    assert "any 1 of the 4" in by["tie", "tie_at_cut"].detail
    assert "LIMIT 1 without ORDER BY" in by["limit-no-order", "limit_without_order"].detail
    assert "snap-000000000000" in by["other-snapshot", "other_snapshot"].detail
    assert "sql_error:" in by["sql-error", "sql_error"].detail


def test_report_counts_and_exit_codes(world):
    report = world["report"]
    codes = Counter(code for s in EXPECTED.values() for code, _ in s)
    assert report.codes() == codes
    assert report.errors == sum(n for c, n in codes.items() if CODES[c][1] == "error") == 11
    assert report.warnings == 9
    assert report.exit_code() == 1 and report.exit_code(strict=True) == 1
    readings = 18 + 2  # 18 audited cases; clean and alt-refused have one alternative each
    assert report.queries == readings * 3
    assert [c.case_id for c in report.flagged()][:7] == [
        "alt-refused", "truncated", "tampered", "random", "other-snapshot", "sql-error", "not-frozen"]
    # a report with warnings only passes, unless strict
    only_warnings = report.model_copy(update={"cases": [c for c in report.cases if not c.errors]})
    assert only_warnings.warnings == 9 - 1 and only_warnings.exit_code() == 0
    assert only_warnings.exit_code(strict=True) == 1
    round_trip = AuditReport.model_validate_json(report.model_dump_json())
    assert found(round_trip) == EXPECTED


class _Reordering:
    """The real guard, with the rows of every second execution of a text rearranged."""

    def __init__(self, guard, rearrange):
        self.guard, self.rearrange = guard, rearrange
        self.policy, self.pool = guard.policy, guard.pool
        self.calls: Counter = Counter()

    def execute(self, sql, **kw):
        res = self.guard.execute(sql, **kw)
        self.calls[sql] += 1
        if self.calls[sql] == 2 and res.result is not None:
            rs = res.result
            res.result = ResultSet(columns=rs.columns, types=rs.types, rows=self.rearrange(rs.rows))
        return res

    def log_reuse(self, res, extra):
        self.guard.log_reuse(res, extra)


@pytest.mark.parametrize("rearrange, expected", [
    # Pune (2 delivered orders) moves from first to last: an order change beyond the tie
    (lambda rows: rows[::-1], {("nondeterministic_order", REF), ("not_self_consistent", REF)}),
    # only the four cities tied on n = 1 change places: allowed by the order keys
    (lambda rows: rows[:1] + rows[1:][::-1], set()),
    # a different row: the values differ
    (lambda rows: [*rows[:-1], ["Goa", 1]], {("nondeterministic_values", REF),
                                             ("not_self_consistent", REF)}),
])
def test_runs_that_disagree(world, rearrange, expected):
    rank = [c for c in world["cases"] if c.id == "rank"]
    assert [r[1] for r in rank[0].expected.rows] == [2, 1, 1, 1, 1]
    report = audit_cases(rank, serving=world["serving"], snapshot_id=world["manifest"].snapshot_id,
                         as_of=AS_OF, guard=_Reordering(world["guard"], rearrange))
    assert found(report) == {"rank": expected}
    if expected:
        run = next(f for f in report.cases[0].findings if f.code == "not_self_consistent")
        assert run.detail.startswith("run 2 of 3:")


def test_a_tie_group_explains_runs_that_keep_different_tied_rows():
    types = ["VARCHAR", "BIGINT"]
    tie = TieAtCut(keys=["n"], before=1, take=1, rows=[["Chennai", 1], ["Delhi", 1], ["Kochi", 1]])
    a = ResultSet(columns=["city", "n"], types=types, rows=[["Pune", 2], ["Chennai", 1]])
    b = ResultSet(columns=["city", "n"], types=types, rows=[["Pune", 2], ["Kochi", 1]])
    c = ResultSet(columns=["city", "n"], types=types, rows=[["Delhi", 1], ["Kochi", 1]])
    assert _explained_by_tie(a, b, tie, types)
    assert not _explained_by_tie(a, c, tie, types)   # Pune is outside the group: it must stay
    assert not _explained_by_tie(a, b, None, types)


@pytest.mark.parametrize("question, phrase", [
    ("How many orders were placed today?", "today"),
    ("Revenue yesterday by city", "yesterday"),
    ("Orders this week", "this week"),
    ("Returns in the past 12 months", "past 12 months"),
    ("Net revenue for the previous quarter", "previous quarter"),
    ("Signups over the last two full weeks", "last two full weeks"),
    ("Revenue YTD", "YTD"),
    ("Month-to-date refunds", "Month-to-date"),
    ("How many recent orders were cancelled?", "recent"),
    ("Orders placed 3 days ago", "ago"),
    ("What is the current stock?", "current"),
    ("How many orders so far?", "so far"),
    ("What was revenue in November 2025?", None),
    ("What is our total revenue to date?", None),
    ("How many products are in the catalogue?", None),
    ("Which month had the most orders?", None),
])
def test_relative_time_wording(question, phrase):
    assert relative_time_phrase(question) == phrase


@pytest.mark.parametrize("sql, cuts", [
    ("SELECT a FROM t LIMIT 3", ["LIMIT 3"]),
    ("SELECT a FROM t ORDER BY a LIMIT 3", []),
    ("SELECT a FROM t UNION ALL SELECT b FROM u LIMIT 3", ["LIMIT 3"]),
    ("SELECT a FROM t OFFSET 2", ["OFFSET 2"]),
    ("SELECT * FROM (SELECT a FROM t LIMIT 2) s ORDER BY a", ["LIMIT 2"]),
    ("SELECT a FROM t WHERE b IN (SELECT b FROM u LIMIT 1) ORDER BY a LIMIT 5", ["LIMIT 1"]),
    ("SELECT count(*) FROM t LIMIT 1", []),
    ("SELECT a, count(*) FROM t GROUP BY a LIMIT 1", ["LIMIT 1"]),
    ("SELECT a, row_number() OVER (ORDER BY a) FROM t LIMIT 1", ["LIMIT 1"]),
    ("(SELECT a FROM t LIMIT 4)", ["LIMIT 4"]),
    ("WITH x AS (SELECT a FROM t LIMIT 2) SELECT a FROM x ORDER BY a", ["LIMIT 2"]),
])
def test_unordered_cuts(sql, cuts):
    assert unordered_cuts(sql) == cuts


def test_weak_results():
    def rs(types, rows):
        return ResultSet(columns=[f"c{i}" for i in range(len(types))], types=types, rows=rows)

    assert weak_result(rs(["BIGINT"], []))[0] == "empty_result"
    assert weak_result(rs(["VARCHAR", "DOUBLE"], [[None, None]]))[0] == "single_null"
    assert weak_result(rs(["VARCHAR", "BIGINT"], [["a", 0], ["b", 0]]))[0] == "all_zero"
    assert weak_result(rs(["DOUBLE", "BIGINT"], [[0.0, None]]))[0] == "all_zero"
    assert weak_result(rs(["BIGINT", "BIGINT"], [[None, 1]])) is None     # one NULL, not all
    assert weak_result(rs(["VARCHAR"], [["a"]])) is None                  # no number at all
    assert weak_result(rs(["BOOLEAN"], [[False]])) is None                # a boolean is no number
    assert weak_result(rs(["BIGINT"], [[0], [1]])) is None


# --------------------------------------------------------------------------- the real CLI


@pytest.fixture(scope="module")
def cli_project(world):
    """A project over the audit's snapshot: ``ok.jsonl`` (a clean case and a warning),
    ``bad.jsonl`` (an error) in separate folders."""
    root = world["root"] / "project"
    for name in ("ok", "bad"):
        (root / name).mkdir(parents=True)
    by_id = {c.id: c for c in world["cases"]}
    write_cases(root / "ok" / "ok.jsonl", [by_id["clean"], by_id["words-no-clock"], by_id["unreviewed"]])
    write_cases(root / "bad" / "bad.jsonl", [by_id["clean"], by_id["sql-error"]])
    (root / "guard_policy.yaml").write_text("version: 1\nlimits:\n  row_cap: 10\n")
    spec = {"name": "audit-test", "as_of": AS_OF.isoformat(),
            "paths": {"golden": "ok", "snapshots": str(world["manifest_dir"]),
                      "build": str(world["home"]), "guard_policy": "guard_policy.yaml"}}
    (root / "sqleval.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return root


def test_cli_warnings_pass_unless_strict(cli_project, tmp_path):
    out = tmp_path / "audit.json"
    proc = sqleval(cli_project, "golden", "audit", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "words-no-clock" in proc.stdout and "relative_time_ignores_clock" in proc.stdout
    assert "unreviewed" in proc.stdout and "skipped" in proc.stdout
    assert "audited 2 case(s) (9 guarded runs, 3 per reading)" in " ".join(proc.stdout.split())
    data = json.loads(out.read_text())
    assert {c["case_id"]: [f["code"] for f in c["findings"]] for c in data["cases"]} == {
        "clean": [], "words-no-clock": ["relative_time_ignores_clock"]}
    assert data["skipped"][0]["case_id"] == "unreviewed"

    strict = sqleval(cli_project, "golden", "audit", "--strict")
    assert strict.returncode == 1 and "--strict" in strict.stderr

    only = sqleval(cli_project, "golden", "audit", "--strict", "--cases", "clean")
    assert only.returncode == 0, only.stdout + only.stderr
    assert "words-no-clock" not in only.stdout


def test_cli_errors_fail(cli_project):
    proc = sqleval(cli_project, "golden", "audit", "--golden", str(cli_project / "bad"))
    assert proc.returncode == 1
    text = " ".join(proc.stdout.split())
    assert "sql-error" in text and "sql_error" in text and "not_reproduced" in text
    unknown = sqleval(cli_project, "golden", "audit", "--cases", "clean,nope")
    assert unknown.returncode == 1 and "unknown case id(s): nope" in unknown.stderr


def test_golden_freeze_says_where_the_limit_cuts_a_tie(cli_project):
    """`sqleval golden freeze` records the tie group and says so (a note per tie), as import does."""
    from sqleval_pipeline.golden.loader import load_golden

    folder = cli_project / "ties"
    folder.mkdir()
    tie = next(c for c in load_golden(cli_project / "bad" / "bad.jsonl").cases if c.id == "clean")
    # the audit's 'tie' case: Pune (2 orders) first, then four cities tied at 1 for one place
    write_cases(folder / "ties.jsonl", [tie.model_copy(update={
        "id": "tie", "expected": None, "order_matters": True,
        "reference_sql": "SELECT city, count(*) AS n FROM orders WHERE status = 'delivered' "
                         "GROUP BY city ORDER BY n DESC LIMIT 2"})])
    proc = sqleval(cli_project, "golden", "freeze", "--golden", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: tie reference_sql: the LIMIT cuts through 4 rows tied on n" in " ".join(proc.stderr.split())
    assert "1 note(s) above" in proc.stdout
    frozen = load_golden(folder / "ties.jsonl").cases[0]
    assert frozen.expected.tie is not None and frozen.expected.tie.take == 1
    assert len(frozen.expected.tie.rows) == 4
