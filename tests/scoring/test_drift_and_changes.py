"""The drift gate (two batches of one version) and "what changed" between two evaluations."""

from __future__ import annotations

import datetime as dt

from sqleval_pipeline.pipeline.records import Grade
from sqleval_pipeline.scoring.changes import RunInputs, what_changed
from sqleval_pipeline.scoring.gate import Decision, gate
from sqleval_pipeline.scoring.scorecard import build_scorecard


def _card(version: str, outcomes: list[str]):
    return build_scorecard([Grade(config_version=version, case_id=f"q{i:03d}", run_index=0,
                                  outcome=o, reason="x", grader_version="r1", band="answerable",
                                  difficulty="top_k", split="dev", cluster=f"c{i}")
                            for i, o in enumerate(outcomes)], resamples=200)


def test_drift_fails_only_beyond_sampling_noise():
    n = 60
    before = _card("v1", ["CORRECT"] * n)
    one_lost = _card("v1", ["WRONG"] + ["CORRECT"] * (n - 1))
    half_lost = _card("v1", ["WRONG"] * (n // 2) + ["CORRECT"] * (n // 2))
    # between two versions any drop fails; between two batches of one version, one lost case
    # out of 60 is within noise, half of them is not
    assert not gate(before, one_lost, []).passed
    assert gate(before, one_lost, [], drift=True, candidate_batch="b2").passed
    assert not gate(before, half_lost, [], drift=True, candidate_batch="b2").passed


def test_a_drift_decision_must_name_the_batch():
    before = _card("v1", ["CORRECT"] * 40)
    worse = _card("v1", ["WRONG"] * 20 + ["CORRECT"] * 20)
    versions = dict(baseline="v1", candidate="v1", who="ana", why="provider incident",
                    date=dt.date(2026, 12, 1))
    blanket = Decision(**versions)
    assert not gate(before, worse, [blanket], drift=True, candidate_batch="b2").passed
    named = Decision(**versions, batch="b2")
    r = gate(before, worse, [named], drift=True, candidate_batch="b2")
    assert r.passed and r.waived
    assert not gate(before, worse, [named], drift=True, candidate_batch="b3").passed
    # between two versions the blanket decision still works as before
    assert gate(_card("v0", ["CORRECT"] * 40), _card("v1", ["WRONG"] * 20 + ["CORRECT"] * 20),
                [Decision(**{**versions, "baseline": "v0"})]).passed


def _inputs(**kw) -> RunInputs:
    base = dict(partition_key="a@1", config_name="a", config_version="1", batch_id="b1",
                snapshot_id="s", golden_hash="g", grader_version="r3",
                judge_versions={"rules": "rules-r2"}, policy_version="p1",
                configuration={"name": "a", "description": "x", "generator": {"kind": "baseline"},
                               "context": {"curation": True, "retrieval_k": 6}, "runs": 3,
                               "active": True},
                input_digests={"glossary": "aaa"}, provider_models=[])
    return RunInputs(**{**base, **kw})


def test_what_changed_names_every_differing_input_and_nothing_else():
    a = _inputs()
    assert [c.field for c in what_changed(a, _inputs())] == []
    b = _inputs(batch_id="b2", snapshot_id="s2", policy_version="p2",
                judge_versions={"rules": "rules-r3", "llm": "j1"},
                configuration={**a.configuration, "description": "other", "active": False,
                               "context": {"curation": False, "retrieval_k": 6}},
                input_digests={}, provider_models=["gpt-x-2026"])
    changes = {c.field: (c.baseline, c.candidate) for c in what_changed(a, b)}
    assert changes == {
        "snapshot": ("s", "s2"), "judge rules": ("rules-r2", "rules-r3"),
        "guard policy": ("p1", "p2"), "context.curation": ("True", "False"),
        "glossary (content)": ("aaa", "unrecorded"), "provider-reported model": ("unrecorded", '["gpt-x-2026"]'),
        "batch": ("b1", "b2")}
    # a judge that diagnosed nothing in one batch (no failure there) is not a judge change
    quiet = what_changed(_inputs(judge_versions={}), _inputs(judge_versions={"rules": "rules-r3"}))
    assert [c.field for c in quiet] == []
    # data comes first, the batch last
    fields = [c.field for c in what_changed(a, b)]
    assert fields[0] == "snapshot" and fields[-1] == "batch"
