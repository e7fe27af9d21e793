"""Scorecard numbers computed by hand from tests/scoring/conftest.py."""

from __future__ import annotations

import math

import pytest

from sqleval_pipeline.pipeline.records import Diagnosis
from sqleval_pipeline.scoring import build_scorecard, calibrated_refusal
from sqleval_pipeline.scoring.scorecard import Scorecard
from sqleval_pipeline.scoring.stats import cases_needed, cluster_bootstrap_ratio, mcnemar_exact

from scoring_data import make_grades


def test_headline_rates(base_grades):
    sc = build_scorecard(base_grades, resamples=300)
    o = sc.overall
    # answerable non-error attempts: q1 3 + q2 3 + q3 2 = 8; facts-correct 3 + 2 = 5; exact 3
    assert (o.accuracy.num, o.accuracy.den, o.accuracy.value) == (5, 8, 0.625)
    assert (o.strict_accuracy.num, o.strict_accuracy.value) == (3, 0.375)
    assert o.answered_accuracy.value == pytest.approx(5 / 7)
    # per run: run0 2/3, run1 1/3, run2 2/2 (the ERROR leaves the denominator)
    assert [r.accuracy for r in o.per_run] == pytest.approx([2 / 3, 1 / 3, 1.0])
    assert o.mean_over_runs == pytest.approx(2 / 3)
    assert o.spread == pytest.approx(2 / 3)
    assert o.strict_mean_over_runs == pytest.approx((1 / 3 + 1 / 3 + 1 / 2) / 3)
    assert o.strict_spread == pytest.approx(1 / 2 - 1 / 3)
    assert (sc.refusal.deferral_rate.num, sc.refusal.deferral_rate.den) == (3, 11)
    assert sc.refusal.over_refusal_rate.value == pytest.approx(1 / 8)
    assert sc.refusal.refusal_hold.value == pytest.approx(2 / 3)
    assert sc.errors.count == 1 and sc.errors.by_reason == {"provider_error:503": 1}
    assert (sc.case_flip_rate.num, sc.case_flip_rate.den) == (3, 4)


def test_slices_and_none_rates(base_grades):
    sc = build_scorecard(base_grades, resamples=300)
    assert sc.by_split["dev"].accuracy.value == pytest.approx(5 / 6)
    assert sc.by_split["heldout"].accuracy.value == 0.0
    assert sc.by_band["should_refuse"].accuracy.value is None  # a rate over nothing is None
    assert sc.by_band["should_refuse"].accuracy.ci is None
    assert sc.by_difficulty["trap"].mean_over_runs is None
    assert sc.by_difficulty["top_k"].accuracy.value == pytest.approx(2 / 3)
    assert set(sc.by_split) == {"dev", "heldout"}


def test_intervals_seeded_and_cover_estimate(base_grades):
    a = build_scorecard(base_grades, resamples=500, seed=11)
    b = build_scorecard(base_grades, resamples=500, seed=11)
    assert a.to_json() == b.to_json()
    ci = a.overall.accuracy.ci
    assert ci.low <= a.overall.accuracy.value <= ci.high
    # two clusters with answerable attempts (c1 5/6, c2 0/2) are fewer than MIN_CLUSTERS, so the
    # interval is the wider of the cluster bootstrap (0 to 5/6) and the case bootstrap over q1 3/3,
    # q2 2/3, q3 0/2: a resample of q1 alone has chance (1/3)^3 = 3.7% > 2.5%, so it reaches 1.0.
    # (Before intervals named their method this set printed the cluster bootstrap's [0, 83.3].)
    assert ci.low == pytest.approx(0.0) and ci.high == pytest.approx(1.0)
    assert ci.kind == "wider" and ci.method == "wider of case and cluster bootstrap (3 cases; 2 clusters < 20)"
    c = build_scorecard(base_grades, resamples=500, seed=12)
    assert c.bootstrap.seed == 12


def test_cluster_bootstrap_single_cluster_is_degenerate():
    assert cluster_bootstrap_ratio([3], [4], resamples=100, seed=1) == (0.75, 0.75)
    assert cluster_bootstrap_ratio([], [], resamples=100, seed=1) == (None, None)


def test_power_formula_hand_computed():
    # z = 1.959964 + 0.841621; z^2 = 7.848879
    assert cases_needed(0.03, 0.112) == 969  # Miller's worked example
    assert cases_needed(0.05, 0.32) == 997  # 7.848879 * (0.32 - 0.0025) / 0.0025 = 996.8
    assert cases_needed(0.10, 0.05) == 71  # discordance raised to delta: 7.848879 * 0.09 / 0.01
    with pytest.raises(ValueError):
        cases_needed(0, 0.1)


def test_scorecard_power_section(base_grades):
    sc = build_scorecard(base_grades, resamples=300)
    assert sc.power.discordance == pytest.approx(2 * 0.625 * 0.375)
    assert [r.difference_points for r in sc.power.rows] == [3, 5, 10]
    assert sc.power.rows[0].cases_needed == cases_needed(0.03, 2 * 0.625 * 0.375)
    assert sc.power.design_effect >= 1
    assert sc.power.verdict.startswith("diagnostic only")


def test_mcnemar_exact():
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 4) == pytest.approx(1.0)  # the two tails hold every outcome
    # many discordant pairs: the binomial tail summed exactly with integers
    tail = sum(math.comb(1900, k) for k in range(901))
    assert mcnemar_exact(900, 1000) == pytest.approx(2 * tail / 2**1900, rel=1e-9)
    assert mcnemar_exact(3, 400) == pytest.approx(2 * sum(math.comb(403, k) for k in range(4)) / 2**403, rel=1e-9)


def test_json_round_trip_is_stable(base_grades):
    sc = build_scorecard(base_grades, resamples=200, tuned=True)
    text = sc.to_json()
    again = Scorecard.from_json(text)
    assert again.to_json() == text
    assert again.tuned and any("tuned" in n for n in again.notes)
    with pytest.raises(ValueError):
        Scorecard.from_json(text.replace("sqleval.scorecard/1", "sqleval.scorecard/0"))


def test_mixed_grader_versions_refused(base_grades):
    other = make_grades("cfgA", {"q1": ["CORRECT"]}, grader="r2-other")
    for g in other:
        g.case_id = "q1"
    with pytest.raises(ValueError, match="grader versions"):
        build_scorecard(base_grades[:3] + [o.model_copy(update={"run_index": 5}) for o in other])
    with pytest.raises(ValueError, match="configuration versions"):
        build_scorecard(base_grades + make_grades("cfgB", {"q1": ["CORRECT"]}))


def test_failure_histogram_from_diagnoses(base_grades):
    diags = [
        Diagnosis(config_version="cfgA", case_id="q2", run_index=1, category="wrong_filter", explanation="x", judge="rules"),
        Diagnosis(config_version="cfgA", case_id="q3", run_index=1, category="wrong_metric", explanation="y", judge="rules"),
        Diagnosis(config_version="cfgA", case_id="q3", run_index=1, category="wrong_table", explanation="z", judge="llm:m"),
    ]
    sc = build_scorecard(base_grades, diags, resamples=100)
    assert sc.failure_histogram == {"wrong_filter": 1, "wrong_metric": 1}
    assert sc.failure_histogram_judge == "rules"
    # failures: q2 W, q3 DW + W, q4 W = 4; diagnosed 2
    assert (sc.failures_diagnosed.num, sc.failures_diagnosed.den) == (2, 4)
    assert build_scorecard(base_grades, resamples=100).failure_histogram is None


def test_calibrated_refusal():
    strict = build_scorecard(make_grades("S", {"q1": ["DEFERRED_WRONGLY"] * 3, "q2": ["CORRECT"] * 3}), resamples=50)
    perm = build_scorecard(make_grades("P", {"q1": ["WRONG", "WRONG", "CORRECT"], "q2": ["CORRECT"] * 3}), resamples=50)
    cr = calibrated_refusal(perm, strict)
    assert (cr.strict_config, cr.permissive_config, cr.declined_cases) == ("S", "P", ["q1"])
    assert cr.permissive_accuracy_on_declined.value == pytest.approx(1 / 3)
    assert cr.permissive_overall_accuracy.value == pytest.approx(4 / 6)
    assert cr.gap == pytest.approx(-1 / 3)
    assert cr.verdict.startswith("refusals earn their keep")
