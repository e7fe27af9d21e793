"""Diff and regression gate, hand-computed from tests/scoring/conftest.py."""

from __future__ import annotations

import datetime as dt

import pytest

from sqleval_pipeline.reporting.scorecard import diff_markdown, gate_markdown, scorecard_markdown
from sqleval_pipeline.scoring import (
    Decision,
    IncomparableScorecards,
    build_scorecard,
    diff,
    gate,
    load_decisions,
)
from sqleval_pipeline.scoring.diff import Diff

from scoring_data import BASELINE, make_grades


@pytest.fixture
def cards(base_grades, cand_grades):
    return build_scorecard(base_grades, resamples=300), build_scorecard(cand_grades, resamples=300)


def test_paired_cases_and_metrics(cards):
    base, cand = cards
    d = diff(base, cand, resamples=300)
    assert d.newly_failing == ["q1"]
    assert d.newly_passing == ["q3"]
    assert d.still_failing == []
    acc = d.metric("accuracy")
    assert (acc.baseline, acc.candidate) == (pytest.approx(5 / 8), pytest.approx(6 / 9))
    assert acc.delta == pytest.approx(6 / 9 - 5 / 8)
    assert acc.ci.low <= acc.delta <= acc.ci.high
    assert d.metric("strict_accuracy").delta == pytest.approx(6 / 9 - 3 / 8)
    assert d.metric("refusal_hold").delta == pytest.approx(1 - 2 / 3)
    assert d.metric("accuracy", "split:heldout").candidate == pytest.approx(2 / 3)
    assert (d.mcnemar.pass_to_fail, d.mcnemar.fail_to_pass, d.mcnemar.n_paired) == (1, 1, 3)
    assert d.mcnemar.p_value == 1.0
    assert d.power.discordance == pytest.approx(2 / 3)
    assert Diff.from_json(d.to_json()).to_json() == d.to_json()
    assert "newly failing (1): q1" in diff_markdown(d)


def test_refuses_across_grader_or_snapshot_unless_rebased(base_grades):
    base = build_scorecard(base_grades, resamples=50)
    other = build_scorecard(make_grades("cfgB", BASELINE, grader="r2-new"), resamples=50)
    with pytest.raises(IncomparableScorecards, match="grader versions differ"):
        diff(base, other)
    snap = build_scorecard(make_grades("cfgB", BASELINE, snapshot="snap2"), resamples=50)
    with pytest.raises(IncomparableScorecards, match="snapshots differ"):
        diff(base, snap)
    d = diff(base, other, rebase=True, resamples=50)
    assert d.rebased and d.notes and d.metric("accuracy").delta == 0


def test_histogram_shift(base_grades, cand_grades):
    from sqleval_pipeline.pipeline.records import Diagnosis

    db = [Diagnosis(config_version="cfgA", case_id="q2", run_index=1, category="wrong_filter", explanation="", judge="rules")]
    dc = [Diagnosis(config_version="cfgB", case_id="q1", run_index=r, category="wrong_table", explanation="", judge="rules")
          for r in (0, 1)]
    d = diff(build_scorecard(base_grades, db, resamples=50), build_scorecard(cand_grades, dc, resamples=50), resamples=50)
    shift = {h.category: (h.baseline, h.candidate, h.delta) for h in d.histogram_shift}
    assert shift == {"wrong_filter": (1, 0, -1), "wrong_table": (0, 2, 2)}


def test_gate_accuracy_drop_and_decisions(cards, tmp_path):
    base, cand = cards
    # cfgB -> cfgA: accuracy 6/9 -> 5/8 drops
    r = gate(cand, base, [])
    assert not r.passed and not r.waived
    assert r.delta == pytest.approx(5 / 8 - 6 / 9)
    assert "accuracy dropped" in r.failures[0]
    other = Decision(who="ana", why="other pair", date=dt.date(2025, 6, 1), baseline="cfgX", candidate="cfgA")
    assert not gate(cand, base, [other]).passed
    ok = Decision(who="ana", why="cheaper model", date=dt.date(2025, 6, 1), baseline="cfgB", candidate="cfgA")
    r = gate(cand, base, [other, ok])
    assert r.passed and r.waived and r.decision == ok
    assert "decision of ana" in gate_markdown(r)


def test_gate_case_regression_is_configurable(cards):
    base, cand = cards
    assert gate(base, cand, []).passed  # accuracy went up
    r = gate(base, cand, [], fail_on_case_regression=True)
    assert not r.passed and r.regressed_cases == ["q1"]


def test_decisions_file(tmp_path):
    p = tmp_path / "decisions.yaml"
    assert load_decisions(p) == []
    p.write_text("# nothing yet\n[]\n")
    assert load_decisions(p) == []
    p.write_text("- who: ana\n  why: ok\n  date: 2025-06-01\n  baseline: abcdef0123\n  candidate: 9876543210\n")
    (d,) = load_decisions(p)
    assert d.matches("abcdef0123456", "9876543210ff")
    assert not d.matches("abcdef0", "9876543210")
    p.write_text("- who: ana\n  date: 2025-06-01\n  baseline: a\n  candidate: b\n")
    with pytest.raises(ValueError, match="invalid"):
        load_decisions(p)


def test_repo_decisions_file_is_valid():
    """The demo's decisions file loads (whatever decisions a team has recorded in it)."""
    from pathlib import Path

    decisions = load_decisions(Path(__file__).resolve().parents[2] / "evals" / "decisions.yaml")
    assert isinstance(decisions, list)
    assert all(d.who and d.why for d in decisions)


def test_markdown_render(cards):
    md = scorecard_markdown(cards[0])
    assert "| overall | 4 | 3 | 8 | 62.5%" in md  # cases, clusters, attempts, accuracy
    assert "wider-bs" in md and "2 clusters < 20" in md
    assert "refusal hold" in md
