"""``sqleval golden review`` driven end to end through its prompts in a pseudo-terminal, as a
person over SSH would: accept one, edit one, reject one, then the process is killed mid-session
and started again — it resumes at the next undecided case and nothing decided is lost; the
rejected proposal is never proposed again."""

from __future__ import annotations

import datetime as dt
import json
import signal

import pytest

from sqleval_pipeline import project as proj
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.golden.dedup import normalise_sql, read_rejected, rejected_path
from sqleval_pipeline.golden.freeze import run_reference
from sqleval_pipeline.golden.loader import load_golden
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.snapshot import open_readonly
from tests.golden.conftest import CLI, cli_env, sqleval
from tests.golden.ptyrun import Terminal

ACTION = r"\[a\]ccept +\[e\]dit +\[r\]eject +\[s\]kip +\[q\]uit > "
TODAY = dt.date.today().isoformat()


def review(project, target):
    return Terminal([*CLI, "--project", str(project), "golden", "review", "--reviewer", "ana",
                     "--file", str(target)], env=cli_env(), cwd=str(project))


def frozen_rows(project, sql):
    p = proj.load_project(project)
    sid, manifest, serving = snap.pinned_snapshot(p.manifest_dir, p.home.snapshot_dir)
    con = open_readonly(serving)
    try:
        return sid, run_reference(con, sql, manifest.as_of)
    finally:
        con.close()


def lines_by_id(path):
    return {json.loads(line)["id"]: line for line in path.read_text().splitlines()}


@pytest.mark.slow
def test_review_accept_edit_reject_kill_and_resume(demo_project):
    target = demo_project / "evals" / "golden" / "proposed.jsonl"
    res = sqleval(demo_project, "golden", "propose", "-n", "6", "--seed", "17")
    assert res.returncode == 0, res.stdout + res.stderr
    cases = load_golden(target).cases
    assert len(cases) == 6 and all(c.status == "generated" for c in cases)
    first, second, third, fourth = cases[:4]
    untouched = lines_by_id(target)
    commerce = (demo_project / "evals" / "golden" / "commerce.jsonl").read_bytes()

    t = review(demo_project, target)
    t.expect(r"6 case\(s\) to review")
    # the first case: its question, its SQL and its first rows from the snapshot
    t.expect(rf"\[1/6\] {first.id} — generated")
    t.expect(r"question: " + r"\s*".join(map(_re, first.question.split())))
    t.expect(r"row\(s\) on snap-")
    t.expect(r"similar: \S+ \((verified|generated), |no similar case in the golden set")
    t.expect(ACTION)
    t.send("a")
    t.expect(rf"accepted {first.id}: verified by ana")

    # the second: a new SQL (two lines) and difficulty, then accepted
    t.expect(rf"\[2/6\] {second.id}")
    t.expect(ACTION)
    new_sql = f"SELECT count(*) AS n\nFROM ({second.reference_sql}) AS q"
    t.send("e")
    t.expect(r"edit which\?.*> ")
    t.send("s")
    t.expect(r"new SQL .*> ")
    for line in new_sql.splitlines():
        t.send(line)
    t.send("")
    t.expect(rf"saved sql of {second.id}")
    t.expect(r"sql: SELECT count\(\*\) AS n\s+FROM \(")   # shown again, and run again
    t.expect(r"1 row\(s\) on snap-")
    t.expect(ACTION)
    t.send("e")
    t.expect(r"edit which\?.*> ")
    t.send("d")
    t.expect(r"difficulty \(.*\), now .* > ")
    t.send("no_such_difficulty")
    t.expect(r"not saved: no_such_difficulty is not one of")
    t.expect(ACTION)
    t.send("e")
    t.expect(r"edit which\?.*> ")
    t.send("d")
    t.expect(r"difficulty \(.*\), now .* > ")
    t.send("multi_condition")
    t.expect(rf"saved difficulty of {second.id}")
    t.expect(ACTION)
    t.send("a")
    t.expect(rf"accepted {second.id}")

    # the third: rejected (a reason is required)
    t.expect(rf"\[3/6\] {third.id}")
    t.expect(ACTION)
    t.send("r")
    t.expect(r"reason .*> ")
    t.send("")
    t.expect(r"not rejected: a reason is needed")
    t.expect(ACTION)
    t.send("r")
    t.expect(r"reason .*> ")
    t.send("the dashboard answers this already")
    t.expect(rf"rejected {third.id}")

    # the fourth: its question edited, then the process is killed at the next prompt
    t.expect(rf"\[4/6\] {fourth.id}")
    t.expect(ACTION)
    t.send("e")
    t.expect(r"edit which\?.*> ")
    t.send("q")
    t.expect(r"question, now .* > ")
    t.send("How many of them were there, all told?")
    t.expect(rf"saved question of {fourth.id}")
    t.expect(ACTION)
    t.kill(signal.SIGKILL)

    # nothing decided was lost, nothing else changed, no half-written file is left
    after = {c.id: c for c in load_golden(target).cases}
    sid, rs = frozen_rows(demo_project, first.reference_sql)
    a = after[first.id]
    assert a.status == "verified" and a.provenance.reviewer == "ana"
    assert a.provenance.date.isoformat() == TODAY and a.snapshot_id == sid
    assert _rows(a) == rs.to_json()["rows"]
    b = after[second.id]
    assert b.status == "verified" and b.difficulty == "multi_condition"
    assert b.reference_sql == new_sql and b.provenance.author == "ana"
    assert _rows(b) == frozen_rows(demo_project, new_sql)[1].to_json()["rows"]
    assert third.id not in after
    ledger = read_rejected(rejected_path(target))
    assert [r["case"]["id"] for r in ledger] == [third.id]
    assert ledger[0]["rejected"] == {"reason": "the dashboard answers this already",
                                     "reviewer": "ana", "date": TODAY}
    assert Case.model_validate(ledger[0]["case"]).reference_sql == third.reference_sql
    d = after[fourth.id]
    assert d.status == "generated" and d.question == "How many of them were there, all told?"
    now = lines_by_id(target)
    for c in cases[4:]:
        assert now[c.id] == untouched[c.id]  # byte for byte
    assert (demo_project / "evals" / "golden" / "commerce.jsonl").read_bytes() == commerce
    assert not [p for p in target.parent.rglob("*") if p.name.endswith(".tmp")]

    # started again: it resumes at the first undecided case, the edited one
    t = review(demo_project, target)
    t.expect(r"3 case\(s\) to review")
    t.expect(rf"\[1/3\] {fourth.id} — generated")
    t.expect(r"question: How many of them were there, all told\?")
    t.expect(ACTION)
    t.send("s")
    t.expect(rf"skipped {fourth.id}")
    t.expect(rf"\[2/3\] {cases[4].id}")
    t.expect(ACTION)
    t.send("\x03")  # Ctrl-C
    t.expect(r"interrupted: every decision so far is saved")
    assert t.wait() == 130
    assert {c.id: c.status for c in load_golden(target).cases} == {
        first.id: "verified", second.id: "verified", fourth.id: "generated",
        cases[4].id: "generated", cases[5].id: "generated"}

    # the rejected proposal is not proposed again, with the same seed, while a project
    # without its ledger would propose it again
    res = sqleval(demo_project, "golden", "propose", "-n", "6", "--seed", "17")
    assert res.returncode == 0, res.stdout + res.stderr
    again = load_golden(target).cases
    assert normalise_sql(third.reference_sql) not in {normalise_sql(c.reference_sql) for c in again}
    assert third.id not in {c.id for c in again}
    rejected_path(target).unlink()
    target.write_text("".join(line + "\n" for cid, line in lines_by_id(target).items()
                              if cid in {first.id, second.id}))
    res = sqleval(demo_project, "golden", "propose", "-n", "6", "--seed", "17")
    assert res.returncode == 0, res.stdout + res.stderr
    assert normalise_sql(third.reference_sql) in {normalise_sql(c.reference_sql)
                                                  for c in load_golden(target).cases}


def _re(word: str) -> str:
    import re

    return re.escape(word)


def _rows(case):
    return case.expected.model_dump()["rows"]
