"""Intervals that never overclaim (docs/grading.md#intervals), and slices by facet and tag.

Every expected interval is computed here independently: a plain case or cluster bootstrap
written out as one (resamples x units) index matrix with the same seed semantics as the
scorecard (``numpy.random.default_rng(seed).integers``), the Wilson formula, the exact
Clopper-Pearson bound, Kish's design effect from the ANOVA intraclass correlation.
"""

from __future__ import annotations

import json
import math
import time
from statistics import NormalDist

import numpy as np
import pytest
from rich.console import Console

from sqleval_pipeline.defs.evaluation.metadata import scorecard_metadata
from sqleval_pipeline.pipeline.records import Grade
from sqleval_pipeline.reporting.scorecard import diff_markdown, render_scorecard, scorecard_markdown
from sqleval_pipeline.scoring import build_scorecard, diff, gate
from sqleval_pipeline.scoring import scorecard as scorecard_module
from sqleval_pipeline.scoring.scorecard import Scorecard

SEED, RESAMPLES = 7, 400
Z = NormalDist().inv_cdf(0.975)


def grade(case: str, run: int, outcome: str | None, cluster: str = "general", *, cfg: str = "c1",
          band: str = "answerable", difficulty: str = "top_k", split: str = "dev", **extra) -> Grade:
    return Grade(config_version=cfg, case_id=case, run_index=run, outcome=outcome,
                 reason="unverified_execution_only" if outcome is None else "x", grader_version="r1",
                 band=band, difficulty=difficulty, split=split, cluster=cluster, **extra)


def runs_of(case: str, outcomes: list[str], **kw) -> list[Grade]:
    return [grade(case, r, o, **kw) for r, o in enumerate(outcomes)]


def textbook_ratio_interval(num, den, resamples=RESAMPLES, seed=SEED):
    """Percentile bootstrap of sum(num)/sum(den) over the given units, one index matrix."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    idx = np.random.default_rng(seed).integers(0, len(num), size=(resamples, len(num)))
    n, d = num[idx].sum(axis=1), den[idx].sum(axis=1)
    draws = (n / np.where(d > 0, d, 1))[d > 0]
    return tuple(float(x) for x in np.quantile(draws, [0.025, 0.975]))


def textbook_paired(nb, db, nc, dc, resamples=RESAMPLES, seed=SEED):
    nb, db, nc, dc = (np.asarray(x, float) for x in (nb, db, nc, dc))
    idx = np.random.default_rng(seed).integers(0, len(nb), size=(resamples, len(nb)))
    draws = nc[idx].sum(1) / dc[idx].sum(1) - nb[idx].sum(1) / db[idx].sum(1)
    return tuple(float(x) for x in np.quantile(draws, [0.025, 0.975]))


def wilson(p: float, n: int) -> tuple[float, float]:
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def user_set(n_cases: int = 25, correct: int = 12, cfg: str = "c1") -> list[Grade]:
    """The measured problem: every case in one cluster, 3 runs each; three should-refuse cases
    in the same cluster contribute nothing to accuracy (they must not be resampled for it)."""
    out = []
    for i in range(n_cases):
        outs = (["CORRECT"] * 3 if i < correct else ["WRONG", "CORRECT", "WRONG"] if i % 4 == 0
                else ["WRONG"] * 3)
        out += runs_of(f"q{i:02d}", outs, cfg=cfg)
    for i in range(3):
        out += runs_of(f"r{i}", ["DEFERRED_CORRECTLY"] * 3, band="should_refuse", cfg=cfg)
    return out


def per_case(grades: list[Grade]) -> tuple[list[int], list[int]]:
    """(facts-correct, answerable attempts) per answerable case, by case id."""
    cases = sorted({g.case_id for g in grades if g.band == "answerable"})
    num = [sum(g.outcome in ("CORRECT", "CORRECT_FACTS") for g in grades if g.case_id == c) for c in cases]
    den = [sum(g.outcome not in (None, "ERROR") for g in grades if g.case_id == c) for c in cases]
    return num, den


# --------------------------------------------------------------------------- rates


def test_single_cluster_set_resamples_cases_not_the_one_cluster():
    grades = user_set()
    sc = build_scorecard(grades, seed=SEED, resamples=RESAMPLES)
    ci = sc.overall.accuracy.ci
    num, den = per_case(grades)
    assert len(num) == 25
    assert (ci.low, ci.high) == pytest.approx(textbook_ratio_interval(num, den), abs=0)
    assert ci.high - ci.low > 0.2  # not the [48.0, 48.0] a one-cluster bootstrap printed
    assert ci.kind == "case" and ci.method == "case bootstrap (25 cases; 1 cluster < 20)"
    assert (ci.n_clusters, ci.n_cases) == (1, 25)
    # refusal hold: the three should-refuse cases are its only units, all alike: Wilson, n = 3
    hold = sc.refusal.refusal_hold.ci
    assert hold.kind == "wilson" and (hold.low, hold.high) == pytest.approx(wilson(1.0, 3))


def test_all_correct_and_single_case_sets_are_never_zero_width():
    sc = build_scorecard([g for i in range(25) for g in runs_of(f"q{i}", ["CORRECT"] * 3)],
                         seed=SEED, resamples=RESAMPLES)
    ci = sc.overall.accuracy.ci
    assert ci.kind == "wilson" and ci.high - ci.low > 0.1
    assert (ci.low, ci.high) == pytest.approx((25 / (25 + Z * Z), 1.0))  # Wilson at p = 1
    assert ci.method == "Wilson score, n = 25 cases (degenerate bootstrap; 1 cluster)"
    wrong = build_scorecard(runs_of("q1", ["WRONG"] * 3), resamples=RESAMPLES).overall.accuracy.ci
    assert (wrong.low, wrong.high) == pytest.approx((0.0, Z * Z / (1 + Z * Z)))  # n = 1 case, not 3 runs
    # many clusters, all correct: the cluster bootstrap is degenerate too
    many = build_scorecard([g for i in range(30) for g in runs_of(f"q{i}", ["CORRECT"] * 2, cluster=f"k{i}")],
                           resamples=RESAMPLES).overall.accuracy.ci
    assert many.kind == "wilson" and (many.low, many.high) == pytest.approx(wilson(1.0, 30))
    # every interval of every scorecard above has a positive width
    for card in (sc,):
        assert all(i.high - i.low > 0 for i in card.intervals())


def many_cluster_set(n_clusters: int, cfg: str = "c1", shift: int = 0) -> list[Grade]:
    out = []
    for i in range(4 * n_clusters):
        outs = ["CORRECT" if (i * 7 + r + shift) % 5 < 3 else "WRONG" for r in range(3)]
        out += runs_of(f"q{i:03d}", outs, cluster=f"k{i % n_clusters:02d}", cfg=cfg)
    return out


def cluster_sums(grades: list[Grade]) -> tuple[list[int], list[int]]:
    names = sorted({g.cluster for g in grades})
    num = [sum(g.outcome == "CORRECT" for g in grades if g.cluster == k) for k in names]
    den = [sum(1 for g in grades if g.cluster == k) for k in names]
    return num, den


def test_enough_clusters_keep_the_cluster_bootstrap_and_its_numbers():
    grades = many_cluster_set(24)
    ci = build_scorecard(grades, seed=SEED, resamples=RESAMPLES).overall.accuracy.ci
    assert (ci.low, ci.high) == pytest.approx(textbook_ratio_interval(*cluster_sums(grades)), abs=0)
    assert ci.kind == "cluster" and ci.method == "cluster bootstrap (24 clusters)"


def test_few_clusters_give_the_wider_of_case_and_cluster_bootstrap():
    grades = many_cluster_set(5)
    ci = build_scorecard(grades, seed=SEED, resamples=RESAMPLES).overall.accuracy.ci
    cl = textbook_ratio_interval(*cluster_sums(grades))
    case = textbook_ratio_interval(*per_case(grades))
    assert (ci.low, ci.high) == pytest.approx((min(cl[0], case[0]), max(cl[1], case[1])), abs=0)
    assert ci.method == "wider of case and cluster bootstrap (20 cases; 5 clusters < 20)"
    # the threshold is a parameter and is recorded
    lower = build_scorecard(grades, seed=SEED, resamples=RESAMPLES, min_clusters=5)
    assert lower.overall.accuracy.ci.kind == "cluster" and lower.bootstrap.min_clusters == 5
    assert (lower.overall.accuracy.ci.low, lower.overall.accuracy.ci.high) == pytest.approx(cl, abs=0)


def test_seeds_stay_deterministic():
    a = build_scorecard(user_set(), seed=3, resamples=300)
    assert a.to_json() == build_scorecard(user_set(), seed=3, resamples=300).to_json()
    assert a.to_json() != build_scorecard(user_set(), seed=4, resamples=300).to_json()


# --------------------------------------------------------------------------- paired


def test_paired_diff_with_one_cluster_pairs_cases():
    base, cand = user_set(cfg="b"), user_set(correct=16, cfg="c")
    d = diff(build_scorecard(base, resamples=RESAMPLES), build_scorecard(cand, resamples=RESAMPLES),
             seed=SEED, resamples=RESAMPLES)
    acc = d.metric("accuracy")
    nb, db = per_case(base)
    nc, dc = per_case(cand)
    assert (acc.ci.low, acc.ci.high) == pytest.approx(textbook_paired(nb, db, nc, dc), abs=0)
    assert acc.ci.method == "case bootstrap (25 cases; 1 cluster < 20)"
    assert acc.ci.low < acc.delta < acc.ci.high
    md = diff_markdown(d)
    assert "case-bs" in md and "case bootstrap (25 cases; 1 cluster < 20)" in md


def test_paired_diff_without_discordance_is_not_zero_width():
    base, cand = user_set(cfg="b"), user_set(cfg="c")
    d = diff(build_scorecard(base, resamples=RESAMPLES), build_scorecard(cand, resamples=RESAMPLES),
             seed=SEED, resamples=RESAMPLES)
    acc = d.metric("accuracy")
    q = 1 - 0.025 ** (1 / 25)  # exact 95% upper bound on a share when 0 of 25 cases differ
    assert acc.delta == 0 and (acc.ci.low, acc.ci.high) == pytest.approx((-q, q))
    assert acc.ci.kind == "exact" and acc.ci.method.startswith("exact bound on discordance, n = 25")
    assert d.mcnemar.p_value == 1.0 and d.mcnemar.unit == "case"
    # with many clusters and nothing changed, the same fallback (the cluster bootstrap is [0, 0] too)
    many = diff(build_scorecard(many_cluster_set(24, "b"), resamples=RESAMPLES),
                build_scorecard(many_cluster_set(24, "c"), resamples=RESAMPLES), resamples=RESAMPLES)
    ci = many.metric("accuracy").ci
    q96 = 1 - 0.025 ** (1 / 96)
    assert ci.kind == "exact" and (ci.low, ci.high) == pytest.approx((-q96, q96))


def test_paired_diff_with_enough_clusters_keeps_the_paired_cluster_bootstrap():
    base, cand = many_cluster_set(24, "b"), many_cluster_set(24, "c", shift=1)
    d = diff(build_scorecard(base, resamples=RESAMPLES), build_scorecard(cand, resamples=RESAMPLES),
             seed=SEED, resamples=RESAMPLES)
    acc = d.metric("accuracy")
    (nb, db), (nc, dc) = cluster_sums(base), cluster_sums(cand)
    assert (acc.ci.low, acc.ci.high) == pytest.approx(textbook_paired(nb, db, nc, dc), abs=1e-12)
    assert acc.ci.method == "cluster bootstrap (24 clusters)"


def test_drift_gate_names_the_interval_method():
    base = build_scorecard(user_set(correct=20, cfg="v"), resamples=RESAMPLES)
    cand = build_scorecard([g.model_copy(update={"config_version": "v"}) for g in user_set(correct=5)],
                           resamples=RESAMPLES)
    r = gate(base, cand, [], drift=True, resamples=RESAMPLES)
    assert not r.passed and "case bootstrap (25 cases; 1 cluster < 20)" in r.failures[0]


# --------------------------------------------------------------------------- power


def kish(y: list[float], clusters: list[str]) -> float:
    groups: dict[str, list[float]] = {}
    for v, c in zip(y, clusters, strict=True):
        groups.setdefault(c, []).append(v)
    n, g = len(y), len(groups)
    grand = sum(y) / n
    means = {k: sum(v) / len(v) for k, v in groups.items()}
    msb = sum(len(v) * (means[k] - grand) ** 2 for k, v in groups.items()) / (g - 1)
    msw = sum((x - means[k]) ** 2 for k, v in groups.items() for x in v) / (n - g)
    sq = sum(len(v) ** 2 for v in groups.values())
    m0 = (n - sq / n) / (g - 1)
    icc = max(0.0, (msb - msw) / (msb + (m0 - 1) * msw))
    return 1 + (sq / n - 1) * icc


def test_design_effect_is_never_a_one_cluster_bootstrap():
    one = build_scorecard(user_set(), resamples=RESAMPLES).power
    assert one.design_effect == 1.0 and one.design_effect_method.startswith("not estimated (1 cluster")
    # three clusters: one all right, one all wrong, one mixed -> strongly clustered
    grades = []
    for i in range(12):
        cl = ("a", "b", "c")[i % 3]
        outs = {"a": ["CORRECT"] * 3, "b": ["WRONG"] * 3, "c": ["CORRECT", "WRONG", "WRONG"] if i % 2 else ["CORRECT"] * 3}[cl]
        grades += runs_of(f"q{i:02d}", outs, cluster=cl)
    p = build_scorecard(grades, seed=SEED, resamples=RESAMPLES).power
    names = sorted({g.case_id for g in grades})
    clusters = [next(g.cluster for g in grades if g.case_id == c) for c in names]
    num, den = per_case(grades)
    y = [a / b for a, b in zip(num, den, strict=True)]
    cn = [sum(a for a, k in zip(num, clusters, strict=True) if k == c) for c in "abc"]
    cd = [sum(b for b, k in zip(den, clusters, strict=True) if k == c) for c in "abc"]

    def var(nu, de):
        nu, de = np.asarray(nu, float), np.asarray(de, float)
        idx = np.random.default_rng(SEED).integers(0, len(nu), size=(RESAMPLES, len(nu)))
        return float(np.var(nu[idx].sum(1) / de[idx].sum(1)))

    expected = max(1.0, kish(y, clusters), var(cn, cd) / var(num, den))
    assert p.design_effect == pytest.approx(round(expected, 4))
    assert p.design_effect > 1.5 and "3 clusters < 20" in p.design_effect_method
    assert p.rows[0].cases_needed_clustered == math.ceil(p.rows[0].cases_needed * p.design_effect)


# --------------------------------------------------------------------------- renderings


def test_every_rendering_names_the_method():
    sc = build_scorecard([g.model_copy(update={"inferred": ["cluster"]}) for g in user_set()],
                         seed=SEED, resamples=RESAMPLES)
    method = sc.overall.accuracy.ci.method
    derived = "clusters derived by sqleval (the reference's main table, or the benchmark's database) for 28 of 28"
    assert sc.clusters_derived == 28
    acc = sc.overall.accuracy
    assert (acc.num, acc.den) == (40, 75)  # 12 cases right in 3 runs, 4 in one run
    lo, hi = 100 * acc.ci.low, 100 * acc.ci.high
    cell = f"53.3% [{lo:.1f}, {hi:.1f}] case-bs (40/75)"
    console = Console(record=True, width=400)
    render_scorecard(sc, console)
    terminal = console.export_text()
    md = scorecard_markdown(sc)
    for text in (terminal, md):
        assert cell in text and method in text and derived in text
    # JSON: the interval carries its method; a scorecard written before methods loads as what it used
    data = json.loads(sc.to_json())
    assert data["overall"]["accuracy"]["ci"]["method"] == method
    for key in ("method", "kind", "n_clusters", "n_cases"):
        del data["overall"]["accuracy"]["ci"][key]
    old = Scorecard.model_validate(data).overall.accuracy.ci
    assert (old.method, old.tag) == ("cluster bootstrap", "cluster-bs")
    # Dagster metadata
    meta = scorecard_metadata(sc)
    assert meta["accuracy interval method"] == method
    assert meta["accuracy interval (95%)"] == f"[{lo:.1f}, {hi:.1f}] case-bs"
    assert derived in meta["clusters"] and meta["clusters derived"] == 28
    assert "not estimated (1 cluster" in meta["design effect"]


def test_the_html_report_names_the_method_of_every_interval():
    from tests.reporting.pages import Page
    from tests.reporting.test_html_report import _synthetic

    from sqleval_pipeline.reporting.html.page import render_report

    sc = build_scorecard([g.model_copy(update={"config_version": "v1", "inferred": ["cluster"],
                                               "facets": {"database": f"db{int(g.case_id[1:]) % 2}"}
                                               if g.case_id.startswith("q") else {}})
                          for g in user_set()], seed=SEED, resamples=RESAMPLES)
    data = _synthetic()
    data.evaluations[0].card = sc
    page = Page(render_report(data))
    method = sc.overall.accuracy.ci.method
    titles = [a.get("title") for t, a in page.tags if t == "abbr"]
    assert method in titles
    headline = page.of(f"article:{data.evaluations[0].key}")
    lo, hi = 100 * sc.overall.accuracy.ci.low, 100 * sc.overall.accuracy.ci.high
    assert f"53.3% [{lo:.1f}, {hi:.1f}] case-bs (40/75)" in headline
    assert method in headline and "clusters derived by sqleval" in headline
    slices = page.of("section:slices")
    db0 = sc.by_facet["database"]["db0"].accuracy
    assert f"database db0 {100 * db0.value:.1f}% [{100 * db0.ci.low:.1f}, {100 * db0.ci.high:.1f}] case-bs" in slices


# --------------------------------------------------------------------------- slices


def test_facet_and_tag_slices():
    grades = []
    for i in range(8):
        outs = ["CORRECT"] * 2 if i < 5 else ["WRONG"] * 2
        facets = {"database": "flight_2" if i < 4 else "car_1", "hardness": "extra" if i % 2 else "easy"}
        tags = ["join"] + (["nested", "join"] if i in (0, 5) else [])  # a repeated tag counts once
        grades += runs_of(f"q{i}", outs, cluster="general", facets=facets, tags=tags)
    sc = build_scorecard(grades, seed=SEED, resamples=RESAMPLES)
    assert set(sc.by_facet) == {"database", "hardness"}
    flight = sc.by_facet["database"]["flight_2"]
    assert (flight.n_cases, flight.accuracy.num, flight.accuracy.den) == (4, 8, 8)  # q0..q3 all right
    car = sc.by_facet["database"]["car_1"]
    assert (car.accuracy.num, car.accuracy.den) == (2, 8)  # q4 right, q5..q7 wrong
    assert (sc.by_facet["hardness"]["extra"].accuracy.num, sc.by_facet["hardness"]["extra"].accuracy.den) == (4, 8)
    assert (sc.by_tag["join"].n_cases, sc.by_tag["join"].accuracy.den) == (8, 16)
    nested = sc.by_tag["nested"]
    assert (nested.n_cases, nested.accuracy.num, nested.accuracy.den) == (2, 2, 4)  # q0 right, q5 wrong
    # the same honest intervals: one cluster -> case bootstrap over the slice's cases
    num = [2 if i < 5 else 0 for i in range(4, 8)]
    assert (car.accuracy.ci.low, car.accuracy.ci.high) == pytest.approx(
        textbook_ratio_interval(num, [2] * 4), abs=0)
    assert flight.accuracy.ci.kind == "wilson"  # all four right: never [100, 100]
    md = scorecard_markdown(sc)
    assert "| database flight_2 | 4 | 1 | 8 |" in md and "| tag nested | 2 | 1 | 4 |" in md
    again = Scorecard.from_json(sc.to_json())
    assert again.by_facet["database"]["car_1"] == car and again.by_tag["nested"] == nested


def test_thousands_of_tags_stay_bounded():
    grades = []
    for i in range(300):
        tags = [f"t{(i * 5 + k) % 1000:04d}" for k in range(5)] + ["all"]  # 1,000 distinct + "all"
        grades += runs_of(f"q{i:03d}", ["CORRECT" if i % 3 else "WRONG"] * 3, cluster=f"k{i % 30}",
                          tags=tags, facets={"database": f"db{i % 120}"})
    started = time.perf_counter()
    sc = build_scorecard(grades)  # default 2,000 resamples
    seconds = time.perf_counter() - started
    cap = scorecard_module.MAX_SLICE_VALUES
    assert len(sc.by_tag) == cap and "all" in sc.by_tag
    assert sc.slices_omitted == {"tags": 1001 - cap, "facet:database": 120 - cap}
    assert any("tag(s) not sliced" in n for n in sc.notes)
    assert seconds < 30, f"{seconds:.1f} s"  # measured ~2 s on 2 shared cores
    md = scorecard_markdown(sc)
    assert f"{1001 - 12} more tag(s)" in md and f"{120 - 12} more value(s) of facet database" in md


def test_execution_only_cases_say_how_to_get_graded():
    sc = build_scorecard([grade(f"u{i}", r, None, case_status="unverified") for i in range(4) for r in range(3)],
                         resamples=RESAMPLES)
    assert sc.overall.n_cases == 0 and sc.execution_only.n_cases == 4
    md = scorecard_markdown(sc)
    assert "overall (no graded case; 4 execution-only)" in md
    assert "4 execution-only case(s) (12 attempts" in md and "no case is graded yet" in md
    assert "sqleval golden review --reviewer NAME" in md and "sqleval golden import FILE --reviewer NAME" in md
    assert "sqleval golden review" in scorecard_metadata(sc)["execution-only"]


def test_a_scorecard_written_before_the_rule_says_so():
    data = json.loads(build_scorecard(user_set(), resamples=RESAMPLES).to_json())
    del data["bootstrap"]["min_clusters"]
    old = Scorecard.model_validate(data)
    assert any("predates the interval rule" in line and "1 clusters" not in line
               for line in old.interval_legend())
    assert "predates the interval rule" in scorecard_markdown(old)
