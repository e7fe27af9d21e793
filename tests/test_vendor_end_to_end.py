"""`sqleval run` on the demo against loopback fakes of Cortex Analyst and Genie that speak
their real formats (tests/generation/vendor_fakes.py validates every request): every outcome
kind is reached through the whole pipeline — attempts, guarded executions, grades, scorecard —
and a throttled question's retry is counted on its attempt.

The fakes answer by question: the case's own reference (CORRECT), the reference with an extra
column (CORRECT_FACTS), the reference emptied (WRONG), words only for an answerable case
(DEFERRED_WRONGLY) and for a should-refuse one (DEFERRED_CORRECTLY), a throttled first request
(429, then the reference: CORRECT after one retry) and a vendor failure on one run (ERROR)."""

from __future__ import annotations

import collections
import json
import threading

import pytest
from typer.testing import CliRunner

from sqleval_pipeline.cli import app
from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.pipeline.records import Attempt, Grade, load_records
from tests.generation.fakes import raw
from tests.generation.vendor_fakes import (FakeCortexAnalyst, FakeGenie, analyst_sql, analyst_text,
                                           genie_failed, genie_sql, genie_text, statement)
from tests.conftest import cli_home

runner = CliRunner()
SPACE = "01ef1234567890abcdef1234567890ab"


def _plan():
    """Case id → role, over demo cases chosen by their properties (not by their ids)."""
    cases = load_golden(location.GOLDEN_DIR).cases
    answerable = [c for c in cases if c.band == "answerable" and c.reference_sql and not c.order_matters
                  and c.expected is not None and c.expected.rows]
    refuse = [c for c in cases if c.band == "should_refuse"]
    assert len(answerable) >= 6 and refuse
    roles = ["correct", "facts", "wrong", "declined", "throttled", "failing"]
    plan = {c.id: (role, c) for role, c in zip(roles, answerable)}
    plan[refuse[0].id] = ("refused", refuse[0])
    return plan


EXPECTED = {"correct": {"CORRECT"}, "facts": {"CORRECT_FACTS"}, "wrong": {"WRONG"},
            "declined": {"DEFERRED_WRONGLY"}, "refused": {"DEFERRED_CORRECTLY"},
            "throttled": {"CORRECT"}, "failing": {"ERROR", "CORRECT"}}


class Behaviour:
    """The fake's answer for a question, counting the requests per question."""

    def __init__(self, plan, vendor: str, widths: dict[str, int] | None = None):
        self.by_question = {c.question: (role, c) for role, c in plan.values()}
        #: Genie sends its own rows too: for the emptied reference, as many columns as
        #: sqleval's execution and no row (they agree); for the reference itself one made-up
        #: row (they disagree: its warehouse holds other data)
        self.widths = widths or {}
        self.vendor = vendor
        self.seen: collections.Counter = collections.Counter()
        self.lock = threading.Lock()

    def question(self, req) -> str:
        body = req.json
        return body["content"] if self.vendor == "genie" else body["messages"][-1]["content"][0]["text"]

    def __call__(self, req):
        q = self.question(req)
        role, case = self.by_question[q]
        with self.lock:
            self.seen[q] += 1
            n = self.seen[q]
        ref = (case.reference_sql or "").strip().rstrip(";")
        sql_reply = genie_sql if self.vendor == "genie" else analyst_sql
        text_reply = genie_text if self.vendor == "genie" else analyst_text
        if role in ("correct", "throttled", "failing"):
            if role == "throttled" and n == 1:
                return raw(429, {"message": "slow down"}, {"Retry-After": "0"})
            if role == "failing" and n == 1:
                return (genie_failed("the warehouse is stopped") if self.vendor == "genie"
                        else raw(400, {"message": "semantic model not found", "code": "399504"}))
            if self.vendor == "genie" and role == "correct":
                return genie_sql(ref, result=statement([{"name": "x", "type_name": "INT"}], [["1"]]))
            return sql_reply(ref)
        if role == "wrong" and self.vendor == "genie":
            cols = [{"name": f"c{i}", "type_name": "STRING"} for i in range(self.widths[case.id])]
            return genie_sql(f"SELECT * FROM ({ref}) AS q LIMIT 0", result=statement(cols, []))
        if role == "facts":
            return sql_reply(f"SELECT 0 AS vendor_extra, q.* FROM ({ref}) AS q")
        if role == "wrong":
            return sql_reply(f"SELECT * FROM ({ref}) AS q LIMIT 0")
        return text_reply("I cannot answer that from this data.")


@pytest.mark.parametrize("vendor", ["cortex_analyst", "genie"])
def test_sqleval_run_reaches_every_outcome_through_a_vendor_api(vendor, serving_snapshot, tmp_path,
                                                                  monkeypatch):
    import duckdb

    plan = _plan()
    con = duckdb.connect(str(serving_snapshot.path), read_only=True)
    try:
        widths = {c.id: len(con.execute(f"SELECT * FROM ({c.reference_sql.strip().rstrip(';')}) AS q LIMIT 0")
                                .description) for role, c in plan.values() if role == "wrong"}
    finally:
        con.close()
    behaviour = Behaviour(plan, vendor, widths)
    fake = (FakeGenie(behaviour, spaces=(SPACE,)) if vendor == "genie"
            else FakeCortexAnalyst(behaviour)).start()
    try:
        home = cli_home(serving_snapshot, tmp_path, monkeypatch)
        configs = tmp_path / "configs"
        configs.mkdir()
        if vendor == "genie":
            monkeypatch.setenv("DATABRICKS_TOKEN", fake.token)
            generator = (f"{{kind: genie, host: '{fake.base_url}', space_id: {SPACE}, "
                         "poll_interval_s: 0.01, poll_max_interval_s: 0.02, max_wait_s: 30, "
                         "fetch_query_result: true}")
        else:
            monkeypatch.setenv("SNOWFLAKE_TOKEN", fake.token)
            generator = (f"{{kind: cortex_analyst, account_url: '{fake.base_url}', "
                         "semantic_model_file: '@db.sch.stage/model.yaml'}")
        cfg = configs / "vendor.yaml"
        cfg.write_text(f"name: {vendor}-fake\ngenerator: {generator}\nmax_retries: 2\n")
        result = runner.invoke(app, ["run", "-c", str(cfg), "--cases", ",".join(plan), "--json"])
        assert result.exit_code == 0, result.output
        out = result.output
        verdict = json.loads(out[out.index("\n{") + 1 if not out.startswith("{") else 0:])
    finally:
        fake.stop()

    assert fake.rejections == [], fake.rejections  # every request the adapter sent was valid
    folder = home / "store" / "runs" / verdict["partition"] / verdict["batch_id"]
    grades = load_records(folder / "grades.parquet", Grade)
    attempts = {a.key: a for a in load_records(folder / "attempts.parquet", Attempt)}
    outcomes: dict[str, list[str]] = collections.defaultdict(list)
    for g in sorted(grades, key=lambda g: (g.case_id, g.run_index)):
        outcomes[g.case_id].append(str(g.outcome))
    for cid, (role, _case) in plan.items():
        assert len(outcomes[cid]) == 3, (cid, outcomes[cid])
        assert set(outcomes[cid]) == EXPECTED[role], (role, cid, outcomes[cid])
    # every outcome kind was reached
    assert {o for os_ in outcomes.values() for o in os_} == {
        "CORRECT", "CORRECT_FACTS", "WRONG", "DEFERRED_WRONGLY", "DEFERRED_CORRECTLY", "ERROR"}
    # the throttled question was asked twice for its first attempt: one retry, counted there
    throttled = next(cid for cid, (role, _c) in plan.items() if role == "throttled")
    retried = [a for a in attempts.values() if a.case_id == throttled and a.retries]
    assert [a.retries for a in retried] == [1]
    # each case and run is its own question: one conversation (Genie) or request per attempt,
    # plus the throttled retry
    assert sum(behaviour.seen.values()) == len(plan) * 3 + 1
    if vendor == "genie":
        assert len(set(fake.conversations)) == len(plan) * 3
    # the verdict counts the ERROR apart from accuracy: 1 error among 21 attempts
    assert verdict["accuracy"]["value"] is not None
    by_role = {role: cid for cid, (role, _c) in plan.items()}
    vendor = {(g.case_id, g.run_index): (g.vendor_rows, g.vendor_outcome) for g in grades}
    if behaviour.vendor == "genie":
        # Genie's own rows: graded, and compared with sqleval's execution of the same SQL
        assert {vendor[(by_role["correct"], r)] for r in range(3)} == {("disagree", "WRONG")}
        assert {vendor[(by_role["wrong"], r)] for r in range(3)} == {("agree", "WRONG")}
        from sqleval_pipeline.scoring import load_scorecard

        card = load_scorecard(folder / "scorecard.json")
        # the fake sends its one made-up row for every other query too: each disagrees
        disagreeing = sorted({cid for (cid, _r), (rows, _o) in vendor.items() if rows == "disagree"})
        assert by_role["correct"] in disagreeing and by_role["wrong"] not in disagreeing
        assert card.vendor_rows is not None and card.vendor_rows.disagreeing_cases == disagreeing
        assert card.vendor_rows.n_disagree == sum(rows == "disagree" for rows, _o in vendor.values())
        assert card.vendor_rows.n_compared == sum(rows in ("agree", "disagree") for rows, _o in vendor.values())
    else:  # Cortex Analyst sends no rows of its own
        assert set(vendor.values()) == {(None, None)}
