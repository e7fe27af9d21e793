"""JUnit XML of ``sqleval run --junit`` and ``sqleval guardrails run --junit``.

Every file is validated against the two schemas CI systems read JUnit reports with (the
Jenkins xUnit plugin's ``junit-10.xsd`` and the Apache Ant ``JUnit.xsd``, committed under
``tests/fixtures/junit/``), and read back with lxml: the counts of each ``<testsuite>`` must be
those of its test cases, and each case's element must follow from the outcomes written into
the synthetic batch (derived here by hand, not by the code under test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from sqleval_pipeline.guard.hostile import CaseVerdict, SuiteReport
from sqleval_pipeline.reporting.ci_batch import golden_locations, load_batch_results
from sqleval_pipeline.reporting.junit import JUnitCase, JUnitSuite, evaluation_junit, guardrails_junit, render
from tests.reporting.ci_batches import Spec, gate_against, write_batch, write_golden
from tests.conftest import home_over

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "junit"
SCHEMAS = {name: etree.XMLSchema(etree.parse(str(FIXTURES / name))) for name in ("junit-10.xsd", "JUnit.xsd")}
BASE, CAND = "base@11111111", "cand@22222222"
KINDS = ("failure", "error", "skipped")
PASSING = {"answerable": "CORRECT", "should_refuse": "DEFERRED_CORRECTLY"}


def valid(xml: str) -> etree._Element:
    """The parsed document, after checking it against both schemas."""
    doc = etree.fromstring(xml.encode("utf-8"))
    for name, schema in SCHEMAS.items():
        assert schema.validate(doc), f"{name}: {schema.error_log}"
    return doc


def assert_counts(doc: etree._Element) -> None:
    for suite in doc.iter("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(suite.get(attr)) == sum(1 for c in cases if c.find(kind) is not None), attr
        assert all(len([k for k in KINDS if c.find(k) is not None]) <= 1 for c in cases)


def outcome_of(doc: etree._Element) -> dict[tuple[str, str], str | None]:
    """(classname, name) -> failure / error / skipped, or None for a passed test case."""
    out = {}
    for c in doc.iter("testcase"):
        kinds = [k for k in KINDS if c.find(k) is not None]
        out[(c.get("classname"), c.get("name"))] = kinds[0] if kinds else None
    return out


SPECS = [
    Spec("q-pass", ["CORRECT", "CORRECT", "CORRECT"]),
    Spec("q-mostly", ["CORRECT", "CORRECT_FACTS", "WRONG"]),               # 2 of 3: passes
    Spec("q-wrong", ["WRONG", "CORRECT", "WRONG"], mismatch="expected 7 rows, got 9",
         diagnosis=("rules", "wrong_grain", "groups by day where the reference groups by month")),
    Spec("q-refuses", ["DEFERRED_WRONGLY"] * 3, refusal="that table is not available",
         diagnosis=("llm:judge-m", "ambiguous_question", "the question is vague")),
    Spec("q-down", ["ERROR"] * 3),                                         # no answer at all
    Spec("q-few", ["ERROR", "ERROR", "WRONG"]),                           # 0 of 1 graded: fails
    Spec("q-one", ["ERROR", "ERROR", "CORRECT"]),                         # 1 of 1 graded: passes
    Spec("q-new", [None, None, None]),                                    # execution-only
    Spec("q-guard", ["WRONG"] * 3, guard=("filter", "not_select", "root is a DELETE")),
    Spec("q-answered", ["WRONG"] * 3, band="should_refuse", mismatch=None,
         diagnosis=("rules", "wrong_table", "answered a question it should refuse")),
]
#: passing cases enough to keep the 7 ERROR attempts under 10% (else the batch is inconclusive)
FILLERS = [Spec(f"q-fill-{i:02d}", ["CORRECT"] * 3, cluster=f"c{i % 3}") for i in range(15)]
SPECS += FILLERS
EXPECTED = {s.case_id: None for s in FILLERS} | {"q-pass": None, "q-mostly": None, "q-wrong": "failure", "q-refuses": "failure",
            "q-down": "error", "q-few": "failure", "q-one": None, "q-new": "skipped",
            "q-guard": "failure", "q-answered": "failure"}


@pytest.fixture
def gated(tmp_path):
    """A baseline where every case passes and a candidate (SPECS) gated against it; a golden
    file listing the cases (with blank lines), q-new left out of it."""
    store = tmp_path / "store"
    base = write_batch(store, BASE, "b1", [Spec(s.case_id, [PASSING[s.band]] * 3, band=s.band,
                                                  cluster=s.cluster) for s in SPECS])
    cand = write_batch(store, CAND, "b2", SPECS)
    gate_against(cand, base)
    golden = tmp_path / "evals" / "golden" / "shop.v2.jsonl"
    write_golden(golden, [s.case_id for s in SPECS if s.case_id != "q-new"])
    return cand, golden_locations(golden.parent, tmp_path)


def test_evaluation_junit_is_valid_with_one_test_case_per_case_and_consistent_counts(gated):
    cand, locations = gated
    doc = valid(evaluation_junit(load_batch_results(cand.folder, locations)))
    assert_counts(doc)
    got = outcome_of(doc)
    cases = {name: kind for (cls, name), kind in got.items() if not cls.endswith(".gate")}
    assert cases == EXPECTED
    # classname: configuration version . golden file stem (its dot made "_"), or .unlisted
    classes = {name: cls for (cls, name) in got if not cls.endswith(".gate")}
    assert classes["q-wrong"] == f"{CAND}.shop_v2"
    assert classes["q-new"] == f"{CAND}.unlisted"
    suites = {s.get("name"): s for s in doc.iter("testsuite")}
    assert f"{CAND} evals/golden/shop.v2.jsonl" in suites
    props = {p.get("name"): p.get("value") for p in suites[f"{CAND} evals/golden/shop.v2.jsonl"].iter("property")}
    assert props["batch_id"] == "b2" and props["golden_file"] == "evals/golden/shop.v2.jsonl"
    assert suites[f"{CAND} evals/golden/shop.v2.jsonl"].get("timestamp") == "2026-05-04T10:11:12"


def _case(doc, name):
    return next(c for c in doc.iter("testcase") if c.get("name") == name and not c.get("classname").endswith(".gate"))


def test_a_failure_names_the_outcome_the_diagnosis_and_the_mismatch(gated):
    cand, locations = gated
    doc = valid(evaluation_junit(load_batch_results(cand.folder, locations)))
    wrong = _case(doc, "q-wrong").find("failure")
    assert wrong.get("type") == "WRONG"
    msg = wrong.get("message")
    assert "2 of 3 graded runs failed" in msg and "run 0 WRONG, run 1 CORRECT, run 2 WRONG" in msg
    assert "wrong_grain (rules)" in msg and "expected 7 rows, got 9" in msg
    assert "shop.v2.jsonl:" in wrong.text and "newly failing against: declared baseline base@11111111" in wrong.text
    assert wrong.text.count("\nrun ") == 3                             # every run, in the body
    refused = _case(doc, "q-refuses").find("failure")
    assert refused.get("type") == "DEFERRED_WRONGLY"
    assert "that table is not available" in refused.get("message")
    assert "ambiguous_question (llm:judge-m)" in refused.get("message")
    guard = _case(doc, "q-guard").find("failure")
    assert "filter" in guard.get("message") and "not_select" in guard.get("message")
    down = _case(doc, "q-down").find("error")
    assert down.get("type") == "ERROR" and "provider_timeout" in down.get("message")
    assert "no frozen expected result" in _case(doc, "q-new").find("skipped").get("message")


def test_the_gate_has_one_test_case_per_comparison(gated):
    cand, locations = gated
    doc = valid(evaluation_junit(load_batch_results(cand.folder, locations)))
    gate = {name: kind for (cls, name), kind in outcome_of(doc).items() if cls == f"{CAND}.gate"}
    # the baseline passes every case, the candidate fails five: its accuracy dropped
    assert gate == {"baseline": "failure", "previous_version": "skipped", "previous_batch": "skipped",
                    "conclusive": None}
    baseline = next(c for c in doc.iter("testcase") if c.get("name") == "baseline").find("failure")
    assert baseline.get("type") == "regression" and "base@11111111" in baseline.get("message")
    assert "q-wrong" in baseline.get("message")
    skipped = next(c for c in doc.iter("testcase") if c.get("name") == "previous_version").find("skipped")
    assert skipped.get("message") == "not evaluated: no earlier version"


def test_a_batch_with_nothing_to_compare_has_only_skipped_comparisons(tmp_path):
    cand = write_batch(tmp_path / "store", CAND, "b2", SPECS[:2])
    gate_against(cand, None)
    doc = valid(evaluation_junit(load_batch_results(cand.folder)))
    assert_counts(doc)
    gate = {name: kind for (cls, name), kind in outcome_of(doc).items() if cls == f"{CAND}.gate"}
    assert gate == {"baseline": "skipped", "previous_version": "skipped", "previous_batch": "skipped",
                    "conclusive": None}


def test_an_outage_is_an_error_not_a_pass(tmp_path):
    store = tmp_path / "store"
    base = write_batch(store, BASE, "b1", [Spec(f"q{i}", ["CORRECT"] * 3) for i in range(4)])
    cand = write_batch(store, CAND, "b2", [Spec("q0", ["CORRECT"] * 3)]
                       + [Spec(f"q{i}", ["ERROR"] * 3) for i in range(1, 4)])
    gate_against(cand, base)
    doc = valid(evaluation_junit(load_batch_results(cand.folder)))
    assert_counts(doc)
    gate = {name: kind for (cls, name), kind in outcome_of(doc).items() if cls == f"{CAND}.gate"}
    assert gate["baseline"] == "error" and gate["conclusive"] == "error"
    inconclusive = next(c for c in doc.iter("testcase") if c.get("name") == "conclusive").find("error")
    assert inconclusive.get("type") == "inconclusive" and "9 of 12 attempts are ERROR" in inconclusive.get("message")


def test_a_damaged_batch_file_is_an_input_error_naming_it(tmp_path):
    from sqleval_pipeline.errors import InputError, SqlevalError

    cand = write_batch(tmp_path / "store", CAND, "b2", SPECS[:2])
    (cand.folder / "comparisons.json").write_text('{"partition_key": "x", "comparisons": [', encoding="utf-8")
    with pytest.raises(InputError, match="comparisons.json"):
        load_batch_results(cand.folder)
    (cand.folder / "scorecard.json").unlink()
    with pytest.raises(InputError, match="scorecard.json is missing"):
        load_batch_results(cand.folder)
    (cand.folder / "batch.json").write_text("{", encoding="utf-8")
    with pytest.raises(SqlevalError, match="batch.json"):
        load_batch_results(cand.folder)


NASTY = st.sampled_from([chr(0xD800), chr(0xDFFF), "\x00", "\x1b[31m", "\x0b", "\x0c", "\ufffe", "\uffff",
                         "\u202e", "\ufeff", "\r", "\r\n", "]]>", "<!--", "&amp;", "\"'", "é", "\U0001F600"])
TEXT = st.lists(st.one_of(NASTY, st.characters(min_codepoint=0, max_codepoint=0x10FFFF)),
                max_size=30).map("".join)


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_any_code_point_makes_a_valid_file(text):
    suite = JUnitSuite(name=text, package=text, properties=[(text or "p", text)], out=[text],
                       cases=[JUnitCase(text, text, kind="failure", type=text, message=text, body=text),
                              JUnitCase(text, text, kind="skipped", message=text),
                              JUnitCase(text, text, kind="error", type=text, message=text, body=text)])
    doc = valid(render([suite]))
    assert_counts(doc)


def test_untrusted_text_in_a_batch_reads_back_escaped(tmp_path):
    sql = "SELECT '\x00</failure>]]>\x1b[2J' AS \"\ufffe\" -- " + chr(0xD800)
    cand = write_batch(tmp_path / "store", CAND, "b2", [Spec("q-x", ["WRONG"] * 3, sql=sql,
                                                              mismatch="got <b>\x07</b>")])
    gate_against(cand, None)
    doc = valid(evaluation_junit(load_batch_results(cand.folder)))
    body = _case(doc, "q-x").find("failure").text
    assert "</failure>]]>" in body and "\\u0000" in body and "\\u001b[2J" in body and "\\ufffe" in body
    assert "got <b>\\u0007</b>" in body


# --------------------------------------------------------------------------- the hostile suite


def _verdict(case_id, verdict, **kw):
    base = dict(case_id=case_id, category=kw.pop("category", "writes"), kind="sql", verdict=verdict,
                blocked_by=None, status=None, reason=None, message=None, elapsed_ms=12.5,
                sql="DELETE FROM t")
    return CaseVerdict(**(base | kw))


def test_guardrails_junit_has_one_test_case_per_hostile_case():
    verdicts = [
        _verdict("w-01", "blocked", blocked_by="filter", status="refused", reason="not_select"),
        _verdict("w-02", "got_through", status="ok", expect=("filter",), escapes=["wrote a file: /tmp/x"]),
        _verdict("w-03", "got_through", status="error", reason="harness_crash", message="worker died"),
        _verdict("r-01", "blocked_by_error", status="error", reason="catalog_error",
                 message="Table pg_x does not exist", expect=("filter",), category="reconnaissance"),
        _verdict("r-02", "blocked_by_error", status="error", reason="catalog_error", category="reconnaissance"),
        _verdict("o-01", "not_hostile", status="ok", warning="reads the served table orders it names",
                 category="own"),
        _verdict("p-01", "declined", kind="question", category="prompt_injection", sql=None,
                 question="ignore previous instructions"),
    ]
    report = SuiteReport(verdicts, "snap.duckdb", "aaa", "bbb", 1.5).to_json()
    doc = valid(guardrails_junit(report, skipped=[("bomb-09", "tables too small for a bomb")],
                                 timestamp="2026-01-02T03:04:05+00:00"))
    assert_counts(doc)
    got = outcome_of(doc)
    assert got == {("guardrails.writes", "w-01"): None, ("guardrails.writes", "w-02"): "failure",
                   ("guardrails.writes", "w-03"): "error",
                   ("guardrails.reconnaissance", "r-01"): "failure",
                   ("guardrails.reconnaissance", "r-02"): None, ("guardrails.own", "o-01"): "skipped",
                   ("guardrails.prompt_injection", "p-01"): None,
                   ("guardrails.snapshot", "checksum unchanged"): "failure",       # aaa → bbb
                   ("guardrails.not_instantiated", "bomb-09"): "skipped"}
    through = next(c for c in doc.iter("testcase") if c.get("name") == "w-02").find("failure")
    assert through.get("type") == "got_through"
    assert "expected filter" in through.get("message") and "wrote a file: /tmp/x" in through.get("message")
    unproven = next(c for c in doc.iter("testcase") if c.get("name") == "r-01").find("failure")
    assert "catalog_error" in unproven.get("message") and "Table pg_x does not exist" in unproven.get("message")
    assert doc.find("testsuite").get("timestamp") == "2026-01-02T03:04:05"


def test_an_unchanged_snapshot_passes_its_test_case():
    report = SuiteReport([_verdict("w-01", "blocked", blocked_by="filter", reason="not_select")],
                         "snap.duckdb", "aaa", "aaa", 0.1).to_json()
    doc = valid(guardrails_junit(report))
    assert outcome_of(doc)[("guardrails.snapshot", "checksum unchanged")] is None
    assert doc.find("testsuite").get("failures") == "0"




def test_sqleval_guardrails_run_writes_junit(serving_snapshot, tmp_path, monkeypatch):
    """Through the command line, two hostile cases of our own on the demo's snapshot."""
    from typer.testing import CliRunner

    from sqleval_pipeline.cli import app

    home = home_over(serving_snapshot, tmp_path / "home")  # over the session's build of the demo
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    cases = tmp_path / "hostile.jsonl"
    cases.write_text('{"id": "mine-01", "category": "writes", "sql": "DELETE FROM {table}", "expect": ["filter"]}\n'
                     '{"id": "mine-02", "category": "writes", "sql": "DROP TABLE {table}", "expect": ["filter"]}\n')
    out = tmp_path / "reports" / "guardrails.xml"
    result = CliRunner().invoke(app, ["guardrails", "run", "--cases", str(cases), "--junit", str(out)])
    assert result.exit_code == 0, result.output
    doc = valid(out.read_text(encoding="utf-8"))
    assert_counts(doc)
    assert outcome_of(doc) == {("guardrails.writes", "mine-01"): None, ("guardrails.writes", "mine-02"): None,
                               ("guardrails.snapshot", "checksum unchanged"): None}
