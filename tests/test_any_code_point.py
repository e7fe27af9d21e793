"""Every writer of untrusted text survives any code point (lone surrogates, NUL, controls,
right-to-left overrides), and reports never carry raw control bytes.

A system under test can answer anything: a provider's JSON may decode to a lone surrogate,
DuckDB's messages quote the SQL they fail on. Each writer below is fed arbitrary strings
(hypothesis) and must write something that reads back.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqleval_pipeline.generation.runner import Journal, _read_record
from sqleval_pipeline.pipeline.records import Attempt, Diagnosis, Execution
from sqleval_pipeline.pipeline.recordio import RecordWriter, load_records
from sqleval_pipeline.textfiles import encodable, visible, visible_text, write_atomically
from tests.conftest import BOMB_LIMITS

#: every code point, lone surrogates included, biased towards the troublesome ones
NASTY = st.sampled_from([chr(0xD800), chr(0xDFFF), "\x00", "\x1b[31m", "\u202e", "\u2066", "\ufeff",
                         "\u200b", "\x7f", "\x85", "'", '"', "\\", "\n", "é", "東", "\U0001F600"])
TEXT = st.lists(st.one_of(NASTY, st.characters(min_codepoint=0, max_codepoint=0x10FFFF)),
                max_size=40).map("".join)
RAW_IN_REPORT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                           "\ufeff\ud800-\udfff]")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@given(TEXT)
def test_encodable_keeps_valid_text_and_makes_the_rest_writable(text):
    out = encodable(text)
    assert _utf8(out)
    if _utf8(text):
        assert out == text                      # nothing valid is ever changed


@given(TEXT)
def test_visible_leaves_no_raw_control_in_a_report(text):
    out = visible(text)
    assert _utf8(out) and not RAW_IN_REPORT.search(out)
    printable = "".join(c for c in text if not RAW_IN_REPORT.match(c))
    assert printable in out.replace("\\u", "") or all(c in out for c in printable)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=TEXT, message=TEXT)
def test_records_journal_and_record_files_survive_any_text(tmp_path, sql, message):
    sql = "SELECT " + sql
    attempt = Attempt(config_version="c@1", case_id="q-1", run_index=0, kind="sql", sql=sql,
                      raw_response=message)
    journal = Journal(tmp_path / "parts")
    path, offset = journal.add(attempt)
    journal.sync()
    back = _read_record({}, path, offset)
    assert back.sql == encodable(sql) and back.raw_response == encodable(message)
    execution = Execution(config_version="c@1", case_id="q-1", run_index=0, status="error",
                          error_source="sql", error_code="parser_error", message=message,
                          error_message=message, executed_sql=sql)
    diagnosis = Diagnosis(config_version="c@1", case_id="q-1", run_index=0, category="harness_bug",
                          explanation=message, judge="rules")
    for suffix in (".jsonl", ".parquet"):
        out = tmp_path / f"executions{suffix}"
        with RecordWriter(out, Execution) as w:
            w.write(execution)
        assert load_records(out, Execution)[0].message == encodable(message)
    with RecordWriter(tmp_path / "diagnoses.parquet", Diagnosis) as w:
        w.write(diagnosis)
    write_atomically(tmp_path / "report.md", message)
    assert (tmp_path / "report.md").read_bytes().decode("utf-8") == encodable(message)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_the_guard_log_and_its_result_survive_any_text(guard_with_log, text):
    guard, log_path = guard_with_log
    literal = text.replace("'", "''")
    for sql in (f"SELECT '{literal}' AS v", text):
        res = guard.execute(sql)                 # never raises, whatever the text
        assert _utf8(res.sql) and (res.message is None or _utf8(res.message))
        if res.ok and _utf8(text) and "\x00" not in text:
            assert res.result.rows == [[text]] or res.result.rows[0][0] == text
    for line in log_path.read_bytes().decode("utf-8").split("\n"):
        if line:
            json.loads(line)


@pytest.fixture(scope="module")
def guard_with_log(serving_snapshot, tmp_path_factory):
    from sqleval_pipeline.guard.executor import GuardedExecutor
    from sqleval_pipeline.guard.policy import load_policy

    log_path = tmp_path_factory.mktemp("guardlog") / "guard.jsonl"
    policy = load_policy(overrides={"limits": BOMB_LIMITS},
                         served=list(serving_snapshot.manifest.tables))
    with GuardedExecutor(serving_snapshot.path, as_of=serving_snapshot.manifest.as_of, policy=policy,
                         log_path=log_path) as guard:
        yield guard, log_path


@settings(deadline=None)
@given(TEXT)
def test_reports_show_controls_as_escapes(text):
    from sqleval_pipeline.reporting.html.page import _jinja

    html = _jinja().from_string("<pre>{{ sql }}</pre>").render(sql=text)
    assert not RAW_IN_REPORT.search(html) and _utf8(html)
    md = visible_text(lambda t: f"| sql | {t} |")(text)
    assert not RAW_IN_REPORT.search(md)

